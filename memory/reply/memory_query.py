"""``memory_query``: the one way the chat model asks long-term memory.

The model calls it as an OpenAI tool (function calling) or, on endpoints
without tools, as the JSON directive ``memoryLookupQuery`` (a query string
or an object with the same parameters). Either way the arguments are
validated here, the search runs in the engine under the tool's allowlist
(within the reply's own), and the answer is ``[M#]`` bullets that fit in
``budget_tokens``. A bad argument is not an exception: its message goes back
to the model as the call's result, so it can correct itself.

Parameters: ``query`` (required, at most 220 characters); ``about`` (member
names or ids, ``me`` for the member the reply answers, or ``lore``); ``types`` (memory types); ``as_of``, ``after``,
``before`` (ISO dates or times; as_of: what was true then; after/before:
when it was observed); ``top_k`` (1–10, default 5); ``budget_tokens``
(50–800, default 400); ``threshold`` (0–1: the least score a result needs).

A call searches facts and past messages together (the engine's default
scope: "when did we talk about X?" is answered by the messages), unless it
narrows to members, memory types or observation times: those are fields of
facts, which messages do not have, so such a call searches facts only.

Bullets are numbered across a reply's calls (a second call's first bullet
follows the first call's last), so each ``[M#]`` the model cites in its
answer names one memory (``QueryCall.first``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memory.errors import InvalidInput
from memory.memory_types import MEMORY_TYPES, parse_types
from memory.models import DEFAULT_SEARCH_SCOPE, LORE_SUBJECT, Hit
from memory.text import estimate_tokens

if TYPE_CHECKING:
    from memory.engine import Memory

log = logging.getLogger(__name__)

TOOL_NAME = "memory_query"
MAX_QUERY_CHARS = 220
MAX_TOP_K = 10
DEFAULT_TOP_K = 5
MIN_BUDGET_TOKENS = 50
MAX_BUDGET_TOKENS = 800
DEFAULT_BUDGET_TOKENS = 400
MAX_ABOUT = 5
# What the model may write in ``about`` for the member it is answering.
SELF_NAMES = frozenset({"me", "myself", "i", "self", "the user", "user", "author"})
_PARAMETERS = (
    "query",
    "about",
    "types",
    "as_of",
    "after",
    "before",
    "top_k",
    "budget_tokens",
    "threshold",
)

TOOL_SPEC: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Search this server's long-term memory (facts about members, server lore, "
            "summaries of past conversations, and past messages: when something was "
            "talked about). Use it when the conversation and the memory already in your "
            "instructions are not enough. Results are bullets [M1], [M2]... "
            "At most 2 calls per reply."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "What to look for, in a few words (at most 220 characters).",
                },
                "about": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Only memories about these members (display names or ids), "
                    '"me" for the member you are answering, or "lore" for the server\'s own '
                    "lines.",
                },
                "types": {
                    "type": "array",
                    "items": {"type": "string", "enum": list(MEMORY_TYPES)},
                    "description": "Only these memory types.",
                },
                "as_of": {
                    "type": "string",
                    "description": "ISO date or time: what was true then (default: now).",
                },
                "after": {
                    "type": "string",
                    "description": "ISO date or time: only memories observed after it.",
                },
                "before": {
                    "type": "string",
                    "description": "ISO date or time: only memories observed before it.",
                },
                "top_k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_TOP_K,
                    "description": f"How many results at most (default {DEFAULT_TOP_K}).",
                },
                "budget_tokens": {
                    "type": "integer",
                    "minimum": MIN_BUDGET_TOKENS,
                    "maximum": MAX_BUDGET_TOKENS,
                    "description": "How long the answer may be, in tokens "
                    f"(default {DEFAULT_BUDGET_TOKENS}).",
                },
                "threshold": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                    "description": "The least relevance score (0-1) a result needs.",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
}


@dataclass(frozen=True)
class MemoryQuery:
    """Validated arguments of one call."""

    query: str
    about: tuple[str, ...] = ()
    types: tuple[str, ...] | None = None
    as_of: datetime | None = None
    after: datetime | None = None
    before: datetime | None = None
    top_k: int = DEFAULT_TOP_K
    budget_tokens: int = DEFAULT_BUDGET_TOKENS
    threshold: float | None = None

    @property
    def narrowed(self) -> bool:
        """Whether the call narrows by fields only facts have (members, types, times)."""
        return bool(self.about) or self.types is not None or bool(self.after or self.before)

    def filters(self) -> dict[str, Any]:
        """The call's filters, for traces and the reply's record."""
        out: dict[str, Any] = {"top_k": self.top_k, "budget_tokens": self.budget_tokens}
        if self.about:
            out["about"] = list(self.about)
        if self.types is not None:
            out["types"] = list(self.types)
        for name in ("as_of", "after", "before"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value.isoformat()
        if self.threshold is not None:
            out["threshold"] = self.threshold
        return out


def _when(name: str, value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be an ISO date or time such as 2026-05-01, not {value!r}")
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(
            f"{name} must be an ISO date or time such as 2026-05-01, not {value[:40]!r}"
        ) from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _bounded_int(name: str, value: Any, lo: int, hi: int, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise InvalidInput(f"{name} must be a whole number from {lo} to {hi}")
    if not lo <= int(value) <= hi:
        raise InvalidInput(f"{name} must be from {lo} to {hi}, not {int(value)}")
    return int(value)


def _names(name: str, value: Any) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise InvalidInput(f"{name} must be a list of strings")
    return [v.strip() for v in items if v.strip()]


def parse_arguments(raw: str | Mapping[str, Any]) -> MemoryQuery:
    """A call's arguments (a JSON object, or a bare query string for the
    directive); ``InvalidInput`` says what is wrong, for the model to read."""
    if isinstance(raw, str):
        text = raw.strip()
        if text.startswith("{"):
            try:
                loaded = json.loads(text)
            except ValueError:
                raise InvalidInput("arguments are not valid JSON") from None
            if not isinstance(loaded, dict):
                raise InvalidInput("arguments must be a JSON object")
            args: Mapping[str, Any] = loaded
        else:
            args = {"query": text}
    else:
        args = raw
    unknown = sorted(k for k in args if k not in _PARAMETERS)
    if unknown:
        raise InvalidInput(
            f"unknown parameter(s) {', '.join(unknown[:5])}; known: {', '.join(_PARAMETERS)}"
        )
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("query is required: a few words saying what to look for")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidInput(f"query is too long ({len(query)} characters; at most 220)")
    about = _names("about", args.get("about"))
    if len(about) > MAX_ABOUT:
        raise InvalidInput(f"about names at most {MAX_ABOUT} members")
    types_raw = args.get("types")
    types = None if types_raw is None else tuple(sorted(parse_types(_names("types", types_raw))))
    if types is not None and not types:
        types = None
    threshold = args.get("threshold")
    if threshold is not None and (
        isinstance(threshold, bool)
        or not isinstance(threshold, int | float)
        or not 0 <= threshold <= 1
    ):
        raise InvalidInput("threshold must be a number from 0 to 1")
    q = MemoryQuery(
        query=" ".join(query.split()),
        about=tuple(about),
        types=types,
        as_of=_when("as_of", args.get("as_of")),
        after=_when("after", args.get("after")),
        before=_when("before", args.get("before")),
        top_k=_bounded_int("top_k", args.get("top_k"), 1, MAX_TOP_K, DEFAULT_TOP_K),
        budget_tokens=_bounded_int(
            "budget_tokens",
            args.get("budget_tokens"),
            MIN_BUDGET_TOKENS,
            MAX_BUDGET_TOKENS,
            DEFAULT_BUDGET_TOKENS,
        ),
        threshold=None if threshold is None else float(threshold),
    )
    if q.after is not None and q.before is not None and q.after >= q.before:
        raise InvalidInput("after must be earlier than before")
    return q


@dataclass(frozen=True)
class QueryScope:
    """Where a reply's calls search: its guild and channel, what its audience may
    read, and the consumers whose allowlists bind (the tool's, and the reply's)."""

    guild_id: str
    channel_id: str | None
    visible_channels: frozenset[str]
    consumers: tuple[str, ...] = ("tool", "replies")
    # The member the reply answers: what ``about: "me"`` means.
    author_id: str | None = None


@dataclass(frozen=True)
class QueryCall:
    """One call as traced: how it came (``tool`` or ``directive``), its query
    and filters, the hits (and their ids) or the error, and what the model read."""

    via: str
    query: str | None
    filters: Mapping[str, Any] = field(default_factory=dict)
    hits: tuple[Hit, ...] = ()
    error: str | None = None
    result: str = ""
    first: int = 1  # the [M#] number of its first hit

    def citation(self, number: int) -> Hit | None:
        """The hit the model cites as ``[M<number>]``, if this call returned it."""
        i = number - self.first
        return self.hits[i] if 0 <= i < len(self.hits) else None

    @property
    def hit_ids(self) -> list[str]:
        return [h.id for h in self.hits]

    def record(self) -> dict[str, Any]:
        """The call for the reply's action-log row (no memory text)."""
        return {
            "via": self.via,
            "query": self.query,
            "filters": dict(self.filters),
            "hits": len(self.hits),
            "hit_ids": self.hit_ids,
            "error": self.error,
        }


async def _subjects(
    memory: Memory, guild_id: str, about: Sequence[str], author_id: str | None
) -> list[str]:
    out: list[str] = []
    for name in about:
        if name.lower() == "lore":
            out.append(LORE_SUBJECT)
            continue
        if name.lower() in SELF_NAMES:
            if author_id is None:
                raise InvalidInput('"me" names nobody here: give a member\'s name')
            out.append(author_id)
            continue
        found = await memory.retriever.members_named(guild_id, name)
        if not found:
            raise InvalidInput(f"no member of this server is called {name[:40]!r}")
        out.extend(sorted(found))
    return out


def render_results(
    query: str,
    hits: Sequence[Hit],
    budget_tokens: int,
    render: Callable[[Hit], str],
    start: int = 1,
) -> tuple[str, int]:
    """``[M#]`` bullets from ``[M<start>]``, best first, as many as fit in
    ``budget_tokens``; the text and how many bullets it holds."""
    if not hits:
        return (
            f"Memory lookup for {json.dumps(query, ensure_ascii=False)}: no durable match. "
            "Nothing in the server's long-term memory matched; say so if it matters, and do "
            "not make anything up.",
            0,
        )
    head = f"Memory lookup results for {json.dumps(query, ensure_ascii=False)}:"
    lines = [head]
    used = estimate_tokens(head)
    shown = 0
    for i, h in enumerate(hits, start=start):
        line = f"[M{i}] {render(h)}"
        cost = estimate_tokens(line)
        if used + cost > budget_tokens:
            break
        lines.append(line)
        used += cost
        shown += 1
    if shown < len(hits):
        lines.append(f"({len(hits) - shown} more left out to stay within {budget_tokens} tokens)")
    return "\n".join(lines), shown


async def run_query(
    memory: Memory,
    scope: QueryScope,
    raw: str | Mapping[str, Any],
    *,
    via: str,
    render: Callable[[Hit], str],
    start: int = 1,
) -> QueryCall:
    """Validate and run one call, its bullets numbered from ``[M<start>]``;
    errors (bad arguments, a type outside the allowlists) become the call's
    result, never an exception."""
    try:
        q = parse_arguments(raw)
        subjects = await _subjects(memory, scope.guild_id, q.about, scope.author_id)
        hits = await memory.search(
            scope.guild_id,
            q.query,
            channel_id=scope.channel_id,
            limit=q.top_k,
            scope="facts" if q.narrowed else DEFAULT_SEARCH_SCOPE,
            visible_channels=set(scope.visible_channels),
            as_of=q.as_of,
            consumer=scope.consumers,
            types=q.types,
            subjects=subjects or None,
            after=q.after,
            before=q.before,
        )
    except InvalidInput as exc:
        query = raw.get("query") if isinstance(raw, Mapping) else raw
        log.info("memory_query refused: %s", exc)
        return QueryCall(
            via=via,
            query=str(query)[:MAX_QUERY_CHARS] if query is not None else None,
            error=str(exc),
            result=f"memory_query error: {exc}. Fix the arguments, or answer without it.",
        )
    if q.threshold is not None:
        hits = [h for h in hits if h.score >= q.threshold]
    text, shown = render_results(q.query, hits, q.budget_tokens, render, start)
    kept = tuple(hits[:shown])
    log.info(
        "memory_query via %s: %r %s -> %d hits %s",
        via,
        q.query,
        q.filters(),
        len(kept),
        [h.id for h in kept],
    )
    return QueryCall(
        via=via, query=q.query, filters=q.filters(), hits=kept, result=text, first=start
    )
