"""A year of a busy guild: does memory stay bounded month after month?

    .venv/bin/python bench/year.py                 # 150 messages a weekday, 365 days
    .venv/bin/python bench/year.py --per-day 10 --days 60   # smoke run

The messages are the real export's (tests/data, DiscordChatExporter), authors
kept, re-timed over ``--days`` days from 2025-01-01: ``--per-day`` messages on
a weekday, more at the weekend, in a few conversations a day (a minute or two
between messages, hours between conversations) spread over four channels.
They go through the real engine (``Memory.open``, SQLite file in WAL mode,
offline rule extractor, no embeddings: the local model would embed every
message and fact, which a year's worth of cannot do in the run's time on two
cores — so relations, which need vectors, are not exercised). The engine's
clock is injected: it follows the messages, and at the end of each simulated
day the daily jobs run as the bot schedules them: channel episodes, upkeep
(TTL expiry, then the purge of archived facts) and consolidation.

Small budgets and TTLs are set as guild settings so a year reaches them
(``--budget-*``). Recorded at the end of each month: current facts per scope
(the largest member, lore, the largest channel's episodes, the guild total)
against their budgets, archived (in all, and by budgets alone)/expired/purged counts, and the
database and WAL file sizes. Writes bench/results/year.json and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import EXPORT, loadavg, print_table, write_json
from memory.clock import DISCORD_EPOCH, iso
from memory.config import EmbeddingConfig, MemoryConfig
from memory.engine import Memory
from memory.models import IncomingMessage

GUILD = "900000000000000003"
CHANNELS = [str(930000000000000000 + i) for i in range(4)]
START = datetime(2025, 1, 1, tzinfo=UTC)
# Monday first: a guild is busier at the weekend.
WEEKDAY_FACTOR = (1.0, 0.9, 1.0, 1.0, 1.2, 1.6, 1.4)


@dataclass(frozen=True)
class Source:
    author_id: str
    author_name: str
    content: str


@dataclass(frozen=True)
class Planned:
    at: datetime
    channel_id: str
    source: Source


class SimClock:
    """The engine's clock, moved by the simulation."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def read_export(path: Path) -> list[Source]:
    data = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for m in data["messages"]:
        content = (m.get("content") or "").strip()
        author = m.get("author") or {}
        if content and not author.get("isBot"):
            name = author.get("nickname") or author.get("name") or "someone"
            out.append(Source(str(author.get("id", "0")), name, content))
    return out


def plan_day(
    day: datetime, count: int, sources: list[Source], start: int, rng: random.Random
) -> list[Planned]:
    """``count`` messages of ``sources`` (cyclic, from ``start``) on ``day``,
    in conversations of 6–20 messages 30–150 s apart, each in one channel,
    starting between 08:00 and 22:00; sorted by time."""
    out: list[Planned] = []
    i = 0
    while i < count:
        size = min(count - i, rng.randint(6, 20))
        channel = rng.choice(CHANNELS)
        at = day + timedelta(hours=8, seconds=rng.randint(0, 14 * 3600))
        for _ in range(size):
            out.append(Planned(at, channel, sources[(start + i) % len(sources)]))
            at += timedelta(seconds=rng.randint(30, 150))
            i += 1
    out.sort(key=lambda p: p.at)
    return out


def messages_on(day_index: int, per_day: int) -> int:
    day = START + timedelta(days=day_index)
    return round(per_day * WEEKDAY_FACTOR[day.weekday()])


def snowflake(at: datetime, seq: int) -> str:
    ms = int((at - DISCORD_EPOCH).total_seconds() * 1000)
    return str((ms << 22) | (seq & 0x3FFFFF))


def file_mib(path: Path) -> float:
    try:
        return path.stat().st_size / 2**20
    except FileNotFoundError:
        return 0.0


async def month_row(mem: Memory, cfg: MemoryConfig, month: str, sent: int) -> dict[str, Any]:
    usage = await mem.upkeep.usage(GUILD)

    def scope(kind: str) -> tuple[int, int, int]:
        """(largest use, its budget, number of scopes of that kind)."""
        found = [s for s in usage.scopes if s.kind == kind]
        if not found:
            return 0, 0, 0
        top = max(found, key=lambda s: s.used)
        return top.used, top.budget, len(found)

    member, member_budget, members = scope("member")
    episodes, episode_budget, channels = scope("episodes")
    lore, lore_budget, _ = scope("lore")
    guild, guild_budget, _ = scope("guild")
    stats = usage.compaction
    return {
        "month": month,
        "messages": sent,
        "member_max": member,
        "member_budget": member_budget,
        "members_with_facts": members,
        "lore": lore,
        "lore_budget": lore_budget,
        "episodes_max_channel": episodes,
        "episodes_budget": episode_budget,
        "episode_channels": channels,
        "episodes_per_channel": {
            s.key: s.used for s in usage.scopes if s.kind == "episodes" and s.key is not None
        },
        "guild_total": guild,
        "guild_budget": guild_budget,
        "pinned": usage.pinned,
        "archived": usage.archived,
        "expired": usage.expired,
        "purged": usage.purged,
        "budget_archived": stats.archived,
        "db_mib": round(file_mib(cfg.db_path), 2),
        "wal_mib": round(file_mib(Path(f"{cfg.db_path}-wal")), 2),
    }


async def simulate(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    sources = read_export(args.export)
    rng = random.Random(args.seed)
    clock = SimClock(START)
    cfg = MemoryConfig.for_data_dir(data_dir, embedding=EmbeddingConfig(provider="none"))
    mem = await Memory.open(cfg, clock=clock)
    settings = {
        "budget_member_facts": args.budget_member,
        "budget_lore": args.budget_lore,
        "budget_channel_episodes": args.budget_episodes,
        "budget_guild_total": args.budget_guild,
        "ttl_days_other": args.ttl_days,
        "ttl_days_project": args.ttl_days,
        "ttl_days_episode": args.ttl_days,
        "purge_after_days": args.purge_after_days,
    }
    for key, value in settings.items():
        await mem.guilds.set_setting(GUILD, key, str(value))
    months: list[dict[str, Any]] = []
    jobs = {"episodes": 0, "consolidation_changes": 0}
    job_s = {"ingest": 0.0, "episodes": 0.0, "upkeep": 0.0, "consolidation": 0.0}
    sent = seq = 0
    started = time.perf_counter()
    try:
        for d in range(args.days):
            day = START + timedelta(days=d)
            t0 = time.perf_counter()
            for p in plan_day(day, messages_on(d, args.per_day), sources, sent, rng):
                clock.now = p.at
                seq += 1
                await mem.ingest_message(
                    IncomingMessage(
                        id=snowflake(p.at, seq),
                        guild_id=GUILD,
                        channel_id=p.channel_id,
                        author_id=p.source.author_id,
                        author_name=p.source.author_name,
                        content=p.source.content,
                        created_at=iso(p.at),
                    )
                )
                sent += 1
            await mem.drain(120)
            t1 = time.perf_counter()
            # The daily jobs, just before midnight: every conversation is over.
            clock.now = day + timedelta(hours=23, minutes=55)
            run = await mem.episodes.run()
            jobs["episodes"] += len(run.created)
            t2 = time.perf_counter()
            await mem.upkeep.run_daily()
            await mem.upkeep.settle(120)
            t3 = time.perf_counter()
            report = await mem.consolidation.run(GUILD)
            jobs["consolidation_changes"] += len(report.report.get("applied", []))
            await mem.upkeep.settle(120)
            t4 = time.perf_counter()
            for key, dt in zip(job_s, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                job_s[key] += dt
            tomorrow = day + timedelta(days=1)
            if tomorrow.month != day.month or d == args.days - 1:
                row = await month_row(mem, cfg, f"{day:%Y-%m}", sent)
                months.append(row)
                print(
                    f"{row['month']}: {sent} messages, guild {row['guild_total']}, "
                    f"{time.perf_counter() - started:.0f} s",
                    flush=True,
                )
        counters = mem.admin.counters()
        episode_stats = mem.episodes.stats
    finally:
        await mem.close()
    return {
        "settings": settings,
        "per_day": args.per_day,
        "days": args.days,
        "messages": sent,
        "wall_s": round(time.perf_counter() - started, 1),
        "job_seconds": {k: round(v, 1) for k, v in job_s.items()},
        "episodes_created": jobs["episodes"],
        "episodes_extractive": episode_stats.extractive,
        "consolidation_changes": jobs["consolidation_changes"],
        "facts_added": counters.get("facts_added"),
        "dropped": counters.get("ingest_dropped"),
        "months": months,
        "db_mib_after_close": round(file_mib(cfg.db_path), 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--per-day", type=int, default=150, help="messages on a plain weekday")
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--budget-member", type=int, default=3)
    ap.add_argument("--budget-lore", type=int, default=10)
    ap.add_argument("--budget-episodes", type=int, default=30)
    ap.add_argument("--budget-guild", type=int, default=120)
    ap.add_argument(
        "--ttl-days", type=int, default=90, help="TTL of plain, project and episode facts"
    )
    ap.add_argument("--purge-after-days", type=int, default=30)
    ap.add_argument("--export", type=Path, default=EXPORT, help="a DiscordChatExporter JSON file")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    load_before = loadavg()
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(simulate(args, Path(tmp)))
    result["load_average"] = {"before": load_before, "after": loadavg()}
    print_table(
        [
            "month",
            "messages",
            "largest member/budget",
            "lore/budget",
            "episodes largest channel/budget",
            "guild/budget",
            "archived",
            "expired",
            "purged",
            "by budget",
            "db MiB",
            "WAL MiB",
        ],
        [
            [
                r["month"],
                r["messages"],
                f"{r['member_max']}/{r['member_budget']}",
                f"{r['lore']}/{r['lore_budget']}",
                f"{r['episodes_max_channel']}/{r['episodes_budget']}",
                f"{r['guild_total']}/{r['guild_budget']}",
                r["archived"],
                r["expired"],
                r["purged"],
                r["budget_archived"],
                r["db_mib"],
                r["wal_mib"],
            ]
            for r in result["months"]
        ],
    )
    print(
        f"\n{result['messages']} messages in {result['wall_s']} s ({result['job_seconds']}); "
        f"{result['episodes_created']} episodes, {result['dropped']} dropped; "
        f"load {result['load_average']}"
    )
    path = write_json("year", result, args.json)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
