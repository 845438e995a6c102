"""The year simulation's re-timing of the export: a day's plan is what the
bench's table claims it is."""

from __future__ import annotations

import random
from datetime import timedelta

from bench.year import CHANNELS, START, Source, messages_on, plan_day, snowflake


def test_a_day_plan_keeps_count_order_authors_and_the_day() -> None:
    sources = [Source(str(i), f"m{i}", f"text {i}") for i in range(7)]
    plan = plan_day(START, 45, sources, start=5, rng=random.Random(1))
    assert len(plan) == 45
    assert [p.at for p in plan] == sorted(p.at for p in plan)
    assert all(START <= p.at < START + timedelta(days=1) for p in plan)
    assert {p.channel_id for p in plan} <= set(CHANNELS)
    # Every source message is used in turn from ``start``, authors kept.
    assert sorted(int(p.source.author_id) for p in plan) == sorted((5 + i) % 7 for i in range(45))


def test_weekends_are_busier_and_snowflakes_follow_time() -> None:
    weekday = messages_on(0, 100)  # 2025-01-01, a Wednesday
    saturday = messages_on(3, 100)
    assert (weekday, saturday) == (100, 160)
    assert int(snowflake(START, 1)) < int(snowflake(START + timedelta(seconds=1), 0))
