"""Reply assembly latency: everything a reply does before the chat model is called.

    .venv/bin/python bench/reply.py [--facts 100000] [--messages 50000] [--queries 200]
                                    [--pool 4000] [--max-recent 35] [--recent-tokens 2000]

One on-disk database holds the measured guild of ``bench/search.py``'s corpus
(``bench/_search_corpus.py``): ``--facts`` active facts with real MiniLM
vectors (pooled and perturbed), its lore, and ``--messages`` chat messages
with vectors spread over its channels, plus 40 of the bot's own replies per
channel. Written straight through the store, not extracted.

Timed per question: ``assemble_prompt`` (memory/reply/conversation.py), as a reply
runs it — the short-term window from the inbox (the channel's last
``--max-recent`` messages within ``--recent-tokens``), the prompt slice (user
facts, relevant facts and messages: query embedding, vector KNN, FTS5, scoring)
and the rendering of the system prompt and turns. Each question is new text,
so its query embedding is computed on the timed path (the offline MiniLM). The
window alone is timed too (``window``). The LLM call is not part of it.

Target: assembly p95 ≤ 100 ms at 100k facts and 50k messages.
Writes bench/results/reply.json.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make the project importable
    sys.path.insert(0, str(ROOT))

from bench._common import loadavg, percentile, print_table, write_json  # noqa: E402
from bench._search_corpus import (  # noqa: E402
    CHANNELS_PER_GUILD,
    LORE_PER_GUILD,
    MEMBERS_PER_GUILD,
    TARGET_GUILD,
    Corpus,
    channel_id,
    questions,
    user_id,
    write_facts,
    write_in_chunks,
    write_members,
    write_messages,
)

BOT_REPLIES_PER_CHANNEL = 40


def _stats(ms: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(ms, 50), 2),
        "p95_ms": round(percentile(ms, 95), 2),
        "max_ms": round(max(ms), 2),
        "n": len(ms),
    }


def _write_bot_replies(con: Any, now: str, last_message_at: str) -> None:
    from memory.store import window as store_window

    for c in range(CHANNELS_PER_GUILD):
        for i in range(BOT_REPLIES_PER_CHANNEL):
            store_window.insert_bot_reply(
                con,
                guild_id=TARGET_GUILD,
                channel_id=channel_id(0, c),
                message_id=str(7 * 10**17 + c * 10**4 + i),
                reply_to_id=None,
                to_user_id=user_id(0, i),
                content=f"Sure, here is what I remember about that, reply {i}.",
                # Interleaved with the last days of chat, before any question.
                created_at=last_message_at[:8] + f"{1 + i % 28:02d}" + last_message_at[10:],
                keep_per_channel=120,
            )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from memory.clock import iso, system_clock
    from memory.config import EmbeddingConfig, MemoryConfig
    from memory.embed.local import LocalMiniLMEmbedder
    from memory.engine import Memory
    from memory.extract.rules.extractor import RuleExtractor
    from memory.reply.conversation import ReplyRequest, assemble_prompt, reply_window

    corpus = Corpus(args.pool, args.noise)
    emb = LocalMiniLMEmbedder(threads=2, batch_size=64)
    emb.load()
    corpus.embed_pool(emb)
    print(f"embedded {len(corpus.preds)} pooled sentences", flush=True)
    rng = random.Random(11)
    qs = questions(rng, args.queries, corpus.names[0])
    data = Path(tempfile.mkdtemp(prefix="guildlore-bench-reply-", dir=args.tmp))
    cfg = MemoryConfig.for_data_dir(data)
    cfg = replace(cfg, embedding=EmbeddingConfig(provider="local"))
    out: dict[str, Any] = {}
    try:
        mem = await Memory.open(cfg, extractor=RuleExtractor(), embedder=emb, ingest=False)
        try:
            model = mem.embeddings.model_for_guild(TARGET_GUILD)
            assert model is not None
            now = iso(system_clock())
            b0 = time.perf_counter()
            await mem.db.write(write_members, corpus, now)
            await mem.db.write(write_facts, model, corpus.lore(0, LORE_PER_GUILD, 200), now)
            await write_in_chunks(mem, write_facts, model, corpus.facts(0, args.facts, 100), now)
            msgs = corpus.messages(0, args.messages, seed=99)
            for i in range(0, len(msgs), 10_000):
                await mem.db.write(write_messages, model, msgs[i : i + 10_000], now)
            last = max(m.created_at for m, _ in msgs)
            await mem.db.write(_write_bot_replies, now, last)
            print(f"wrote the guild in {time.perf_counter() - b0:.1f}s", flush=True)
            await mem.warm_up(TARGET_GUILD)
            names = {channel_id(0, c): f"channel-{c}" for c in range(CHANNELS_PER_GUILD)}
            visible = frozenset(names)
            requests = []
            for i, q in enumerate(qs):
                who = rng.randrange(MEMBERS_PER_GUILD)
                requests.append(
                    ReplyRequest(
                        guild_id=TARGET_GUILD,
                        guild_name="bench guild 0",
                        channel_id=channel_id(0, rng.randrange(CHANNELS_PER_GUILD)),
                        channel_name="general",
                        author_id=user_id(0, who),
                        author_name=corpus.names[0][who],
                        message_id=str(8 * 10**17 + i),
                        text=q,
                        visible_channels=visible,
                        channel_names=names,
                    )
                )
            # One untimed assembly: first-use costs (reader threads, model warm-up).
            await assemble_prompt(mem, requests[0], persona="bench")
            load_before = loadavg()
            total: list[float] = []
            window_ms: list[float] = []
            turns: list[int] = []
            for req in requests[1:]:
                t0 = time.perf_counter()
                prompt = await assemble_prompt(
                    mem,
                    req,
                    persona="bench",
                    max_recent_messages=args.max_recent,
                    recent_tokens=args.recent_tokens,
                )
                total.append((time.perf_counter() - t0) * 1000)
                turns.append(len(prompt.window))
                t0 = time.perf_counter()
                await reply_window(
                    mem,
                    req,
                    max_recent_messages=args.max_recent,
                    recent_tokens=args.recent_tokens,
                )
                window_ms.append((time.perf_counter() - t0) * 1000)
            out = {
                "facts_in_guild": args.facts,
                "messages_in_guild": args.messages,
                "bot_replies_per_channel": BOT_REPLIES_PER_CHANNEL,
                "max_recent_messages": args.max_recent,
                "recent_tokens": args.recent_tokens,
                "assembly": _stats(total),
                "window": _stats(window_ms),
                "window_turns_mean": round(sum(turns) / len(turns), 1),
                "loadavg_during": [load_before, loadavg()],
                "examples": qs[:5],
            }
        finally:
            await mem.close()
    finally:
        await emb.aclose()
        shutil.rmtree(data, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--pool", type=int, default=4000)
    parser.add_argument("--noise", type=float, default=0.02)
    parser.add_argument("--max-recent", type=int, default=35)
    parser.add_argument("--recent-tokens", type=int, default=2000)
    parser.add_argument("--tmp", type=Path, default=None, help="folder for the database")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    out = asyncio.run(run(args))
    print_table(
        ["what", "p50 ms", "p95 ms", "max ms", "n"],
        [
            [k, out[k]["p50_ms"], out[k]["p95_ms"], out[k]["max_ms"], out[k]["n"]]
            for k in ("assembly", "window")
        ],
    )
    print(f"window turns (mean): {out['window_turns_mean']}")
    path = write_json("reply", out, args.out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
