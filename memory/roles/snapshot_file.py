"""MEMORY.md on disk: rendered from the stored facts, names and the journal,
written atomically (one writer: the engine's refresher or an explicit refresh),
and read back for the dashboard and the CLI."""

from __future__ import annotations

import asyncio
from pathlib import Path

from memory.clock import Clock
from memory.config import SnapshotConfig
from memory.db.core import Connection, Database
from memory.models import EPISODE_SUBJECT, LORE_SUBJECT, Fact
from memory.roles.journals import JournalViews
from memory.snapshot import GuildLore, PersonFacts, render_snapshot, write_atomic
from memory.store import facts as store

SNAPSHOT_NAME = "MEMORY.md"


class SnapshotFile:
    def __init__(
        self, db: Database, journals: JournalViews, cfg: SnapshotConfig, path: Path, clock: Clock
    ) -> None:
        self._db = db
        self._journals = journals
        self._cfg = cfg
        self._clock = clock
        self.path = path

    async def write(self) -> None:
        cfg = self._cfg
        facts, names, guilds = await self._db.read(_inputs, cfg.facts_per_person)
        people: dict[tuple[str, str], list[Fact]] = {}
        lore: dict[str, list[Fact]] = {}
        for f in facts:
            if f.subject == EPISODE_SUBJECT:
                continue  # channel episodes follow channel visibility; the file has none
            if f.subject == LORE_SUBJECT:
                lore.setdefault(f.guild_id, []).append(f)
            else:
                people.setdefault((f.guild_id, f.subject), []).append(f)
        person_list = [
            PersonFacts(gid, guilds.get(gid), sid, names.get((gid, sid), sid), fs)
            for (gid, sid), fs in people.items()
        ]
        lore_list = [GuildLore(gid, guilds.get(gid), fs) for gid, fs in lore.items()]
        now = self._clock()
        journal = await self._journals.recent(
            cfg.highlight_files, max(cfg.highlight_files, cfg.source_files)
        )

        def render_and_write() -> None:
            text = render_snapshot(person_list, lore_list, journal, cfg, now)
            write_atomic(self.path, text)

        await asyncio.to_thread(render_and_write)

    async def read(self) -> str:
        """The file's text; written first when there is none yet."""
        text = await asyncio.to_thread(self._read)
        if not text:
            await self.write()
            text = await asyncio.to_thread(self._read)
        return text

    def _read(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return ""


def _inputs(
    con: Connection, per_subject: int
) -> tuple[list[Fact], dict[tuple[str, str], str], dict[str, str | None]]:
    return store.snapshot_facts(con, per_subject), store.display_names(con), store.guild_names(con)
