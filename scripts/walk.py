"""One message's walk through the code, counted by running it.

Runs the real path in this process — the Discord listener (the real cog's
``on_message`` on a real ``discord.Message``), the engine's ingest through to a stored fact and
its vector, then a search on the dashboard's JSON API (the real aiohttp app)
that finds the fact — with a profiler that notes every function of the
repository that runs, and prints, per leg, the files that ran in the order
they were first entered, with their lengths. The offline defaults: rule
extraction, the bundled MiniLM embeddings, SQLite.

    .venv/bin/python scripts/walk.py [--json OUT] [--markdown]

The counts are what ran, not what a reader must read: a file is on the walk
when any function of it was called on the way.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType, SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PACKAGES = ("bot", "memory", "dashboard")
GUILD, CHANNEL, AUTHOR = "111111111111111111", "222222222222222222", "333333333333333333"
TEXT = "I'm a palaeographer and I live in Leiden."


class Tracer:
    """Notes the repository files whose functions run, in first-entered order,
    on every thread (the writer and reader threads do the store's work)."""

    def __init__(self) -> None:
        # Notes only while on; the hook is installed once, before the engine
        # starts its threads (a thread takes the profile hook when it starts).
        self.on = False
        self.files: dict[str, None] = {}
        self._lock = threading.Lock()
        prefixes = tuple(str(ROOT / p) + "/" for p in PACKAGES)
        self._prefixes = prefixes
        self._seen_code: dict[Any, bool] = {}

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or not self.on:
            return
        code = frame.f_code
        ours = self._seen_code.get(code)
        if ours is None:
            ours = code.co_filename.startswith(self._prefixes)
            self._seen_code[code] = ours
        if ours:
            name = Path(code.co_filename).relative_to(ROOT).as_posix()
            if name not in self.files:
                with self._lock:
                    self.files.setdefault(name, None)

    def install(self) -> None:
        threading.setprofile(self._profile)
        sys.setprofile(self._profile)

    def uninstall(self) -> None:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]

    def start(self) -> None:
        self.files = {}
        self.on = True

    def stop(self) -> list[str]:
        self.on = False
        return list(self.files)


# Top-down: the adapters, the facade, the engine's roles, the machinery from
# the write path to the database, then the ground floor everything stands on.
LAYERS = (
    ("the adapter", ("bot/", "dashboard/")),
    ("the facade", ("memory/engine.py",)),
    ("the engine's roles", ("memory/roles/",)),
    ("ingest", ("memory/ingest/",)),
    ("extraction", ("memory/extract/",)),
    ("retrieval", ("memory/retrieval/",)),
    ("embeddings", ("memory/embed/",)),
    ("usage", ("memory/usage/",)),
    ("the journal and the snapshot", ("memory/journal.py", "memory/snapshot")),
    ("the tables' SQL", ("memory/store/",)),
    ("the database", ("memory/db/",)),
    ("the ground floor", ("memory/",)),
)


def layer_of(name: str) -> int:
    return next(i for i, (_, prefixes) in enumerate(LAYERS) if name.startswith(prefixes))


def _lines(name: str) -> int:
    return len((ROOT / name).read_text(encoding="utf-8").splitlines())


async def _walk() -> dict[str, list[str]]:
    import discord
    from aiohttp.test_utils import TestClient, TestServer

    from bot.cogs.listener import Listener
    from dashboard.app import create_app
    from memory import Memory, MemoryConfig, RuleExtractor

    tracer = Tracer()
    legs: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        config = MemoryConfig(db_path=data / "memory.sqlite3", journal_dir=data / "journal")
        tracer.install()
        mem = Memory(config, extractor=RuleExtractor())
        await mem.start()
        try:
            message = _discord_message(discord)
            # The real cog; of the bot it needs only what on_message reads.
            bot = SimpleNamespace(accepting=True, user=None, memory=mem)
            listener = Listener(bot)  # type: ignore[arg-type]
            tracer.start()
            await listener.on_message(message)
            await mem.settle(timeout=120)
            legs["listener → stored fact and its vector"] = tracer.stop()
            facts = await mem.facts.find(GUILD, limit=10)
            if not facts:
                raise SystemExit("walk.py: the message gave no fact; the walk is not the usual one")
            app = create_app(mem)
            async with TestClient(TestServer(app)) as client:
                tracer.start()
                resp = await client.get(
                    "/api/memory/search", params={"guildId": GUILD, "q": "who lives in Leiden?"}
                )
                body = await resp.json()
                legs["search → dashboard hit"] = tracer.stop()
            if resp.status != 200 or not body.get("results"):
                raise SystemExit(f"walk.py: the search found nothing ({resp.status}: {body})")
        finally:
            await mem.close()
            tracer.uninstall()
    return legs


def _discord_message(discord: Any) -> Any:
    """A real ``discord.Message``, built from a gateway payload as discord.py
    builds it when MESSAGE_CREATE arrives."""
    from discord.state import ConnectionState

    state = ConnectionState(
        dispatch=lambda *a, **k: None,
        handlers={},
        hooks={},
        http=None,  # type: ignore[arg-type]
        intents=discord.Intents.default(),
    )
    guild = discord.Guild(data={"id": GUILD, "name": "Walk", "channels": []}, state=state)
    channel = discord.TextChannel(
        state=state,
        guild=guild,
        data={"id": CHANNEL, "name": "general", "type": 0, "position": 0, "guild_id": GUILD},  # type: ignore[typeddict-item]
    )
    payload = {
        "id": "444444444444444444",
        "channel_id": CHANNEL,
        "guild_id": GUILD,
        "author": {"id": AUTHOR, "username": "alice", "discriminator": "0", "avatar": None},
        "member": {"roles": [], "joined_at": datetime.now(UTC).isoformat()},
        "content": TEXT,
        "timestamp": datetime.now(UTC).isoformat(),
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": False,
        "type": 0,
    }
    return discord.Message(state=state, channel=channel, data=payload)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the walk here as JSON")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    legs = asyncio.run(_walk())
    out: dict[str, Any] = {"legs": {}}
    seen: set[str] = set()
    for leg, files in legs.items():
        rows = [{"file": f, "lines": _lines(f), "new": f not in seen} for f in files]
        seen |= set(files)
        out["legs"][leg] = rows
    out["total_files"] = len(seen)
    out["total_lines"] = sum(_lines(f) for f in seen)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    show: Callable[[str], None] = print
    for leg, rows in out["legs"].items():
        new = [r for r in rows if r["new"]]
        show(
            f"\n{leg}: {len(rows)} files ({len(new)} not on an earlier leg), "
            f"{sum(r['lines'] for r in rows)} lines"
        )
        if args.markdown:
            show("\n| layer | files (lines) |\n|---|---|")
            ordered = sorted(rows, key=lambda r: layer_of(r["file"]))
            for i, (label, _) in enumerate(LAYERS):
                here = [r for r in ordered if layer_of(r["file"]) == i]
                if here:
                    cells = ", ".join(
                        f"`{r['file']}` ({r['lines']}{'' if r['new'] else ', again'})" for r in here
                    )
                    show(f"| {label} | {cells} |")
            continue
        for i, r in enumerate(rows, 1):
            mark = "" if r["new"] else " (again)"
            show(f"  {i:3d}  {r['lines']:5d}  {r['file']}{mark}")
    show(f"\nin all: {out['total_files']} files, {out['total_lines']} lines")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
