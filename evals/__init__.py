"""Retrieval benchmarks over public memory datasets. They drive the engine only
through the ``memory`` facade; the CLI's ``guildlore bench`` imports them."""
