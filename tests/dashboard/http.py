"""What the dashboard's tests share: client types, the keys of a hit and a
fact, the error shape, and the CSRF tokens of the API and the forms."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient

TOKEN = "correct-horse-battery-staple-42"
Client = TestClient[web.Request, web.Application]
MakeClient = Callable[..., Awaitable[Client]]

HIT_KEYS = {
    "id",
    "created_at",
    "guild_id",
    "channel_id",
    "subject",
    "fact",
    "fact_type",
    "evidence_text",
    "source_message_id",
    "confidence",
    "score",
    "semanticScore",
    "lexicalScore",
    "bm25Score",
    "confidenceScore",
    "recencyScore",
    "channelScore",
    "speakerScore",
    "firstPersonScore",
    "combinedScore",
    "passed",
    "kind",
}
FACT_KEYS = {
    "id",
    "guild_id",
    "channel_id",
    "subject",
    "fact",
    "fact_type",
    "evidence_text",
    "source_message_id",
    "confidence",
    "is_active",
    "created_at",
    "updated_at",
    "observed_at",
    "last_observed_at",
    "valid_from",
    "valid_to",
}


def assert_error(body: Any, status: int) -> None:
    assert body == {"ok": False, "error": body["error"], "status": status}
    assert isinstance(body["error"], str) and body["error"]
    assert "Traceback" not in body["error"]


async def csrf_header(client: Client) -> dict[str, str]:
    r = await client.get("/api/csrf")
    assert r.status == 200
    body = await r.json()
    return {body["header"]: body["csrfToken"]}


async def form_token(client: Client, path: str) -> str:
    html = await (await client.get(path)).text()
    m = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert m, f"no CSRF field on {path}"
    return m.group(1)
