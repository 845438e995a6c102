"""Names members are addressed by (memory.retrieval.addressed): the pure rule,
then through search and the prompt slice on a real engine."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from dashboard.serialize import hit_json
from memory.clock import iso
from memory.retrieval.addressed import (
    AddressedNames,
    AddressRule,
    Use,
    addresses,
    candidate_words,
    mentions,
    resolve,
    with_names,
    without_words,
)
from memory.retrieval.query import MemberNames, plan_query
from tests.helpers import ALICE, BOB, CHANNEL, GUILD, msg

NAMES = MemberNames.build([(ALICE, "Emi"), (BOB, "elise")])
NOW = datetime(2024, 1, 1, tzinfo=UTC)


def test_an_address_is_a_greeting_a_comma_or_you_before_the_name() -> None:
    long = "I " + "really " * 40 + "liked it."
    assert addresses(f"Hey Kate! {long}", "Kate") and addresses(
        f"{long} What about you Kate?", "Kate"
    )
    assert not addresses(f"{long} Thanks, Kate! {long}", "Kate")  # a message greets at its edges
    for text in (
        "Hey Kate!",
        "hi Kate, how was the trip?",
        "What about you Kate?",
        "That sounds great, Kate!",
        "Thanks, Kate",
        "Kate, did you see the game?",
        "Wow Kate. That looks amazing",
    ):
        assert addresses(text, "Kate"), text
    for text in (
        "I went skiing with Kate.",  # a third person, not the one spoken to
        "Kate's brother called",
        "hey Kateland is a nice town",
        "hey kate",  # the name is matched as written in the query
        "Hey Katherine!",
        "Go over the report with your partner, Kate, and the agent.",  # an apposition
        'Open with a greeting such as "Hey Kate, so proud of you!"',  # a quoted draft
        "I told you Kate would come",
        "Kate, Emma and I went hiking",  # a list of people
    ):
        assert not addresses(text, "Kate"), text


def test_a_mention_is_the_whole_word_as_written() -> None:
    assert mentions("I met Kate today", "Kate") and mentions("Kate's dog", "Kate")
    assert not mentions("Katerina said hi", "Kate") and not mentions("kate", "Kate")


def test_candidate_words_are_capitalised_names_no_member_has() -> None:
    query = "Which cities have Kate and Elise both seen, besides NYU and Paris? Kate's?"
    # Elise is a member's name; "Which" a stop word; NYU an acronym; repeats once.
    assert candidate_words(query, NAMES) == ["Kate", "Paris"]
    assert candidate_words("what does kate like?", NAMES) == []


def test_the_votes_go_to_who_is_spoken_to_not_to_the_writer() -> None:
    uses = [
        Use(BOB, (ALICE, ALICE)),
        Use(BOB, (ALICE,)),
        Use(BOB, (ALICE, BOB)),
        Use(BOB, (BOB,)),  # only the writer around: no vote
        Use(BOB, (), addressed=False),  # "I saw Kate's post": a mention, no vote
    ]
    assert resolve(uses) == ALICE
    # Too few addresses, or votes split between members, name nobody.
    assert resolve(uses[:2]) is None
    assert resolve([Use(BOB, (ALICE,)), Use(BOB, (ALICE,)), Use(ALICE, (BOB,))]) is None
    carol = "666666666666666666"
    split = [Use(BOB, (ALICE,)), Use(BOB, (ALICE,)), Use(BOB, (carol,)), Use(BOB, (carol,))]
    assert resolve(split) is None
    assert resolve([*split, Use(BOB, (ALICE,)), Use(BOB, (ALICE,))]) == ALICE


def test_a_name_its_member_writes_is_a_third_person() -> None:
    # Alice tells about her friend Kate and Bob greets Kate in the chat's
    # drafts: Alice writing the name herself says it is not hers.
    said_by_alice = [Use(ALICE, (), addressed=False) for _ in range(3)]
    uses = [Use(BOB, (ALICE,)) for _ in range(4)]
    assert resolve(uses) == ALICE
    assert resolve([*uses, *said_by_alice]) is None
    assert resolve([*uses, *said_by_alice], AddressRule(max_self_share=0.5)) == ALICE


def test_a_resolved_word_is_read_as_the_members_name() -> None:
    query = "What are Kate's hobbies?"
    before = plan_query(query, NAMES, NOW)
    assert before.named == () and "Kate" in before.content
    plan = plan_query(query, with_names(NAMES, {"Kate": ALICE}), NOW)
    assert plan.named == (ALICE,)
    assert "Kate" not in plan.content and "hobbies" in plan.content
    # Full-text search leaves the word out too: "Hey Kate!" is not about hobbies.
    assert plan.message_match is not None and "kate" in plan.message_match
    trimmed = without_words(plan, ["Kate"])
    assert trimmed.message_match is not None and "kate" not in trimmed.message_match
    assert trimmed.fact_match is not None and "hobbies" in trimmed.fact_match
    assert trimmed.named == plan.named and trimmed.content == plan.content


# -- through search on a real engine -------------------------------------------------------------


def _at(minute: int) -> str:
    return f"2024-03-02T18:{minute:02d}:00.000Z"


async def _ingest(mem: Any, messages: Sequence[Any]) -> None:
    for m in messages:
        out = await mem.ingest_message(m, backpressure=True)
        assert out.status == "queued", out
    assert await mem.settle(60)


def _emi(text: str, minute: int) -> Any:
    return msg(text, author=ALICE, name="Emi", created_at=_at(minute))


def _elise(text: str, minute: int) -> Any:
    return msg(text, author=BOB, name="elise", created_at=_at(minute))


async def test_search_reads_the_name_members_are_addressed_by(
    make_memory: Callable[..., Any],
) -> None:
    mem = await make_memory()
    await _ingest(
        mem,
        [
            _elise("Hey Kate! How was your weekend?", 1),
            _emi("Great! I went skiing in Aspen with my cousins.", 2),
            _elise("I tried skiing once in Vermont and hated the cold.", 3),
            _emi("Brr, that sounds rough.", 4),
            _elise("Thanks, Kate! Are you going skiing again soon?", 5),
            _emi("Maybe next month, if the snow holds.", 6),
            _elise("Hey Kate, how is skiing?", 7),
            _emi("Still fun!", 8),
        ],
    )
    query = "Where did Kate go skiing?"
    plan = await mem.retriever.plan(GUILD, query)
    assert plan.named == (ALICE,)
    hits = await mem.retriever.search(GUILD, query, scope="messages", gate=False, limit=5)
    assert "Aspen" in hits[0].text
    # Visible where hits are explained: Emi's messages carry the speaker part.
    assert hits[0].parts.speaker == 1.0
    assert hits[0].parts.as_dict()["speaker"] == 1.0
    assert hit_json(hits[0])["speakerScore"] == 1.0
    assert all(h.parts.speaker == 0.0 for h in hits if h.subject == BOB)
    # What the model reads: the prompt slice has the same first message.
    sl = await mem.build_prompt_slice(GUILD, CHANNEL, BOB, query)
    assert "Aspen" in sl.relevant_messages[0].text


async def test_a_name_is_learnt_only_from_channels_the_asker_can_see(
    make_memory: Callable[..., Any],
) -> None:
    mem = await make_memory()
    hidden = "777777777777777777"
    await _ingest(
        mem,
        [
            msg(
                "Hey Kate! How was your weekend?",
                author=BOB,
                name="elise",
                channel=hidden,
                created_at=_at(1),
            ),
            msg("Lovely, thanks.", author=ALICE, name="Emi", channel=hidden, created_at=_at(2)),
            msg(
                "Thanks, Kate! See you", author=BOB, name="elise", channel=hidden, created_at=_at(3)
            ),
            msg("See you!", author=ALICE, name="Emi", channel=hidden, created_at=_at(4)),
            msg("Hey Kate, ready?", author=BOB, name="elise", channel=hidden, created_at=_at(5)),
            msg("Yes!", author=ALICE, name="Emi", channel=hidden, created_at=_at(6)),
            _emi("I went skiing in Aspen with my cousins.", 30),
        ],
    )
    query = "Where did Kate go skiing?"
    everywhere = await mem.search(GUILD, query, scope="messages", gate=False, limit=3)
    assert "Aspen" in everywhere[0].text and everywhere[0].parts.speaker == 1.0
    seen = await mem.search(
        GUILD, query, scope="messages", gate=False, limit=3, visible_channels={CHANNEL}
    )
    assert [h.channel_id for h in seen] == [CHANNEL]
    assert seen[0].parts.speaker == 0.0


async def test_a_word_that_names_nobody_is_not_looked_up_again_for_a_while(
    make_memory: Callable[..., Any],
) -> None:
    mem = await make_memory()
    await _ingest(mem, [_elise("Morning all", 1), _emi("Morning!", 2)])
    ctx = mem.retriever.ctx
    names = await ctx.member_names(GUILD)
    query = "Where did Kate go skiing?"
    kept = AddressedNames(ctx.db, ttl_s=0.0, gap_s=7200.0)
    fresh = AddressedNames(ctx.db, ttl_s=0.0, gap_s=7200.0, rule=AddressRule(unresolved_ttl_s=0))
    assert await kept.resolve_words(GUILD, query, names) == {}
    assert await fresh.resolve_words(GUILD, query, names) == {}
    await _ingest(
        mem,
        [
            _elise("Hey Kate! How was your weekend?", 3),
            _emi("Great, I went skiing.", 4),
            _elise("Thanks, Kate!", 5),
            _emi("Anytime", 6),
            _elise("Hey Kate, ready?", 7),
            _emi("Yes", 8),
        ],
    )
    assert await kept.resolve_words(GUILD, query, names) == {}  # still the cached answer
    assert await fresh.resolve_words(GUILD, query, names) == {"Kate": ALICE}


async def test_a_search_of_the_past_does_not_learn_a_name_from_later_messages(
    make_memory: Callable[..., Any],
) -> None:
    mem = await make_memory()
    await _ingest(
        mem,
        [
            _emi("I went skiing in Aspen with my cousins.", 1),
            _elise("I tried skiing once in Vermont.", 2),
            # Only later does the chat call Emi "Kate".
            _elise("Hey Kate! How was your weekend?", 40),
            _emi("Lovely, thanks.", 41),
            _elise("Thanks, Kate! See you", 42),
            _emi("See you!", 43),
            _elise("Hey Kate, ready?", 44),
            _emi("Yes!", 45),
        ],
    )
    query = "Where did Kate go skiing?"
    now = await mem.search(GUILD, query, scope="messages", gate=False, limit=3)
    assert "Aspen" in now[0].text and now[0].parts.speaker == 1.0
    then = datetime(2024, 3, 2, 18, 10, tzinfo=UTC)
    past = await mem.search(GUILD, query, scope="messages", gate=False, limit=3, as_of=then)
    assert all(h.parts.speaker == 0.0 for h in past)
    assert (await mem.retriever.ctx.plan(GUILD, query, None, iso(then))).named == ()
