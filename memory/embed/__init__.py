"""Embeddings: the local ONNX model, the OpenAI-compatible provider, and the
background service that keeps fact and message vectors filled."""
