"""Relative time cues in a query ("three weeks ago", "last weekend") read as
date spans (memory.retrieval.query.find_dates), so
the messages of that period gain the query's date part."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from memory.retrieval.query import EMPTY_NAMES, DateSpan, find_dates, plan_query

NOW = datetime(2023, 6, 22, 18, 30, tzinfo=UTC)  # a Thursday


def _days(span: DateSpan) -> tuple[date | None, date | None]:
    return span.start, span.end


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        # Around the day, give or take a quarter of the distance (at least two days).
        ("What did I do a week ago?", date(2023, 6, 13), date(2023, 6, 18)),
        ("the race three weeks ago", date(2023, 5, 27), date(2023, 6, 7)),
        ("a month ago", date(2023, 5, 16), date(2023, 5, 31)),
        ("2 days ago", date(2023, 6, 18), date(2023, 6, 23)),
        # From the Saturday before: what was done at a weekend is often told days later.
        ("Which bike did I fix the past weekend?", date(2023, 6, 17), date(2023, 6, 23)),
    ],
)
def test_relative_cues_read_as_spans(text: str, start: date, end: date) -> None:
    spans = find_dates(text, NOW)
    assert (start, end) in [_days(s) for s in spans]


def test_a_cue_favours_messages_of_its_period() -> None:
    plan = plan_query("What family event did I go to a week ago?", EMPTY_NAMES, NOW)
    assert plan.date_score(datetime(2023, 6, 15, 10, tzinfo=UTC)) == 1.0
    assert plan.date_score(datetime(2023, 5, 6, 10, tzinfo=UTC)) == 0.0


@pytest.mark.parametrize(
    "text",
    [
        "How many days ago did I meet Emma?",
        "the last time we met",
        "years of practice",
        # A window up to now covers most of what is remembered: no cue.
        "the trips I took in the past three months",
    ],
)
def test_no_cue_without_a_count_and_a_unit(text: str) -> None:
    assert find_dates(text, NOW) == []
