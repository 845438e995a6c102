"""Voice channels → transcripts → memory.

Import the submodules directly; this package imports nothing on purpose so
that ``bot.voice.pipeline`` and friends load without discord's voice stack.
Only ``bot.voice.discord_adapter`` touches discord's voice internals,
``discord.ext.voice_recv`` and ``davey``.
"""
