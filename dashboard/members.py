"""The guild page's member list: one page of members with their fact and
message counts, filtered by a part of their name or id (``q``), sorted
(``sort``: facts, name, messages, last message), paged (``page``), and —
unless ``all=1`` — without the members no fact is about, folded into a count
(a real server has many more members than members the bot learned about)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aiohttp import web

from . import context, params

MEMBERS_PER_PAGE = 25
# How the guild page sorts members (the engine's member_page sorts).
MEMBER_SORTS = ("facts", "name", "messages", "last")


async def members_context(request: web.Request, guild: str) -> dict[str, Any]:
    """One page of the guild's members: filtered (``q``), sorted (``sort``),
    and without the members no fact is about unless ``all=1``."""
    q = request.query
    name_filter = (q.get("q") or "").strip().lower()[:100]
    sort = params.choice(q, "sort", MEMBER_SORTS, "facts")
    show_all = params.choice(q, "all", ("0", "1"), "0") == "1"
    page_no = params.integer(q, "page", default=1, lo=1, hi=100_000)
    found = await context.memory_of(request).guilds.member_page(
        guild,
        search=name_filter,
        with_facts_only=not show_all,
        sort=sort,
        offset=(page_no - 1) * MEMBERS_PER_PAGE,
        limit=MEMBERS_PER_PAGE,
    )
    listed = found.total if show_all else found.total - found.without_facts
    return {
        "filter": name_filter,
        "sort": sort,
        "sorts": list(MEMBER_SORTS),
        "show_all": show_all,
        "page": page_no,
        "pages": max(1, -(-listed // MEMBERS_PER_PAGE)),
        "members": [asdict(m) for m in found.members],
        "members_total": found.total,
        "members_listed": listed,
        "members_without_facts": found.without_facts,
    }
