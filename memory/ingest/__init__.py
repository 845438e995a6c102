"""Ingest: validation, the durable inbox, the bounded de-duplicating queue and the
pipeline that turns a message into a journal line and stored facts."""
