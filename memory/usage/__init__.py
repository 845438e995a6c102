"""The operator's view over time: daily series per guild and the request log.

``series`` names what is counted (pure); ``recorder`` buffers what happens
outside a write transaction — searches, extraction calls, replies, embedding
errors — and writes it every few seconds, together with the fold of the
increments the write path made in its own transactions
(``memory.store.usage``)."""
