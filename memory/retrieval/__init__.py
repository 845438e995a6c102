"""Retrieval: hybrid search over the whole guild, for the prompt slice and
strict search.

``query`` reads a query (names, dates, FTS expression); ``scoring`` holds the
pure signals, fusion and relevance gate; ``vector_index`` the in-memory
matrices and ``vector_search`` the KNN over them or sqlite-vec; ``context``
what fact and message search share; ``facts`` and ``messages`` the two
searches; ``hits`` builds results; ``shared_part`` lets two threads split a
query; ``retriever`` composes them into the one ``Retriever``."""
