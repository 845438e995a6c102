"""How a database is reached, naming no table of guild memory: the tables'
SQL lives in ``memory.store``; here are the ``Database`` and ``Connection``
Protocols (``core``), which backend a configuration asks for (``backend``),
and one folder per backend with its connections, writer and readers, dialect
and migrations (``sqlite/``, ``postgres/``).
"""
