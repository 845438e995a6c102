"""The PostgreSQL schema steps, one module per step (``apply(cur)``),
registered in order in ``memory.store.pg_migrations.PG_MIGRATIONS``."""
