"""Storage: every table query the engine runs, and the machinery under them.

``sqlite`` picks the driver and loads sqlite-vec; ``db`` owns the connections
(one writer thread, a pool of readers; ``read_gate`` holds new reads while the
WAL restarts) and collects each transaction's ``changes`` for caches outside
SQLite; ``migrations`` numbers the schema. The SQL itself, one module per
subject: ``facts``, ``messages`` (the durable inbox), ``vectors`` (blobs and
sqlite-vec indexes), ``pending_vectors`` (what still needs a vector),
``search`` (the queries retrieval runs), ``ops`` (traces, action log, guild
settings, health) and ``sessions`` (dashboard logins); ``sql`` has small
helpers for writing it. Outside this package nothing queries a table (the
ingest pipeline only sets a savepoint around each message)."""
