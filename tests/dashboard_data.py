"""A small guild history for the dashboard tests, stored through the real ingest path.

Facts come from the offline rule extractor, except for one message whose fact
keeps a literal ``<script>alert(1)</script>`` (the rule extractor would cut it
at the parenthesis); that fact still goes through the guards and the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory.extract.rules.extractor import RuleExtractor
from memory.models import Candidate
from tests.helpers import ALICE, BOB, CHANNEL, GUILD, OTHER_GUILD, ScriptedExtractor, msg

CAROL = "666666666666666666"
DAVE = "777777777777777777"
OTHER_CHANNEL = "888888888888888888"
GUILD_NAME = "Harbour Club"
SCRIPT = "<script>alert(1)</script>"
XSS_FACT = f"Bob's favourite snippet is {SCRIPT}."

MESSAGES = (
    (GUILD, CHANNEL, ALICE, "Alice", "I work as a nurse in Berlin and I love hiking."),
    (GUILD, CHANNEL, ALICE, "Alice", "I'm learning Rust for a compiler project."),
    (GUILD, CHANNEL, BOB, "Bob", "My favourite food is ramen."),
    (GUILD, OTHER_CHANNEL, BOB, "Bob", f"My favourite snippet is {SCRIPT} in every form."),
    (GUILD, OTHER_CHANNEL, CAROL, "Carol", "I live in Lisbon and I play the cello."),
    (OTHER_GUILD, CHANNEL, DAVE, "Dave", "I work as a baker in Paris."),
)

_rules = RuleExtractor()


def _extract(text: str, author: str) -> list[Candidate]:
    if SCRIPT in text:
        return [Candidate(fact=XSS_FACT, type="preference", confidence=0.7, evidence=text)]
    return _rules.extract_sync(text, author)


def extractor() -> ScriptedExtractor:
    return ScriptedExtractor(_extract, name="rules+script")


@dataclass
class Seeded:
    mem: Any
    message_ids: list[str]
    reply_to: str  # a message the "bot" answered, with traces

    async def fact_id(self, text_part: str, guild: str = GUILD) -> int:
        for f in await self.mem.facts.find(guild, active=None, limit=500):
            if text_part in f.fact:
                return int(f.id)
        raise AssertionError(f"no fact containing {text_part!r}")


async def seed(make_memory: Any, **kw: Any) -> Seeded:
    mem = await make_memory(extractor=extractor(), **kw)
    ids: list[str] = []
    for guild, channel, author, name, text in MESSAGES:
        m = msg(text, author=author, name=name, guild=guild, channel=channel)
        ids.append(m.id)
        assert (await mem.ingest_message(m)).status == "queued"
    assert await mem.settle()
    await mem.guilds.set_names(GUILD, guild_name=GUILD_NAME, channels={CHANNEL: "general"})
    question = msg("@bot where does Alice work?", author=BOB, name="Bob")
    assert await (await mem.ingest_message(question)).wait()
    hits = await mem.search(GUILD, "where does Alice work", channel_id=CHANNEL)
    assert hits, "the seeded history should answer this"
    await mem.traces.record(GUILD, CHANNEL, question.id, retrieved=hits)
    assert await mem.lore.remember(
        GUILD,
        "remember that the club anniversary is in March",
        source_text="remember that the club anniversary is in March",
        source_message_id=question.id,
        actor=f"user:{BOB}",
    )
    assert await mem.settle()
    await mem.refresh_snapshot()
    return Seeded(mem, ids, question.id)
