"""Importing history: reading DiscordChatExporter and raw API exports as a stream
and converting their records to incoming messages."""
