"""Ingest: from an accepted message to a journal line and stored facts.

``validate`` checks and repairs what adapters hand in; ``inbox`` is the
durable ``messages`` table behind the queue (written before queueing, replayed
after a crash or a drop); ``queue`` is the bounded, de-duplicating queue and
its workers, over ``jobs`` (a queued message, a batch, per-author write
order); ``pipeline`` processes one batch; ``retry`` decides when a failed
message is tried again."""
