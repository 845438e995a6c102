"""Budgets and compaction: a write that passes a scope's budget brings the
scope back to it exactly — with the model's one decision through the real
openai client and the fake server, or by value when the model fails (error,
timeout, invalid decision, database error) or none is configured. Pinned
facts never go; every change has a history row with its reason."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from memory.config import MemoryConfig
from memory.engine import Memory
from memory.ingest.llm_decision import LLMDecider
from memory.models import Fact
from tests.fakeopenai import Fault, default_chat_reply
from tests.helpers import BOB, GUILD, msg
from tests.ingest.test_decision import ingest

HOBBIES = ("I play chess", "I love hiking", "I collect stamps")
NEW = "I speak Portuguese"
_LINE = re.compile(r"^\[M(\d+)\]( NEW)? \([^)]*\): <<<(.*)>>>$")


def compaction_handler(
    answer: Callable[[dict[str, int], int], dict[str, Any] | str | Fault],
) -> Callable[[dict[str, Any]], str | Fault]:
    """A chat handler answering compaction requests with ``answer(aliases by
    text, the new memory's alias)``, every other request by default."""

    def handler(body: dict[str, Any]) -> str | Fault:
        fmt = body.get("response_format") or {}
        if fmt.get("json_schema", {}).get("name") != "memory_compaction":
            return default_chat_reply(body)
        aliases: dict[str, int] = {}
        new = 0
        for line in body["messages"][-1]["content"].splitlines():
            m = _LINE.match(line)
            assert m is not None, line
            aliases[m[3]] = int(m[1])
            if m[2]:
                new = int(m[1])
        got = answer(aliases, new)
        return json.dumps(got) if isinstance(got, dict) else got

    return handler


def alias_of(aliases: dict[str, int], word: str) -> int:
    return next(n for text, n in aliases.items() if word in text)


async def current(mem: Memory, subject: str | None = None) -> dict[str, Fact]:
    found = await mem.facts.find(GUILD, limit=200, subject=subject)
    return {f.fact: f for f in found if f.valid_to is None}


async def archived(mem: Memory) -> dict[str, Fact]:
    found = await mem.facts.find(GUILD, active=False, limit=200)
    return {f.fact: f for f in found}


async def llm_memory(
    make_memory: Any, client: Any, tmp_path: Path, budget: int = 3, **ingest: Any
) -> Memory:
    cfg = replace(MemoryConfig.for_data_dir(tmp_path / "data").ingest, **ingest)
    mem: Memory = await make_memory(
        embeddings="none", decider=LLMDecider(client, "compact-model"), ingest=cfg
    )
    await mem.guilds.set_setting(GUILD, "budget_member_facts", str(budget))
    return mem


def compaction_requests(fake: Any) -> list[Any]:
    return [
        r
        for r in fake.chat_requests()
        if (r.body.get("response_format") or {}).get("json_schema", {}).get("name")
        == "memory_compaction"
    ]


async def test_llm_delete_brings_the_member_scope_to_its_budget_exactly(
    make_memory: Any, fake_openai: Any, fake_llm_client: Any, tmp_path: Path
) -> None:
    fake_openai.chat_handler = compaction_handler(
        lambda a, new: {
            "action": "delete",
            "targetMemoryId": alias_of(a, "stamps"),
            "newContent": None,
            "reason": "a trivial hobby",
        }
    )
    mem = await llm_memory(make_memory, fake_llm_client, tmp_path)
    await ingest(mem, *(msg(t) for t in HOBBIES))
    assert len(await current(mem)) == 3 and not compaction_requests(fake_openai)
    await ingest(mem, msg(NEW))
    now = await current(mem)
    assert len(now) == 3 and not any("stamps" in t for t in now)
    assert any("Portuguese" in t for t in now)
    (gone,) = (await archived(mem)).values()
    assert "stamps" in gone.fact
    last = (await mem.facts.history(GUILD, gone.id))[-1]
    assert last.event == "archive" and last.actor == "system:compaction"
    assert last.reason is not None and "a trivial hobby" in last.reason
    assert len(compaction_requests(fake_openai)) == 1
    stats = mem.upkeep.budgets.stats
    assert stats.llm_calls == 1 and stats.llm_applied == 1
    assert sum(stats.fallbacks.values()) == 0


async def test_llm_edit_merges_the_new_memory_into_another(
    make_memory: Any, fake_openai: Any, fake_llm_client: Any, tmp_path: Path
) -> None:
    merged_text = "Alice plays chess and speaks Portuguese."
    fake_openai.chat_handler = compaction_handler(
        lambda a, new: {
            "action": "edit",
            "targetMemoryId": alias_of(a, "chess"),
            "newContent": merged_text,
            "reason": "one sentence holds both",
        }
    )
    mem = await llm_memory(make_memory, fake_llm_client, tmp_path)
    await ingest(mem, *(msg(t) for t in (*HOBBIES, NEW)))
    now = await current(mem)
    assert len(now) == 3 and merged_text in now
    (gone,) = (await archived(mem)).values()
    assert "Portuguese" in gone.fact
    target = now[merged_text]
    edit = (await mem.facts.history(GUILD, target.id))[-1]
    assert (edit.event, edit.new_text, edit.linked_fact_id) == ("update", merged_text, gone.id)
    assert edit.reason is not None and "one sentence holds both" in edit.reason
    merged = (await mem.facts.history(GUILD, gone.id))[-1]
    assert merged.event == "archive" and f"merged into fact {target.id}" in (merged.reason or "")


def _hiking_duplicate(a: dict[str, int], new: int) -> dict[str, Any]:
    # Merging into chess with the exact text of another current fact of the
    # member: the UNIQUE constraint refuses the write.
    return {
        "action": "edit",
        "targetMemoryId": alias_of(a, "chess"),
        "newContent": next(t for t in a if "hiking" in t),
        "reason": "merge",
    }


@pytest.mark.parametrize(
    ("cause", "answer"),
    [
        ("llm_error", lambda a, new: Fault.status(400)),
        ("timeout", lambda a, new: Fault.timeout(600.0)),  # never answers in time
        ("invalid", lambda a, new: {"action": "delete", "targetMemoryId": 99, "reason": "x"}),
        ("invalid", lambda a, new: {"action": "edit", "targetMemoryId": new, "reason": "x"}),
        ("invalid", lambda a, new: "I would rather not decide."),
        ("db_error", _hiking_duplicate),
    ],
)
async def test_each_failure_falls_back_to_the_lowest_value_fact(
    make_memory: Any,
    fake_openai: Any,
    fake_llm_client: Any,
    tmp_path: Path,
    cause: str,
    answer: Callable[[dict[str, int], int], Any],
) -> None:
    fake_openai.chat_handler = compaction_handler(answer)
    # Short only against the server that never answers in time: an answer that
    # is merely slow on a loaded machine must not become a timeout.
    timeout = 0.3 if cause == "timeout" else 30.0
    mem = await llm_memory(make_memory, fake_llm_client, tmp_path, compaction_timeout_s=timeout)
    await ingest(mem, *(msg(t) for t in (*HOBBIES, NEW)))
    now = await current(mem)
    assert len(now) == 3
    (gone,) = (await archived(mem)).values()
    # Equal confidence and one observation each: the least recently observed goes.
    assert "chess" in gone.fact
    last = (await mem.facts.history(GUILD, gone.id))[-1]
    assert last.event == "archive" and f"compaction fallback: {cause}" in (last.reason or "")
    stats = mem.upkeep.budgets.stats
    assert stats.fallbacks[cause] == 1 and sum(stats.fallbacks.values()) == 1
    assert stats.llm_applied == 0


async def test_without_an_llm_the_write_itself_archives_by_value(
    make_memory: Any, tmp_path: Path
) -> None:
    mem: Memory = await make_memory(embeddings="none")
    await mem.guilds.set_setting(GUILD, "budget_member_facts", "3")
    await ingest(mem, *(msg(t) for t in (*HOBBIES, NEW)))
    assert len(await current(mem)) == 3
    (gone,) = (await archived(mem)).values()
    last = (await mem.facts.history(GUILD, gone.id))[-1]
    assert last.reason == "over the member budget of 3: lowest value"
    assert mem.upkeep.budgets.stats.offline == 1


async def test_a_lower_budget_and_the_guild_total_end_exactly_at_budget(
    make_memory: Any, fake_openai: Any, fake_llm_client: Any, tmp_path: Path
) -> None:
    # Every call fails: the first falls back, the rest of the excess goes by value.
    fake_openai.chat_handler = compaction_handler(lambda a, new: Fault.status(400))
    mem = await llm_memory(make_memory, fake_llm_client, tmp_path, budget=10)
    await ingest(
        mem, *(msg(t) for t in HOBBIES), *(msg(t, author=BOB, name="Bob") for t in HOBBIES)
    )
    assert len(await current(mem)) == 6
    await mem.guilds.set_setting(GUILD, "budget_guild_total", "4")
    await ingest(mem, msg(NEW, author=BOB, name="Bob"))
    assert len(await current(mem)) == 4
    assert len(await archived(mem)) == 3


async def test_pinned_facts_neither_count_nor_go(make_memory: Any, tmp_path: Path) -> None:
    mem: Memory = await make_memory(embeddings="none")
    await mem.guilds.set_setting(GUILD, "budget_member_facts", "2")
    await ingest(mem, msg(HOBBIES[0]))
    (chess,) = (await current(mem)).values()
    assert await mem.upkeep.pin(GUILD, chess.id) is not None
    await ingest(mem, *(msg(t) for t in (*HOBBIES[1:], NEW)))
    now = await current(mem)
    # Two unpinned facts (the budget) and the pinned one.
    assert len(now) == 3 and chess.fact in now
    assert {h.event for h in await mem.facts.history(GUILD, chess.id)} >= {"pin"}
    usage = await mem.upkeep.usage(GUILD)
    assert usage.pinned == 1
    member = next(s for s in usage.scopes if s.kind == "member")
    assert (member.used, member.budget) == (2, 2)


async def test_a_durable_fact_outlives_newer_trivia(make_memory: Any, tmp_path: Path) -> None:
    """The oldest fact is not the least valuable: a fact seen twice stays
    when newer facts seen once pass the budget."""
    cfg = replace(MemoryConfig.for_data_dir(tmp_path / "data").ingest, keep_facts_per_subject=3)
    mem: Memory = await make_memory(embeddings="none", ingest=cfg)
    await ingest(mem, msg("I live in Lisbon", created_at="2024-01-01T10:00:00.000Z"))
    await ingest(mem, msg("I live in Lisbon!", created_at="2024-01-02T10:00:00.000Z"))
    await ingest(
        mem,
        *(
            msg(text, created_at=f"2024-02-0{i + 1}T10:00:00.000Z")
            for i, text in enumerate((*HOBBIES, NEW))
        ),
    )
    now = await current(mem)
    assert len(now) == 3 and "Alice lives in Lisbon." in now


async def test_a_decision_on_facts_changed_meanwhile_is_not_applied(
    make_memory: Any, fake_openai: Any, fake_llm_client: Any, tmp_path: Path
) -> None:
    """Planned outside the writer transaction, checked again inside it: an
    operator edits the target while the model thinks."""
    held: list[Memory] = []

    async def handler(body: dict[str, Any]) -> str:
        fmt = body.get("response_format") or {}
        if fmt.get("json_schema", {}).get("name") != "memory_compaction":
            return default_chat_reply(body)
        mem = held[0]
        stamps = next(f for f in (await current(mem)).values() if "stamps" in f.fact)
        await mem.facts.edit(GUILD, stamps.id, text="Alice collects rare stamps.")
        lines = body["messages"][-1]["content"].splitlines()
        alias = next(int(m[1]) for m in map(_LINE.match, lines) if m and "stamps" in m[3])
        return json.dumps(
            {"action": "delete", "targetMemoryId": alias, "newContent": None, "reason": "x"}
        )

    fake_openai.chat_handler = handler
    mem = await llm_memory(make_memory, fake_llm_client, tmp_path)
    held.append(mem)
    await ingest(mem, *(msg(t) for t in (*HOBBIES, NEW)))
    assert len(await current(mem)) == 3
    stats = mem.upkeep.budgets.stats
    assert (stats.llm_applied, stats.fallbacks["invalid"]) == (0, 1)
    (gone,) = (await archived(mem)).values()
    last = (await mem.facts.history(GUILD, gone.id))[-1]
    assert "compaction fallback: invalid" in (last.reason or "")
