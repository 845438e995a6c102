"""The pieces of ingest.py's ``--part tidy`` run: budgets small enough that a
two-minute load passes them, the fake model's answers to compaction and
episode-summary calls, and the episode job running beside the load."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from datetime import timedelta
from typing import Any

from memory.clock import system_clock
from memory.engine import Memory
from tests.fakeopenai import echo_facts_reply

# Reached within seconds at 30 msg/s with one fact per message.
TIDY_BUDGETS = {
    "budget_member_facts": 20,
    "budget_lore": 20,
    "budget_channel_episodes": 5,
    "budget_guild_total": 300,
    "episode_idle_minutes": 1,
    "episode_min_messages": 6,
}
EPISODE_EVERY_S = 10.0
_ALIAS = re.compile(r"^\[M(\d+)\]", re.M)
# Numbered so no two summaries are the same text, as a real model's seldom
# are: the engine tells a repeated summary apart by the minute it ended,
# and this load closes several episodes a minute.
_SUMMARIES = itertools.count(1)
_NUMBERED = re.compile(r"^\d+\. ", re.M)


def tidy_reply(body: dict[str, Any]) -> str:
    """Compaction: delete the first (lowest-value) memory shown; sensitivity
    labels: none; an episode summary: a short one naming the channel; anything
    else: ``echo_facts_reply``."""
    fmt = body.get("response_format") or {}
    user = next((m["content"] for m in body["messages"] if m["role"] == "user"), "")
    if fmt.get("json_schema", {}).get("name") == "memory_compaction":
        first = _ALIAS.search(body["messages"][-1]["content"])
        alias = int(first[1]) if first else 1
        return json.dumps(
            {"action": "delete", "targetMemoryId": alias, "newContent": None, "reason": "bench"}
        )
    if fmt.get("json_schema", {}).get("name") == "sensitive_labels":
        count = len(_NUMBERED.findall(user))
        return json.dumps(
            {"labels": [{"index": i, "category": "none"} for i in range(1, count + 1)]}
        )
    if fmt.get("type") == "json_object" and user.startswith("Conversation in "):
        where = user.split(":", 1)[0][len("Conversation in ") :]
        n = next(_SUMMARIES)
        return json.dumps({"summary": f"The members of {where} talked about papyrology ({n})."})
    return echo_facts_reply(body)


async def set_budgets(mem: Memory, guild_id: str) -> None:
    for key, value in TIDY_BUDGETS.items():
        await mem.guilds.set_setting(guild_id, key, str(value))


async def episode_loop(mem: Memory, created: list[int], stop: asyncio.Event) -> None:
    """The episode job every ``EPISODE_EVERY_S`` seconds during the load. It
    is run as of a few minutes ahead: the four channels never go quiet at
    30 msg/s, and the job is what is measured here, not the idle wait."""
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), EPISODE_EVERY_S)
        except TimeoutError:
            pass
        run = await mem.episodes.run(now=system_clock() + timedelta(minutes=5))
        created.append(len(run.created))
