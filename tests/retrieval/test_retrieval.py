"""Retrieval end to end on a real engine: whole-guild candidates,
strict search vs the prompt slice, guild isolation, FTS safety, visibility,
messages, lazy back-fill. The gate cases and the channel scores as pure
functions are in tests/retrieval/test_scoring.py; here they are checked through search.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.clock import iso
from memory.embed.base import fact_embedding_text, vector_to_blob
from memory.models import Hit, IncomingMessage
from memory.retrieval.query import fts_match_expression
from memory.retrieval.scoring import channel_score, passes_gate
from memory.store import facts as store
from memory.store import messages as store_messages
from memory.store import vectors as store_vectors
from tests.helpers import ALICE, BOB, CHANNEL, GUILD, OTHER_GUILD, msg

OTHER_CHANNEL = "777777777777777777"
SECRET = "888888888888888888"

PEOPLE = (
    "Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Niaj Olivia Peggy Rupert Trent Victor".split()
)
TEMPLATES = [
    "plays {g} on weekends",
    "works as a {j} in {c}",
    "is learning {l}",
    "bought a new {t}",
    "cooks {f} every Sunday",
    "is training for a {r}",
    "moved to {c} last year",
    "repairs old {t}s as a hobby",
    "listens to {m} while coding",
    "collects {x}",
]
FILL = {
    "g": ["chess", "tennis", "guitar", "football", "poker", "basketball"],
    "j": ["nurse", "teacher", "plumber", "developer", "chef", "pilot"],
    "c": ["Berlin", "Lisbon", "Osaka", "Toronto", "Nairobi", "Lima"],
    "l": ["Portuguese", "Rust", "the violin", "calligraphy", "Japanese", "sailing"],
    "t": ["laptop", "bicycle", "camera", "synthesizer", "car", "keyboard"],
    "f": ["lasagna", "curry", "paella", "dumplings", "ramen", "tacos"],
    "r": ["marathon", "triathlon", "half marathon", "cycling race"],
    "m": ["jazz", "techno", "opera", "podcasts"],
    "x": ["stamps", "coins", "vinyl records", "comic books", "fossils"],
}


def filler_facts(n: int, seed: int = 1) -> list[tuple[str, str]]:
    """(subject name, fact text) about anything but pets."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        who = rng.choice(PEOPLE)
        body = rng.choice(TEMPLATES).format(**{k: rng.choice(v) for k, v in FILL.items()})
        out.append((who, f"{who} {body} (note {i})."))
    return out


async def insert_facts(
    mem: Any,
    guild: str,
    rows: Sequence[tuple[str, str, str | None]],
    *,
    vectors: np.ndarray | None = None,
    when: str | None = None,
) -> list[int]:
    """Facts straight into the store (subject, text, channel), optionally with
    vectors — for volume; the pipeline is tested elsewhere."""
    now = when or iso(mem.clock())
    model = mem.embeddings.model_for_guild(guild)

    def work(con: Any) -> list[int]:
        ids = []
        for subject, text, channel in rows:
            up = store.upsert_fact(
                con,
                guild_id=guild,
                channel_id=channel,
                subject=subject,
                fact=text,
                fact_type="other",
                evidence=None,
                source_message_id=None,
                confidence=0.6,
                now=now,
                actor="test",
            )
            ids.append(up.fact.id)
        if vectors is not None:
            payload = [
                (fid, guild, f"h{fid}", vector_to_blob(v))
                for fid, v in zip(ids, vectors, strict=True)
            ]
            store_vectors.put_fact_vectors(con, model, vectors.shape[1], payload, now)
        return ids

    return list(await mem.db.write(work))


async def ingest(mem: Any, items: Sequence[IncomingMessage]) -> None:
    for m in items:
        out = await mem.ingest_message(m, backpressure=True)
        assert out.status == "queued", out
    assert await mem.settle(60)


def fact_ids(hits: Sequence[Hit]) -> list[int]:
    return [int(h.id) for h in hits if h.kind == "fact"]


# -- channel scores and the gate, through search ------------------------------------------------


async def test_channel_scores_through_search(make_memory: Callable[..., Any]) -> None:
    mem = await make_memory()
    ids = await insert_facts(
        mem,
        GUILD,
        [
            (ALICE, "Alice keeps bees on the roof.", CHANNEL),
            (ALICE, "Alice keeps bees in the garden.", None),
            (ALICE, "Alice keeps bees at the farm.", OTHER_CHANNEL),
        ],
    )
    here, nowhere, there = ids
    hits = await mem.search(GUILD, "who keeps bees", channel_id=CHANNEL, limit=10)
    chan = {int(h.id): h.parts.channel for h in hits}
    assert chan == {here: 1.0, nowhere: 0.25, there: 0.0}
    assert chan[here] == channel_score(CHANNEL, CHANNEL)
    # No channel in the query: the signal favours nothing.
    hits = await mem.search(GUILD, "who keeps bees", limit=10)
    assert {h.parts.channel for h in hits} == {0.0}
    for h in hits:
        assert h.parts.passed and passes_gate(h.parts)


async def test_strict_search_is_empty_for_a_weak_candidate_but_the_slice_fills(
    make_memory: Callable[..., Any],
) -> None:
    mem = await make_memory()
    await ingest(mem, [msg("I like green tea", author=ALICE, name="Alice")])
    facts = await mem.facts.find(GUILD)
    assert [f.fact for f in facts] == ["Alice likes green tea."]
    query = "quarterly revenue projections for the board"
    assert await mem.search(GUILD, query) == []
    assert await mem.search(GUILD, query, scope="all") == []
    sl = await mem.build_prompt_slice(GUILD, CHANNEL, ALICE, query)
    assert [h.text for h in sl.user_facts] == ["Alice likes green tea."]
    assert not sl.user_facts[0].parts.passed  # there only as the best of nothing
    # The ranking view still sees it, flagged as failing the gate.
    ranked = await mem.retriever.search(GUILD, query, gate=False)
    assert [h.text for h in ranked] == ["Alice likes green tea."]
    assert not ranked[0].parts.passed


# -- the whole guild --------------------------------------------------------------------------


@pytest.mark.slow
async def test_fact_older_than_5000_newer_facts_is_found_by_meaning_alone(
    make_memory: Callable[..., Any], local_embedder: Any
) -> None:
    mem = await make_memory()
    # The old fact goes through the real pipeline: rule extraction, then the
    # embedding worker writes its vector. Its message is a day old, so that
    # recency (from the message's time) stays close to the newer facts' and
    # meaning decides.
    await ingest(
        mem,
        [
            msg(
                "I own a greyhound called Biscuit",
                author=ALICE,
                name="Alice",
                created_at=iso(mem.clock() - timedelta(days=1)),
            )
        ],
    )
    [old] = await mem.facts.find(GUILD)
    assert old.fact == "Alice owns a greyhound called Biscuit."
    counts = await mem.db.read(store_vectors.vector_counts)
    assert counts[mem.embeddings.default_model]["fact_vectors"] == 1
    # 5,000 newer facts about anything but pets, with real-ish vectors:
    # perturbed copies of 250 real embeddings.
    rows = filler_facts(5000)
    base_texts = [fact_embedding_text("other", text, None) for _, text in rows[:250]]
    base = await local_embedder.embed(base_texts)
    rng = np.random.default_rng(7)
    vecs = base[np.arange(5000) % 250] + rng.normal(0, 0.01, (5000, base.shape[1]))
    vecs = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)
    later = iso(mem.clock())
    ids = await insert_facts(
        mem, GUILD, [(f"user-{who}", text, CHANNEL) for who, text in rows], vectors=vecs, when=later
    )
    assert len(ids) == 5000 and min(ids) > old.id
    assert all(f.updated_at > old.updated_at for f in await mem.facts.find(GUILD, limit=500))

    query = "who has a canine companion?"  # no word in common with the fact or its evidence
    assert fts_match_expression(query) is not None
    lexical = await mem.db.read(
        store.search_facts_fts, GUILD, fts_match_expression(query) or "", 10
    )
    assert lexical == []

    # Cold: the vector matrix is not loaded, sqlite-vec answers. (Linking the
    # old fact to its related facts loaded the guild's matrix at ingest; drop
    # it, as a restart would.)
    model = mem.embeddings.default_model
    mem.retriever.index.clear()
    assert mem.retriever.index.get("facts", model, GUILD) is None
    hits = await mem.search(GUILD, query, limit=5)
    assert hits and hits[0].id == str(old.id), [h.text for h in hits]
    assert hits[0].parts.lexical == 0.0 and hits[0].parts.bm25 == 0.0
    # Warm: the in-memory matrix answers the same.
    await mem.retriever.warm(GUILD)
    matrix = mem.retriever.index.get("facts", model, GUILD)
    assert matrix is not None and matrix.rows == 5001
    hits = await mem.search(GUILD, query, limit=5)
    assert hits and hits[0].id == str(old.id)


async def test_a_new_fact_reaches_the_loaded_matrix_and_archived_ones_leave_it(
    make_memory: Callable[..., Any],
) -> None:
    mem = await make_memory()
    await ingest(mem, [msg("I work as a nurse in Berlin", author=ALICE, name="Alice")])
    await mem.retriever.warm(GUILD)
    model = mem.embeddings.default_model
    matrix = mem.retriever.index.get("facts", model, GUILD)
    assert matrix is not None and matrix.rows == 1
    await ingest(mem, [msg("I own a greyhound called Biscuit", author=BOB, name="Bob")])
    assert matrix.rows == 2  # written by the embedding worker, mirrored in place
    dog = next(f for f in await mem.facts.find(GUILD) if "greyhound" in f.fact)
    # The ranking view (gate off): a paraphrase sharing no word is found by
    # its vector alone, whatever the strict gate decides about its similarity.
    query = "who has a canine companion?"
    hits = await mem.search(GUILD, query, gate=False)
    assert hits[0].id == str(dog.id)
    await mem.facts.set_active(GUILD, dog.id, False)
    assert matrix.rows == 1
    assert str(dog.id) not in [h.id for h in await mem.search(GUILD, query, gate=False)]
    await mem.facts.set_active(GUILD, dog.id, True)
    assert matrix.rows == 2
    assert (await mem.search(GUILD, query, gate=False))[0].id == str(dog.id)
    await mem.facts.delete(GUILD, dog.id)
    assert matrix.rows == 1
    report = await mem.forget(GUILD, ALICE)
    assert report.facts == 1
    assert matrix.rows == 0


# -- guild isolation (property) ----------------------------------------------------------------

_SHARED_LINES = [
    "I work as a nurse in Berlin",
    "I love hiking in the Alps",
    "I like green tea",
    "I own a greyhound called Biscuit",
    "I play chess on Tuesdays",
]


def test_no_search_ever_returns_another_guilds_fact(tmp_path: Path, local_embedder: Any) -> None:
    """Three guilds hold the same words; whatever is asked, in any scope and
    mode, only the asked guild's rows come back (the guild filter is SQL)."""
    from memory.config import MemoryConfig
    from memory.engine import Memory
    from memory.extract.rules.extractor import RuleExtractor

    loop = asyncio.new_event_loop()
    guilds = (GUILD, OTHER_GUILD, "333000000000000001")
    mem = Memory(
        MemoryConfig.for_data_dir(tmp_path / "data"),
        extractor=RuleExtractor(),
        embedder=local_embedder,
    )

    async def setup() -> dict[str, set[str]]:
        await mem.start()
        for g in guilds:
            await ingest(
                mem,
                [
                    msg(line, guild=g, author=ALICE, name="Alice", id=f"{g}-{i}")
                    for i, line in enumerate(_SHARED_LINES)
                ],
            )
        owned: dict[str, set[str]] = {}
        for g in guilds:
            owned[g] = {str(f.id) for f in await mem.facts.find(g, active=None)}
            await mem.retriever.warm(g)
        return owned

    try:
        owned = loop.run_until_complete(setup())
        assert all(len(v) == len(_SHARED_LINES) for v in owned.values())

        @settings(max_examples=60, deadline=None)
        @given(
            guild=st.sampled_from(guilds),
            query=st.one_of(
                st.sampled_from(_SHARED_LINES + ["nurse", "Alice", "who likes tea?"]),
                st.text(min_size=1, max_size=60),
            ),
            scope=st.sampled_from(["facts", "messages", "all"]),
            gate=st.booleans(),
            channel=st.sampled_from([None, CHANNEL]),
        )
        def check(guild: str, query: str, scope: str, gate: bool, channel: str | None) -> None:
            hits = loop.run_until_complete(
                mem.retriever.search(
                    guild, query, scope=scope, gate=gate, channel_id=channel, limit=50
                )
            )
            for h in hits:
                assert h.guild_id == guild
                if h.kind == "fact":
                    assert h.id in owned[guild]
                else:
                    assert h.id.startswith(f"{guild}-")
            sl = loop.run_until_complete(
                mem.retriever.build_prompt_slice(guild, channel, ALICE, query)
            )
            for h in (*sl.user_facts, *sl.relevant_facts, *sl.relevant_messages):
                assert h.guild_id == guild

        check()
    finally:
        loop.run_until_complete(mem.close())
        loop.close()


# -- FTS syntax in user input --------------------------------------------------------------------

NASTY = [
    '"',
    '""',
    '"unbalanced quote',
    "NEAR(alice bob)",
    "NEAR(alice bob, 2)",
    "tea*",
    "*",
    "-tea",
    "- -",
    "fact:tea",
    "evidence : tea",
    "(tea OR",
    "tea)",
    "AND OR NOT",
    "tea AND NOT coffee",
    "^tea",
    "{fact evidence}: tea",
    "tea + coffee",
    "col1:col2:",
    "'; DROP TABLE memory_facts; --",
    "\x00\x01 tea",
    "🍵 tea 茶",
    "a" * 100_000,
    ('tea (NEAR "x* ^y -z: ' * 4000)[:100_000],
]


async def test_fts_operator_strings_never_raise(make_memory: Callable[..., Any]) -> None:
    mem = await make_memory()
    await ingest(mem, [msg("I like green tea", author=ALICE, name="Alice")])
    for q in NASTY:
        for scope in ("facts", "messages", "all"):
            await mem.search(GUILD, q, scope=scope)
            await mem.retriever.search(GUILD, q, scope=scope, gate=False, limit=50)
        await mem.build_prompt_slice(GUILD, CHANNEL, ALICE, q)
    hits = await mem.search(GUILD, 'tea" OR NEAR(', scope="all")
    assert any("tea" in h.text for h in hits)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_match_expression_is_always_valid_fts(text: str) -> None:
    from memory.db.sqlite import driver as sqlite

    con = sqlite.connect(":memory:")
    con.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='unicode61 remove_diacritics 2')")
    con.execute("INSERT INTO t (x) VALUES ('green tea and coffee')")
    for prefixes in (False, True):
        expr = fts_match_expression(text, prefixes=prefixes)
        if expr is not None:
            con.execute("SELECT rowid FROM t WHERE t MATCH ?", (expr,)).fetchall()


# -- visibility --------------------------------------------------------------------------------


async def test_hidden_channels_stay_hidden(make_memory: Callable[..., Any]) -> None:
    mem = await make_memory()
    await ingest(
        mem,
        [
            msg("I like green tea", author=ALICE, name="Alice"),
            msg("I like oolong tea", author=BOB, name="Bob", channel=SECRET),
        ],
    )
    await insert_facts(mem, GUILD, [(BOB, "Bob likes jasmine tea.", None)])
    everything = await mem.search(GUILD, "who likes tea", scope="all", limit=50)
    assert any(h.channel_id == SECRET for h in everything)
    visible = {CHANNEL}
    for gate in (True, False):
        hits = await mem.retriever.search(
            GUILD, "who likes tea", scope="all", visible_channels=visible, gate=gate, limit=50
        )
        assert hits
        assert all(h.channel_id in (None, CHANNEL) for h in hits)
        assert any(h.channel_id is None for h in hits)  # guild-wide facts stay visible
    sl = await mem.build_prompt_slice(
        GUILD, CHANNEL, BOB, "who likes tea", visible_channels=visible
    )
    for h in (*sl.user_facts, *sl.relevant_facts, *sl.relevant_messages):
        assert h.channel_id in (None, CHANNEL)


# -- messages ------------------------------------------------------------------------------------


async def test_messages_scope_finds_what_a_member_said(make_memory: Callable[..., Any]) -> None:
    mem = await make_memory()
    t0 = "2025-03-01T18:00:00.000Z"
    await ingest(
        mem,
        [
            msg("Hey Bob! How was your weekend?", author=ALICE, name="Alice", created_at=t0),
            msg(
                "Great, we finally drove up to the lake cabin.",
                author=BOB,
                name="Bob",
                created_at="2025-03-01T18:00:30.000Z",
            ),
            msg(
                "Sounds lovely, Bob. I stayed home and painted the kitchen.",
                author=ALICE,
                name="Alice",
                created_at="2025-03-01T18:01:00.000Z",
            ),
            msg(
                "Did the kids enjoy the trip?",
                author=ALICE,
                name="Alice",
                created_at="2025-03-01T18:01:30.000Z",
            ),
            msg(
                "They loved it, they swam every day.",
                author=BOB,
                name="Bob",
                created_at="2025-03-01T18:02:00.000Z",
            ),
        ],
    )
    hits = await mem.search(GUILD, "What did Bob say about the lake?", scope="messages", limit=5)
    assert hits and all(h.kind == "message" for h in hits)
    top = hits[0]
    assert top.text == "Great, we finally drove up to the lake cabin."
    assert top.parts.speaker == 1.0 and top.author_name == "Bob" and top.subject == BOB
    # The name is not what is matched: the messages that say "Bob" are Alice's.
    plan = await mem.retriever.plan(GUILD, "What did Bob say about the lake?")
    assert plan.named == (BOB,) and "Bob" not in plan.content
    # A reply borrows from the message it answers.
    reply = await mem.retriever.search(
        GUILD, "Did the kids enjoy the trip?", scope="messages", gate=False, limit=5
    )
    answer = next(h for h in reply if h.text.startswith("They loved it"))
    assert answer.parts.neighbour > 0
    # Dates the query names count.
    dated = await mem.retriever.search(
        GUILD, "what did Alice paint on 1 March 2025?", scope="messages", gate=False, limit=5
    )
    assert dated[0].text.startswith("Sounds lovely") and dated[0].parts.date == 1.0


async def test_prompt_slice_puts_the_same_channel_first_and_skips_the_asking_message(
    make_memory: Callable[..., Any],
) -> None:
    mem = await make_memory()
    asking = msg("what tea does Alice like?", author=BOB, name="Bob", id="900000000000000001")
    await ingest(
        mem,
        [
            msg("I like green tea", author=ALICE, name="Alice", channel=OTHER_CHANNEL),
            msg("I like green tea a lot", author=ALICE, name="Alice"),
            asking,
        ],
    )
    sl = await mem.retriever.build_prompt_slice(
        GUILD, CHANNEL, BOB, asking.content, exclude_message_ids=[asking.id]
    )
    ids = [h.id for h in sl.relevant_messages]
    assert asking.id not in ids
    channels = [h.channel_id for h in sl.relevant_messages]
    assert channels == sorted(channels, key=lambda c: c != CHANNEL)
    assert channels[0] == CHANNEL


# -- lazy back-fill -------------------------------------------------------------------------------


async def test_lazy_backfill_is_capped_at_8_per_query(make_memory: Callable[..., Any]) -> None:
    mem = await make_memory()
    model = mem.embeddings.default_model
    # The embedding worker's start-up repair (facts left without a vector) must
    # be over: run later, it would embed all 20 and race the cap checked here.
    assert await mem.embeddings.settle()
    await insert_facts(
        mem, GUILD, [(ALICE, f"Alice saw zebra number {i}.", None) for i in range(20)]
    )
    now = iso(mem.clock())
    raw = [
        msg(
            f"look, zebra number {i} at the zoo",
            author=BOB,
            name="Bob",
            id=f"88800000000000{i:04d}",
        )
        for i in range(20)
    ]

    def stored_never_embedded(con: Any) -> None:
        store_messages.insert_messages(con, raw, now)
        # Marked processed in the same transaction: a row left 'pending' is
        # picked up by the start-up replay, which would embed all 20 of them
        # in the background and race the cap this test checks.
        store_messages.mark_messages(con, [m.id for m in raw], "done", now)

    await mem.db.write(stored_never_embedded)

    async def counts() -> dict[str, dict[str, int]]:
        return dict(await mem.db.read(store_vectors.vector_counts))

    assert (await counts()).get(model, {}).get("fact_vectors", 0) == 0
    await mem.search(GUILD, "zebra", scope="facts", limit=50)
    assert (await counts())[model]["fact_vectors"] == 8
    await mem.search(GUILD, "zebra", scope="facts", limit=50)
    assert (await counts())[model]["fact_vectors"] == 16
    await mem.search(GUILD, "zebra", scope="messages", limit=50)
    assert (await counts())[model]["message_vectors"] == 8


async def test_close_drops_the_vector_matrices_and_a_restart_reloads_them(
    make_memory: Callable[..., Any],
) -> None:
    mem = await make_memory()
    await ingest(mem, [msg("I work as a nurse in Berlin", author=ALICE, name="Alice")])
    await mem.retriever.warm(GUILD)
    assert mem.retriever.index.stats()["matrices"] >= 1
    await mem.close()
    assert mem.retriever.index.stats() | {"loads": 0} == {
        "matrices": 0,
        "rows": 0,
        "bytes": 0,
        "loads": 0,
    }
    await mem.start()
    hits = await mem.search(GUILD, "who works as a nurse?")
    assert hits and "nurse" in hits[0].text
    await mem.retriever.warm(GUILD)
    matrix = mem.retriever.index.get("facts", mem.embeddings.default_model, GUILD)
    assert matrix is not None and matrix.rows == 1
