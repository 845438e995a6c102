"""What the daily series count: their names, what each means, and which
request kinds feed which series. Pure values; the SQL is in
``memory.store.usage`` and the buffering in ``memory.usage.recorder``.

Days are UTC dates. What happened in the guild is counted on the day it was
written (a message's own time, a learned fact's source message), so an
import of old history shows on its own days; what the bot did (searches,
extraction and reply calls, errors, tokens, archiving) is counted on the
day it did it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RequestKind = Literal["reply", "search", "extraction"]
Outcome = Literal["ok", "empty", "error"]
REQUEST_KINDS: tuple[RequestKind, ...] = ("reply", "search", "extraction")
REQUEST_OUTCOMES: tuple[Outcome, ...] = ("ok", "empty", "error")


@dataclass(frozen=True)
class SeriesSpec:
    name: str
    help: str
    # "count" adds events; "ms" adds milliseconds (divided by a count, it is a mean).
    unit: Literal["count", "ms", "tokens"] = "count"


USAGE_SERIES: tuple[SeriesSpec, ...] = (
    SeriesSpec("messages", "Messages stored, on the day they were written."),
    SeriesSpec("facts_added", "Facts added, on the day of the message they came from."),
    SeriesSpec("facts_superseded", "Facts a newer one contradicted (closed, kept for history)."),
    SeriesSpec("facts_archived", "Facts archived: by budgets, expiry, merges or an operator."),
    SeriesSpec(
        "searches", "Searches: the dashboard, the CLI, slash commands, the memory of replies."
    ),
    SeriesSpec("search_ms", "Time spent searching.", "ms"),
    SeriesSpec("search_errors", "Searches that failed."),
    SeriesSpec("extractions", "Fact extraction calls (one per batch of messages)."),
    SeriesSpec("extraction_ms", "Time spent in extraction calls.", "ms"),
    SeriesSpec("extraction_errors", "Extraction calls that failed (their messages are retried)."),
    SeriesSpec("replies", "Replies composed."),
    SeriesSpec("reply_ms", "Time spent composing replies.", "ms"),
    SeriesSpec("reply_errors", "Replies that failed (the member got an apology)."),
    SeriesSpec("messages_failed", "Messages whose processing failed for good (guildlore retry)."),
    SeriesSpec("embedding_errors", "Embedding calls that failed."),
    SeriesSpec("tokens_prompt", "Prompt tokens the chat model reported.", "tokens"),
    SeriesSpec("tokens_completion", "Completion tokens the chat model reported.", "tokens"),
)
USAGE_SERIES_BY_NAME = {s.name: s for s in USAGE_SERIES}
# The series that add up to a day's errors.
ERROR_SERIES = (
    "extraction_errors",
    "reply_errors",
    "search_errors",
    "messages_failed",
    "embedding_errors",
)
# A request row's kind → (its count, its time, its errors).
REQUEST_SERIES: dict[str, tuple[str, str, str]] = {
    "search": ("searches", "search_ms", "search_errors"),
    "extraction": ("extractions", "extraction_ms", "extraction_errors"),
    "reply": ("replies", "reply_ms", "reply_errors"),
}
