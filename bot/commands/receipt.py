"""``guildlore receipt ID``: show a deletion receipt and check it.

A receipt (``/memory forget-me``, ``forget-fact``, the why card's Forget
this, ``guildlore forget``) lists what an erase removed, as counts per kind,
never any text. This prints it, then looks for anything of what it erased
that memory holds again (facts about the member stored before the erase,
their messages written before it; for one fact, the fact): none is the
expected answer. Exit status 0 when clean, 3 when something came back
(a re-import of old history), 1 when there is no such receipt.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from bot.commands._common import (
    CliError,
    add_config_argument,
    load_cli_settings,
    open_memory,
    reports_errors,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="the receipt id, e.g. R-7KQ2-M9XD-4HFA")
    parser.add_argument("--json", action="store_true", help="print the receipt as JSON")
    add_config_argument(parser)


@reports_errors
def run(args: argparse.Namespace) -> int:
    settings = load_cli_settings(args)
    if not settings.database_exists:
        raise CliError(f"guildlore receipt: no database at {settings.database_label}", 1)
    return asyncio.run(_main(args, settings))


async def _main(args: argparse.Namespace, settings: Any) -> int:
    async with open_memory(settings, ingest=False) as memory:
        found = await memory.receipts.verify(args.id)
    if found is None:
        raise CliError(f"guildlore receipt: no receipt {args.id.strip()[:40]!r}", 1)
    r = found.receipt
    if args.json:
        doc = {
            "id": r.id,
            "guild_id": r.guild_id,
            "user_id": r.user_id,
            "scope": r.scope,
            "actor": r.actor,
            "created_at": r.created_at,
            "counts": r.counts,
            "remaining": found.remaining,
            "clean": found.clean,
        }
        print(json.dumps(doc, indent=2))
    else:
        where = "every guild" if r.guild_id is None else f"guild {r.guild_id}"
        counts = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in r.counts.items()) or "nothing"
        print(f"Receipt {r.id}: {r.created_at}, {r.scope} erase of user {r.user_id} in {where}")
        print(f"  by {r.actor}; erased {counts}")
        if found.clean:
            print("  check: nothing from before the erase is in memory now")
        else:
            left = ", ".join(f"{n} {k}" for k, n in found.remaining.items() if n)
            print(f"  check: memory holds {left} from before the erase again")
    return 0 if found.clean else 3
