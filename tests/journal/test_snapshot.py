from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from memory.config import SnapshotConfig
from memory.journal import Journal
from memory.models import LORE_SUBJECT, Fact
from memory.sensitive import mask_secrets
from memory.snapshot import (
    HIGHLIGHTS_HEADING,
    LORE_HEADING,
    NO_HIGHLIGHTS,
    NO_LORE,
    NO_PEOPLE,
    NO_SOURCES,
    PEOPLE_HEADING,
    SOURCES_HEADING,
    TITLE,
    GuildLore,
    PersonFacts,
    SnapshotRefresher,
    md_inline,
    render_snapshot,
    write_atomic,
)

NOW = datetime(2024, 5, 10, 12, 0, tzinfo=UTC)
CFG = SnapshotConfig()
_ids = iter(range(1, 1_000_000))


def fact(
    guild: str,
    subject: str,
    text: str,
    kind: str = "other",
    updated: str = "2024-05-01T00:00:00.000Z",
    active: bool = True,
) -> Fact:
    return Fact(
        id=next(_ids),
        guild_id=guild,
        channel_id=None,
        subject=subject,
        fact=text,
        fact_type=kind,
        evidence_text=None,
        source_message_id=None,
        confidence=0.7,
        is_active=active,
        created_at=updated,
        updated_at=updated,
    )


def section(text: str, heading: str) -> list[str]:
    """Lines of one ``## `` section, without its heading."""
    lines = text.splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return [line for line in lines[start:end] if line]


def h2s(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("## ")]


def test_empty_snapshot_has_all_sections_and_placeholders(tmp_path: Path) -> None:
    text = render_snapshot([], [], Journal(tmp_path), CFG, NOW)
    lines = text.splitlines()
    assert lines[0] == TITLE
    assert any("SQLite retrieval" in line and "not this file" in line for line in lines[1:4])
    assert any("2024-05-10T12:00:00.000Z" in line for line in lines[1:5])
    assert h2s(text) == [PEOPLE_HEADING, LORE_HEADING, HIGHLIGHTS_HEADING, SOURCES_HEADING]
    assert section(text, PEOPLE_HEADING) == [NO_PEOPLE]
    assert section(text, LORE_HEADING) == [NO_LORE]
    assert section(text, HIGHLIGHTS_HEADING) == [NO_HIGHLIGHTS]
    assert section(text, SOURCES_HEADING) == [NO_SOURCES]


def test_people_and_lore_structure(tmp_path: Path) -> None:
    alice = [
        fact("g1", "111", "likes green tea", "preference", "2024-05-09T00:00:00.000Z"),
        fact("g1", "111", "lives in Lisbon", "profile", "2024-05-08T00:00:00.000Z"),
        fact("g1", "111", "is Bob's sister", "relationship", "2024-05-07T00:00:00.000Z"),
        fact("g1", "111", "builds a synth", "project", "2024-05-06T00:00:00.000Z"),
        fact("g1", "111", "said something", "other", "2024-05-05T00:00:00.000Z"),
    ] + [
        fact("g1", "111", f"old fact {i}", "other", f"2024-04-0{i}T00:00:00.000Z")
        for i in range(1, 6)
    ]
    people = [
        PersonFacts("g2", None, "111", "Alice", [fact("g2", "111", "other guild fact")]),
        PersonFacts("g1", "Zeta Guild", "222", "bob", [fact("g1", "222", "plays bass", "profile")]),
        PersonFacts("g1", "Zeta Guild", "111", "Alice", alice),
        PersonFacts("g1", "Zeta Guild", "333", "Ghost", [fact("g1", "333", "gone", active=False)]),
    ]
    lore = [
        GuildLore(
            "g1",
            "Zeta Guild",
            [
                fact(
                    "g1",
                    LORE_SUBJECT,
                    f"Memory line: lore {i}.",
                    "lore",
                    f"2024-05-{i + 1:02d}T00:00:00.000Z",
                )
                for i in range(20)
            ],
        )
    ]
    text = render_snapshot(people, lore, Journal(tmp_path), CFG, NOW)
    assert h2s(text) == [PEOPLE_HEADING, LORE_HEADING, HIGHLIGHTS_HEADING, SOURCES_HEADING]

    body = section(text, PEOPLE_HEADING)
    # Guilds by name ("Guild g2" < "Zeta Guild"), then people by display name.
    assert [line for line in body if line.startswith("#")] == [
        "### Guild g2",
        "#### Alice (111)",
        "### Zeta Guild (guild g1)",
        "#### Alice (111)",
        "#### bob (222)",
    ]
    alice_lines = body[body.index("### Zeta Guild (guild g1)") + 2 : body.index("#### bob (222)")]
    assert alice_lines == [
        "- Preference: likes green tea",
        "- Profile: lives in Lisbon",
        "- Relationship: is Bob's sister",
        "- Project: builds a synth",
        "- said something",
        "- old fact 5",
    ]  # newest 6 of 10
    assert "gone" not in text and "Ghost" not in text

    lore_body = section(text, LORE_HEADING)
    assert lore_body[0] == "### Zeta Guild (guild g1)"
    assert lore_body[1] == "- Memory line: lore 19."
    assert 1 < len(lore_body) - 1 <= 12


def write_day(tmp_path: Path, day: str, rows: list[tuple[str, str, str]]) -> None:
    j = Journal(tmp_path)
    for i, (author_id, name, content) in enumerate(rows):
        j.append(f"{day}T10:{i // 60:02d}:{i % 60:02d}Z", name, author_id, "g1", "c1", content)


def test_highlights_caps_filters_and_sources(tmp_path: Path) -> None:
    j = Journal(tmp_path)
    for d in range(1, 8):  # seven daily files; only the newest three feed highlights
        write_day(tmp_path, f"2024-05-0{d}", [("900", "Old", f"older day {d} message")])
    chatty = [("1", "Chatty", f"chatty message number {i}") for i in range(12)]
    noise = [
        ("2", "Linker", "https://example.com/a/very/long/link/only"),
        ("2", "Linker", "<https://example.com/x>"),
        ("2", "Linker", "lol https://example.com/y"),
        ("3", "Short", "ok"),
        ("3", "Short", "  hey   "),
    ]
    others = [(str(10 + i), f"P{i}", f"distinct person {i} speaking") for i in range(20)]
    write_day(tmp_path, "2024-05-07", others + noise + chatty)

    text = render_snapshot([], [], j, CFG, NOW)
    items = section(text, HIGHLIGHTS_HEADING)
    assert len(items) == 24
    assert sum("(1)" in line for line in items) == 8  # per-author cap
    assert not any("example.com" in line or "Short" in line for line in items)
    # Newest first: the last message written on the newest day comes first.
    assert "chatty message number 11" in items[0]
    assert "chatty message number 3" not in text  # the author's 9th newest line
    times = [re.match(r"- (\S+) ", line)[1] for line in items]  # type: ignore[index]
    assert times == sorted(times, reverse=True)
    assert not any("older day 4" in line for line in text.splitlines())

    assert section(text, SOURCES_HEADING) == [f"- 2024-05-0{d}.md" for d in (7, 6, 5, 4, 3)]


SECRET_LINES = [
    ("my password is hunter2", "my password is [redacted]"),
    ("my api key is sk-proj-abcdefghijklmnop1234 fyi", "my api key is [redacted] fyi"),
    ("My PW for the wiki is hunter2!", "My PW for the wiki is [redacted]!"),
    ("my passw0rd: hunter2 lol", "my passw0rd: [redacted] lol"),
    ("my pass\u200bword is hunter2", "my pass\u200bword is [redacted]"),
    ("the wifi password is 'correct horse' ok", "the wifi password is [redacted] ok"),
    (
        "my seed phrase is apple banana cherry. I love tea",
        "my seed phrase is [redacted]. I love tea",
    ),
    ("my pin is 4321", "my pin is [redacted]"),
    ("deploy with ghp_abcdefghijklmnopqrstuvwxyz012345 ok", "deploy with [redacted] ok"),
    ("the bot uses xoxb-1234567890-abcdefghij now", "the bot uses [redacted] now"),
    ("AKIAIOSFODNN7EXAMPLE leaked", "[redacted] leaked"),
    (
        "curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwx'",
        "curl -H 'Authorization: [redacted]'",
    ),
    (
        "sha 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.",
        "sha [redacted].",
    ),
    ("blob Q2hhbmdlTWU0dGhlV2lraUFjY2Vzcw9xYZ end", "blob [redacted] end"),
]
KEPT_LINES = [
    "Dave passed the exam and loves pinball",
    "Eve's pinned post is about my password manager",
    "Carol works on tokenizer research",
    "I collect arcade tokens from 1987",
    "I liked https://example.com/some-long-article-title-about-things-2024 a lot",
]


@pytest.mark.parametrize(("raw", "masked"), SECRET_LINES)
def test_mask_secrets(raw: str, masked: str) -> None:
    assert mask_secrets(raw) == masked


@pytest.mark.parametrize("raw", KEPT_LINES)
def test_mask_secrets_keeps_ordinary_text(raw: str) -> None:
    assert mask_secrets(raw) == raw


def test_highlights_mask_secrets(tmp_path: Path) -> None:
    rows = [(str(100 + i), f"P{i}", raw) for i, (raw, _) in enumerate(SECRET_LINES)]
    rows += [(str(200 + i), f"K{i}", raw) for i, raw in enumerate(KEPT_LINES)]
    write_day(tmp_path, "2024-05-07", rows)
    text = render_snapshot([], [], Journal(tmp_path), CFG, NOW)
    items = section(text, HIGHLIGHTS_HEADING)
    assert len(items) == len(rows)
    for secret in ("hunter2", "sk-proj", "correct horse", "apple banana", "4321", "ghp_",
                   "xoxb-", "AKIA", "9f86d08", "Q2hhbmdl", "abcdefghijklmnopqrstuvwx"):  # fmt: skip
        assert secret not in text, secret
    assert sum("\\[redacted\\]" in line for line in items) == len(SECRET_LINES)
    for raw in KEPT_LINES:
        assert any(md_inline(raw) in line for line in items), raw


def test_highlights_only_from_newest_three_files(tmp_path: Path) -> None:
    for d in range(1, 6):
        write_day(tmp_path, f"2024-05-0{d}", [("1", "A", f"message from day {d}")])
    items = section(render_snapshot([], [], Journal(tmp_path), CFG, NOW), HIGHLIGHTS_HEADING)
    assert [re.search(r"day (\d)", line)[1] for line in items] == ["5", "4", "3"]  # type: ignore[index]


def parse_ok(text: str) -> None:
    """Valid structure: section order, only known top headings, no torn lines."""
    assert text.endswith("\n")
    assert text.splitlines()[0] == TITLE
    assert [line for line in text.splitlines() if line.startswith("# ")] == [TITLE]
    assert h2s(text) == [PEOPLE_HEADING, LORE_HEADING, HIGHLIGHTS_HEADING, SOURCES_HEADING]


def test_size_bound_with_2000_long_facts(tmp_path: Path) -> None:
    long = "x" * 150
    people = [
        PersonFacts(
            f"g{p % 3}",
            f"Guild {p % 3}",
            str(1000 + p),
            f"Person {p}",
            [
                fact(f"g{p % 3}", str(1000 + p), f"fact {p}-{k} {long}", "preference")
                for k in range(5)
            ],
        )
        for p in range(400)
    ]
    lore = [
        GuildLore(
            f"g{g}",
            f"Guild {g}",
            [fact(f"g{g}", LORE_SUBJECT, f"lore {g}-{k} {long}") for k in range(120)],
        )
        for g in range(3)
    ]
    write_day(tmp_path, "2024-05-09", [(str(i), f"U{i}", f"message {i} {long}") for i in range(40)])
    everything = {f"- Preference: fact {p}-{k} {long}" for p in range(400) for k in range(5)}
    everything |= {f"- lore {g}-{k} {long}" for g in range(3) for k in range(120)}

    text = render_snapshot(people, lore, Journal(tmp_path), CFG, NOW)
    assert len(text.encode("utf-8")) <= CFG.max_bytes
    parse_ok(text)
    people_body = section(text, PEOPLE_HEADING)
    shown = [line for line in people_body if line.startswith("- Preference:")]
    assert shown and all(line in everything for line in shown)  # no line cut short
    assert re.fullmatch(
        r"- _… \d+ more facts not shown \(snapshot size limit\)\._", people_body[-1]
    )
    lore_body = section(text, LORE_HEADING)
    assert any(line.startswith("- lore ") for line in lore_body)
    assert "more lore facts" in lore_body[-1]
    hl = section(text, HIGHLIGHTS_HEADING)
    assert any("message 39" in line for line in hl)  # newest survives the trim
    assert section(text, SOURCES_HEADING) == ["- 2024-05-09.md"]

    # Tighter budgets keep the guarantee.
    for max_bytes in (8000, 3000, 1200):
        cfg = SnapshotConfig(max_bytes=max_bytes)
        small = render_snapshot(people, lore, Journal(tmp_path), cfg, NOW)
        assert len(small.encode("utf-8")) <= max_bytes
        parse_ok(small)


def test_multibyte_text_respects_byte_bound(tmp_path: Path) -> None:
    people = [
        PersonFacts(
            "g",
            "ギルド",
            str(i),
            f"名前{i}",
            [fact("g", str(i), "日本語の長い事実" * 20 + str(k)) for k in range(6)],
        )
        for i in range(100)
    ]
    text = render_snapshot(people, [], Journal(tmp_path), CFG, NOW)
    assert len(text.encode("utf-8")) <= CFG.max_bytes
    parse_ok(text)


def test_markdown_injection_does_not_break_sections(tmp_path: Path) -> None:
    nasty = "# heading\n## People (Durable Facts)\r\n<script>alert(1)</script> | a | `code` [x](javascript:y)"
    people = [
        PersonFacts(
            "g1",
            "## Fake Guild",
            "111",
            "# Mallory\n## Ongoing Lore",
            [fact("g1", "111", nasty, "profile")],
        ),
        PersonFacts(
            "g1", "## Fake Guild", "222", "- item", [fact("g1", "222", "1. not a list #tag ##")]
        ),
    ]
    lore = [
        GuildLore("g1", "## Fake Guild", [fact("g1", LORE_SUBJECT, "<img src=x onerror=alert(1)>")])
    ]
    j = Journal(tmp_path)
    j.append(
        "2024-05-09T10:00:00Z",
        "## Source Daily Logs",
        "9",
        "g1",
        "c1",
        "# big heading <script>x</script>",
    )

    text = render_snapshot(people, lore, j, CFG, NOW)
    parse_ok(text)
    assert not re.search(r"(?<!\\)<", text)  # every "<" is escaped
    assert "\\<script\\>" in text  # escaped, still readable

    html = MarkdownIt("commonmark").render(text)
    assert "<script" not in html and "<img" not in html and "<code>" not in html
    assert re.findall(r"<h1>.*?</h1>", html) == ["<h1>Durable Memory Snapshot</h1>"]
    assert re.findall(r"<h2>(.*?)</h2>", html) == [
        "People (Durable Facts)",
        "Ongoing Lore",
        "Recent Journal Highlights",
        "Source Daily Logs",
    ]
    assert "<a " not in html


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("plain text", "plain text"),
        ("snake_case_name", "snake_case_name"),
        ("_emph_", "\\_emph\\_"),
        ("# title", "\\# title"),
        ("C# and F#", "C# and F#"),
        ("tag #general", "tag \\#general"),
        ("a | b", "a \\| b"),
        ("<@123>", "\\<@123\\>"),
        ("- dash", "\\- dash"),
        ("1. first", "1\\. first"),
        ("2024. was a year", "2024\\. was a year"),
        ("line\nbreak\r\n\tend", "line break end"),
    ],
)
def test_md_inline(raw: str, expected: str) -> None:
    assert md_inline(raw) == expected


def test_write_atomic_replaces_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "out" / "MEMORY.md"
    write_atomic(target, "first\n")
    os.chmod(target, 0o640)
    write_atomic(target, "second ✓\n")
    assert target.read_text(encoding="utf-8") == "second ✓\n"
    assert os.stat(target).st_mode & 0o777 == 0o640
    assert [p.name for p in target.parent.iterdir()] == ["MEMORY.md"]


def test_write_atomic_failure_keeps_old_file(tmp_path: Path) -> None:
    target = tmp_path / "MEMORY.md"
    write_atomic(target, "old\n")
    with pytest.raises(UnicodeEncodeError):
        write_atomic(target, "bad \ud800 surrogate")
    assert target.read_text(encoding="utf-8") == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["MEMORY.md"]


# -- refresher ---------------------------------------------------------------


async def until(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


class Render:
    """A render callback that can be held open to simulate a slow refresh."""

    def __init__(self) -> None:
        self.calls = 0
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.release.set()
        self.fail_next = False

    async def __call__(self) -> None:
        self.calls += 1
        self.started.set()
        await self.release.wait()
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("render broke")


async def test_requests_coalesce_into_one_refresh() -> None:
    render = Render()
    r = SnapshotRefresher(render, debounce_s=0.05)
    for _ in range(20):
        r.request()
    assert render.calls == 0  # debounced, not immediate
    await until(lambda: r.runs == 1 and not r.running)
    assert not r.pending
    await asyncio.sleep(0.1)  # two more debounce periods: nothing else fires
    assert render.calls == 1
    await r.close()


async def test_request_during_refresh_causes_exactly_one_more() -> None:
    render = Render()
    render.release.clear()
    r = SnapshotRefresher(render, debounce_s=0.02)
    r.request()
    await asyncio.wait_for(render.started.wait(), 5)
    assert r.running and render.calls == 1
    for _ in range(5):  # changes that arrive while the snapshot is being written
        r.request()
    assert r.pending
    render.release.set()
    await until(lambda: render.calls == 2 and not r.running)
    assert not r.pending
    await asyncio.sleep(0.1)
    assert render.calls == 2 and r.runs == 2 and r.errors == 0
    await r.close()


async def test_refresh_now_covers_pending_request() -> None:
    render = Render()
    r = SnapshotRefresher(render, debounce_s=0.05)
    r.request()
    assert await r.refresh_now() is True
    assert render.calls == 1 and not r.pending
    await asyncio.sleep(0.1)  # the debounced timer finds nothing left to do
    assert render.calls == 1
    await r.close()


async def test_render_errors_are_logged_and_refresher_survives(
    caplog: pytest.LogCaptureFixture,
) -> None:
    render = Render()
    render.fail_next = True
    r = SnapshotRefresher(render, debounce_s=0.01)
    r.request()
    await until(lambda: r.errors == 1 and not r.running)
    assert "snapshot refresh failed" in caplog.text and "render broke" in caplog.text
    r.request()
    await until(lambda: r.runs == 2 and not r.running)
    assert r.errors == 1
    assert await r.refresh_now() is True
    await r.close()


async def test_close_waits_for_running_render_and_drops_pending() -> None:
    render = Render()
    render.release.clear()
    r = SnapshotRefresher(render, debounce_s=0.01)
    r.request()
    await asyncio.wait_for(render.started.wait(), 5)
    r.request()  # would normally cause one more run
    closing = asyncio.create_task(r.close())
    await asyncio.sleep(0.05)
    assert not closing.done()  # still waiting for the write in progress
    render.release.set()
    await asyncio.wait_for(closing, 30)
    assert not r.running
    await asyncio.sleep(0.05)
    assert render.calls == 1
    r.request()  # ignored after close
    await asyncio.sleep(0.05)
    assert render.calls == 1
    with pytest.raises(RuntimeError):
        await r.refresh_now()


async def test_close_cancels_a_pending_timer() -> None:
    render = Render()
    r = SnapshotRefresher(render, debounce_s=0.2)
    r.request()
    await r.close()
    await asyncio.sleep(0.25)
    assert render.calls == 0


async def test_end_to_end_refresh_writes_snapshot(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    target = tmp_path / "MEMORY.md"
    clock_now = [NOW]

    async def refresh() -> None:
        text = await asyncio.to_thread(render_snapshot, [], [], journal, CFG, clock_now[0])
        await asyncio.to_thread(write_atomic, target, text)

    r = SnapshotRefresher(refresh, debounce_s=0.01)
    await asyncio.to_thread(
        journal.append, "2024-05-10T11:00:00Z", "A", "1", "g", "c", "a real message"
    )
    clock_now[0] = NOW + timedelta(minutes=1)
    r.request()
    await until(lambda: r.runs == 1 and not r.running)
    text = target.read_text(encoding="utf-8")
    assert "a real message" in text and "2024-05-10T12:01:00.000Z" in text
    names = await asyncio.to_thread(lambda: sorted(p.name for p in tmp_path.iterdir()))
    assert names == ["2024-05-10.md", "MEMORY.md"]
    await r.close()
