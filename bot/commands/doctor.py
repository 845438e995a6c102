"""``guildlore doctor``: check the installation and the configuration, and explain.

Each check prints ``ok``, ``warn``, ``FAIL`` or ``info`` with one line of
detail and, when something is wrong, what to do about it. The exit status is
1 when a required check fails (the bot or the offline demo could not work),
2 when the settings themselves are invalid, else 0.

Network checks (the LLM endpoint, the Discord token with Discord) run only
for what is configured, and are skipped with ``--offline``.
"""

from __future__ import annotations

import argparse
import os
import sys

from bot.commands._common import add_config_argument, reports_errors
from bot.commands.doctor_checks import (
    check_dashboard,
    check_database,
    check_embeddings,
    check_inbox,
    check_llm,
    check_paths,
    check_sqlite,
)
from bot.commands.doctor_discord import check_discord
from bot.commands.doctor_report import Report, guard
from bot.commands.doctor_storage import check_storage


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--offline", action="store_true", help="skip checks that use the network")
    add_config_argument(parser)


@reports_errors
def run(args: argparse.Namespace) -> int:
    from bot.settings import Settings, SettingsError, load_settings

    out = sys.stdout
    print("guildlore doctor", file=out)
    report = Report(out)
    settings_bad = False
    try:
        settings = load_settings(config_file=args.config, overrides={"data_dir": args.data_dir})
        source = (
            f"config file {args.config}"
            if args.config
            else (
                f"config file {os.environ['GUILDLORE_CONFIG']}"
                if os.environ.get("GUILDLORE_CONFIG")
                else "defaults and environment"
            )
        )
        report.add("ok", "settings", f"valid ({source})")
    except SettingsError as exc:
        settings_bad = True
        report.add("FAIL", "settings", "; ".join(exc.problems), "fix the settings listed above")
        # Check the rest with what can be salvaged: the data dir and defaults.
        settings = Settings(data_dir=args.data_dir)

    v = sys.version_info
    report.add(
        "ok" if (3, 11) <= v[:2] < (3, 13) else "warn",
        "python",
        f"{v.major}.{v.minor}.{v.micro} ({sys.executable})",
        "" if (3, 11) <= v[:2] < (3, 13) else "guildlore is tested on Python 3.11 and 3.12",
    )
    guard(report, "sqlite", lambda: check_sqlite(report))
    guard(report, "data dir", lambda: check_paths(report, settings))
    guard(report, "database", lambda: check_database(report, settings))
    guard(report, "inbox", lambda: check_inbox(report, settings))
    guard(report, "storage", lambda: check_storage(report, settings))
    guard(report, "embeddings", lambda: check_embeddings(report, settings, args.offline))
    guard(report, "llm", lambda: check_llm(report, settings, args.offline))
    guard(report, "discord", lambda: check_discord(report, settings, args.offline))
    guard(report, "dashboard", lambda: check_dashboard(report, settings))

    failures, warnings = report.failures, report.warnings
    print("", file=out)
    if failures:
        print(
            f"{len(failures)} problem{'s' if len(failures) != 1 else ''} to fix"
            + (f", {len(warnings)} warning{'s' if len(warnings) != 1 else ''}" if warnings else "")
            + ".",
            file=out,
        )
        return 2 if settings_bad and len(failures) == 1 else 1
    print(
        "Everything required works"
        + (f" ({len(warnings)} warning{'s' if len(warnings) != 1 else ''})." if warnings else "."),
        file=out,
    )
    return 0
