"""Migration p001, part 4: the KNN indexes. Shipped: never edit, add a new
migration instead.

SQLite keeps the vectors' source of truth as float32 blobs
(``memory_fact_vectors``, ``message_vectors``, ordinary tables in
``p001_tables``) and mirrors them into sqlite-vec vec0 indexes created per
embedding model at run time: ``vec_facts_<n>(fact_id INTEGER PRIMARY KEY,
guild_id TEXT PARTITION KEY, embedding float[dims] distance_metric=cosine)``
and ``vec_messages_<n>(message_seq ..., guild_id, embedding)``, where ``n``
is the model's ``embedding_models.id``; the fact index holds active facts only
(the store decides which rows it writes).

Here the per-model tables are one table per kind, created once:
``vec_facts(model_id, fact_id, guild_id, embedding)`` and
``vec_messages(model_id, message_seq, guild_id, embedding)``. ``model_id``
is the ``n`` of the SQLite table name, so ``vec_facts_<n>`` is ``vec_facts
WHERE model_id = n``; the primary key is (model_id, id), as each vec0 table's
is its id. ``embedding`` is pgvector's dimensionless ``vector``; a trigger
refuses a vector whose length is not the model's ``dims``, as a vec0 column
of fixed width does. KNN is exact, per guild, by cosine distance (the vec0
metric): ``ORDER BY embedding <=> $q LIMIT k`` over the (model_id, guild_id)
btree, which reads only that guild's rows, as a vec0 partition does. Like the
vec0 tables they have no foreign keys: the store removes their rows itself.
"""

from __future__ import annotations

STATEMENTS: tuple[str, ...] = (
    "CREATE EXTENSION IF NOT EXISTS vector",
    """CREATE TABLE vec_facts (
        model_id BIGINT NOT NULL,
        fact_id BIGINT NOT NULL,
        guild_id TEXT NOT NULL,
        embedding vector NOT NULL,
        PRIMARY KEY (model_id, fact_id)
    )""",
    "CREATE INDEX vec_facts_guild ON vec_facts (model_id, guild_id)",
    """CREATE TABLE vec_messages (
        model_id BIGINT NOT NULL,
        message_seq BIGINT NOT NULL,
        guild_id TEXT NOT NULL,
        embedding vector NOT NULL,
        PRIMARY KEY (model_id, message_seq)
    )""",
    "CREATE INDEX vec_messages_guild ON vec_messages (model_id, guild_id)",
    """CREATE FUNCTION guildlore_vector_dims_check() RETURNS trigger
    LANGUAGE plpgsql AS $fn$
    DECLARE
        want BIGINT;
    BEGIN
        SELECT dims INTO want FROM embedding_models WHERE id = NEW.model_id;
        IF want IS NULL THEN
            RAISE EXCEPTION 'no embedding model % for %', NEW.model_id, TG_TABLE_NAME;
        END IF;
        IF vector_dims(NEW.embedding) <> want THEN
            RAISE EXCEPTION 'dimension mismatch for % model %: expected % dimensions, got %',
                TG_TABLE_NAME, NEW.model_id, want, vector_dims(NEW.embedding);
        END IF;
        RETURN NEW;
    END
    $fn$""",
    """CREATE TRIGGER vec_facts_dims BEFORE INSERT OR UPDATE ON vec_facts
    FOR EACH ROW EXECUTE FUNCTION guildlore_vector_dims_check()""",
    """CREATE TRIGGER vec_messages_dims BEFORE INSERT OR UPDATE ON vec_messages
    FOR EACH ROW EXECUTE FUNCTION guildlore_vector_dims_check()""",
)
