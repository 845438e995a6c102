"""Extraction harness: what an import learns about the people in a chat.

``guildlore bench extraction --data FILE`` imports a chat the way
``guildlore import`` does (the file is a DiscordChatExporter export, read by
``import_files``: guards, the write decision, budgets, the extractor the
settings configure) and reads back the current facts.

Two kinds of data:

* **LoCoMo layout** (a list of samples with ``conversation`` and
  ``observation``): each conversation is written out as a DCE export of its
  own guild (its turns at their session dates, the two speakers as authors,
  the turn's words without LoCoMo's image captions, which an export does not
  have). LoCoMo gives every session gold *observations* per speaker, each
  naming the turns it rests on. An observation is **covered** at a threshold
  when some current fact about that speaker, observed in one of those turns,
  has a cosine to it at least the threshold. Reported per conversation and
  overall: coverage at 0.5 / 0.6 / 0.7, facts per 100 turns, the share of
  facts observed in some observation's evidence turn, facts per speaker, and
  a sample of facts beside the observation they match best (or none).
* **A DCE export** (a real server's): facts per 100 messages, and the share
  of authors with at least 3 messages who have a fact.

The judge is all-MiniLM-L6-v2 whatever model the guild embeds with: the
bundled int8 ONNX copy (``LocalMiniLMEmbedder``). On LoCoMo dev its cosines
differ from the float32 model's by 0.002 on average (at most 0.008) and the
coverage it gives is the same at 0.5 and 0.6, 0.3 points lower at 0.7
(``bench/judge_check.py``, docs/extraction.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evals.locomo import parse_session_date
from memory import Fact, LocalMiniLMEmbedder, Memory, import_files

THRESHOLDS: tuple[float, ...] = (0.5, 0.6, 0.7)
SAMPLE_PER_CONVERSATION = 12
TURN_SPACING_S = 30
MIN_MESSAGES = 3  # "authors with at least 3 messages"

OpenEngine = Callable[[Path], contextlib.AbstractAsyncContextManager[Memory]]


@dataclass(frozen=True)
class Observation:
    speaker: str  # the author id
    text: str
    evidence: frozenset[str]  # message ids


@dataclass
class Chat:
    """One conversation as an export: its guild, message ids → turn ids, observations."""

    name: str
    guild_id: str
    export: dict[str, Any]
    speakers: dict[str, str]  # author id → name
    turn_of: dict[str, str]  # message id → dia_id (LoCoMo) or the message id
    authored: Counter[str]  # author id → messages
    observations: list[Observation]


# -- LoCoMo → DCE --------------------------------------------------------------------------------


def _snowflake(base: int, n: int) -> str:
    return str(base + n)


def locomo_chats(data: list[dict[str, Any]]) -> list[Chat]:
    chats: list[Chat] = []
    for c, sample in enumerate(data):
        conv = sample["conversation"]
        name = str(sample.get("sample_id") or f"conv-{c}")
        guild = _snowflake(900_000_000_000_000_000, c * 1_000_000)
        names = [str(conv.get("speaker_a", "A")), str(conv.get("speaker_b", "B"))]
        author_of = {
            s: _snowflake(800_000_000_000_000_000, c * 1_000 + i) for i, s in enumerate(names)
        }
        messages: list[dict[str, Any]] = []
        msg_of: dict[str, str] = {}
        sessions = sorted(
            int(k.split("_")[1]) for k in conv if k.startswith("session_") and k.count("_") == 1
        )
        for number in sessions:
            turns = conv.get(f"session_{number}")
            if not isinstance(turns, list) or not turns:
                continue
            start = parse_session_date(str(conv[f"session_{number}_date_time"]))
            for i, t in enumerate(turns):
                text = str(t.get("text") or "").strip()
                speaker = str(t["speaker"])
                if not text or speaker not in author_of:
                    continue
                mid = _snowflake(int(guild) + 1_000, len(messages))
                msg_of[str(t["dia_id"])] = mid
                when = start.timestamp() + TURN_SPACING_S * i
                messages.append(_dce_message(mid, when, text, author_of[speaker], speaker))
        observations: list[Observation] = []
        for session in (sample.get("observation") or {}).values():
            for speaker, items in (session or {}).items():
                if speaker not in author_of:
                    continue
                for text, evidence in items:
                    ids = [evidence] if isinstance(evidence, str) else list(evidence)
                    turns_ = frozenset(msg_of[e] for e in ids if e in msg_of)
                    if turns_:
                        observations.append(Observation(author_of[speaker], str(text), turns_))
        chats.append(
            Chat(
                name=name,
                guild_id=guild,
                export=_dce_export(guild, f"locomo {name}", messages),
                speakers={a: s for s, a in author_of.items()},
                turn_of={m: d for d, m in msg_of.items()},
                authored=Counter(m["author"]["id"] for m in messages),
                observations=observations,
            )
        )
    return chats


def _dce_message(mid: str, when: float, text: str, author: str, name: str) -> dict[str, Any]:
    from datetime import UTC, datetime

    return {
        "id": mid,
        "type": "Default",
        "timestamp": datetime.fromtimestamp(when, UTC).isoformat(),
        "timestampEdited": None,
        "isPinned": False,
        "content": text,
        "author": {"id": author, "name": name, "discriminator": "0000", "isBot": False},
        "attachments": [],
        "embeds": [],
        "reactions": [],
        "mentions": [],
    }


def _dce_export(guild: str, name: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "guild": {"id": guild, "name": name},
        "channel": {"id": str(int(guild) + 1), "type": "GuildTextChat", "name": "chat"},
        "messages": messages,
        "messageCount": len(messages),
    }


def export_chat(path: Path, export: dict[str, Any]) -> Chat:
    """A real DCE export as a chat without observations."""
    guild = str(export["guild"]["id"])
    authored: Counter[str] = Counter()
    names: dict[str, str] = {}
    for m in export.get("messages", []):
        author = m.get("author") or {}
        if author.get("isBot"):
            continue  # an attachment-only message counts: its author took part
        aid = str(author.get("id"))
        authored[aid] += 1
        names[aid] = str(author.get("nickname") or author.get("name") or aid)
    return Chat(path.stem, guild, export, names, {}, authored, [])


def load(path: Path) -> tuple[str, list[Chat]]:
    """("locomo" | "export", the chats); ValueError when it is neither."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and "messages" in data and "guild" in data:
        return "export", [export_chat(path, data)]
    if isinstance(data, dict):
        data = [data]
    if isinstance(data, list) and data and all(isinstance(s, dict) for s in data):
        if all("conversation" in s for s in data):
            return "locomo", locomo_chats(data)
    raise ValueError("neither a LoCoMo-layout data set nor a DiscordChatExporter export")


# -- reading the memory back ---------------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    fact: Fact
    sources: frozenset[str]  # every message it was observed in


async def current_facts(memory: Memory, guild_id: str) -> list[Found]:
    out: list[Found] = []
    before: int | None = None
    while True:
        page = await memory.facts.find(guild_id, active=True, before_id=before, limit=500)
        if not page:
            break
        for f in page:
            if f.valid_to is not None:
                continue
            srcs = {s.message_id for s in await memory.facts.sources(guild_id, f.id)}
            if f.source_message_id:
                srcs.add(f.source_message_id)
            out.append(Found(f, frozenset(srcs)))
        before = page[-1].id
    out.sort(key=lambda x: x.fact.id)
    return out


# -- scoring -------------------------------------------------------------------------------------


def score_chat(
    chat: Chat, facts: Sequence[Found], vectors: dict[str, np.ndarray], turns: int
) -> dict[str, Any]:
    """The chat's figures; ``vectors`` maps every fact and observation text to its unit vector."""
    member_facts = [f for f in facts if f.fact.subject in chat.speakers]
    per_speaker = Counter(f.fact.subject for f in member_facts)
    block: dict[str, Any] = {
        "name": chat.name,
        "turns": turns,
        "facts": len(member_facts),
        "facts_per_100": round(100 * len(member_facts) / turns, 2) if turns else 0.0,
        "facts_per_speaker": {chat.speakers[a]: n for a, n in sorted(per_speaker.items())},
    }
    if not chat.observations:
        active = [a for a, n in chat.authored.items() if n >= MIN_MESSAGES]
        with_fact = [a for a in active if per_speaker.get(a)]
        block["authors"] = len(chat.authored)
        block["authors_3plus"] = len(active)
        block["authors_3plus_with_fact"] = len(with_fact)
        block["authors_3plus_with_fact_share"] = (
            round(len(with_fact) / len(active), 4) if active else 0.0
        )
        block["sample"] = [
            {"speaker": chat.speakers.get(f.fact.subject, f.fact.subject), "fact": f.fact.fact}
            for f in member_facts[:: max(1, len(member_facts) // SAMPLE_PER_CONVERSATION)][
                :SAMPLE_PER_CONVERSATION
            ]
        ]
        return block
    evidence_turns = set().union(*(o.evidence for o in chat.observations))
    best: dict[int, float] = {}  # observation index → best cosine of an eligible fact
    match: dict[int, tuple[float, int]] = {}  # fact id → (cosine, observation index)
    for i, obs in enumerate(chat.observations):
        ov = vectors[obs.text]
        for f in member_facts:
            if f.fact.subject != obs.speaker or not (f.sources & obs.evidence):
                continue
            cos = float(ov @ vectors[f.fact.fact])
            best[i] = max(best.get(i, -1.0), cos)
            if cos > match.get(f.fact.id, (-2.0, -1))[0]:
                match[f.fact.id] = (cos, i)
    n_obs = len(chat.observations)
    block["observations"] = n_obs
    block["covered"] = {
        f"{t:.1f}": sum(1 for c in best.values() if c >= t - 1e-9) for t in THRESHOLDS
    }
    block["coverage"] = {k: round(v / n_obs, 4) for k, v in block["covered"].items()}
    from_evidence = sum(1 for f in member_facts if f.sources & evidence_turns)
    block["from_evidence"] = from_evidence
    block["from_evidence_share"] = (
        round(from_evidence / len(member_facts), 4) if member_facts else 0.0
    )
    step = max(1, len(member_facts) // SAMPLE_PER_CONVERSATION)
    sample = []
    for f in member_facts[::step][:SAMPLE_PER_CONVERSATION]:
        hit = match.get(f.fact.id)
        sample.append(
            {
                "speaker": chat.speakers[f.fact.subject],
                "turns": sorted(chat.turn_of.get(s, s) for s in f.sources),
                "fact": f.fact.fact,
                "observation": chat.observations[hit[1]].text if hit else None,
                "cosine": round(hit[0], 3) if hit else None,
            }
        )
    block["sample"] = sample
    return block


def overall(blocks: Sequence[dict[str, Any]]) -> dict[str, Any]:
    turns = sum(b["turns"] for b in blocks)
    facts = sum(b["facts"] for b in blocks)
    out: dict[str, Any] = {
        "turns": turns,
        "facts": facts,
        "facts_per_100": round(100 * facts / turns, 2) if turns else 0.0,
    }
    if all("observations" in b for b in blocks):
        n_obs = sum(b["observations"] for b in blocks)
        out["observations"] = n_obs
        out["coverage"] = {
            f"{t:.1f}": round(sum(b["covered"][f"{t:.1f}"] for b in blocks) / max(1, n_obs), 4)
            for t in THRESHOLDS
        }
        ev = sum(b["from_evidence"] for b in blocks)
        out["from_evidence_share"] = round(ev / facts, 4) if facts else 0.0
    else:
        active = sum(b["authors_3plus"] for b in blocks)
        with_fact = sum(b["authors_3plus_with_fact"] for b in blocks)
        out["authors_3plus"] = active
        out["authors_3plus_with_fact_share"] = round(with_fact / active, 4) if active else 0.0
    return out


# -- running -------------------------------------------------------------------------------------


async def _judge(texts: Sequence[str], threads: int) -> dict[str, np.ndarray]:
    unique = sorted(set(texts))
    if not unique:
        return {}
    judge = LocalMiniLMEmbedder(threads=threads)
    try:
        rows = await judge.embed(unique)
    finally:
        await judge.aclose()
    return {t: np.asarray(v, dtype=np.float32) for t, v in zip(unique, rows, strict=True)}


async def run(
    data: Path,
    open_engine: OpenEngine,
    *,
    extractor: str,
    threads: int = 2,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Import every chat of ``data`` into one fresh engine (``open_engine(dir)``)
    and score what it learned. ``extractor`` names it in the summary."""
    kind, chats = await asyncio.to_thread(load, data)
    blocks: list[dict[str, Any]] = []
    imports: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="guildlore-bench-extraction-") as tmp:
        root = Path(tmp)
        found: dict[str, list[Found]] = {}
        turns: dict[str, int] = {}
        async with open_engine(root / "data") as memory:
            for chat in chats:
                path = root / f"{chat.name}.json"
                if kind == "locomo":
                    # Fictional speakers cannot answer a consent prompt; a real
                    # export keeps the guild's defaults, as a plain import does.
                    await memory.guilds.set_setting(chat.guild_id, "sensitive_facts", "store")
                    path.write_text(json.dumps(chat.export), encoding="utf-8")
                    paths = [path]
                else:
                    paths = [data]
                if progress:
                    progress(f"importing {chat.name} ({sum(chat.authored.values())} messages)")
                report = await import_files(memory, paths)
                if report.errors or not report.settled:
                    raise ValueError(
                        f"import of {chat.name} failed: {report.errors or 'unsettled'}"
                    )
                imports.append(
                    {
                        "name": chat.name,
                        "messages": report.stats.messages,
                        "ready_seconds": round(report.ready_seconds, 3),
                        "ready_messages_per_s": round(report.ready_rate, 1),
                        "extract_errors": report.extract_errors,
                    }
                )
                found[chat.name] = await current_facts(memory, chat.guild_id)
                turns[chat.name] = report.stats.messages
        texts = [o.text for c in chats for o in c.observations]
        texts += [f.fact.fact for fs in found.values() for f in fs]
        if progress:
            progress(f"judging {len(texts)} texts with all-MiniLM-L6-v2")
        vectors = await _judge(texts, threads)
        for chat in chats:
            blocks.append(score_chat(chat, found[chat.name], vectors, turns[chat.name]))
    return {
        "data": data.name,
        "kind": kind,
        "extractor": extractor,
        "judge": "all-MiniLM-L6-v2 (bundled int8 ONNX)",
        "thresholds": list(THRESHOLDS),
        "overall": overall(blocks),
        "conversations": blocks,
        "imports": imports,
    }


# -- the table -----------------------------------------------------------------------------------


def format_table(summary: dict[str, Any]) -> str:
    lines: list[str] = []
    blocks = summary["conversations"]
    if summary["kind"] == "locomo":
        head = f"{'conversation':<14}{'turns':>6}{'facts':>6}{'/100':>7}{'cov@0.5':>9}"
        head += f"{'cov@0.6':>9}{'cov@0.7':>9}{'from evidence':>15}"
        lines.append(head)
        rows = [*blocks, {"name": "overall", **summary["overall"]}]
        for b in rows:
            cov = b["coverage"]
            lines.append(
                f"{b['name']:<14}{b['turns']:>6}{b['facts']:>6}{b['facts_per_100']:>7.1f}"
                f"{cov['0.5'] * 100:>8.1f}%{cov['0.6'] * 100:>8.1f}%{cov['0.7'] * 100:>8.1f}%"
                f"{b['from_evidence_share'] * 100:>14.1f}%"
            )
    else:
        lines.append(
            f"{'export':<28}{'messages':>9}{'facts':>6}{'/100':>7}{'authors≥3 with a fact':>24}"
        )
        for b in blocks:
            share = f"{b['authors_3plus_with_fact']}/{b['authors_3plus']} ({b['authors_3plus_with_fact_share'] * 100:.1f}%)"
            lines.append(
                f"{b['name'][:27]:<28}{b['turns']:>9}{b['facts']:>6}{b['facts_per_100']:>7.2f}{share:>24}"
            )
    for b in blocks:
        speakers = ", ".join(f"{k} {v}" for k, v in list(b["facts_per_speaker"].items())[:8])
        lines.append(f"{b['name']}: facts per speaker: {speakers or 'none'}")
        for s in b["sample"]:
            line = f"  {s['speaker']}: {s['fact']}"
            if summary["kind"] == "locomo":
                obs = s["observation"]
                line += (
                    f"\n      ↔ {obs} ({s['cosine']:.2f})" if obs else "\n      ↔ (no observation)"
                )
            lines.append(line)
    for imp in summary["imports"]:
        lines.append(
            f"import {imp['name']}: {imp['messages']} messages, memory ready in "
            f"{imp['ready_seconds']:.2f} s ({imp['ready_messages_per_s']:.0f} msg/s)"
        )
    return "\n".join(lines)
