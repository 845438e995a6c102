"""Retrieval: how a query is read, pure scoring with explain, the in-memory
vector index, and fact and message search composed into one retriever."""
