"""The engine's roles: one object per concern, composed by ``Memory``
(``memory/engine.py``), each receiving the parts it uses.

The operator's and member's side: ``facts`` (``FactOps``: find, read, edit,
archive, restore, delete facts and their history), ``lore`` (lore lines),
``pins`` (pinned messages as canon lore), ``procedures`` (how-to lore),
``members`` (``MemberData``: a member's own view, corrections, export),
``consent`` (sensitive facts waiting for a member's answer), ``guilds``
(guilds, members, channels, per-guild settings, voice opt-outs), ``traces``
(what replies used or stored), ``admin`` (the action log, re-index, counters,
health). The lifecycle of messages and guilds: ``lifecycle`` (Discord's
deletes and edits), ``catch_up`` (what Discord holds that the process
missed while away, and the deletes and edits made meanwhile), ``retention`` (leave policies, guild purge), ``journals``
(the journal files and their views), ``leases`` (which process runs a global
job), ``upkeep`` (the scheduled jobs). Features with more than one module
have a folder: ``episodes/`` (channel stretches summarised) and
``consolidation/`` (the daily pass over related facts and the insights).

None reaches back into the facade, with one stated exception: ``Retention``
receives ``Memory.forget`` (a member who left is forgotten the same way a
request to forget is carried out, snapshot and vectors included).
"""
