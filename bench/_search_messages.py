"""The message part of ``bench/search.py``: search with ``scope="messages"``
and ``scope="all"`` in a guild of 10k and 100k long messages
(``bench._message_corpus``).

The messages go into the second guild of the facts database (its
``--other-guild-facts`` facts and lore stay: ``scope="all"`` searches those
too). Per size the engine is opened, the messages written straight through
the store with their vectors (as the import and the embedding service
would), the guild's matrices loaded and its lexicon built (``Retriever.warm``),
every query run once untimed (its vector then comes from the engine's query
cache), and the queries timed ``--rounds`` times each, strict as ``/memory
search`` calls it (limit 10, the asker's channel, visible channels set).
Beside them, in passes of their own, the guild's in-memory BM25 alone (what
message search ranks by, ``memory.retrieval.lexicon``) and the bare FTS5
message query (what answers while a big guild's lexicon is built, or for a
guild too big to hold one).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from bench._common import loadavg, percentile
from bench._message_corpus import MessageCorpus
from bench._search_corpus import (
    CHANNELS_PER_GUILD,
    channel_id,
    guild_id,
    user_id,
    write_messages,
)

MESSAGE_GUILD = 1  # index of the measured guild among the bench's guilds
SPEAKERS = 60


def stats(ms: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(ms, 50), 3),
        "p95_ms": round(percentile(ms, 95), 3),
        "mean_ms": round(sum(ms) / len(ms), 3),
        "max_ms": round(max(ms), 3),
        "n": len(ms),
    }


async def quiet(mem: Any) -> None:
    """Let start-up work (snapshot render, replay) finish before timing."""
    await asyncio.sleep(0.2)
    for _ in range(600):
        snap = mem.snapshot
        if not snap.pending and not snap.running and mem.embeddings.backlog == 0:
            return
        await asyncio.sleep(0.1)


def _bare_fts(db_path: Path, guild: str, matches: list[str], k: int) -> list[float]:
    from memory.db.sqlite import driver as sqlite
    from memory.store import message_fts

    con = sqlite.connect(db_path)
    out = []
    try:
        # The guild's size, as the search knows it from its vectors (every
        # message here has one): the statement then sorts a bounded list.
        rows = int(
            con.execute("SELECT count(*) FROM messages WHERE guild_id = ?", (guild,)).fetchone()[0]
        )
        for match in matches:
            t0 = time.perf_counter()
            message_fts.search_messages_fts(con, guild, match, k, None, None, rows)
            out.append((time.perf_counter() - t0) * 1000)
    finally:
        con.close()
    return out


def _bare_lexicon(retriever: Any, guild: str, matches: list[str], k: int) -> list[float]:
    """The guild's in-memory BM25 alone (``GuildLexicon.best``), what message
    search now ranks by; empty when the guild has no lexicon (too big)."""
    lex = retriever.ctx.lexicons.index.get(guild)
    if lex is None:
        return []
    out = []
    for match in matches:
        t0 = time.perf_counter()
        lex.best(match, k)
        out.append((time.perf_counter() - t0) * 1000)
    return out


async def _measure(mem: Any, guild: str, qs: list[str], rounds: int) -> dict[str, Any]:
    retriever = mem.retriever
    channels = [channel_id(MESSAGE_GUILD, c) for c in range(CHANNELS_PER_GUILD)]
    visible = set(channels)
    asker = [channels[i % len(channels)] for i in range(len(qs))]
    w0 = time.perf_counter()
    await retriever.warm(guild)
    warm_ms = (time.perf_counter() - w0) * 1000
    for q, ch in zip(qs, asker, strict=True):  # untimed: embeds every query once
        for scope in ("messages", "all"):
            await mem.search(guild, q, channel_id=ch, visible_channels=visible, scope=scope)
    times: dict[str, list[float]] = {"messages": [], "all": []}
    stage: list[float] = []
    embed: list[float] = []
    hits = {"messages": 0, "all": 0}
    load_before = loadavg()
    for _ in range(rounds):
        for q, ch in zip(qs, asker, strict=True):
            for scope in ("messages", "all"):
                t0 = time.perf_counter()
                found = await mem.search(
                    guild, q, channel_id=ch, visible_channels=visible, scope=scope
                )
                times[scope].append((time.perf_counter() - t0) * 1000)
                hits[scope] += len(found)
                embed.append(retriever.last_timings.get("embed_ms", 0.0))
                if scope == "messages":
                    stage.append(retriever.last_timings.get("messages_ms", 0.0))
        await asyncio.sleep(0.2)
    plans = [await retriever.plan(guild, q) for q in qs]
    matches = [p.message_match for p in plans if p.message_match]
    k = retriever.ctx.tuning.message_candidates
    # The bare query reads the SQLite file: not timed on PostgreSQL.
    fts = (
        await asyncio.to_thread(_bare_fts, mem.config.db_path, guild, matches, k)
        if mem.config.database_url is None
        else []
    )
    lexicon = _bare_lexicon(retriever, guild, matches, k)
    n = len(qs) * rounds
    return {
        "search_messages": stats(times["messages"]),
        "search_all": stats(times["all"]),
        "messages_stage": stats(stage),
        "bare_fts_messages": stats(fts) if fts else None,
        "bare_lexicon_messages": stats(lexicon) if lexicon else None,
        "lexicons": retriever.ctx.lexicons.stats(),
        "mean_hits": {s: round(h / n, 2) for s, h in hits.items()},
        "query_embed_ms_max": round(max(embed), 3),
        "loadavg_during": [load_before, loadavg()],
        "matrix_warm_ms": round(warm_ms, 1),
        "vector_cache": retriever.index.stats(),
    }


async def run_messages(
    cfg: Any,
    emb: Any,
    names: list[str],
    sizes: list[int],
    data: Path | None,
    pool: int,
    noise: float,
    queries: int,
    rounds: int,
) -> dict[str, Any]:
    """Message search at each size (ascending) in guild ``MESSAGE_GUILD``."""
    from memory.clock import iso, system_clock
    from memory.engine import Memory
    from memory.extract.rules.extractor import RuleExtractor

    corpus = MessageCorpus(data, pool, noise)
    corpus.embed(emb)
    lengths = sorted(len(t) for t in corpus.texts)
    print(
        f"embedded {len(corpus.texts)} message texts ({corpus.source}; median "
        f"{lengths[len(lengths) // 2]} chars) in {corpus.embed_seconds:.1f}s",
        flush=True,
    )
    guild = guild_id(MESSAGE_GUILD)
    channels = [channel_id(MESSAGE_GUILD, c) for c in range(CHANNELS_PER_GUILD)]
    members = [(user_id(MESSAGE_GUILD, w), names[w]) for w in range(SPEAKERS)]
    qs = corpus.questions(queries)
    now = iso(system_clock())
    out: dict[str, Any] = {
        "guild": guild,
        "source": corpus.source,
        "pool": {
            "texts": len(corpus.texts),
            "median_chars": lengths[len(lengths) // 2],
            "p90_chars": lengths[int(len(lengths) * 0.9)],
            "embed_seconds": round(corpus.embed_seconds, 2),
        },
        "queries": {"distinct": len(qs), "rounds": rounds, "examples": qs[:8]},
        "sizes": {},
    }
    written = 0
    for size in sorted(sizes):
        mem = await Memory.open(cfg, extractor=RuleExtractor(), embedder=emb)
        try:
            model = mem.embeddings.model_for_guild(guild)
            b0 = time.perf_counter()
            for first in range(written, size, 5000):
                items = corpus.messages(guild, first, min(5000, size - first), channels, members)
                await mem.db.write(write_messages, model, items, now)
            build_s = time.perf_counter() - b0
            written = size
            await quiet(mem)
            row = {"messages_in_guild": size, "insert_seconds": round(build_s, 1)}
            row.update(await _measure(mem, guild, qs, rounds))
        finally:
            await mem.close()
        out["sizes"][str(size)] = row
        print(
            f"{size:>7} messages: scope=messages p50 {row['search_messages']['p50_ms']:.1f} "
            f"p95 {row['search_messages']['p95_ms']:.1f} | scope=all p50 "
            f"{row['search_all']['p50_ms']:.1f} p95 {row['search_all']['p95_ms']:.1f} "
            f"| bare fts p50 "
            f"{row['bare_fts_messages']['p50_ms'] if row['bare_fts_messages'] else float('nan'):.1f}"
            f" | 1-min load {_load1(row['loadavg_during'][0])} → "
            f"{_load1(row['loadavg_during'][1])}",
            flush=True,
        )
    return out


def _load1(load: list[float] | None) -> float | None:
    return load[0] if load else None
