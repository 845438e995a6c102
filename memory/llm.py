"""The narrow boundary to OpenAI-compatible chat endpoints.

Everything that talks to a chat model goes through ``chat_completion``: one
place that sets the response format, maps every transport failure (HTTP
status, timeout, connection, a body that is not JSON, a response without
content) to one typed error, and falls back gracefully on servers that do
not support ``response_format`` (older llama.cpp, LM Studio with
``json_object``). ``parse_json_object`` is the one tolerant parser of model
output, shared by the bot's replies and the LLM extractor.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import openai

from memory.config import LLMConfig
from memory.errors import ConfigError, GuildloreError, LLMError, ToolsRejected

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Local servers (Ollama, llama.cpp, vLLM) ignore the key, but the client
# insists on one; passing it explicitly also stops the client reading the
# environment, which the engine never does.
PLACEHOLDER_API_KEY = "not-needed"

_FENCE = re.compile(r"```[ \t]*(?:json5?|javascript|js)?[ \t]*\r?\n?(.*?)```", re.DOTALL | re.I)
# Reasoning models served locally often think out loud before answering.
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


def parse_json_object(text: str | None) -> dict[str, Any] | None:
    """Parse a JSON object out of model output, tolerantly.

    Tries, in order: the whole text; each fenced code block; the span from
    the first ``{`` to the last ``}``. Returns None if none yields an object
    (a JSON array or scalar is not an object).
    """
    if not text or not isinstance(text, str):
        return None
    value = _THINK.sub("", text).strip().lstrip("\ufeff")
    candidates = [value]
    candidates.extend(m.group(1).strip() for m in _FENCE.finditer(value))
    start, end = value.find("{"), value.rfind("}")
    if 0 <= start < end:
        candidates.append(value[start : end + 1])
    for cand in candidates:
        if not cand:
            continue
        try:
            parsed = json.loads(cand)
        except (ValueError, RecursionError):
            continue
        if isinstance(parsed, dict):
            return parsed
    return None


def make_openai_client(cfg: LLMConfig) -> openai.AsyncOpenAI:
    """An ``AsyncOpenAI`` for the configured endpoint; raises ConfigError if none."""
    if not cfg.enabled:
        raise ConfigError("no LLM endpoint configured (set a base URL or an API key)")
    return openai.AsyncOpenAI(
        api_key=cfg.api_key or PLACEHOLDER_API_KEY,
        base_url=cfg.base_url or DEFAULT_BASE_URL,
        timeout=cfg.timeout_s,
        max_retries=cfg.max_retries,
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {exc.message}"
    if isinstance(exc, openai.APITimeoutError):
        return "request timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"connection failed: {exc.__cause__ or exc}"
    if isinstance(exc, ValueError):
        return f"response body is not valid JSON: {exc}"
    return f"{type(exc).__name__}: {exc}"


def _response_format_unsupported(exc: openai.APIStatusError) -> bool:
    # Servers without structured output answer 400/422 naming the field; a
    # 400 for any other reason must still surface as an error.
    return exc.status_code in (400, 422) and "response_format" in str(exc.message).lower()


# Client errors an endpoint without function calling answers a request with tools.
_TOOLS_REJECTED_STATUS = (400, 404, 422, 501)


@dataclass(frozen=True)
class ToolCall:
    """A function call the model asked for: its id, name and JSON arguments (as sent)."""

    id: str
    name: str
    arguments: str

    def as_message_part(self) -> dict[str, Any]:
        """The call as it goes back in the assistant turn of the next request."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class Completion:
    """A chat completion's text and the token counts the endpoint reported
    (None where it reported none, as some local servers do), and the tool
    calls it asked for (then ``text`` may be empty)."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tool_calls: tuple[ToolCall, ...] = ()


def _tool_calls(message: Any) -> tuple[ToolCall, ...]:
    out: list[ToolCall] = []
    for i, call in enumerate(getattr(message, "tool_calls", None) or ()):
        fn = getattr(call, "function", None)
        name = getattr(fn, "name", None)
        if not isinstance(name, str) or not name:
            continue
        args = getattr(fn, "arguments", None)
        ident = getattr(call, "id", None)
        out.append(
            ToolCall(
                ident if isinstance(ident, str) and ident else f"call_{i}",
                name,
                args if isinstance(args, str) else "{}",
            )
        )
    return tuple(out)


@dataclass
class TokenTally:
    """The tokens chat endpoints reported for the calls made inside
    ``counting_tokens``; ``unreported``: calls whose endpoint gave no counts."""

    prompt: int = 0
    completion: int = 0
    calls: int = 0
    unreported: int = 0

    def add(self, prompt: int | None, completion: int | None) -> None:
        self.calls += 1
        if prompt is None and completion is None:
            self.unreported += 1
        self.prompt += prompt or 0
        self.completion += completion or 0


# The tallies open in this task (and the tasks it starts: they copy the
# context, and so share the tally objects).
_TALLIES: ContextVar[tuple[TokenTally, ...]] = ContextVar("guildlore_token_tallies", default=())


@contextlib.contextmanager
def counting_tokens() -> Iterator[TokenTally]:
    """Add up the tokens of every ``chat_completion`` awaited inside the
    block, however deep: an extraction call, a batch's decision calls. Blocks
    nest; each sees the calls made inside it."""
    tally = TokenTally()
    token = _TALLIES.set((*_TALLIES.get(), tally))
    try:
        yield tally
    finally:
        _TALLIES.reset(token)


def _usage_count(usage: Any, name: str) -> int | None:
    value = getattr(usage, name, None) if usage is not None else None
    return value if isinstance(value, int) and value >= 0 else None


async def chat_completion(
    client: openai.AsyncOpenAI,
    *,
    model: str,
    messages: list[dict[str, Any]],
    temperature: float,
    response_format: dict[str, Any] | None = None,
    timeout_s: float | None = None,
    max_tokens: int | None = None,
    error: type[GuildloreError] = LLMError,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: str | None = None,
) -> Completion:
    """One chat completion: the reply text, the token counts the endpoint
    reported and the tool calls the model asked for; raises ``error`` with
    the cause.

    If the server rejects ``response_format`` it is retried once without it
    (the prompts ask for JSON anyway and the parser is tolerant). A client
    error to a request that offers ``tools`` raises ``ToolsRejected``: the
    caller knows whether the model has handled tools before.
    """
    kwargs: dict[str, Any] = {"model": model, "messages": messages, "temperature": temperature}
    if timeout_s is not None:
        kwargs["timeout"] = timeout_s
    if max_tokens is not None:
        kwargs["max_tokens"] = max_tokens
    if response_format is not None:
        kwargs["response_format"] = response_format
    if tools:
        kwargs["tools"] = tools
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
    started = time.monotonic()
    try:
        try:
            completion = await client.chat.completions.create(**kwargs)
        except openai.APIStatusError as exc:
            if response_format is None or not _response_format_unsupported(exc):
                raise
            log.info("model %s rejected response_format; retrying without it", model)
            kwargs.pop("response_format")
            completion = await client.chat.completions.create(**kwargs)
    except openai.APIStatusError as exc:
        if tools and exc.status_code in _TOOLS_REJECTED_STATUS:
            raise ToolsRejected(
                f"chat completion with tools failed ({model}): {_describe(exc)}"
            ) from exc
        raise error(f"chat completion failed ({model}): {_describe(exc)}") from exc
    except (openai.OpenAIError, ValueError) as exc:
        # ValueError: a 200 whose body is not JSON surfaces as JSONDecodeError.
        raise error(f"chat completion failed ({model}): {_describe(exc)}") from exc
    elapsed = time.monotonic() - started
    choices = getattr(completion, "choices", None)
    if not choices:
        raise error(f"chat completion from {model} has no choices")
    message = choices[0].message
    content = getattr(message, "content", None)
    calls = _tool_calls(message) if tools else ()
    if calls and not isinstance(content, str):
        content = ""
    if not isinstance(content, str):
        refusal = getattr(message, "refusal", None)
        reason = f"refused: {refusal}" if refusal else "no text content"
        raise error(f"chat completion from {model}: {reason}")
    log.debug("chat completion %s: %d chars in %.3fs", model, len(content), elapsed)
    usage = getattr(completion, "usage", None)
    done = Completion(
        content,
        _usage_count(usage, "prompt_tokens"),
        _usage_count(usage, "completion_tokens"),
        calls,
    )
    for tally in _TALLIES.get():
        tally.add(done.prompt_tokens, done.completion_tokens)
    return done


_JSON_NUDGE = {"role": "system", "content": "Respond with a single JSON object."}


class ChatModel:
    """The chat model the bot replies with."""

    def __init__(
        self, client: openai.AsyncOpenAI, model: str, *, timeout_s: float | None = None
    ) -> None:
        self.client = client
        self.model = model
        self.timeout_s = timeout_s
        # Whether this endpoint's model takes tools: True once it handled
        # them, False once it proved it cannot, None before (``memory.reply.tools``).
        # An endpoint does not change what it supports while the process runs.
        self.tools: bool | None = None

    @classmethod
    def from_config(cls, cfg: LLMConfig) -> ChatModel:
        return cls(make_openai_client(cfg), cfg.chat_model, timeout_s=cfg.timeout_s)

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        json_mode: bool = True,
        temperature: float = 0.7,
        max_tokens: int | None = None,
    ) -> str:
        """The model's reply text; raises ``LLMError`` on any transport failure."""
        done = await self.completion(
            messages, json_mode=json_mode, temperature=temperature, max_tokens=max_tokens
        )
        return done.text

    async def completion(
        self,
        messages: list[dict[str, Any]],
        *,
        json_mode: bool = True,
        temperature: float = 0.7,
        max_tokens: int | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> Completion:
        """The model's reply with its token counts (and tool calls when ``tools``
        were offered); raises ``LLMError`` on any transport failure.

        With ``json_mode`` the request asks for a JSON object. OpenAI refuses
        JSON mode unless the word "JSON" appears in the messages, so a short
        system line saying so is added when the caller's prompt lacks it.
        """
        msgs = list(messages)
        response_format: dict[str, Any] | None = None
        if json_mode:
            response_format = {"type": "json_object"}
            if not any("json" in str(m.get("content", "")).lower() for m in msgs):
                msgs.insert(0, _JSON_NUDGE)
        return await chat_completion(
            self.client,
            model=self.model,
            messages=msgs,
            temperature=temperature,
            response_format=response_format,
            timeout_s=self.timeout_s,
            max_tokens=max_tokens,
            tools=tools,
            tool_choice=tool_choice,
        )

    async def complete_json(
        self, messages: list[dict[str, Any]], *, temperature: float = 0.7
    ) -> dict[str, Any] | None:
        """``complete`` in JSON mode, parsed; None when the reply is not a JSON object."""
        return parse_json_object(await self.complete(messages, temperature=temperature))
