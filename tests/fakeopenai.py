"""A real local HTTP server that speaks enough of the OpenAI API for our tests.

Tests talk to it through the real ``openai`` client, so request building,
response parsing, timeouts and error mapping are all exercised for real::

    async with FakeOpenAI() as fake:
        fake.script_chat('{"facts": []}', Fault.status(429))
        client = fake.client()
        ...

Endpoints: ``POST /v1/chat/completions``, ``POST /v1/embeddings``,
``POST /v1/audio/transcriptions`` and ``GET /v1/models``.

Order of answers for chat (and likewise transcriptions):
``fail_next`` faults → a random fault (chat only, with probability
``fault_rate``, drawn from ``random_faults`` by a seeded generator) → scripted
replies (FIFO; a write-decision request takes ``script_decisions``' replies,
every other chat request ``script_chat``'s) → ``chat_handler`` → default.
Every request is recorded *before* any fault is applied, so tests can count
attempts (e.g. client retries).

A scripted chat answer may also be ``ToolCalls`` (an assistant message
asking for function calls). It is answered as a call only when the request
offers ``tools`` and does not set ``tool_choice: "none"``; otherwise, like a
real model that cannot call, its ``content`` (or the default reply) is the
text. ``reject_tools = True`` answers every request that offers ``tools``
with a 400, like an endpoint without function calling. Requests are checked
the way OpenAI checks them: every ``tool`` message must answer a call of the
assistant turn before it, and every call must be answered.

Default chat reply: ``{"decisions": []}`` to a write-decision request,
``{"facts": []}`` (or ``{"results": []}`` for a batch
schema) when the system prompt mentions facts, otherwise the bot reply shape
``{"text": "ok", "memoryLine": null, "memoryLookupQuery": null}``.

Embeddings are deterministic: each token of the text (``memory.text.tokens``)
gets a unit vector seeded by a hash of the token, and the text's vector is
their normalised sum. Identical texts give identical vectors and texts that
share words get a positive cosine, which makes retrieval tests meaningful.
``embedding_mode = "text"`` seeds one vector from the whole text instead
(unrelated texts are then near-orthogonal).

``echo_facts_reply`` answers an extraction request the way a model might:
one grounded fact per message of three words or more; a write-decision
request (schema ``memory_decisions``) it answers with ``echo_decisions_reply``:
``add`` for every candidate.

Run it as a separate process (benchmarks, CLI tests)::

    python -m tests.fakeopenai --port 8011 --latency 0.05 --script script.json
    python -m tests.fakeopenai --echo-facts --fault-rate 0.3 --fault-seed 7
    python -m tests.fakeopenai --reject-tools   # an endpoint without function calling

The script file is ``{"chat": [...], "transcriptions": [...]}``; each entry
is a reply string or a fault object such as ``{"fault": "status", "code": 429}``,
``{"fault": "timeout", "seconds": 5}``, ``{"fault": "malformed"}`` or
``{"fault": "garbage", "text": "Sorry!"}``.
The process prints its base URL on the first stdout line once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import inspect
import json
import random
import re
import subprocess
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import aiohttp
import numpy as np
import openai
import pytest_asyncio
from aiohttp import web

from memory.text import tokens

Endpoint = Literal["chat", "embeddings", "transcriptions"]
ENDPOINTS: tuple[str, ...] = ("chat", "embeddings", "transcriptions")
DEFAULT_DIMENSIONS = 384

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    503: "server_error",
}


@dataclass(frozen=True)
class Fault:
    """An injectable failure for the next matching call."""

    kind: Literal["status", "timeout", "malformed", "garbage"]
    code: int = 500
    body: str | None = None
    seconds: float = 0.0
    text: str = "{not json"

    @staticmethod
    def status(code: int, body: str | None = None) -> Fault:
        """Answer with HTTP ``code``; ``body`` replaces the OpenAI-style error JSON."""
        return Fault(kind="status", code=code, body=body)

    @staticmethod
    def timeout(seconds: float) -> Fault:
        """Sleep ``seconds`` (longer than the client's timeout), then answer 504."""
        return Fault(kind="timeout", seconds=seconds)

    @staticmethod
    def malformed(text: str = "{not json") -> Fault:
        """Answer 200 ``application/json`` with a body that is not valid JSON."""
        return Fault(kind="malformed", text=text)

    @staticmethod
    def garbage(text: str = "Sorry, I cannot help with that.") -> Fault:
        """Answer a well-formed completion whose content is ``text`` (not the JSON asked for)."""
        return Fault(kind="garbage", text=text)

    @staticmethod
    def from_json(obj: dict[str, Any]) -> Fault:
        kind = obj.get("fault")
        if kind == "status":
            return Fault.status(int(obj.get("code", 500)), obj.get("body"))
        if kind == "timeout":
            return Fault.timeout(float(obj.get("seconds", 30.0)))
        if kind == "malformed":
            return Fault.malformed(str(obj.get("text", "{not json")))
        if kind == "garbage":
            return Fault.garbage(str(obj.get("text", "Sorry, I cannot help with that.")))
        raise ValueError(f"unknown fault {obj!r}")


@dataclass(frozen=True)
class ToolCalls:
    """A scripted assistant turn that calls functions: ``(name, arguments)``
    pairs (arguments as a dict, or a raw string sent as is), and an optional text."""

    calls: tuple[tuple[str, dict[str, Any] | str], ...]
    content: str | None = None

    @staticmethod
    def one(name: str, arguments: dict[str, Any] | str, content: str | None = None) -> ToolCalls:
        return ToolCalls(((name, arguments),), content)


@dataclass
class RecordedRequest:
    endpoint: str
    body: dict[str, Any]
    headers: dict[str, str]


ChatHandler = Callable[
    [dict[str, Any]], "str | Fault | ToolCalls | Awaitable[str | Fault | ToolCalls]"
]
TranscriptionHandler = Callable[[bytes, dict[str, Any]], "str | Fault | Awaitable[str | Fault]"]


@lru_cache(maxsize=65536)
def _seeded_unit(seed_text: str, dims: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(seed_text.encode("utf-8", "surrogatepass")).digest()[:8])
    vec = np.random.default_rng(seed).standard_normal(dims)
    return vec / np.linalg.norm(vec)


def fake_embedding(text: str, dims: int = DEFAULT_DIMENSIONS, mode: str = "tokens") -> list[float]:
    """The vector the fake server returns for ``text`` (exposed so tests can predict it)."""
    toks = tokens(text) if mode == "tokens" else []
    if not toks:
        vec = _seeded_unit("text:" + text, dims)
    else:
        vec = np.sum([_seeded_unit("tok:" + t, dims) for t in toks], axis=0)
        norm = float(np.linalg.norm(vec))
        vec = vec / norm if norm > 0 else _seeded_unit("text:" + text, dims)
    return [float(x) for x in vec.astype(np.float32)]


_BATCH_HEAD = re.compile(r"^Message (\d+) \(author: (.*)\):$")
_BLOCK = re.compile(r"<<<\n(.*?)\n>>>", re.DOTALL)


_CANDIDATE_HEAD = re.compile(r"^C(\d+) about ", re.MULTILINE)


DECISION_SCHEMA_NAME = "memory_decisions"


def _schema_name(body: dict[str, Any]) -> str | None:
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and isinstance(fmt.get("json_schema"), dict):
        name = fmt["json_schema"].get("name")
        return name if isinstance(name, str) else None
    return None


def echo_decisions_reply(body: dict[str, Any]) -> str:
    """A write-decision answer: ``add`` for every candidate of the request."""
    user = next((m["content"] for m in body["messages"] if m["role"] == "user"), "")
    return json.dumps(
        {
            "decisions": [
                {
                    "candidate": int(n),
                    "decision": "add",
                    "target": None,
                    "text": None,
                    "reason": "new",
                }
                for n in _CANDIDATE_HEAD.findall(user)
            ]
        }
    )


def echo_facts_reply(body: dict[str, Any]) -> str:
    """One grounded fact per message of three words or more ("<author> said
    <its first words>."), in the shape the extractor asked for: the batch
    schema or the single-message one. A write-decision request gets
    ``echo_decisions_reply``."""
    if _schema_name(body) == DECISION_SCHEMA_NAME:
        return echo_decisions_reply(body)
    user = next((m["content"] for m in body["messages"] if m["role"] == "user"), "")

    def fact(author: str, text: str) -> list[dict[str, Any]]:
        words = text.split()[:8]
        if len(words) < 3:
            return []
        said = " ".join(words).rstrip(".!?,;:")
        return [
            {"fact": f"{author} said {said}.", "type": "other", "confidence": 0.6, "evidence": None}
        ]

    if user.startswith("Author: "):  # one message
        author = user.split("\n", 1)[0][len("Author: ") :]
        block = _BLOCK.search(user)
        return json.dumps({"facts": fact(author, block.group(1) if block else "")})
    results = []
    for part in user.split("\n\n"):
        head, _, rest = part.partition("\n")
        m = _BATCH_HEAD.match(head)
        block = _BLOCK.search(rest)
        if m and block:
            facts = fact(m.group(2), block.group(1))
            if facts:
                results.append({"index": int(m.group(1)), "facts": facts})
    return json.dumps({"results": results})


def _json_error(status: int, message: str, *, code: str | None = None) -> web.Response:
    payload = {
        "error": {
            "message": message,
            "type": _ERROR_TYPES.get(status, "api_error"),
            "param": None,
            "code": code,
        }
    }
    return web.json_response(payload, status=status)


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _minimal_instance(schema: Any) -> Any:
    """The smallest value that satisfies a (simple) JSON schema."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = "null" if "null" in kind else (kind[0] if kind else None)
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: _minimal_instance(props.get(k)) for k in schema.get("required") or props}
    if kind == "array":
        return []
    if kind == "string":
        enum = schema.get("enum")
        return enum[0] if enum else ""
    if kind in ("number", "integer"):
        return 0
    if kind == "boolean":
        return False
    return None


def _schema_of(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        js = fmt.get("json_schema")
        if isinstance(js, dict) and isinstance(js.get("schema"), dict):
            return js["schema"]
    return None


def default_chat_reply(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    system = " ".join(
        _message_text(m) for m in messages if isinstance(m, dict) and m.get("role") == "system"
    )
    schema = _schema_of(body)
    props = (schema or {}).get("properties") or {}
    if "decisions" in props:
        # A write decision with no answer for any candidate: the rules decide.
        return json.dumps({"decisions": []})
    if "fact" in system.lower():
        if "results" in props:
            return json.dumps({"results": []})
        return json.dumps({"facts": []})
    if schema is not None and "text" not in props:
        return json.dumps(_minimal_instance(schema))
    return json.dumps({"text": "ok", "memoryLine": None, "memoryLookupQuery": None})


def _validate_response_format(body: dict[str, Any]) -> str | None:
    """The 400 message OpenAI would give for a bad ``response_format``, else None."""
    fmt = body.get("response_format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") not in ("text", "json_object", "json_schema"):
        return f"Invalid value for 'response_format': {fmt!r}"
    if fmt["type"] == "json_schema":
        js = fmt.get("json_schema")
        if not isinstance(js, dict) or not js.get("name") or not isinstance(js.get("schema"), dict):
            return "'response_format.json_schema' must have a 'name' and a 'schema' object"
    if fmt["type"] == "json_object":
        # The real API refuses JSON mode unless the word appears in the messages;
        # enforcing it here catches prompts that would fail in production.
        text = " ".join(_message_text(m) for m in body.get("messages") or [] if isinstance(m, dict))
        if "json" not in text.lower():
            return (
                "'messages' must contain the word 'json' in some form, to use "
                "'response_format' of type 'json_object'."
            )
    return None


def _validate_tool_turns(body: dict[str, Any]) -> str | None:
    """The 400 message OpenAI would give for badly paired tool calls, else None."""
    open_ids: set[str] = set()
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role == "tool":
            ident = m.get("tool_call_id")
            if ident not in open_ids:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    f"preceeding message with 'tool_calls' (tool_call_id {ident!r})."
                )
            open_ids.discard(ident)
            continue
        if open_ids:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. Missing: {sorted(open_ids)}"
            )
        if role == "assistant":
            for call in m.get("tool_calls") or []:
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    open_ids.add(call["id"])
    if open_ids:
        return f"tool calls without a response: {sorted(open_ids)}"
    return None


def _format_transcription(text: str, fields: dict[str, Any], fmt: str) -> web.Response:
    if fmt == "text":
        return web.Response(text=text, content_type="text/plain")
    if fmt in ("srt", "vtt"):
        stamp = "00:00:00,000 --> 00:00:01,000" if fmt == "srt" else "00:00:00.000 --> 00:00:01.000"
        head = "1\n" if fmt == "srt" else "WEBVTT\n\n"
        return web.Response(text=f"{head}{stamp}\n{text}\n", content_type="text/plain")
    if fmt == "verbose_json":
        payload = {
            "task": "transcribe",
            "language": fields.get("language") or "english",
            "duration": 1.0,
            "text": text,
            "segments": [
                {
                    "id": 0,
                    "seek": 0,
                    "start": 0.0,
                    "end": 1.0,
                    "text": text,
                    "tokens": [],
                    "temperature": 0.0,
                    "avg_logprob": -0.1,
                    "compression_ratio": 1.0,
                    "no_speech_prob": 0.0,
                }
            ]
            if text
            else [],
        }
        return web.json_response(payload)
    return web.json_response({"text": text})


@dataclass
class FakeOpenAI:
    """The fake server. ``await start()`` or use as ``async with``."""

    host: str = "127.0.0.1"
    port: int = 0
    latency_s: float = 0.0
    chat_handler: ChatHandler | None = None
    transcription_handler: TranscriptionHandler | None = None
    embedding_mode: Literal["tokens", "text"] = "tokens"
    # Answer every request that offers ``tools`` with a 400 (no function calling).
    reject_tools: bool = False
    # Chat only: the share of requests answered with one of ``random_faults``.
    fault_rate: float = 0.0
    fault_seed: int = 0
    random_faults: tuple[Fault, ...] = (
        Fault.status(500),
        Fault.status(429),
        Fault.timeout(30.0),
        Fault.malformed(),
        Fault.garbage(),
        Fault.garbage('{"results": "not a list"}'),
    )
    requests: list[RecordedRequest] = field(default_factory=list)
    # How many chat requests a random fault answered, by kind.
    random_fault_counts: dict[str, int] = field(default_factory=dict)
    # Highest number of requests served at the same time (bounded-concurrency checks).
    max_in_flight: int = 0
    base_url: str = ""

    def __post_init__(self) -> None:
        self._chat_script: deque[str | Fault | ToolCalls] = deque()
        self._decision_script: deque[str | Fault] = deque()
        self._transcription_script: deque[str | Fault] = deque()
        self._faults: dict[str, deque[Fault]] = {e: deque() for e in ENDPOINTS}
        self._in_flight = 0
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()
        self._recorded = asyncio.Event()
        self._ids = 0
        self._rng = random.Random(self.fault_seed)

    # -- scripting -------------------------------------------------------------

    def script_chat(self, *replies: str | Fault | ToolCalls) -> None:
        self._chat_script.extend(replies)

    def script_decisions(self, *replies: str | Fault) -> None:
        """Replies to write-decision requests (schema ``memory_decisions``),
        kept apart from ``script_chat`` so that a scripted extraction is never
        taken by a decision call."""
        self._decision_script.extend(replies)

    def script_transcription(self, *texts: str | Fault) -> None:
        self._transcription_script.extend(texts)

    def fail_next(self, endpoint: str, fault: Fault, times: int = 1) -> None:
        if endpoint not in self._faults:
            raise ValueError(f"endpoint must be one of {ENDPOINTS}, not {endpoint!r}")
        self._faults[endpoint].extend([fault] * times)

    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.endpoint == "chat"]

    def embedding_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.endpoint == "embeddings"]

    def transcription_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.endpoint == "transcriptions"]

    def decision_requests(self) -> list[RecordedRequest]:
        """The chat requests that asked for a write decision."""
        return [r for r in self.chat_requests() if _schema_name(r.body) == DECISION_SCHEMA_NAME]

    @property
    def pending_chat_script(self) -> int:
        return len(self._chat_script)

    def reset(self) -> None:
        """Forget recorded requests, scripts and queued faults."""
        self.requests.clear()
        self._chat_script.clear()
        self._decision_script.clear()
        self._transcription_script.clear()
        for q in self._faults.values():
            q.clear()
        self.max_in_flight = 0

    # -- lifecycle -------------------------------------------------------------

    def client(self, **kw: Any) -> openai.AsyncOpenAI:
        if not self.base_url:
            raise RuntimeError("FakeOpenAI is not started")
        options: dict[str, Any] = {"api_key": "test", "base_url": self.base_url, "max_retries": 0}
        options.update(kw)
        return openai.AsyncOpenAI(**options)

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_post("/v1/audio/transcriptions", self._transcriptions)
        app.router.add_get("/v1/models", self._models)
        self._closing.clear()
        # A short shutdown timeout: close() must not wait for sleeping fault handlers.
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        self._runner = runner
        # With port 0 the OS picks a free port; the runner knows which.
        self.port = int(runner.addresses[0][1])
        self.base_url = f"http://{self.host}:{self.port}/v1"

    async def close(self) -> None:
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeOpenAI:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- helpers ---------------------------------------------------------------

    async def _sleep(self, seconds: float) -> None:
        """Sleep, but wake at once when the server closes."""
        if seconds <= 0:
            return
        try:
            await asyncio.wait_for(self._closing.wait(), timeout=seconds)
        except TimeoutError:
            pass

    def _record(self, endpoint: str, body: dict[str, Any], request: web.Request) -> None:
        self.requests.append(RecordedRequest(endpoint, body, dict(request.headers)))
        self._recorded.set()

    async def wait_for_requests(
        self, count: int, endpoint: str | None = None, within_s: float = 5.0
    ) -> list[RecordedRequest]:
        """Wait until at least ``count`` requests (of ``endpoint``) have arrived."""

        def matching() -> list[RecordedRequest]:
            return [r for r in self.requests if endpoint is None or r.endpoint == endpoint]

        async with asyncio.timeout(within_s):
            while len(matching()) < count:
                self._recorded.clear()
                await self._recorded.wait()
        return matching()

    def _next_fault(self, endpoint: str) -> Fault | None:
        q = self._faults[endpoint]
        if q:
            return q.popleft()
        if endpoint == "chat" and self.fault_rate > 0 and self._rng.random() < self.fault_rate:
            fault = self._rng.choice(self.random_faults)
            key = fault.kind if fault.kind != "status" else str(fault.code)
            self.random_fault_counts[key] = self.random_fault_counts.get(key, 0) + 1
            return fault
        return None

    async def _apply_fault(self, fault: Fault) -> web.Response:
        if fault.kind == "timeout":
            await self._sleep(fault.seconds)
            return _json_error(504, "fake upstream timeout elapsed")
        if fault.kind == "malformed":
            return web.Response(text=fault.text, content_type="application/json", status=200)
        if fault.kind == "garbage":
            return self._completion("gpt-4o-mini", fault.text, 0)
        if fault.body is not None:
            resp = web.Response(text=fault.body, status=fault.code, content_type="application/json")
        else:
            resp = _json_error(fault.code, f"fake error {fault.code}")
        # A tiny server-directed delay keeps client retries (max_retries > 0) fast in tests.
        resp.headers["retry-after-ms"] = "10"
        return resp

    def _enter(self) -> None:
        self._in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _next_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}-fake-{self._ids}"

    # -- endpoints -------------------------------------------------------------

    async def _read_json(self, request: web.Request) -> dict[str, Any] | web.Response:
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            return _json_error(400, "request body is not valid JSON")
        if not isinstance(body, dict):
            return _json_error(400, "request body must be a JSON object")
        return body

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self._enter()
        try:
            body = await self._read_json(request)
            if isinstance(body, web.Response):
                return body
            self._record("chat", body, request)
            await self._sleep(self.latency_s)
            fault = self._next_fault("chat")
            if fault is not None:
                return await self._apply_fault(fault)
            if not isinstance(body.get("messages"), list) or not body.get("model"):
                return _json_error(400, "'model' and 'messages' are required")
            if body.get("stream"):
                return _json_error(400, "the fake server does not stream")
            if body.get("tools") and self.reject_tools:
                return _json_error(400, "tools is not supported by this server")
            problem = _validate_response_format(body) or _validate_tool_turns(body)
            if problem:
                return _json_error(400, problem)
            reply: str | Fault | ToolCalls
            deciding = _schema_name(body) == DECISION_SCHEMA_NAME
            if deciding and self._decision_script:
                reply = self._decision_script.popleft()
            elif not deciding and self._chat_script:
                reply = self._chat_script.popleft()
            elif self.chat_handler is not None:
                result = self.chat_handler(body)
                reply = await result if inspect.isawaitable(result) else result
            else:
                reply = default_chat_reply(body)
            if isinstance(reply, Fault):
                return await self._apply_fault(reply)
            prompt_tokens = sum(len(_message_text(m).split()) for m in body["messages"])
            if isinstance(reply, ToolCalls):
                if body.get("tools") and body.get("tool_choice") != "none":
                    return self._tool_completion(body["model"], reply, prompt_tokens)
                reply = reply.content or default_chat_reply(body)
            return self._completion(body["model"], reply, prompt_tokens)
        finally:
            self._in_flight -= 1

    def _completion(self, model: str, reply: str, prompt_tokens: int) -> web.Response:
        completion_tokens = len(reply.split())
        return web.json_response(
            {
                "id": self._next_id("chatcmpl"),
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply, "refusal": None},
                        "finish_reason": "stop",
                        "logprobs": None,
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }
        )

    def _tool_completion(self, model: str, reply: ToolCalls, prompt_tokens: int) -> web.Response:
        calls = [
            {
                "id": self._next_id("call"),
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
            for name, args in reply.calls
        ]
        completion_tokens = sum(len(c["function"]["arguments"].split()) for c in calls)
        return web.json_response(
            {
                "id": self._next_id("chatcmpl"),
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": reply.content,
                            "refusal": None,
                            "tool_calls": calls,
                        },
                        "finish_reason": "tool_calls",
                        "logprobs": None,
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }
        )

    async def _embeddings(self, request: web.Request) -> web.StreamResponse:
        self._enter()
        try:
            body = await self._read_json(request)
            if isinstance(body, web.Response):
                return body
            self._record("embeddings", body, request)
            await self._sleep(self.latency_s)
            fault = self._next_fault("embeddings")
            if fault is not None:
                return await self._apply_fault(fault)
            raw = body.get("input")
            if isinstance(raw, str):
                inputs: list[str] = [raw]
            elif isinstance(raw, list) and raw and all(isinstance(x, str) for x in raw):
                inputs = list(raw)
            elif isinstance(raw, list) and raw:
                # token-id input: hash the ids so it is still deterministic
                inputs = [json.dumps(x) for x in (raw if isinstance(raw[0], list) else [raw])]
            else:
                return _json_error(400, "'input' must be a non-empty string or list")
            if any(s == "" for s in inputs):
                return _json_error(400, "'input' cannot contain an empty string")
            dims = body.get("dimensions") or DEFAULT_DIMENSIONS
            if not isinstance(dims, int) or dims < 1 or dims > 4096:
                return _json_error(400, f"invalid 'dimensions': {dims!r}")
            fmt = body.get("encoding_format") or "float"
            if fmt not in ("float", "base64"):
                return _json_error(400, f"invalid 'encoding_format': {fmt!r}")
            data = []
            for i, text in enumerate(inputs):
                vec = fake_embedding(text, dims, self.embedding_mode)
                emb: Any = vec
                if fmt == "base64":
                    emb = base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode("ascii")
                data.append({"object": "embedding", "index": i, "embedding": emb})
            n_tokens = sum(max(1, len(t.split())) for t in inputs)
            return web.json_response(
                {
                    "object": "list",
                    "data": data,
                    "model": body.get("model") or "",
                    "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
                }
            )
        finally:
            self._in_flight -= 1

    async def _transcriptions(self, request: web.Request) -> web.StreamResponse:
        self._enter()
        try:
            fields: dict[str, Any] = {}
            audio = b""
            try:
                reader = await request.multipart()
            except (AssertionError, ValueError):
                return _json_error(400, "expected multipart/form-data")
            while True:
                part = await reader.next()
                if part is None:
                    break
                if not isinstance(part, aiohttp.BodyPartReader) or part.name is None:
                    continue
                if part.name == "file":
                    audio = bytes(await part.read())
                    fields["file"] = {
                        "filename": part.filename,
                        "size": len(audio),
                        "content_type": part.headers.get("Content-Type"),
                    }
                else:
                    fields[part.name] = await part.text()
            self._record("transcriptions", fields, request)
            await self._sleep(self.latency_s)
            fault = self._next_fault("transcriptions")
            if fault is not None:
                return await self._apply_fault(fault)
            if "file" not in fields or not fields.get("model"):
                return _json_error(400, "'file' and 'model' are required")
            reply: str | Fault
            if self._transcription_script:
                reply = self._transcription_script.popleft()
            elif self.transcription_handler is not None:
                result = self.transcription_handler(audio, fields)
                reply = await result if inspect.isawaitable(result) else result
            else:
                reply = ""
            if isinstance(reply, Fault):
                return await self._apply_fault(reply)
            return _format_transcription(reply, fields, fields.get("response_format") or "json")
        finally:
            self._in_flight -= 1

    async def _models(self, request: web.Request) -> web.StreamResponse:
        names = ["gpt-4o-mini", "text-embedding-3-small", "whisper-1"]
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {"id": n, "object": "model", "created": 0, "owned_by": "fake"} for n in names
                ],
            }
        )

    def load_script(self, path: Path) -> None:
        """Queue the replies of a JSON script file (see the module docstring)."""
        data = json.loads(path.read_text(encoding="utf-8"))

        def entries(key: str) -> list[str | Fault]:
            out: list[str | Fault] = []
            for item in data.get(key) or []:
                if isinstance(item, dict) and "fault" in item:
                    out.append(Fault.from_json(item))
                elif isinstance(item, str):
                    out.append(item)
                else:  # a JSON object reply written inline
                    out.append(json.dumps(item))
            return out

        self.script_chat(*entries("chat"))
        self.script_transcription(*entries("transcriptions"))
        if "latency" in data:
            self.latency_s = float(data["latency"])


@contextlib.contextmanager
def server_process(*flags: str) -> Iterator[str]:
    """The fake server in a process of its own (``--echo-facts`` plus ``flags``, see
    ``main``), for a real CLI subprocess to call; yields its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakeopenai", "--echo-facts", *flags],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait(10)


@pytest_asyncio.fixture
async def fake_openai() -> AsyncIterator[FakeOpenAI]:
    """A started fake OpenAI server, closed after the test."""
    fake = FakeOpenAI()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.close()


async def _serve(args: argparse.Namespace) -> None:
    fake = FakeOpenAI(
        host=args.host,
        port=args.port,
        latency_s=args.latency,
        fault_rate=args.fault_rate,
        fault_seed=args.fault_seed,
        reject_tools=args.reject_tools,
    )
    fake.random_faults = tuple(
        replace(f, seconds=args.fault_timeout) if f.kind == "timeout" else f
        for f in fake.random_faults
    )
    if args.echo_facts:
        fake.chat_handler = echo_facts_reply
    if args.script:
        fake.load_script(Path(args.script))
        if args.latency:
            fake.latency_s = args.latency
    async with fake:
        print(fake.base_url, flush=True)
        await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a fake OpenAI API for tests/benchmarks.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every reply")
    parser.add_argument("--script", default=None, help="JSON file with scripted replies")
    parser.add_argument(
        "--echo-facts", action="store_true", help="answer extraction requests with echo_facts_reply"
    )
    parser.add_argument(
        "--fault-rate", type=float, default=0.0, help="share of chat requests answered by a fault"
    )
    parser.add_argument("--fault-seed", type=int, default=0, help="seed of the fault generator")
    parser.add_argument(
        "--fault-timeout", type=float, default=30.0, help="seconds a timeout fault sleeps"
    )
    parser.add_argument(
        "--reject-tools",
        action="store_true",
        help="answer requests that offer tools with a 400 (no function calling)",
    )
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve(args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
