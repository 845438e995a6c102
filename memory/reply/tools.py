"""A reply's exchange with the chat model: its answer, and its memory lookups.

The model answers with ``{"text", "memoryLine", "memoryLookupQuery"}`` (output
that is not JSON is used as plain text) and may look memory up with
``memory_query`` (memory/reply/memory_query.py), at most ``MAX_CALLS`` times per
reply; then it must answer:

- **tool mode**: the request offers ``memory_query`` as an OpenAI tool; each
  call is answered with a ``tool`` message holding its ``[M#]`` bullets, and
  once the calls are used up the next request sets ``tool_choice: "none"``;
- **directive mode**, for endpoints without function calling: the system
  prompt describes ``memoryLookupQuery`` (a query, or an object with the
  tool's parameters); the bullets come back as a user turn.

Which mode a model gets is learned once per chat model and kept on it for
the process (``ChatModel.tools``): a model starts in tool mode; if the endpoint
answers the first request with tools with a client error and the same
request without tools succeeds, or the model writes the call into its text
instead of calling (it ignores tools), it is switched to directive mode for
good. A model that has handled tools once keeps tool mode: a later client
error is that reply's failure.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from memory.errors import LLMError, MalformedReply, ToolsRejected
from memory.llm import ChatModel, Completion, parse_json_object
from memory.models import Hit
from memory.reply.memory_query import MAX_QUERY_CHARS, TOOL_NAME, TOOL_SPEC, QueryCall, QueryScope
from memory.reply.memory_query import run_query as run_memory_query

if TYPE_CHECKING:
    from memory.engine import Memory

log = logging.getLogger(__name__)

MAX_CALLS = 2
# A reply stores at most this many lore lines (one per model answer).
MAX_LINES = 2

_LINE_FIELD = (
    '"memoryLine": <null, or one short durable fact about this server that the member '
    "explicitly asked you to remember, in their own words>"
)
TOOL_REPLY_FORMAT = (
    "If the conversation and the memory above are not enough, call the memory_query tool "
    f"(at most {MAX_CALLS} calls). Then answer with one JSON object and nothing else:\n"
    '{"text": "<your reply to the member>", ' + _LINE_FIELD + "}"
)
REPLY_FORMAT = (
    "Answer with one JSON object and nothing else:\n"
    '{"text": "<your reply to the member>", ' + _LINE_FIELD + ", "
    '"memoryLookupQuery": <null, or a short search query (at most 220 characters) when you '
    "need to look something up in the server's long-term memory before you can answer; or "
    'an object {"query": ..., "about": [member names or "lore"], "types": [...], '
    '"after": "<ISO date>", "before": "<ISO date>", "top_k": <1-10>}>}'
)
FOLLOW_UP_MORE = (
    "You may ask for one more lookup with memoryLookupQuery if you still need it; otherwise "
    'answer with one JSON object and nothing else, {"text": "<your reply>", '
    '"memoryLine": <null or a line to remember>, "memoryLookupQuery": null}'
)
FOLLOW_UP_FORMAT = (
    "Lookups are now disabled: answer with one JSON object and nothing else, "
    '{"text": "<your reply>", "memoryLine": <null or a line to remember>, '
    '"memoryLookupQuery": null}'
)
LIMIT_REACHED = (
    f"memory_query error: the limit of {MAX_CALLS} calls per reply is reached. "
    "Answer with what you have."
)

LookupMode = Literal["tool", "directive"]


# -- the model's answer ----------------------------------------------------------------------


@dataclass(frozen=True)
class ModelReply:
    """One answer: its text, a line to remember, and a lookup it asks for (a
    query string, or the arguments of a ``memory_query`` call)."""

    text: str
    memory_line: str | None = None
    lookup: str | dict[str, Any] | None = None
    structured: bool = True


_TEXT_FIELD = re.compile(r'"text"\s*:\s*"((?:[^"\\]|\\.)*)"', re.DOTALL)


def _str_field(obj: dict[str, Any], *names: str) -> str | None:
    for name in names:
        value = obj.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _lookup_of(obj: dict[str, Any]) -> str | dict[str, Any] | None:
    for name in ("memoryLookupQuery", "memory_lookup_query"):
        value = obj.get(name)
        if isinstance(value, dict) and value:
            return value
        if isinstance(value, str) and value.strip():
            return value.strip()[:MAX_QUERY_CHARS]
    # A model that ignores tools often writes the call out as text.
    if obj.get("name") == TOOL_NAME:
        args = obj.get("arguments", obj.get("parameters"))
        if isinstance(args, str):
            args = parse_json_object(args)
        if isinstance(args, dict):
            return args
    return None


def parse_reply(raw: str) -> ModelReply:
    """The model's JSON reply, or its output as plain text; MalformedReply if unusable."""
    obj = parse_json_object(raw)
    if obj is None:
        stripped = (raw or "").strip()
        if stripped.startswith("{"):
            # Truncated or broken JSON: salvage the text field rather than post braces.
            m = _TEXT_FIELD.search(stripped)
            if m is None:
                raise MalformedReply(f"reply is broken JSON: {stripped[:120]!r}")
            try:
                stripped = json.loads(f'"{m.group(1)}"').strip()
            except ValueError as exc:
                raise MalformedReply("reply text field is not a valid string") from exc
        if not stripped:
            raise MalformedReply("reply is empty")
        return ModelReply(text=stripped, structured=False)
    text = _str_field(obj, "text", "reply", "content", "message", "answer") or ""
    line = _str_field(obj, "memoryLine", "memory_line")
    lookup = _lookup_of(obj)
    if not text and lookup is None:
        raise MalformedReply(f"reply has no text: {raw[:120]!r}")
    return ModelReply(text=text, memory_line=line, lookup=lookup)


# -- which mode a model gets -------------------------------------------------------------------


def lookup_mode(chat: ChatModel) -> LookupMode:
    """Tool calls, unless the model proved it cannot take them (``ChatModel.tools``)."""
    return "directive" if chat.tools is False else "tool"


def learn_tools(chat: ChatModel, supported: bool) -> None:
    if chat.tools != supported:
        log.info("model %s: %s", chat.model, "tools" if supported else "JSON directive")
    chat.tools = supported


# -- one exchange ------------------------------------------------------------------------------


@dataclass
class Exchange:
    """What the model answered over a reply's requests."""

    text: str = ""
    lines: list[str] = field(default_factory=list)
    calls: list[QueryCall] = field(default_factory=list)
    mode: LookupMode = "tool"
    # The last request told the model not to call (its calls were used up).
    forced: bool = False
    # The first request the endpoint answered, and whether it offered the tool.
    first: list[dict[str, Any]] = field(default_factory=list)
    offered_tool: bool = False
    requests: int = 0
    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0

    def count(self, done: Completion) -> None:
        self.requests += 1
        self.prompt_tokens = (
            None
            if self.prompt_tokens is None or done.prompt_tokens is None
            else self.prompt_tokens + done.prompt_tokens
        )
        self.completion_tokens = (
            None
            if self.completion_tokens is None or done.completion_tokens is None
            else self.completion_tokens + done.completion_tokens
        )

    def take(self, reply: ModelReply) -> None:
        if reply.text:
            self.text = reply.text
        if reply.memory_line and reply.memory_line not in self.lines:
            self.lines.append(reply.memory_line)

    @property
    def hits(self) -> list[Hit]:
        return [h for c in self.calls for h in c.hits]


def with_format(messages: list[dict[str, Any]], old: str, new: str) -> list[dict[str, Any]]:
    """``messages`` with the system prompt's answer format ``old`` swapped for ``new``."""
    system = dict(messages[0])
    system["content"] = str(system["content"]).replace(old, new)
    return [system, *messages[1:]]


class ReplyExchange:
    """Asks the model for one reply, running the lookups it asks for."""

    def __init__(
        self,
        memory: Memory,
        chat: ChatModel,
        scope: QueryScope,
        *,
        temperature: float,
        max_tokens: int | None,
        render: Callable[[Hit], str],
    ) -> None:
        self.memory = memory
        self.chat = chat
        self.scope = scope
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.render = render
        self.turns: list[dict[str, Any]] = []

    async def run(self, messages: list[dict[str, Any]], mode: LookupMode) -> Exchange:
        """``messages``: the first request, its system prompt ending with the
        answer format of ``mode``. LLMError when no answer text came."""
        out = Exchange(mode=mode)
        self.turns = list(messages)
        if mode == "tool":
            try:
                done = await self._ask(out, tools=True)
            except ToolsRejected:
                if self.chat.tools is not None:
                    raise
                out.mode = "directive"
                self.turns = with_format(self.turns, TOOL_REPLY_FORMAT, REPLY_FORMAT)
                done = await self._ask(out, tools=False)
                learn_tools(self.chat, False)
            else:
                out.offered_tool = True
                if not done.tool_calls and _directive_in(done.text):
                    # The endpoint took the tools, the model wrote the call as text.
                    learn_tools(self.chat, False)
                    out.mode = "directive"
                else:
                    learn_tools(self.chat, True)
        else:
            done = await self._ask(out, tools=False)
        out.first = list(self.turns)
        step: Completion | None = done
        while step is not None:
            if step.tool_calls and out.mode == "tool":
                if out.forced:
                    # Told not to call, it called anyway: take what text it wrote.
                    self._take_text(out, step)
                    break
                await self._answer_calls(out, step)
                step = await self._follow_up(out, tools=True)
                continue
            reply = parse_reply(step.text)
            out.take(reply)
            if reply.lookup is None or len(out.calls) >= MAX_CALLS:
                break
            call = await self._call(reply.lookup, via="directive", out=out)
            out.calls.append(call)
            more = FOLLOW_UP_MORE if len(out.calls) < MAX_CALLS else FOLLOW_UP_FORMAT
            self.turns += [
                {"role": "assistant", "content": step.text},
                {"role": "user", "content": f"{call.result}\n\n{more}"},
            ]
            step = await self._follow_up(out, tools=out.mode == "tool")
        if not out.text:
            raise MalformedReply("no reply text after the memory lookup")
        return out

    async def _ask(self, out: Exchange, *, tools: bool) -> Completion:
        choice = None
        if tools:
            choice = "auto" if len(out.calls) < MAX_CALLS else "none"
            out.forced = choice == "none"
        done = await self.chat.completion(
            self.turns,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            tools=[TOOL_SPEC] if tools else None,
            tool_choice=choice,
        )
        out.count(done)
        return done

    async def _follow_up(self, out: Exchange, *, tools: bool) -> Completion | None:
        """The next request after lookups; None when it failed but an earlier
        answer's text stands."""
        try:
            return await self._ask(out, tools=tools)
        except LLMError:
            if not out.text:
                raise
            log.info("the follow-up failed; the first answer stands")
            return None

    async def _answer_calls(self, out: Exchange, done: Completion) -> None:
        """The assistant turn with its calls, and one ``tool`` message per call."""
        self._take_text(out, done)
        self.turns.append(
            {
                "role": "assistant",
                "content": done.text or None,
                "tool_calls": [c.as_message_part() for c in done.tool_calls],
            }
        )
        for tc in done.tool_calls:
            if tc.name != TOOL_NAME:
                result = f"error: there is no tool called {tc.name[:40]!r}; use {TOOL_NAME}."
            elif len(out.calls) >= MAX_CALLS:
                result = LIMIT_REACHED
            else:
                call = await self._call(tc.arguments, via="tool", out=out)
                out.calls.append(call)
                result = call.result
            self.turns.append({"role": "tool", "tool_call_id": tc.id, "content": result})

    @staticmethod
    def _take_text(out: Exchange, done: Completion) -> None:
        if not done.text:
            return
        try:
            out.take(parse_reply(done.text))
        except MalformedReply:
            pass  # text beside a call is often a remark, not the answer

    async def _call(self, raw: str | dict[str, Any], *, via: str, out: Exchange) -> QueryCall:
        # Numbered on from the reply's earlier calls: each [M#] names one memory.
        start = 1 + sum(len(c.hits) for c in out.calls)
        return await run_memory_query(
            self.memory, self.scope, raw, via=via, render=self.render, start=start
        )


def _directive_in(text: str) -> bool:
    obj = parse_json_object(text)
    return obj is not None and _lookup_of(obj) is not None
