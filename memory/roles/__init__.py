"""The operator's side of the engine, one object per concern, composed by ``Memory``.

``Memory.facts`` (``FactOps``: find, read, edit, archive, restore, delete facts
and read their history), ``Memory.traces`` (``TraceOps``: what replies used or
stored), ``Memory.guilds`` (``GuildOps``: guilds, members, channels, per-guild
settings, voice opt-outs) and ``Memory.admin`` (``AdminOps``: the action log,
re-index, counters, health) each receive
the engine parts they use; none reaches back into the facade.
"""
