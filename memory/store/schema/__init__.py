"""The schema migrations, one module per step (``apply(con)``), registered in
order in ``memory.store.migrations.MIGRATIONS``."""
