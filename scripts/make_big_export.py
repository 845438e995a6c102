"""Generate a large, realistic DiscordChatExporter JSON export, streaming to disk.

Used by the bounded-memory import test and the import benchmark:

    python scripts/make_big_export.py /tmp/big.json --size-mb 200

The file is written message by message and never held in memory. Content is
varied on purpose (first-person statements the extractor can use, questions,
links, code, emoji, non-Latin scripts, long messages), with the same mix of
replies, system messages and attachment-only posts a real server has, so the
importer's skip paths run too. Output is deterministic for a given seed.

The mix is calibrated on the real #papyrology export: there about 1 message in
100 gives the rule extractor a fact candidate and a handful of people write
most messages (the top author a third of them). By default a sentence here is
a first-person statement with probability 0.02 (about 2 messages in 100 yield
a fact) and authors are drawn Zipf-like, so the busiest ones still pass the
per-person fact cap and archiving runs. ``statement_rate=0.3`` gives the old,
fact-heavy mix (a candidate in almost every third message), which makes an
import about twice as slow without showing anything a real guild would.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

DEFAULT_SIZE_BYTES = 200 * 1024 * 1024
DEFAULT_STATEMENT_RATE = 0.02
DISCORD_EPOCH_MS = 1_420_070_400_000
GUILD_ID = "900000000000000001"
CHANNEL_ID = "900000000000000002"

_FIRST = [
    "Ada",
    "Bram",
    "Chiara",
    "Dmitri",
    "Elif",
    "Farid",
    "Greta",
    "Hiro",
    "Ines",
    "Jonas",
    "Kaito",
    "Lena",
    "Mateo",
    "Nadia",
    "Omar",
    "Priya",
    "Quinn",
    "Rosa",
    "Sven",
    "Tomás",
    "Uma",
    "Viktor",
    "Wen",
    "Xiomara",
    "Yusuf",
    "Zoë",
    "Łukasz",
    "Søren",
    "Amélie",
    "Björn",
]
_LAST = ["Quill", "Reed", "Stone", "Vale", "Marsh", "Frost", "Lark", "Hale", "Moss", "Wren"]
_NICK_EXTRA = ["", "", "", " 🌿", " (she/her)", " (he/him)", " | mod", " ✨", " [away]"]
_TOPICS = [
    "the ink detection model",
    "scroll 1",
    "segment 20230827",
    "the Greek alphabet chart",
    "my fork of the renderer",
    "the volume cartographer",
    "the new CT scans",
    "column 4",
    "the transcription spreadsheet",
    "the papyrus fibre patterns",
    "our reading group",
    "the GPU cluster",
    "the Latin fragments",
    "the Philodemus text",
    "the unwrapping pipeline",
]
_STATEMENTS = [
    "I'm a {job} based in {city}.",
    "I work as a {job} and do this in my spare time.",
    "I live in {city}, so the meetups are a bit far for me.",
    "My favourite tool for this is {tool}.",
    "I love working on {topic}, it never gets old.",
    "I'm learning {lang} so I can read the originals.",
    "I have a {thing} at home that helps a lot with this.",
    "I hate it when {topic} crashes halfway through a render.",
    "I've been working on {topic} for about {n} months now.",
    "My cat keeps walking across the keyboard while I annotate {topic}.",
]
_CHATTER = [
    "Has anyone looked at {topic} since the last update?",
    "I think {topic} shows a clear π in the third line, but I'm not sure.",
    "Nice find! The letter spacing in {topic} looks consistent with the rest.",
    "Here's my attempt: https://example.org/renders/{n}.png — thoughts?",
    "Could be a sigma or an epsilon, hard to say at this resolution.",
    "Meeting notes for {topic} are in the pinned doc 👍",
    "```python\nfor layer in range({n}):\n    render(layer, threshold=0.{n})\n```",
    "lol that's exactly what happened to me with {topic} 😂",
    "Ich glaube, {topic} ist besser lesbar als gedacht.",
    "我觉得{topic}的第三行很清楚。",
    "Это очень интересно, спасибо за {topic}!",
    "هذا رائع، شكرا على المشاركة",
    "Quick question: does {topic} use the same coordinate system as scroll 2?",
    "Thanks for sharing, I'll try it on {topic} tonight.",
]
_JOBS = [
    "papyrologist",
    "software engineer",
    "PhD student",
    "radiologist",
    "teacher",
    "data scientist",
    "museum conservator",
    "retired physicist",
    "classicist",
    "designer",
]
_CITIES = [
    "Naples",
    "Berlin",
    "Lyon",
    "Toronto",
    "Kyoto",
    "Lisbon",
    "Oslo",
    "Austin",
    "Melbourne",
    "Kraków",
    "São Paulo",
    "Nairobi",
]
_TOOLS = ["Blender", "ImageJ", "Python", "a light table", "Photoshop", "Meshlab", "vim"]
_LANGS = ["Ancient Greek", "Latin", "Coptic", "Demotic", "Italian", "Rust"]
_THINGS = ["3D printer", "microscope", "spare GPU", "drawing tablet", "loupe"]
_SYSTEM = [
    ("GuildMemberJoin", ""),
    ("ChannelPinnedMessage", "Pinned a message."),
    ("ThreadCreated", "Started a thread."),
    ("20", "Here is your result."),
]
_EMOJI = [("👍", "thumbsup"), ("❤️", "heart"), ("😂", "joy"), ("🔥", "fire"), ("👀", "eyes")]


@dataclass
class BigExportStats:
    """What was written: enough for a test to check the importer without json.load."""

    path: Path
    bytes: int = 0
    messages: int = 0
    importable: int = 0  # Default/Reply/"20" with non-empty content
    replies: int = 0
    skipped: dict[str, int] = field(default_factory=dict)


def _snowflake(ms: int, seq: int) -> str:
    return str(((ms - DISCORD_EPOCH_MS) << 22) | (seq & 0x3FFFFF))


def _authors(rng: random.Random, n: int) -> list[dict[str, Any]]:
    out = []
    for k in range(n):
        first, last = rng.choice(_FIRST), rng.choice(_LAST)
        handle = f"{first.lower()}{last.lower()}{k}".encode("ascii", "ignore").decode()
        out.append(
            {
                "id": str(800000000000000000 + k * 7919),
                "name": handle,
                "discriminator": "0000",
                "nickname": f"{first} {last}{rng.choice(_NICK_EXTRA)}",
                "color": rng.choice(["#2ECC71", "#E67E22", None]),
                "isBot": k % 50 == 49,
                "roles": [
                    {
                        "id": str(700000000000000000 + k % 5),
                        "name": "member",
                        "color": None,
                        "position": 1,
                    }
                ],
                "avatarUrl": f"https://cdn.discordapp.com/avatars/{k}/{rng.getrandbits(64):x}.png",
            }
        )
    return out


def _content(rng: random.Random, statement_rate: float) -> str:
    fill = {
        "topic": rng.choice(_TOPICS),
        "job": rng.choice(_JOBS),
        "city": rng.choice(_CITIES),
        "tool": rng.choice(_TOOLS),
        "lang": rng.choice(_LANGS),
        "thing": rng.choice(_THINGS),
        "n": rng.randint(2, 99),
    }
    parts = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        pool = _STATEMENTS if rng.random() < statement_rate else _CHATTER
        parts.append(rng.choice(pool).format(**fill))
    if rng.random() < 0.03:  # the occasional wall of text
        parts.append(" ".join(rng.choice(_CHATTER).format(**fill) for _ in range(25)))
    return " ".join(parts)


def write_big_export(
    path: Path,
    size_bytes: int = DEFAULT_SIZE_BYTES,
    *,
    seed: int = 7,
    statement_rate: float = DEFAULT_STATEMENT_RATE,
) -> BigExportStats:
    """Write a DCE export of at least ``size_bytes`` to ``path``; return what it holds.

    ``statement_rate`` is the chance that a sentence is a first-person
    statement the extractor can turn into a fact (see the module docstring).
    """
    if not 0.0 <= statement_rate <= 1.0:
        raise ValueError(f"statement_rate must be within 0..1, got {statement_rate}")
    rng = random.Random(seed)
    authors = _authors(rng, 240)
    # Zipf-like activity: author k writes about 1/(k+1) as much as the first.
    author_weights = list(itertools.accumulate(1 / (k + 1) for k in range(len(authors))))
    stats = BigExportStats(path=path)
    start = datetime(2023, 1, 1, tzinfo=UTC)
    ms = int(start.timestamp() * 1000)
    recent: list[str] = []
    header = {
        "guild": {"id": GUILD_ID, "name": "Generated Guild", "iconUrl": ""},
        "channel": {
            "id": CHANNEL_ID,
            "type": "GuildTextChat",
            "categoryId": None,
            "category": "Text Channels",
            "name": "general",
            "topic": None,
        },
        "dateRange": {"after": None, "before": None},
        "exportedAt": "2025-01-20T22:07:57.3900215+00:00",
    }
    with path.open("w", encoding="utf-8", newline="\n") as out:
        head = json.dumps(header, ensure_ascii=False, indent=2)[:-2]
        written = out.write(head + ',\n  "messages": [\n')
        seq = 0
        while written < size_bytes:
            seq += 1
            ms += rng.randint(1_000, 600_000)
            message_id = _snowflake(ms, seq)
            author = rng.choices(authors, cum_weights=author_weights)[0]
            roll = rng.random()
            msg_type, content = "Default", _content(rng, statement_rate)
            attachments: list[dict[str, Any]] = []
            reference = None
            if roll < 0.02:
                msg_type, content = rng.choice(_SYSTEM)
            elif roll < 0.05:
                content = ""
                attachments = [
                    {
                        "id": message_id,
                        "url": f"files/{seq}.png",
                        "fileName": f"IMG_{seq}.png",
                        "fileSizeBytes": 123456,
                    }
                ]
            elif roll < 0.20 and recent:
                msg_type = "Reply"
                reference = {
                    "messageId": rng.choice(recent),
                    "channelId": CHANNEL_ID,
                    "guildId": GUILD_ID,
                }
            stamp = datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
            message: dict[str, Any] = {
                "id": message_id,
                "type": msg_type,
                "timestamp": stamp,
                "timestampEdited": None,
                "callEndedTimestamp": None,
                "isPinned": False,
                "content": content,
                "author": author,
                "attachments": attachments,
                "embeds": [],
                "stickers": [],
                "mentions": [],
            }
            if rng.random() < 0.3:
                emoji, code = rng.choice(_EMOJI)
                users = rng.sample(authors, rng.randint(1, 4))
                message["reactions"] = [
                    {
                        "emoji": {
                            "id": "",
                            "name": emoji,
                            "code": code,
                            "isAnimated": False,
                            "imageUrl": "",
                        },
                        "count": len(users),
                        "users": [
                            {
                                k: u[k]
                                for k in (
                                    "id",
                                    "name",
                                    "discriminator",
                                    "nickname",
                                    "isBot",
                                    "avatarUrl",
                                )
                            }
                            for u in users
                        ],
                    }
                ]
            else:
                message["reactions"] = []
            if reference is not None:
                message["reference"] = reference
            sep = "    " if seq == 1 else ",\n    "
            written += out.write(
                sep + json.dumps(message, ensure_ascii=False, separators=(", ", ": "))
            )
            stats.messages += 1
            kind = "system" if msg_type not in ("Default", "Reply", "20") else msg_type
            if kind == "system":
                key = f"system_type:{msg_type}"
                stats.skipped[key] = stats.skipped.get(key, 0) + 1
            elif not content.strip():
                stats.skipped["empty_content"] = stats.skipped.get("empty_content", 0) + 1
            else:
                stats.importable += 1
                stats.replies += msg_type == "Reply"
                recent.append(message_id)
                del recent[:-50]
        out.write(f'\n  ],\n  "messageCount": {stats.messages}\n}}\n')
    stats.bytes = path.stat().st_size
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="file to write")
    parser.add_argument("--size-mb", type=float, default=DEFAULT_SIZE_BYTES / 2**20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--statement-rate",
        type=float,
        default=DEFAULT_STATEMENT_RATE,
        help="chance that a sentence is a first-person statement (facts to extract)",
    )
    args = parser.parse_args(argv)
    began = datetime.now(UTC)
    stats = write_big_export(
        args.out, int(args.size_mb * 2**20), seed=args.seed, statement_rate=args.statement_rate
    )
    took = (datetime.now(UTC) - began) / timedelta(seconds=1)
    print(
        f"wrote {args.out}: {stats.bytes / 2**20:.1f} MiB, {stats.messages} messages "
        f"({stats.importable} importable, {stats.replies} replies, skipped {stats.skipped}) "
        f"in {took:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
