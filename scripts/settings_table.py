"""Generate the settings table of the docs from the declaration in bot/settings.py.

    python scripts/settings_table.py                 # print the table
    python scripts/settings_table.py --write FILE    # replace the table between the markers
    python scripts/settings_table.py --check FILE    # exit 1 if FILE's table is out of date

The table in a Markdown file lives between ``<!-- settings-table:start -->``
and ``<!-- settings-table:end -->``; a test keeps docs/operating/settings.md current.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bot.settings import SECTIONS, declared  # noqa: E402

START = "<!-- settings-table:start -->"
END = "<!-- settings-table:end -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default(value: Any, secret: bool) -> str:
    if secret or value is None:
        return "*(unset)*"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple):
        return "*(none)*" if not value else f"`{','.join(map(str, value))}`"
    return f"`{value}`"


def render_table() -> str:
    rows = [
        "| Setting (TOML) | Environment | Default | Description |",
        "|---|---|---|---|",
    ]
    order: dict[str | None, int] = {None: -1, **{s: i for i, s in enumerate(SECTIONS)}}
    items = sorted(
        enumerate(declared()),
        key=lambda p: (order[p[1].file_key.split(".")[0] if "." in p[1].file_key else None], p[0]),
    )
    for _, s in items:
        if "." in s.file_key:
            section, key = s.file_key.split(".", 1)
            name = f"`[{section}]` `{key}`"
        else:
            name = f"`{s.file_key}`"
        env = " or ".join(f"`{e}`" for e in s.env)
        help_text = s.help
        if s.secret:
            name = "—"
            help_text += " **Environment only** (a secret)."
        rows.append(f"| {name} | {env} | {_default(s.default, s.secret)} | {_cell(help_text)} |")
    return "\n".join(rows) + "\n"


def replace_table(document: str, table: str) -> str:
    if START not in document or END not in document:
        raise SystemExit(f"the document has no {START} … {END} markers")
    head, rest = document.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{table}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", type=Path, help="update the table in this Markdown file")
    group.add_argument("--check", type=Path, help="fail if this file's table is out of date")
    args = parser.parse_args(argv)
    table = render_table()
    if args.write:
        text = args.write.read_text(encoding="utf-8")
        args.write.write_text(replace_table(text, table), encoding="utf-8")
        return 0
    if args.check:
        text = args.check.read_text(encoding="utf-8")
        if replace_table(text, table) != text:
            print(
                f"{args.check}: settings table is out of date; run "
                f"python scripts/settings_table.py --write {args.check}",
                file=sys.stderr,
            )
            return 1
        return 0
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
