"""Downtime, measured: a real ``guildlore run`` process against the local
stand-in for Discord (tests/fakegateway.py) is stopped (SIGTERM) while
members talk, delete and edit, then started again. How much of it does the
restarted process have, and how long does reading it back take?

    .venv/bin/python bench/catch_up.py [--channels 8] [--messages 2000] [--deletes 20]
                                       [--edits 20] [--wait 120] [--code DIR] [--label after]

The texts are the real export the tests ship (tests/data), dealt round robin
over ``--channels`` channels of one guild; ``--deletes`` and ``--edits`` are
made to messages the process stored before it stopped (all within the
reconcile window). Offline rules extraction and no embeddings: what is
measured is reading back, not extraction. SQLite in a temporary folder.

``--code DIR`` runs the bot processes from another checkout, e.g. the
baseline before catch-up (``git archive 86fb10f | tar -x -C /tmp/before``);
the stand-in for Discord is always this one's. A process that reads nothing
back is waited for ``--wait`` seconds after it logged in.

Reported: messages said while it was down and how many it has after the
restart, the deletes and edits applied, the seconds from its login until
everything was there (or the wait ended), its history requests, and the
messages read back per second. Writes bench/results/catch-up-<label>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make the project importable
    sys.path.insert(0, str(ROOT))

from bench._common import export_texts, print_table, write_json  # noqa: E402
from memory import Memory, MemoryConfig  # noqa: E402
from tests.fakegateway import FakeDiscord, FakeGuild  # noqa: E402
from tests.helpers import eventually  # noqa: E402

GUILD = "810000000000000001"
LIVE = 40  # messages the process stores before it stops
POLL_S = 0.25


async def _started(code: Path, env: dict[str, str], cwd: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "run",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**env, "PYTHONPATH": str(code)},
        cwd=cwd,
    )


async def _logged_in(proc: asyncio.subprocess.Process, timeout: float = 120.0) -> None:
    """Until the process logs in (its stderr is drained afterwards)."""
    assert proc.stderr is not None
    stderr = proc.stderr
    async with asyncio.timeout(timeout):
        while line := await stderr.readline():
            if b"logged in as" in line:
                asyncio.get_running_loop().create_task(_drain(stderr))
                return
    raise RuntimeError("the bot process exited before it logged in")


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass


async def _count(mem: Memory, ids: list[str], check: Any) -> int:
    return sum([bool(check(await mem.get_message(GUILD, i))) for i in ids])


async def _all(mem: Memory, ids: list[str], check: Any) -> bool:
    return await _count(mem, ids, check) == len(ids)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    texts = [t for _, t in export_texts() if len(t.split()) >= 3]
    channels = [str(810000000000000100 + i) for i in range(args.channels)]
    work = Path(tempfile.mkdtemp(prefix="catch-up-"))
    db, journal = work / "guildlore.sqlite3", work / "memory_journal"
    async with FakeDiscord([FakeGuild(GUILD, "Bench Guild", channels)]) as discord_:
        env = {
            **os.environ,
            "DISCORD_TOKEN": "fake.discord.token",
            "GUILDLORE_DB_PATH": str(db),
            "GUILDLORE_JOURNAL_DIR": str(journal),
            "GUILDLORE_DISCORD_API_BASE_URL": discord_.base_url,
            "GUILDLORE_DISCORD_SYNC_COMMANDS": "false",
            "GUILDLORE_DASHBOARD_ENABLED": "false",
            "GUILDLORE_LLM_EXTRACTOR": "rules",
            "GUILDLORE_EMBEDDING_PROVIDER": "none",
            "GUILDLORE_VOICE_ENABLED": "false",
        }
        env.pop("GUILDLORE_CONFIG", None)
        env.pop("OPENAI_API_KEY", None)
        first = await _started(args.code, env, work)
        await _logged_in(first)
        live = [
            await discord_.send_message(GUILD, channels[i % len(channels)], "444", texts[i])
            for i in range(LIVE)
        ]
        checker = await Memory.open(MemoryConfig(db_path=db, journal_dir=journal), ingest=False)
        try:
            stored = await eventually(
                lambda: _all(checker, live, lambda m: m is not None and m.state == "done"),
                timeout=args.wait,
            )
            if not stored:
                raise RuntimeError("the first process did not store the live messages")
            first.send_signal(signal.SIGTERM)
            await first.wait()

            said = [
                await discord_.send_message(
                    GUILD,
                    channels[i % len(channels)],
                    "555",
                    texts[(LIVE + i) % len(texts)],
                    deliver=False,
                )
                for i in range(args.messages)
            ]
            deleted = live[: args.deletes]
            edited = live[args.deletes : args.deletes + args.edits]
            for i, mid in enumerate(deleted):
                await discord_.delete_message(
                    GUILD, channels[i % len(channels)], mid, deliver=False
                )
            new_text = "Edited while the bot was away, number {}"
            for j, mid in enumerate(edited):
                channel = channels[(args.deletes + j) % len(channels)]
                await discord_.edit_message(GUILD, channel, mid, new_text.format(j), deliver=False)

            reads = len(discord_.history)
            second = await _started(args.code, env, work)
            await _logged_in(second)
            began = time.perf_counter()

            async def counts() -> tuple[int, int, int]:
                return (
                    await _count(checker, said, lambda m: m is not None),
                    await _count(checker, deleted, lambda m: m is None),
                    sum(
                        [
                            (m := await checker.get_message(GUILD, mid)) is not None
                            and m.content == new_text.format(j)
                            for j, mid in enumerate(edited)
                        ]
                    ),
                )

            want = (len(said), len(deleted), len(edited))
            got = (0, 0, 0)

            async def done() -> bool:
                nonlocal got
                got = await counts()
                return got == want

            await eventually(done, timeout=args.wait, interval=POLL_S)
            seconds = time.perf_counter() - began
            second.send_signal(signal.SIGTERM)
            await second.wait()
        finally:
            await checker.close()
    recovered, deletes, edits = got
    complete = got == want
    return {
        "label": args.label,
        "code": str(args.code),
        "channels": args.channels,
        "said_while_down": len(said),
        "recovered": recovered,
        "deletes": len(deleted),
        "deletes_applied": deletes,
        "edits": len(edited),
        "edits_applied": edits,
        "complete": complete,
        "seconds": round(seconds, 2),
        "history_requests": len(discord_.history) - reads,
        "read_back_per_s": round(recovered / seconds, 1) if complete and seconds else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--channels", type=int, default=8)
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--deletes", type=int, default=20)
    ap.add_argument("--edits", type=int, default=20)
    ap.add_argument("--wait", type=float, default=120.0)
    ap.add_argument("--code", type=Path, default=ROOT)
    ap.add_argument("--label", default="after")
    args = ap.parse_args()
    if args.deletes + args.edits > LIVE:
        ap.error(f"--deletes and --edits together at most {LIVE}")
    result = asyncio.run(run(args))
    print_table(
        [
            "code",
            "said while down",
            "recovered",
            "deletes applied",
            "edits applied",
            "s",
            "history requests",
        ],
        [
            [
                result["label"],
                result["said_while_down"],
                result["recovered"],
                f"{result['deletes_applied']}/{result['deletes']}",
                f"{result['edits_applied']}/{result['edits']}",
                result["seconds"],
                result["history_requests"],
            ]
        ],
    )
    print(write_json(f"catch-up-{args.label}", result))


if __name__ == "__main__":
    main()
