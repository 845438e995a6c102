"""Embeddings: the models, and the background service that keeps fact and
message vectors filled.

``base`` is the ``Embedder`` protocol, model resolution and the vector blob
format; ``local`` the bundled ONNX model (English); ``e5`` the bundled
multilingual model; ``remote`` the OpenAI-compatible provider; ``rows`` the
checks they share; ``catalog`` which models a guild may choose; ``service``
the background worker and re-index, with ``activity`` (its counters and
action-log rows), ``threads`` (its CPU priority) and ``query_cache`` (query
vectors embedded before)."""
