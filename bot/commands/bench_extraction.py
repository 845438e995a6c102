"""``guildlore bench extraction``: the extraction harness (``evals.extraction``)
with the engine ``guildlore import`` would open for these settings, in a
throw-away SQLite data directory."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from bot.commands._common import CliError, load_cli_settings, open_memory, reports_errors

if TYPE_CHECKING:
    from memory import Memory


@reports_errors
def run_extraction(args: argparse.Namespace) -> int:
    from evals import extraction

    settings = load_cli_settings(args)
    if settings.use_llm_extractor:
        model = settings.llm_extract_model or settings.llm_chat_model
        label = f"llm:{model}"
    else:
        label = "rules"

    @contextlib.asynccontextmanager
    async def engine(root: Path) -> AsyncIterator[Memory]:
        # Never the configured database: the harness imports into its own.
        local = settings.model_copy(
            update={"data_dir": root, "journal_dir": None, "database_url": None}
        )
        async with open_memory(local, ingest=True, drain_timeout=0.1) as memory:
            yield memory

    try:
        summary = asyncio.run(
            extraction.run(
                args.data,
                engine,
                extractor=label,
                threads=max(1, int(args.threads)),
                progress=lambda line: print(line, file=sys.stderr),
            )
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise CliError(f"cannot read {args.data} for the extraction harness: {exc}", 2) from exc
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    print(f"Extraction against gold observations, extractor {label}, judge {summary['judge']}")
    print(extraction.format_table(summary))
    if args.json is not None:
        print(f"wrote {args.json}")
    return 0
