"""The JSON API's snapshot and search through the real aiohttp app: shapes, scope, bad input (never a 500)."""

from __future__ import annotations

from tests.dashboard.http import (
    HIT_KEYS,
    Client,
    assert_error,
    csrf_header,
)
from tests.dashboard_data import Seeded
from tests.helpers import ALICE, CHANNEL, GUILD, OTHER_GUILD

# -- snapshot ---------------------------------------------------------------------------------


async def test_get_memory_returns_snapshot_markdown(client: Client) -> None:
    r = await client.get("/api/memory")
    assert r.status == 200
    assert r.content_type == "application/json"
    body = await r.json()
    assert body["ok"] is True
    assert body["markdown"].startswith("# Durable Memory Snapshot")
    assert "Alice" in body["markdown"]


async def test_refresh_regenerates_with_csrf_header(client: Client, seeded: Seeded) -> None:
    seeded.mem.snapshot_path.unlink()
    r = await client.post("/api/memory/refresh", headers=await csrf_header(client))
    assert r.status == 200
    body = await r.json()
    assert body["ok"] is True and body["markdown"].startswith("# Durable Memory Snapshot")
    assert seeded.mem.snapshot_path.exists()


async def test_post_without_csrf_is_refused(client: Client) -> None:
    r = await client.post("/api/memory/refresh")
    assert r.status == 403
    assert_error(await r.json(), 403)
    r = await client.post("/snapshot/refresh", data={"x": "1"})
    assert r.status == 403
    r = await client.post("/snapshot/refresh", data={"csrf_token": "forged"})
    assert r.status == 403


# -- search -----------------------------------------------------------------------------------


async def test_search_hit_shape_and_ranking(client: Client) -> None:
    r = await client.get(
        "/api/memory/search", params={"q": "where does Alice work", "guildId": GUILD}
    )
    assert r.status == 200
    body = await r.json()
    # Facts and past messages together unless the request narrows it.
    assert body["ok"] is True and body["guildId"] == GUILD and body["scope"] == "all"
    hits = body["results"]
    assert hits and body["count"] == len(hits)
    top = hits[0]
    assert HIT_KEYS <= set(top)
    assert "nurse" in top["fact"] and top["subject"] == ALICE
    assert top["guild_id"] == GUILD and isinstance(top["id"], int)
    assert 0 <= top["semanticScore"] <= 1 and 0 <= top["lexicalScore"] <= 1
    assert top["passed"] is True
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


async def test_search_messages_scope_and_channel(client: Client) -> None:
    r = await client.get(
        "/api/memory/search",
        params={"q": "cello Lisbon", "guildId": GUILD, "scope": "all", "channelId": CHANNEL},
    )
    body = await r.json()
    assert r.status == 200 and body["scope"] == "all" and body["channelId"] == CHANNEL
    kinds = {h["kind"] for h in body["results"]}
    assert kinds <= {"fact", "message"} and body["results"]


# Bad input shares one seeded engine per test (seeding costs ~0.5 s); each case
# is named in its assertion message.
BAD_LIMITS = ("abc", "1.5", "0x10", "１０", "9" * 40)
CLAMPED_LIMITS = (("-5", 1), ("0", 1), ("100000", 50), ("3", 3), ("", 10))
FTS_STRINGS = (
    '"unbalanced',
    "nurse OR",
    "NEAR(nurse berlin, 2)",
    "fact:nurse",
    "* - ^",
    "nurse AND NOT hiking",
    '""""',
    "(((",
    "'; DROP TABLE memory_facts; --",
    "\x00nurse",
    "%ff%fe",
    "🙂 ナース",
)
BAD_GUILD_IDS = (
    "abc",
    "1 OR 1=1",
    "../etc/passwd",
    "１２３",
    "12345678901234567890123",
    "-1",
    "1e5",
    "12\n34",
)


async def test_search_missing_q_or_guild_is_empty_not_error(client: Client) -> None:
    for query in (
        {},
        {"q": "nurse"},
        {"guildId": GUILD},
        {"q": "", "guildId": GUILD},
        {"q": "   ", "guildId": GUILD},
        {"q": "nurse", "guildId": ""},
    ):
        r = await client.get("/api/memory/search", params=query)
        assert r.status == 200, query
        body = await r.json()
        assert body["ok"] is True and body["results"] == [] and body["count"] == 0, query


async def test_search_is_guild_scoped(client: Client) -> None:
    body = await (
        await client.get("/api/memory/search", params={"q": "baker Paris", "guildId": GUILD})
    ).json()
    assert all(h["guild_id"] == GUILD for h in body["results"])
    assert not any("baker" in h["fact"] for h in body["results"])
    other = await (
        await client.get("/api/memory/search", params={"q": "baker Paris", "guildId": OTHER_GUILD})
    ).json()
    assert any("baker" in h["fact"] for h in other["results"])


async def test_search_limit_not_an_integer_is_400(client: Client) -> None:
    for limit in BAD_LIMITS:
        r = await client.get(
            "/api/memory/search", params={"q": "nurse", "guildId": GUILD, "limit": limit}
        )
        assert r.status == 400, limit
        assert_error(await r.json(), 400)


async def test_search_limit_is_clamped(client: Client) -> None:
    for limit, expected in CLAMPED_LIMITS:
        r = await client.get(
            "/api/memory/search",
            params={"q": "Alice nurse Rust Lisbon", "guildId": GUILD, "limit": limit},
        )
        assert r.status == 200, limit
        body = await r.json()
        assert body["limit"] == expected and len(body["results"]) <= expected, limit
    body = await (
        await client.get(
            "/api/memory/search", params={"q": "Alice nurse Rust", "guildId": GUILD, "limit": "-5"}
        )
    ).json()
    assert len(body["results"]) == 1


async def test_search_100kb_query_is_refused_with_shape(client: Client) -> None:
    r = await client.get("/api/memory/search", params={"q": "a" * 100_000, "guildId": GUILD})
    assert r.status == 400
    assert_error(await r.json(), 400)


async def test_search_fts_operator_strings_never_500(client: Client) -> None:
    for q in FTS_STRINGS:
        for scope in ("facts", "all"):
            r = await client.get(
                "/api/memory/search", params={"q": q, "guildId": GUILD, "scope": scope}
            )
            assert r.status == 200, (q, await r.text())
            assert (await r.json())["ok"] is True


async def test_non_snowflake_guild_id_is_400(client: Client) -> None:
    for guild in BAD_GUILD_IDS:
        for path in ("/api/memory/search", "/api/memory/facts", "/api/memory/traces"):
            r = await client.get(path, params={"q": "nurse", "guildId": guild, "messageId": "1"})
            assert r.status == 400, (path, guild)
            assert_error(await r.json(), 400)


async def test_other_bad_search_params_are_400(client: Client) -> None:
    for param, value in (("scope", "everything"), ("channelId", "general"), ("q", "x" * 2001)):
        r = await client.get(
            "/api/memory/search", params={"q": "nurse", "guildId": GUILD, param: value}
        )
        assert r.status == 400, param
        assert_error(await r.json(), 400)
