"""The offline rules read plain self-descriptions (issue 30): a first-person
clause said again in the third person, in English and in five other
languages; what is not about the member, or will not stay true, gives nothing;
a negation stays a negation."""

from __future__ import annotations

from typing import Any

import pytest

from memory.extract.guards import clean_message, filter_candidates
from memory.extract.rules.extractor import RuleExtractor
from tests.helpers import REAL_EXPORT


def facts(text: str, author: str) -> list[str]:
    """What the rules propose and the guards accept, as the pipeline stores it."""
    cleaned = clean_message(text) or ""
    cands = RuleExtractor().extract_sync(cleaned, author, 4)
    return [c.fact for c in filter_candidates(cands, cleaned, author=author).accepted]


# The self-descriptions the rules missed on the real export (issue 30), each
# as its author wrote it, and the fact it must give.
MISSED = [
    (
        "ilsedevos",
        "as said, I'm not a papyrologist\nI'm a palaeographer working on Medieval Greek "
        "manuscripts",
        "ilsedevos is not a papyrologist.",
    ),
    (
        "ilsedevos",
        "I'm a palaeographer working on Medieval Greek manuscripts",
        "ilsedevos is a palaeographer working on Medieval Greek manuscripts.",
    ),
    (
        "fern.bear",
        "My field of expertise is making neural networks train uncommonly quickly, I hold one "
        "of the bigger benchmark records for it right now.",
        "fern.bear's field of expertise is making neural networks train uncommonly quickly.",
    ),
    (
        "freddy_665",
        "Hi all, I have been exploring language models for Greek and Latin "
        "(https://aclanthology.org/2023.acl-long.846/) and in my experience, there is no "
        "open-source resource as comprehensive as the TLG.",
        "freddy_665 has been exploring language models for Greek and Latin.",
    ),
    (
        "tomweidig",
        "I do genealogy and trying to read 18th century handwriting is much worse than the Greek "
        "writing on the Herculaneum scrolls",
        "tomweidig does genealogy.",
    ),
    (
        "chuckm137",
        "My interests is also in New Testament hapax legomena and neologisms that may be in the "
        "papyri",
        "chuckm137's interests is also in New Testament hapax legomena and neologisms that may "
        "be in the papyri.",
    ),
    (
        "julomai",
        "i audited a papyrology course working on my first classics MA and good lord is it hard",
        "julomai audited a papyrology course working on their first classics MA.",
    ),
    (
        "hannesh",
        "I don't read greek, so i can't tell from the banner, or the transcription.",
        "hannesh does not read Greek.",
    ),
]


@pytest.mark.parametrize(("author", "text", "expected"), MISSED)
def test_each_missed_self_description_becomes_a_third_person_fact(
    author: str, text: str, expected: str
) -> None:
    assert expected in facts(text, author)


def test_every_fact_keeps_its_quote_and_the_rule_that_made_it() -> None:
    [cand] = RuleExtractor().extract_sync("I do genealogy on weekends.", "tomweidig", 4)
    assert cand.fact == "tomweidig does genealogy on weekends."
    assert cand.evidence == "I do genealogy on weekends."
    assert cand.source == "rules.clause.aux"
    [shaped] = RuleExtractor().extract_sync("I work as a nurse in Berlin", "Ana", 4)
    assert shaped.source == "rules.work"


@pytest.mark.parametrize(
    ("text", "expected", "never"),
    [
        ("I'm not a papyrologist", "Mia is not a papyrologist.", "Mia is a papyrologist."),
        ("I am not a nurse", "Mia is not a nurse.", "Mia is a nurse."),
        ("I don't speak French", "Mia does not speak French.", "Mia speaks French."),
        ("I can't drive a car", "Mia cannot drive a car.", "Mia drives a car."),
        ("I have never worked on a papyrus", "Mia has never worked on a papyrus.", None),
        (
            "I didn't study classics at university",
            "Mia did not study classics at university.",
            "Mia studied classics at university.",
        ),  # fmt: skip
    ],
)
def test_a_negation_stays_a_negation(text: str, expected: str, never: str | None) -> None:
    got = facts(text, "Mia")
    assert expected in got
    if never is not None:
        assert never not in got
    for fact in got:
        assert " not " in fact or "never" in fact or "cannot" in fact, fact


@pytest.mark.parametrize(
    "text",
    [
        # questions
        "Am I the only papyrologist here?",
        "Do you think I'm a palaeographer?",
        # hypotheticals and wishes
        "If I were a papyrologist I'd know this hand",
        "I would love to learn Coptic one day",
        "I'd say it's an epsilon",
        "I could try reading it tomorrow",
        # jokes
        "I'm a professional scroll unroller /s",
        "I am the emperor of Herculaneum, jk",
        # someone else's words
        'She said "I am a papyrologist"',
        "> I work at the Louvre",
        # passing states
        "I'm tired",
        "I'm so glad",
        "I'm off to go swimming with the kids",
        "I'm back",
        "I was terrified",
        "I'm sure it's a theta",
        # the conversation itself, not the member
        "I think you're misreading that letter",
        "I see what you mean",
        "I thought it was a kappa",
        "I was wondering about the second line",
        "I don't know",
        "I agree with the reading above",
        "I love that",
        "I posted the image in the other channel",
        "I read a bunch of papers about this",
        "I'll take a look later",
        "My guess is that it is a sigma",
    ],
)
def test_what_is_not_a_fact_about_the_member_gives_nothing(text: str) -> None:
    assert facts(text, "Mia") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "I went to a LGBTQ support group yesterday and it was so powerful.",
            "Mia went to a LGBTQ support group yesterday.",
        ),  # fmt: skip
        ("Last Friday I signed up for a pottery class", "Mia signed up for a pottery class."),
        ("Yeah, I made this bowl in my class.", "Mia made a bowl in their class."),
        (
            "Been running longer since our last chat.",
            "Mia has been running longer since their last chat.",
        ),  # fmt: skip
        (
            "We celebrated my daughter's birthday with a concert.",
            "Mia and others celebrated their daughter's birthday with a concert.",
        ),  # fmt: skip
        (
            "Pottery is a huge part of my life, not just a hobby.",
            "Pottery is a huge part of Mia's life, not just a hobby.",
        ),  # fmt: skip
        ("I (amateur papyrologist) can answer this one", "Mia is an amateur papyrologist."),
        (
            "I'm so excited to meet other people in the community",
            "Mia is so excited to meet other people in the community.",
        ),  # fmt: skip
    ],
)
def test_what_people_say_of_themselves_in_chat(text: str, expected: str) -> None:
    assert expected in facts(text, "Mia")


@pytest.mark.parametrize(
    ("author", "text", "expected"),
    [
        (
            "Jonas",
            "Ich arbeite als Restauratorin in einem Museum in Köln.",
            "Jonas arbeitet als Restauratorin in einem Museum in Köln.",
        ),  # fmt: skip
        ("Jonas", "Ich lese kein Griechisch.", "Jonas liest kein Griechisch."),
        ("Jonas", "Ich bin kein Papyrologe.", "Jonas ist kein Papyrologe."),
        ("Jonas", "Meine Frau ist Ärztin in Berlin.", "Jonas' Frau ist Ärztin in Berlin."),
        (
            "Lucía",
            "Trabajo como enfermera en un hospital de Madrid.",
            "Lucía trabaja como enfermera en un hospital de Madrid.",
        ),  # fmt: skip
        ("Lucía", "No hablo griego.", "Lucía no habla griego."),
        ("Lucía", "Me encanta la paleografía griega.", "A Lucía le encanta la paleografía griega."),
        ("Élise", "J'habite à Lyon avec ma femme.", "Élise habite à Lyon avec sa femme."),
        ("Élise", "Je ne lis pas le grec.", "Élise ne lit pas le grec."),
        (
            "Дмитрий",
            "Я работаю программистом в банке уже четыре года.",
            "Дмитрий работает программистом в банке уже четыре года.",
        ),  # fmt: skip
        ("Дмитрий", "Я не читаю по-гречески.", "Дмитрий не читает по-гречески."),
        ("Дмитрий", "Я историк и изучаю папирусы.", "Дмитрий — историк."),
        ("ゆい", "私は東京に住んでいます。", "ゆいは東京に住んでいます."),
        ("ゆい", "私はギリシャ語を読みません。", "ゆいはギリシャ語を読みません."),
        (
            "ゆい",
            "銀行でプログラマーとして働いて三年になります",
            "ゆいは銀行でプログラマーとして働いて三年になります.",
        ),  # fmt: skip
    ],
)
def test_plain_statements_in_other_languages(author: str, text: str, expected: str) -> None:
    assert facts(text, author) == [expected]


@pytest.mark.parametrize(
    "text",
    [
        "Ich bin müde.",
        "Ich glaube, das ist ein Alpha.",
        "Wenn ich Papyrologe wäre, würde ich es wissen.",
        "Estoy cansada.",
        "Creo que es una alfa.",
        "¿Trabajas en Madrid?",
        "Je pense que c'est un alpha.",
        "Je suis fatigué.",
        "Я думаю, что это альфа.",
        "Я устал.",
        "Ты работаешь программистом?",
        "これはアルファだと思います。",
        "疲れた。",
        "私はギリシャ語を勉強したいです。",
        "Leo is my cat.",  # English: not Spanish for "I read"
    ],
)
def test_other_languages_refuse_the_same_things(text: str) -> None:
    assert facts(text, "Anna") == []


def test_every_rule_fact_on_the_real_export_names_its_rule() -> None:
    import json

    data = json.loads(REAL_EXPORT.read_text(encoding="utf-8"))
    extractor = RuleExtractor()
    out = [
        extractor.extract_sync(m["content"], m["author"]["name"], 4)
        for m in data["messages"]
        if m["content"]
    ]
    made = [c for cands in out for c in cands]
    assert all(c.source and c.source.startswith("rules.") for c in made)
    assert all(" you " not in f" {c.fact.lower()} " for c in made)


def test_a_message_cut_at_a_word_boundary_loses_its_stump() -> None:
    """clean_message cuts at 320 characters and strips the space it cut at:
    the last sentence of a 319-character text is a stump too ("… three
    years" of "… three years ago") and gives no fact."""
    head = "I love tea. "
    stump = "I started painting three years"
    filler = "Blah blah blah. " * ((320 - len(head) - len(stump)) // 16)
    pad = "x" * (319 - len(head) - len(filler) - len(stump) - 2) + ". "
    text = head + filler + pad + stump + " ago, and I never stopped."
    assert text[319] == " "  # the cut falls on the space after "years"
    assert (clean_message(text) or "").endswith("three years")
    assert facts(text, "Ana") == ["Ana loves tea."]


async def test_a_stored_fact_names_its_rule_in_its_history(make_memory: Any) -> None:
    from tests.helpers import GUILD, eventually, msg

    mem = await make_memory()
    await mem.ingest_message(msg("I do genealogy on weekends."))

    async def stored() -> bool:
        return bool(await mem.facts.find(GUILD))

    assert await eventually(stored)
    [fact] = await mem.facts.find(GUILD)
    assert fact.fact == "Alice does genealogy on weekends."
    assert fact.evidence_text == "I do genealogy on weekends."
    [added] = await mem.facts.history(GUILD, fact.id)
    assert (added.event, added.actor) == ("add", "extractor:rules.clause.aux")
