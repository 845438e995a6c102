"""The PostgreSQL schema steps, one module per step (``apply(cur)``),
registered in order in ``memory.db.postgres.migrations.PG_MIGRATIONS``."""
