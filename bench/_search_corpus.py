"""The synthetic guilds of ``bench/search.py``: members, facts, lore and chat
messages with real MiniLM vectors (pooled, perturbed), the questions asked, and
writing them straight through the store. Deterministic for a seed."""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np

GUILDS = 10
TARGET_GUILD = "900000000000000001"
# 2,000 members keep 100k facts at 50 per member, under the archive limit of
# 80 active facts per subject (IngestConfig.keep_facts_per_subject).
MEMBERS_PER_GUILD = 2000
LORE_PER_GUILD = 100
CHANNELS_PER_GUILD = 8

FIRST = (
    "Alice Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Mallory Niaj Olivia Peggy Rupert "
    "Sybil Trent Victor Walter Yasmin Zoe Amir Bea Chen Dmitri Elena Farid Greta Hugo Ines "
    "Jonas Kira Luca Maya Nils Oskar Priya Quinn Rosa Samir Tomas Uma Vera Wen Xavier Yusuf "
    "Zara Anton Bruno Clara Dana Emil Fiona Gustav Hana Igor Jana Karl Lena Milo"
).split()
LAST = (
    "Smith Jones Garcia Muller Rossi Tanaka Kowalski Silva Novak Dubois Jensen Costa Weber "
    "Ivanova Moreau Santos Nakamura Larsen Petrov Okafor Berg Castro Dahl Eriksen Fischer "
    "Gomez Horvat Ito Kaur Lindqvist Mendes Nagy Ortiz Park Quist Reyes Sato Torres Varga Wolff"
).split()
TEMPLATES = [
    ("preference", "plays {game} on weekends"),
    ("preference", "loves {food} and cooks it every {day}"),
    ("fact", "works as a {job} in {city}"),
    ("fact", "moved to {city} in {year}"),
    ("goal", "is learning {skill} this year"),
    ("goal", "is training for a {race} in {city}"),
    ("fact", "owns a {pet} called {petname}"),
    ("fact", "bought a new {thing} for {purpose}"),
    ("preference", "listens to {music} while {activity}"),
    ("fact", "collects {collect} from {city}"),
    ("preference", "prefers {drink} over {drink2}"),
    ("event", "went to {city} for a {event} in {month}"),
    ("fact", "repairs old {thing}s as a hobby"),
    ("preference", "hates {food} but likes {food2}"),
    ("fact", "has a {relative} who is a {job}"),
    ("goal", "wants to visit {city} to see the {sight}"),
    ("fact", "runs the guild's {game} night on {day}s"),
    ("fact", "is allergic to {allergen}"),
    ("preference", "reads {genre} novels before bed"),
    ("event", "broke their {thing} while {activity} in {month}"),
    ("preference", "plays {game} with their {relative} on {day}s"),
    ("goal", "is learning {skill} in {city}"),
    ("fact", "cooks {food} for their {relative} every {day}"),
    ("event", "saw a {music} {event} in {city} in {month}"),
]
FILL: dict[str, list[str]] = {
    "game": "chess tennis guitar football poker basketball Go Minecraft bridge volleyball "
    "Dota badminton".split(),
    "food": "lasagna curry paella dumplings ramen tacos sushi pierogi falafel risotto".split(),
    "food2": "pizza pho goulash moussaka bibimbap empanadas".split(),
    "day": "Sunday Monday Friday Saturday Wednesday".split(),
    "job": "nurse teacher plumber developer chef pilot architect electrician lawyer "
    "pharmacist carpenter journalist".split(),
    "city": "Berlin Lisbon Osaka Toronto Nairobi Lima Oslo Krakow Naples Austin Hanoi "
    "Porto Seoul Dublin".split(),
    "year": [str(y) for y in range(2012, 2026)],
    "skill": [
        "Portuguese",
        "Rust",
        "the violin",
        "calligraphy",
        "Japanese",
        "sailing",
        "pottery",
        "welding",
        "salsa dancing",
        "3D modelling",
    ],
    "race": ["marathon", "triathlon", "half marathon", "cycling race", "trail run"],
    "pet": "greyhound cat parrot tortoise ferret beagle rabbit hamster".split(),
    "petname": "Biscuit Pixel Mango Luna Ziggy Pepper Otis Noodle Waffles Juno".split(),
    "thing": "laptop bicycle camera synthesizer car keyboard drone telescope watch".split(),
    "purpose": ["work", "travel", "streaming", "photography", "the commute", "music"],
    "music": "jazz techno opera podcasts metal lo-fi bluegrass".split(),
    "activity": "coding running cooking gaming painting studying".split(),
    "collect": ["stamps", "coins", "vinyl records", "comic books", "fossils", "postcards"],
    "drink": "coffee tea mate kombucha cocoa".split(),
    "drink2": "beer wine soda juice".split(),
    "event": ["conference", "wedding", "festival", "hackathon", "concert", "funeral"],
    "month": "January March May July September November".split(),
    "relative": "sister brother cousin uncle aunt".split(),
    "sight": ["museum", "old harbour", "cathedral", "botanical garden", "castle"],
    "allergen": ["peanuts", "cats", "pollen", "shellfish", "gluten", "penicillin"],
    "genre": ["fantasy", "crime", "sci-fi", "historical", "horror"],
}
QUESTIONS = [
    "who plays {game}?",
    "does anyone here cook {food}",
    "which of us works as a {job}",
    "who moved to {city}",
    "anyone learning {skill}?",
    "who is training for a {race}",
    "whose {pet} is called {petname}",
    "who bought a new {thing}",
    "does somebody listen to {music}",
    "what does {name} collect",
    "what is {name} learning",
    "where does {name} work",
    "is {name} allergic to anything",
    "what pet does {name} have",
    "who went to a {event} in {city}",
    "recommend a {genre} book like the ones people here read",
    "who runs the {game} night",
    "who wants to see the {sight} in {city}",
    "tell me about {name}",
    "who prefers {drink}",
]
CHAT = [
    "yeah honestly {p} lol",
    "not gonna lie, {p} these days",
    "fun fact: {p}",
    "I think {p}, right?",
    "{p} — ask me anything about it",
]


# -- the synthetic guild ----------------------------------------------------------------------


def guild_id(i: int) -> str:
    return str(int(TARGET_GUILD) + i)


def member_names(rng: random.Random, n: int) -> list[str]:
    names: set[str] = set()
    while len(names) < n:
        names.add(f"{rng.choice(FIRST)} {rng.choice(LAST)}")
    return sorted(names)


def predicates(rng: random.Random, n: int) -> list[tuple[str, str]]:
    """(fact type, predicate) — ``n`` distinct ones."""
    out: dict[str, str] = {}
    for _ in range(50 * n):
        if len(out) >= n:
            break
        ftype, tpl = rng.choice(TEMPLATES)
        pred = tpl.format(**{k: rng.choice(v) for k, v in FILL.items()})
        out.setdefault(pred, ftype)
    if len(out) < n:
        raise SystemExit(f"the templates give only about {len(out)} distinct predicates")
    return [(t, p) for p, t in out.items()]


def questions(rng: random.Random, n: int, names: list[str]) -> list[str]:
    out: dict[str, None] = {}
    while len(out) < n:
        fill = {k: rng.choice(v) for k, v in FILL.items()}
        fill["name"] = rng.choice(names).split()[0]
        out.setdefault(rng.choice(QUESTIONS).format(**fill), None)
    return list(out)


class Corpus:
    """Deterministic facts, vectors and messages for every guild."""

    def __init__(self, pool: int, noise: float, seed: int = 7) -> None:
        rng = random.Random(seed)
        self.noise = noise
        self.preds = predicates(rng, pool)
        self.names = {
            g: member_names(random.Random(seed + g), MEMBERS_PER_GUILD) for g in range(GUILDS)
        }
        self.pool_vecs: np.ndarray | None = None
        self.embed_seconds = 0.0

    def pooled_texts(self) -> list[str]:
        from memory.embed.base import fact_embedding_text

        rng = random.Random(11)
        names = self.names[0]
        return [fact_embedding_text(t, f"{rng.choice(names)} {p}.", None) for t, p in self.preds]

    def embed_pool(self, emb: Any) -> None:
        texts = self.pooled_texts()
        started = time.perf_counter()
        self.pool_vecs = emb.embed_sync(texts)
        self.embed_seconds = time.perf_counter() - started

    def _perturbed(self, preds: list[int], seed: int, sigma: float) -> np.ndarray:
        """The pooled vectors of ``preds``, each with Gaussian noise, re-normalised."""
        assert self.pool_vecs is not None
        nrng = np.random.default_rng(seed)
        noise = nrng.normal(0.0, sigma, (len(preds), self.pool_vecs.shape[1]))
        vecs = self.pool_vecs[preds] + noise.astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        return vecs.astype(np.float32)

    def facts(self, g: int, n: int, seed: int) -> list[dict[str, Any]]:
        """``n`` distinct (member, predicate) facts of guild ``g``, with vectors."""
        rng = random.Random(seed)
        names = self.names[g]
        total = len(names) * len(self.preds)
        if n > total:
            raise SystemExit(f"--pool too small for {n} distinct facts in a guild")
        out = []
        base = time.time() - 2 * 365 * 86400
        for pick in rng.sample(range(total), n):
            who, pi = divmod(pick, len(self.preds))
            ftype, pred = self.preds[pi]
            out.append(
                {
                    "guild": guild_id(g),
                    "subject": user_id(g, who),
                    "channel": None if rng.random() < 0.3 else channel_id(g, rng.randrange(8)),
                    "fact": f"{names[who]} {pred}.",
                    "type": ftype,
                    "evidence": rng.choice(CHAT).format(p=pred) if rng.random() < 0.6 else None,
                    "confidence": round(0.5 + rng.random() * 0.45, 2),
                    "when": iso_time(base + rng.random() * 2 * 365 * 86400),
                    "pred": pi,
                }
            )
        vecs = self._perturbed([f["pred"] for f in out], seed, self.noise)
        for f, v in zip(out, vecs, strict=True):
            f["vec"] = v
        return out

    def lore(self, g: int, n: int, seed: int) -> list[dict[str, Any]]:
        """``n`` guild-wide lore facts (subject ``__lore__``), like ``/memory remember``."""
        from memory.models import LORE_SUBJECT

        rng = random.Random(seed)
        preds = rng.sample(range(len(self.preds)), n)
        vecs = self._perturbed(preds, seed, self.noise)
        base = time.time() - 365 * 86400
        return [
            {
                "guild": guild_id(g),
                "subject": LORE_SUBJECT,
                "channel": None,
                "fact": f"The server {self.preds[pi][1]}.",
                "type": self.preds[pi][0],
                "evidence": None,
                "confidence": 0.9,
                "when": iso_time(base + rng.random() * 365 * 86400),
                "vec": v,
            }
            for pi, v in zip(preds, vecs, strict=True)
        ]

    def messages(self, g: int, n: int, seed: int) -> list[tuple[Any, np.ndarray]]:
        from memory.models import IncomingMessage

        rng = random.Random(seed)
        gid = guild_id(g)
        names = self.names[g]
        msgs = []
        preds = []
        t = time.time() - 365 * 86400
        for i in range(n):
            who = rng.randrange(len(names))
            pi = rng.randrange(len(self.preds))
            t += rng.random() * 2 * 365 * 86400 / n
            m = IncomingMessage(
                id=str(10**17 + g * 10**7 + i),
                guild_id=gid,
                channel_id=channel_id(g, rng.randrange(CHANNELS_PER_GUILD)),
                author_id=user_id(g, who),
                author_name=names[who],
                content=rng.choice(CHAT).format(p=self.preds[pi][1].replace("their", "my")),
                created_at=iso_time(t),
                source="import",
            )
            msgs.append(m)
            preds.append(pi)
        vecs = self._perturbed(preds, seed, self.noise * 1.5)
        return list(zip(msgs, vecs, strict=True))


def user_id(g: int, who: int) -> str:
    return str(3 * 10**17 + g * 10**6 + who)


def channel_id(g: int, c: int) -> str:
    return str(5 * 10**17 + g * 10**6 + c)


def iso_time(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(ts))


# -- writing ------------------------------------------------------------------------------------


def write_members(con: Any, corpus: Corpus, now: str) -> None:
    from memory.store import messages as store_messages

    for g in range(GUILDS):
        gid = guild_id(g)
        store_messages.set_guild_name(con, gid, f"bench guild {g}", now)
        for c in range(CHANNELS_PER_GUILD):
            store_messages.set_channel_name(con, gid, channel_id(g, c), f"channel-{c}", now)
        for who, name in enumerate(corpus.names[g]):
            store_messages.upsert_member(con, gid, user_id(g, who), name, now)


def write_facts(con: Any, model: str, facts: list[dict[str, Any]], now: str) -> None:
    from memory.embed.base import vector_to_blob
    from memory.store import facts as store
    from memory.store import vectors as store_vectors

    payload = []
    for f in facts:
        up = store.upsert_fact(
            con,
            guild_id=f["guild"],
            channel_id=f["channel"],
            subject=f["subject"],
            fact=f["fact"],
            fact_type=f["type"],
            evidence=f["evidence"],
            source_message_id=None,
            confidence=f["confidence"],
            now=f["when"],
            actor="bench",
        )
        payload.append((up.fact.id, f["guild"], f"bench{up.fact.id}", vector_to_blob(f["vec"])))
    store_vectors.put_fact_vectors(con, model, len(facts[0]["vec"]), payload, now)


def write_messages(con: Any, model: str, items: list[tuple[Any, np.ndarray]], now: str) -> None:
    from memory.embed.base import vector_to_blob
    from memory.store import messages as store_messages
    from memory.store import vectors as store_vectors

    msgs = [m for m, _ in items]
    store_messages.insert_messages(con, msgs, now)
    store_messages.mark_messages(con, [m.id for m in msgs], "done", now)
    store_messages.mark_journaled(con, [m.id for m in msgs])
    seqs = {
        r["id"]: int(r["seq"])
        for r in con.execute(
            "SELECT id, seq FROM messages WHERE guild_id = ?", (msgs[0].guild_id,)
        ).fetchall()
    }
    rows = [(seqs[m.id], m.guild_id, vector_to_blob(v)) for m, v in items]
    store_vectors.put_message_vectors(con, model, len(items[0][1]), rows, now)


async def write_in_chunks(mem: Any, fn: Any, model: str, items: list[Any], now: str) -> None:
    for i in range(0, len(items), 5000):
        await mem.db.write(fn, model, items[i : i + 5000], now)
