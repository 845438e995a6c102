"""The operator's side of the engine, one object per concern, composed by ``Memory``.

``memory.facts`` (FactOps), ``memory.traces`` (TraceOps), ``memory.guilds``
(GuildOps) and ``memory.admin`` (AdminOps) each receive the engine parts they
use; none reaches back into the facade.
"""
