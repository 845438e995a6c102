"""Importing history: DiscordChatExporter and raw Discord API exports.

``parse`` streams a file of any size; ``convert`` turns each record into an
incoming message or a skip reason; ``reader`` is the reading side's public
face (formats, headers, paths); ``session`` feeds the messages through the
live ingest path of a running engine, as ``guildlore import`` does."""
