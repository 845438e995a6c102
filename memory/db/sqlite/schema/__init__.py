"""The schema migrations, one module per step (``apply(con)``), registered in
order in ``memory.db.sqlite.migrations.MIGRATIONS``."""
