"""Build the bundled demo guild (bot/data/sample_guild.json) from a real DCE export.

    python scripts/make_sample.py [SOURCE.json] [--out bot/data/sample_guild.json]

Source: the #papyrology channel of the Vesuvius Challenge Discord, exported
with DiscordChatExporter (tests/data/vesuvius-papyrology.json, MIT, see
tests/data/vesuvius-LICENSE.txt and bot/data/SAMPLE_LICENSE.txt). The output is a valid DCE export the importer reads
like any other, with every person pseudonymised:

* each user (authors, mentioned users, reaction users) gets a stable fake id,
  username and nickname, assigned in order of first appearance in the source;
* mentions and bare occurrences of real usernames/nicknames in message text
  are replaced by the fake nickname; every Discord id in text is remapped;
* avatars, roles, colours, embeds, sticker and attachment URLs are dropped,
  attachment file names replaced;
* guild, channel and message ids are fake; the guild is "Papyrology Commons".
  Timestamps are kept, so the demo's journals land on the original days.

The sample is contiguous stretches of the channel (``STRETCHES``): every
message between two times, as the channel has them — no message chosen for
what it says, so the demo's memory is what an import of this channel
gives. The first stretch runs from the Sunday after the first letters were
read to the end of November 2023 (papyrologists and palaeographers arrive,
radiocarbon dating, masks); the
second is the channel's last eight months (the news about Plato's grave,
language models reading ink labels). Non-text messages (thread created, pin
notices, attachments without text) come along as they are; the importer
skips them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT / "tests" / "data" / "vesuvius-papyrology.json"
DEFAULT_OUT = ROOT / "bot" / "data" / "sample_guild.json"
LICENSE_NAME = "SAMPLE_LICENSE.txt"
# (from, until) in the source's time: every message at or after ``from`` and
# before ``until`` (None: to the end of the export).
STRETCHES: tuple[tuple[str, str | None], ...] = (
    ("2023-10-15T13:00:00+00:00", "2023-12-01T00:00:00+00:00"),
    ("2024-04-01T00:00:00+00:00", None),
)

FAKE_GUILD_ID = "1200000000000000001"
FAKE_CATEGORY_ID = "1200000000000000002"
FAKE_CHANNEL_ID = "1200000000000000003"
FAKE_GUILD_NAME = "Papyrology Commons"
DISCORD_EPOCH_MS = 1_420_070_400_000

# Invented names; checked at build time against every real name in the source.
FAKE_FIRST = """
Aurelia Bastian Cosima Dorian Elowen Fabian Gwendolyn Hektor Isolde Jovan Katalin Leander
Marisol Niklas Odalys Paloma Quentin Rosalind Severin Tamsin Ulrike Valentin Wilhelmina Xaver
Yolanda Zephyrine Anselm Brigitta Caspian Delphine Emeric Florentyna Gideon Henrike Ignatius
Juniper Konstantin Liesel Maximilian Nerissa Octavian Perpetua Rafferty Sieglinde Thaddeus
Ursula Vespera Wolfram Ambrose Benedikta Cyprian Dagmar Eustace Fenella Gottfried Hyacinth
Isidora Jolyon Kunigunde Lucius Mirabel Nathaniel Ottilie Peregrine Quirina Radomir Saoirse
Tiberius Undine Viggo Winifred Ysolde Zenobia Alaric Berenike Cornelius Drusilla Evander
Felicitas Gawain Hermione Ivo Jessamy Kasimir Lavinia Mordecai Nephele Oswin Philippa Rainer
Seraphina Tobias Violetta Wendelin Agathe Barnaby Clementine Dietrich Eulalia Florian Griselda
Horatio Ingeborg Jasper Kallista Lysander Melisande Norbert Ophelia Percival Roswitha Sylvester
Theodora Ulysses Valeska Wilfried Aldous Bettina Crispin Dorothea Engelbert Filippa Godfrey
Hildegard Ichabod Josefine Leopold Magdalena Ignaz Romilly Solveig Tancred Verity Winslow
""".split()
# Handles for the people who only react (no messages): ordinary-looking usernames.
FAKE_HANDLES = """
ashgrove brackenridge coldwater dunmore eldersby fairweather greystoke hollowell ivybridge
juniperwood kestrelmoor lindqvist marchbanks nettlefield oakenshaw pemberton
""".split()

# Ordinary words, a Greek letter and a philosopher that happen to be some
# user's name: in text they almost never mean the user, so they stay.
NOT_PERSON_WORDS = frozenset(
    {
        "philodemus",
        "cool",
        "experience",
        "sigma",
        "user",
        "incredible",
        "blue",
        "deleted",
        "dear",
        "giant",
        "reader",
        "team",
        "accepted",
    }
)

# How people are addressed in text when that is not their Discord name
# (alias -> username), found by reading the output.
ALIASES = {"Jan Paul": "janpaul123", "Youssef": "youssefnader8296"}

_ID_IN_TEXT = re.compile(r"(?<![0-9])[0-9]{17,20}(?![0-9])")
_DISCORD_CDN = re.compile(r"https?://(?:cdn|media)\.discordapp\.(?:com|net)/\S+")


# --------------------------------------------------------------------------
# Selection


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def select(
    messages: list[dict[str, Any]],
    stretches: Sequence[tuple[str, str | None]] = STRETCHES,
) -> list[int]:
    """Indexes into ``messages`` of the sample, in source (chronological)
    order: every message inside one of the ``stretches``."""
    bounds = [(_time(lo), None if hi is None else _time(hi)) for lo, hi in stretches]
    return [
        i
        for i, m in enumerate(messages)
        if any(
            lo <= _time(m["timestamp"]) and (hi is None or _time(m["timestamp"]) < hi)
            for lo, hi in bounds
        )
    ]


# --------------------------------------------------------------------------
# Pseudonymisation


def _users(messages: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every user object in the export, by id, in order of first appearance."""
    seen: dict[str, dict[str, Any]] = {}
    for m in messages:
        found = [m["author"], *m.get("mentions", [])]
        found += [u for r in m.get("reactions", []) for u in r.get("users", [])]
        if isinstance(m.get("interaction"), dict):
            found.append(m["interaction"].get("user") or {})
        for user in found:
            if user.get("id") and user["id"] not in seen:
                seen[user["id"]] = user
    return seen


def real_names(users: Iterable[dict[str, Any]]) -> set[str]:
    """Usernames, nicknames and their word parts (≥4 letters) — what must not leak."""
    names: set[str] = set()
    for user in users:
        for name in (user.get("name"), user.get("nickname")):
            if not name:
                continue
            names.add(name)
            names.update(t for t in re.findall(r"[^\W_]{4,}", name) if not t.isdigit())
    return names


class Pseudonymiser:
    def __init__(
        self, messages: list[dict[str, Any]], guild_ids: tuple[str, str, str | None]
    ) -> None:
        self.users = _users(messages)
        self.fake: dict[str, dict[str, Any]] = {}
        lowered = {n.casefold() for n in real_names(self.users.values())}
        if len(set(FAKE_FIRST)) != len(FAKE_FIRST):
            raise SystemExit("FAKE_FIRST has duplicates")
        # Authors get distinct first names, most active first; people who only
        # react or are mentioned get plain handles. Stable for a given source.
        posts = Counter(m["author"]["id"] for m in messages)
        order = sorted(self.users, key=lambda uid: -posts[uid])  # stable: ties keep first-seen
        for k, uid in enumerate(order):
            user = self.users[uid]
            if k < len(FAKE_FIRST) and posts[uid]:
                nickname = FAKE_FIRST[k]
                username = nickname.lower() + ("" if k % 3 else f"_{k}")
            else:
                nickname = f"{FAKE_HANDLES[k % len(FAKE_HANDLES)]}{k // len(FAKE_HANDLES) + 1}"
                username = nickname
            if {nickname.casefold(), username} & lowered:
                raise SystemExit(f"fake name {nickname!r} collides with a real name")
            self.fake[uid] = {
                "id": str(1_210_000_000_000_000_000 + 7_919 * (k + 1)),
                "name": username,
                "discriminator": "0000",
                "nickname": nickname,
                "color": None,
                "isBot": bool(user.get("isBot")),
            }
        self.ids: dict[str, str] = {}
        self._next_id = 0
        guild_id, channel_id, category_id = guild_ids
        self.ids.update({guild_id: FAKE_GUILD_ID, channel_id: FAKE_CHANNEL_ID})
        if category_id:
            self.ids[category_id] = FAKE_CATEGORY_ID
        # Longest first, so "Mae Sawatzky" is replaced before "Mae".
        pairs: list[tuple[str, str]] = []
        for uid, user in self.users.items():
            fake_nick = self.fake[uid]["nickname"]
            for name in {n for n in (user.get("name"), user.get("nickname")) if n}:
                pairs.append((name, fake_nick))
                pairs += [
                    (t, fake_nick)
                    for t in re.findall(r"[^\W_]{4,}", name)
                    if not t.isdigit() and t.casefold() not in NOT_PERSON_WORDS
                ]
        by_username = {u.get("name"): uid for uid, u in self.users.items()}
        # A KeyError here means the source changed: better than a silent leak.
        pairs += [
            (alias, self.fake[by_username[username]]["nickname"])
            for alias, username in ALIASES.items()
        ]
        self._mentions = sorted(
            {("@" + name, "@" + fake) for name, fake in pairs}, key=lambda p: (-len(p[0]), p)
        )
        self._bare = sorted(
            {(n, f) for n, f in pairs if len(n) >= 4 and n.casefold() not in NOT_PERSON_WORDS},
            key=lambda p: (-len(p[0]), p),
        )
        self._bare_re = [
            (re.compile(r"(?<!\w)" + re.escape(n) + r"(?!\w)", re.IGNORECASE), f)
            for n, f in self._bare
        ]
        # Three-letter names ("nat", "Rex") are matched only as written or
        # capitalised: case-insensitively they would hit ordinary words.
        short = {
            (variant, f)
            for n, f in pairs
            if len(n) == 3 and n.casefold() not in NOT_PERSON_WORDS
            for variant in (n, n[:1].upper() + n[1:])
        }
        self._bare_re += [
            (re.compile(r"(?<![\w@])" + re.escape(n) + r"(?!\w)"), f) for n, f in sorted(short)
        ]

    def user(self, user: dict[str, Any], *, roles: bool = True) -> dict[str, Any]:
        out = dict(self.fake[user["id"]])
        if roles:
            out["roles"] = []
        return out

    def map_id(self, real: str, ms: int | None = None) -> str:
        """A stable fake snowflake for any id; message ids keep their time."""
        if real not in self.ids:
            self._next_id += 1
            if ms is None:
                ms = (int(real) >> 22) + DISCORD_EPOCH_MS
            # Same creation time, different low bits: ordering by id still
            # matches ordering by time, but the id is not the real one.
            self.ids[real] = str(((ms - DISCORD_EPOCH_MS) << 22) | (0x2A0000 + self._next_id))
        return self.ids[real]

    def text(self, content: str) -> str:
        content = _DISCORD_CDN.sub("[attachment]", content)
        for real, fake in self._mentions:
            content = content.replace(real, fake)
        for pattern, fake in self._bare_re:
            content = pattern.sub(fake, content)
        return _ID_IN_TEXT.sub(lambda m: self.map_id(m.group(0)), content)

    def message(self, msg: dict[str, Any], n: int) -> dict[str, Any]:
        ms = int(datetime.fromisoformat(msg["timestamp"]).timestamp() * 1000)
        out: dict[str, Any] = {
            "id": self.map_id(msg["id"], ms),
            "type": msg["type"],
            "timestamp": msg["timestamp"],
            "timestampEdited": msg.get("timestampEdited"),
            "callEndedTimestamp": msg.get("callEndedTimestamp"),
            "isPinned": bool(msg.get("isPinned")),
            "content": self.text(msg.get("content", "")),
            "author": self.user(msg["author"]),
            "attachments": [
                {
                    "id": self.map_id(a["id"]),
                    "url": "",
                    "fileName": f"attachment-{n}-{k}{Path(a.get('fileName', '')).suffix.lower()}",
                    "fileSizeBytes": a.get("fileSizeBytes", 0),
                }
                for k, a in enumerate(msg.get("attachments", []))
            ],
            "embeds": [],
            "stickers": [],
            "reactions": [
                {
                    "emoji": {k: r["emoji"].get(k, "") for k in ("id", "name", "code")}
                    | {"isAnimated": bool(r["emoji"].get("isAnimated")), "imageUrl": ""},
                    "count": r.get("count", 0),
                    "users": [self.user(u, roles=False) for u in r.get("users", [])],
                }
                for r in msg.get("reactions", [])
            ],
            "mentions": [self.user(u) for u in msg.get("mentions", [])],
        }
        if out["reactions"] and out["reactions"][0]["emoji"]["id"]:
            for r in out["reactions"]:
                if r["emoji"]["id"]:
                    r["emoji"]["id"] = self.map_id(r["emoji"]["id"])
        ref = msg.get("reference")
        if isinstance(ref, dict):
            out["reference"] = {
                "messageId": self.map_id(ref["messageId"]) if ref.get("messageId") else None,
                "channelId": FAKE_CHANNEL_ID,
                "guildId": FAKE_GUILD_ID,
            }
        return out


# --------------------------------------------------------------------------
# Output


def build(
    source: dict[str, Any], stretches: Sequence[tuple[str, str | None]] = STRETCHES
) -> dict[str, Any]:
    messages = source["messages"]
    channel = source["channel"]
    pseudo = Pseudonymiser(
        messages, (source["guild"]["id"], channel["id"], channel.get("categoryId"))
    )
    # Map every message id in source order first, so reply links to messages
    # outside the sample still get consistent fake ids.
    for m in messages:
        pseudo.map_id(m["id"], int(datetime.fromisoformat(m["timestamp"]).timestamp() * 1000))
    picked = [pseudo.message(messages[i], n) for n, i in enumerate(select(messages, stretches))]
    return {
        "guild": {"id": FAKE_GUILD_ID, "name": FAKE_GUILD_NAME, "iconUrl": ""},
        "channel": {
            "id": FAKE_CHANNEL_ID,
            "type": channel.get("type", "GuildTextChat"),
            "categoryId": FAKE_CATEGORY_ID,
            "category": channel.get("category"),
            "name": channel.get("name"),
            "topic": channel.get("topic"),
        },
        "dateRange": {"after": None, "before": None},
        "exportedAt": source.get("exportedAt"),
        # Not a DCE field; readers ignore unknown keys. Travels with the file.
        "sampleNotice": (
            f"Pseudonymised stretches ({_spans(stretches)}) of the Vesuvius Challenge #papyrology "
            "channel "
            "(DiscordChatExporter export, MIT licence, Copyright (c) 2025 Nikhil Akula); "
            f"see {LICENSE_NAME}. Names and ids of people are fake."
        ),
        "messages": picked,
        "messageCount": len(picked),
    }


def _spans(stretches: Sequence[tuple[str, str | None]]) -> str:
    return ", ".join(f"{lo[:10]} to {hi[:10] if hi else 'the end'}" for lo, hi in stretches)


def _license_text(source_license: str, stretches: Sequence[tuple[str, str | None]]) -> str:
    return (
        "bot/data/sample_guild.json is derived from vesuvius-papyrology.json, a\n"
        "DiscordChatExporter export of the #papyrology channel of the Vesuvius\n"
        "Challenge Discord server, distributed under the licence below.\n\n"
        "Changes made by scripts/make_sample.py: only the messages of contiguous\n"
        f"stretches of the channel ({_spans(stretches)}, every\n"
        "message in them, as exported);\n"
        "every user id, username and nickname replaced by an invented one (also\n"
        "inside message text); all Discord ids replaced; avatars, roles, embeds,\n"
        "stickers and attachment URLs and names removed; guild renamed\n"
        f'"{FAKE_GUILD_NAME}".\n\n' + source_license.strip() + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", type=Path, nargs="?", default=DEFAULT_SOURCE)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    source = json.loads(args.source.read_text(encoding="utf-8"))
    sample = build(source)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # Indented like DCE writes it; non-ASCII raw, as DCE does.
    args.out.write_text(json.dumps(sample, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    license_src = args.source.with_name("vesuvius-LICENSE.txt")
    (args.out.parent / LICENSE_NAME).write_text(
        _license_text(license_src.read_text(encoding="utf-8"), STRETCHES), encoding="utf-8"
    )
    msgs = sample["messages"]
    print(
        f"wrote {args.out}: {len(msgs)} messages, "
        f"{len({m['author']['id'] for m in msgs})} authors, "
        f"{sum(m['type'] == 'Reply' for m in msgs)} replies, "
        f"{msgs[0]['timestamp'][:10]} .. {msgs[-1]['timestamp'][:10]}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
