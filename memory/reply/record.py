"""What a reply's model saw, kept for the operator's "show context" page.

One bounded JSON per reply: the first request (the system prompt with the
memory sections, the window's turns, the member's message), the tool the
model was offered (or the directive mode), and each ``memory_query`` call
with its filters, hit ids and the text the model read back. Texts are cut to
fixed lengths and the window to its newest turns, so a context stays within
``MAX_CONTEXT_CHARS``. It names the messages, facts and member it holds
(refs), so erasing any of them erases it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from memory.reply.memory_query import TOOL_SPEC

if TYPE_CHECKING:
    from memory.engine import Memory
    from memory.reply.conversation import ReplyRequest, ReplyResult

MAX_SYSTEM_CHARS = 16_000
MAX_TURN_CHARS = 1_000
MAX_RESULT_CHARS = 4_000
MAX_CONTEXT_CHARS = 64_000


def _cut(text: Any, limit: int) -> str:
    s = "" if text is None else str(text)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def reply_context(request: ReplyRequest, result: ReplyResult) -> tuple[dict[str, Any], list[str]]:
    """The context of one reply, and its refs."""
    prompt = list(result.prompt)
    system = prompt[0]["content"] if prompt and prompt[0].get("role") == "system" else ""
    turns = [
        {"role": str(m.get("role")), "content": _cut(m.get("content"), MAX_TURN_CHARS)}
        for m in prompt[1:]
    ]
    context: dict[str, Any] = {
        "model": result.model,
        "mode": result.mode,
        "system": _cut(system, MAX_SYSTEM_CHARS),
        "turns": turns,
        "window_messages": len(result.window),
        "tool": TOOL_SPEC if result.offered_tool else None,
        "calls": [{**c.record(), "result": _cut(c.result, MAX_RESULT_CHARS)} for c in result.calls],
        "text": _cut(result.text, MAX_TURN_CHARS * 2),
    }
    # The newest turns matter most: drop the oldest until the whole fits.
    while len(json.dumps(context)) > MAX_CONTEXT_CHARS and len(context["turns"]) > 1:
        context["turns"].pop(0)
    refs = {f"u:{request.author_id}", f"m:{request.message_id}"}
    refs.update(f"m:{t.message_id}" for t in result.window)
    for h in result.retrieved:
        refs.add(f"f:{h.id}" if h.kind == "fact" else f"m:{h.id}")
        if h.kind == "message":
            refs.add(f"u:{h.subject}")
    return context, sorted(refs)


async def record_reply_context(
    memory: Memory, request: ReplyRequest, result: ReplyResult, reply_id: str | None
) -> int:
    """Keep ``result``'s context for the reply to ``request``; the context's id."""
    context, refs = reply_context(request, result)
    return await memory.traces.record_context(
        request.guild_id, request.channel_id, request.message_id, reply_id, context, refs
    )
