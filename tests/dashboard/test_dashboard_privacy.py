"""The dashboard's ``/privacy`` (issue 31): generated from the live settings
(a change shows at once), public only when the operator turns
``privacy_public`` on — and then only the notice, nothing of the operator's
part — and, for the operator, receipts (checked by id) and what the daily
caps held back."""

from __future__ import annotations

from typing import Any

from aiohttp.test_utils import TestServer

from dashboard.app import DashboardConfig, create_app
from dashboard.server import runner_options
from memory import Deployment
from tests.helpers import ALICE, BOB, GUILD, msg

TOKEN = "correct-horse-battery-staple-42"
ONLINE = Deployment(
    chat_endpoint="llm.example.org",
    extract_endpoint="llm.example.org",
    embedding="remote",
    embedding_endpoint="llm.example.org",
    voice=True,
    stt_endpoint="stt.example.org",
)


async def _client(mem: Any, aiohttp_client: Any, **cfg: Any) -> Any:
    config = DashboardConfig(**cfg)
    server = TestServer(create_app(mem, config))
    await server.start_server(**runner_options(config))
    return await aiohttp_client(server)


async def _seed(mem: Any) -> None:
    for text, author in (("I love hiking in the Alps.", ALICE), ("I love chess.", BOB)):
        assert await (await mem.ingest_message(msg(text, author=author))).wait()
    assert await mem.settle(30)
    await mem.guilds.set_names(GUILD, guild_name="Papyrology Club", channels={})


async def test_privacy_page_follows_a_setting_change(make_memory: Any, aiohttp_client: Any) -> None:
    mem = await make_memory(embeddings="none")
    await _seed(mem)
    client = await _client(mem, aiohttp_client, deployment=ONLINE)

    first = await (await client.get("/privacy", params={"guildId": GUILD, "format": "json"})).json()
    sections = {s["key"]: s["items"] for s in first["sections"]}
    assert first["ok"] and first["guildName"] == "Papyrology Club"
    assert any("not stored until you agree" in i for i in sections["sensitive"])
    assert any("erased" not in i and "stays until" in i for i in sections["retention"])
    assert "Fact extraction: messages are sent to llm.example.org." in sections["endpoints"]
    assert any("stt.example.org" in i for i in sections["endpoints"])
    assert any("at most 5 facts about other members and at most 20 lore lines" in i
               for i in sections["limits"])  # fmt: skip

    await mem.guilds.set_setting(GUILD, "sensitive_facts", "never")
    await mem.guilds.set_setting(GUILD, "member_leave_policy", "forget:14d")
    await mem.guilds.set_setting(GUILD, "daily_cap_lore_lines", "0")
    html = await (await client.get("/privacy", params={"guildId": GUILD})).text()
    assert "are never stored" in html and "not stored until you agree" not in html
    assert "erased 14 days later, unless they rejoin" in html
    assert "at most 5 facts about other members a day" in html
    assert "<code>/memory opt-out</code>" in html  # commands as code, everything else escaped

    # The review queue: moderators see what waits, and sensitive facts go to them.
    await mem.guilds.set_setting(GUILD, "review_policy", "flagged")
    await mem.guilds.set_setting(GUILD, "sensitive_facts", "review")
    body = await (await client.get("/privacy", params={"guildId": GUILD, "format": "json"})).json()
    sections = {s["key"]: s["items"] for s in body["sections"]}
    assert any("waits for a moderator" in i and "dropped after 7 days" in i
               for i in sections["visibility"])  # fmt: skip
    assert any("until a moderator approves them" in i for i in sections["sensitive"])
    assert not any("the bot asks you" in i for i in sections["sensitive"])
    await mem.guilds.set_setting(GUILD, "review_policy", "off")  # review off: the member is asked
    body = await (await client.get("/privacy", params={"guildId": GUILD, "format": "json"})).json()
    sections = {s["key"]: s["items"] for s in body["sections"]}
    assert not any("moderator" in i and "waits" in i for i in sections["visibility"])
    assert any("not stored until you agree" in i for i in sections["sensitive"])

    # Offline: no endpoint receives anything.
    offline = await _client(mem, aiohttp_client, deployment=Deployment())
    body = await (await offline.get("/privacy", params={"guildId": GUILD, "format": "json"})).json()
    endpoints = next(s for s in body["sections"] if s["key"] == "endpoints")["items"]
    assert endpoints == [
        "None: everything runs on the bot's machine (offline extraction and embeddings, no "
        "chat model). No message or fact is sent to any model provider."
    ]


async def test_privacy_page_is_public_only_when_the_operator_says(
    make_memory: Any, aiohttp_client: Any
) -> None:
    mem = await make_memory(embeddings="none")
    await _seed(mem)
    report = await mem.forget(GUILD, BOB, actor=f"user:{BOB}")

    locked = await _client(mem, aiohttp_client, token=TOKEN)
    refused = await locked.get("/privacy", params={"format": "json"})
    assert refused.status == 401

    public = await _client(mem, aiohttp_client, token=TOKEN, privacy_public=True)
    page = await public.get("/privacy", params={"guildId": GUILD})
    assert page.status == 200
    html = await page.text()
    assert "What is collected" in html and "/memory opt-out" in html
    # Only the notice: no guild name, no guild list, no receipts, no operator navigation.
    assert "Papyrology Club" not in html and "For the operator" not in html
    assert str(report.receipt_id) not in html and 'href="/settings"' not in html
    body = await (await public.get("/privacy", params={"format": "json"})).json()
    assert body["public"] and "receipts" not in body and "guilds" not in body
    # Everything else stays behind the token, and the page cannot be posted to.
    assert (await public.get("/settings", params={"format": "json"})).status == 401
    assert (await public.post("/privacy")).status in (401, 403, 405)

    operator = await public.get(
        "/privacy",
        params={"guildId": GUILD, "receipt": str(report.receipt_id), "format": "json"},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    data = await operator.json()
    assert not data["public"] and data["guildName"] == "Papyrology Club"
    assert [r["id"] for r in data["receipts"]] == [report.receipt_id]
    assert data["checked"]["found"] and data["checked"]["clean"]
    assert data["receipts"][0]["counts"]["facts"] == 1


async def test_what_the_caps_held_back_is_shown_to_the_operator(
    make_memory: Any, aiohttp_client: Any
) -> None:
    mem = await make_memory(embeddings="none")
    await _seed(mem)
    await mem.guilds.set_setting(GUILD, "daily_cap_lore_lines", "1")
    line = "The raid is on Friday."
    await mem.lore.remember(GUILD, line, source_text=line, author_id=ALICE)
    other = "The guild mascot is a goose."
    try:
        await mem.lore.remember(GUILD, other, source_text=other, author_id=ALICE)
    except Exception as exc:  # CapReached
        assert "daily cap" in str(exc)
    client = await _client(mem, aiohttp_client)
    html = await (await client.get("/privacy", params={"guildId": GUILD})).text()
    assert "Held back by the daily caps" in html and "mascot is a goose" in html
    activity = await (await client.get("/activity", params={"kind": "memory_cap"})).text()
    assert "mascot is a goose" in activity and "daily cap of 1" in activity
