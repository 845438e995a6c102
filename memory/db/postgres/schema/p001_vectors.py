"""Migration p001, part 4: pgvector. Shipped: never edit, add a new migration
instead.

SQLite keeps the vectors' source of truth as float32 blobs
(``memory_fact_vectors``, ``message_vectors``, ordinary tables in
``p001_tables``) and mirrors them into sqlite-vec vec0 indexes created per
embedding model at run time: ``vec_facts_<n>`` and ``vec_messages_<n>``,
where ``n`` is the model's ``embedding_models.id``. PostgreSQL does the same
with ordinary tables of those names made by ``memory.store.vectors`` when a
model is first used: an ``embedding vector(dims)`` column (a vector of
another width is refused, as by a vec0 column) and a B-tree on the guild,
so a KNN is an exact scan of one guild's rows by cosine distance, as a vec0
partition is. This step makes the extension available.
"""

from __future__ import annotations

STATEMENTS: tuple[str, ...] = ("CREATE EXTENSION IF NOT EXISTS vector",)
