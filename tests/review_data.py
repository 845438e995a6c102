"""A guild with memories waiting for review, stored through the real ingest
path (offline rules), for the dashboard's tests and screenshots: a
contradiction of a pinned fact, a low-confidence fact, a lore line from a
member without the trusted role, and a member's correction of someone
else's fact."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from memory.clock import iso
from memory.models import LORE_SUBJECT
from memory.review_policy import Standing
from tests.helpers import ALICE, BOB, CHANNEL, GUILD, msg

GUILD_NAME = "Harbour Club"
MODS = "999999999999999991"
TRUSTED_ROLE = "999999999999999992"


@dataclass
class ReviewSeed:
    mem: Any
    pinned_id: int  # Alice's pinned fact (Lisbon)
    porto: int  # item: contradicts it
    chess: int  # item: low confidence
    lore: int  # item: lore from a member without the role
    correction: int  # item: Bob's correction of Alice's fact


async def say(mem: Any, text: str, author: str = ALICE, name: str = "Alice") -> None:
    assert await (await mem.ingest_message(msg(text, author=author, name=name))).wait()
    assert await mem.settle()


async def seed_review(make_memory: Any, **kw: Any) -> ReviewSeed:
    mem = await make_memory(**kw)
    await mem.guilds.set_names(
        GUILD, guild_name=GUILD_NAME, channels={CHANNEL: "general", MODS: "mod-review"}
    )
    await say(mem, "I live in Lisbon.")
    await say(mem, "I work as a nurse.")
    lisbon = next(f for f in await mem.facts.find(GUILD, subject=ALICE) if "Lisbon" in f.fact)
    assert await mem.upkeep.pin(GUILD, lisbon.id, actor=f"user:{ALICE}")
    for key, value in (
        ("review_policy", "flagged"),
        ("review_channel", MODS),
        ("review_lore_roles", TRUSTED_ROLE),
    ):
        await mem.guilds.set_setting(GUILD, key, value)
    await say(mem, "I live in Porto.")  # contradicts the pinned fact
    await mem.guilds.set_setting(GUILD, "review_min_confidence", "90")
    await say(mem, "I love chess.", BOB, "Bob")  # every offline fact is below 90 %
    newcomer = Standing(frozenset(), iso(mem.clock() - timedelta(days=3)))
    queued = await mem.lore.remember(
        GUILD,
        "the harbour festival is in June",
        source_text="the harbour festival is in June",
        actor=f"user:{BOB}",
        standing=newcomer,
    )
    assert queued is not None
    nurse = next(f for f in await mem.facts.find(GUILD, subject=ALICE) if "nurse" in f.fact)
    await mem.review.propose_correction(GUILD, BOB, nurse.id, "Alice works as a midwife.", None)
    items = {i.kind + ":" + i.fact: i.id for i in await mem.review.pending(GUILD)}
    return ReviewSeed(
        mem,
        lisbon.id,
        porto=items["fact:Alice lives in Porto."],
        chess=items["fact:Bob loves chess."],
        lore=items["lore:Memory line: the harbour festival is in June."],
        correction=items["correction:Alice works as a midwife."],
    )


async def lore_facts(mem: Any) -> list[str]:
    return [f.fact for f in await mem.facts.find(GUILD, subject=LORE_SUBJECT)]
