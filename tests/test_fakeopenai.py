"""The fake OpenAI server, driven through the real ``openai`` client."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest

from tests.fakeopenai import (
    DEFAULT_DIMENSIONS,
    FakeOpenAI,
    Fault,
    ToolCalls,
    echo_facts_reply,
    fake_embedding,
)

ROOT = Path(__file__).resolve().parent.parent
FACTS_SYSTEM = "Extract durable facts about the author. Reply with JSON."


async def _chat(client: openai.AsyncOpenAI, system: str = "You are a bot.", **kw: Any) -> str:
    messages: Any = [{"role": "system", "content": system}, {"role": "user", "content": "hi"}]
    resp = await client.chat.completions.create(model="gpt-4o-mini", messages=messages, **kw)
    return resp.choices[0].message.content or ""


async def test_default_chat_replies(fake_openai: FakeOpenAI) -> None:
    client = fake_openai.client()
    assert json.loads(await _chat(client, FACTS_SYSTEM)) == {"facts": []}
    reply = json.loads(await _chat(client))
    assert reply == {"text": "ok", "memoryLine": None, "memoryLookupQuery": None}
    assert len(fake_openai.chat_requests()) == 2
    assert fake_openai.chat_requests()[0].body["messages"][0]["content"] == FACTS_SYSTEM
    assert fake_openai.chat_requests()[0].headers["Authorization"] == "Bearer test"


async def test_default_honours_json_schema(fake_openai: FakeOpenAI) -> None:
    client = fake_openai.client()
    batch_schema = {
        "type": "json_schema",
        "json_schema": {
            "name": "batch",
            "schema": {"type": "object", "properties": {"results": {"type": "array"}}},
        },
    }
    out = await _chat(client, FACTS_SYSTEM, response_format=batch_schema)
    assert json.loads(out) == {"results": []}
    other = {
        "type": "json_schema",
        "json_schema": {
            "name": "verdict",
            "schema": {
                "type": "object",
                "properties": {"keep": {"type": "boolean"}, "why": {"type": ["string", "null"]}},
                "required": ["keep", "why"],
            },
        },
    }
    assert json.loads(await _chat(client, response_format=other)) == {"keep": False, "why": None}


async def test_json_object_mode_requires_word_json(fake_openai: FakeOpenAI) -> None:
    client = fake_openai.client()
    with pytest.raises(openai.BadRequestError, match="json"):
        await _chat(client, "no hint here", response_format={"type": "json_object"})
    ok = await _chat(client, "Answer in JSON.", response_format={"type": "json_object"})
    assert json.loads(ok)["text"] == "ok"


async def test_script_then_handler_then_default(fake_openai: FakeOpenAI) -> None:
    client = fake_openai.client()
    fake_openai.script_chat("first", "second")
    fake_openai.chat_handler = lambda body: "from handler " + body["messages"][-1]["content"]
    assert await _chat(client) == "first"
    assert await _chat(client) == "second"
    assert await _chat(client) == "from handler hi"


async def test_async_handler(fake_openai: FakeOpenAI) -> None:
    async def handler(body: dict[str, object]) -> str:
        await asyncio.sleep(0)
        return "async"

    fake_openai.chat_handler = handler
    assert await _chat(fake_openai.client()) == "async"


@pytest.mark.parametrize(
    ("code", "exc"),
    [
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
        (400, openai.BadRequestError),
    ],
)
async def test_status_faults(fake_openai: FakeOpenAI, code: int, exc: type[Exception]) -> None:
    client = fake_openai.client()
    fake_openai.fail_next("chat", Fault.status(code))
    with pytest.raises(exc):
        await _chat(client)
    assert await _chat(client) != ""  # the fault was consumed


async def test_fail_next_times_and_retries(fake_openai: FakeOpenAI) -> None:
    fake_openai.fail_next("chat", Fault.status(500), times=2)
    client = fake_openai.client(max_retries=2)
    assert json.loads(await _chat(client))["text"] == "ok"
    assert len(fake_openai.chat_requests()) == 3  # two failures recorded, then success


async def test_scripted_fault(fake_openai: FakeOpenAI) -> None:
    fake_openai.script_chat(Fault.status(503, '{"error": {"message": "busy"}}'), "after")
    client = fake_openai.client()
    with pytest.raises(openai.APIStatusError) as info:
        await _chat(client)
    assert info.value.status_code == 503
    assert await _chat(client) == "after"


async def test_timeout_fault(fake_openai: FakeOpenAI) -> None:
    fake_openai.fail_next("chat", Fault.timeout(600))
    client = fake_openai.client(timeout=0.2)
    with pytest.raises(openai.APITimeoutError):
        await _chat(client)


async def test_malformed_fault(fake_openai: FakeOpenAI) -> None:
    fake_openai.fail_next("chat", Fault.malformed())
    with pytest.raises(ValueError):  # the client's JSON decoder gives up
        await _chat(fake_openai.client())


async def test_garbage_fault_is_a_well_formed_completion(fake_openai: FakeOpenAI) -> None:
    fake_openai.fail_next("chat", Fault.garbage("no JSON here"))
    assert await _chat(fake_openai.client(), FACTS_SYSTEM) == "no JSON here"


async def test_random_faults_follow_the_rate_and_the_seed() -> None:
    async def run(seed: int) -> list[str]:
        outcomes = []
        async with FakeOpenAI(fault_rate=0.5, fault_seed=seed) as fake:
            fake.random_faults = (Fault.status(500), Fault.garbage("x"))
            client = fake.client()
            for _ in range(40):
                try:
                    outcomes.append(await _chat(client, FACTS_SYSTEM))
                except openai.InternalServerError:
                    outcomes.append("500")
            assert sum(fake.random_fault_counts.values()) == sum(
                o != '{"facts": []}' for o in outcomes
            )
        return outcomes

    first = await run(7)
    assert 5 < sum(o != '{"facts": []}' for o in first) < 35
    assert {"500", "x"} <= set(first)
    assert await run(7) == first, "the same seed gives the same faults"


def test_echo_facts_reply_answers_both_shapes() -> None:
    single = {
        "messages": [
            {"role": "system", "content": "facts"},
            {"role": "user", "content": "Author: Ana\nMessage:\n<<<\nI knit warm socks.\n>>>"},
        ]
    }
    assert json.loads(echo_facts_reply(single))["facts"][0]["fact"] == "Ana said I knit warm socks."
    batch = {
        "messages": [
            {"role": "system", "content": "facts"},
            {
                "role": "user",
                "content": "Message 1 (author: Ana):\n<<<\nhi\n>>>\n\n"
                "Message 2 (author: Bo):\n<<<\nI sail small boats.\n>>>",
            },
        ]
    }
    results = json.loads(echo_facts_reply(batch))["results"]
    assert [r["index"] for r in results] == [2]
    assert results[0]["facts"][0]["fact"] == "Bo said I sail small boats."


async def test_latency_is_added(fake_openai: FakeOpenAI) -> None:
    fake_openai.latency_s = 600  # far beyond the timeout, however loaded the machine
    client = fake_openai.client(timeout=0.1)
    with pytest.raises(openai.APITimeoutError):
        await _chat(client)
    fake_openai.latency_s = 0.01
    assert await _chat(fake_openai.client()) != ""


async def test_concurrency_is_measured(fake_openai: FakeOpenAI) -> None:
    fake_openai.latency_s = 0.1
    client = fake_openai.client()
    await asyncio.gather(*(_chat(client) for _ in range(5)))
    assert fake_openai.max_in_flight == 5


async def test_embeddings_base64_default_and_float(fake_openai: FakeOpenAI) -> None:
    client = fake_openai.client()
    resp = await client.embeddings.create(model="text-embedding-3-small", input=["a cat", "a cat"])
    assert fake_openai.requests[-1].body["encoding_format"] == "base64"
    v0, v1 = (np.asarray(d.embedding) for d in resp.data)
    assert v0.shape == (DEFAULT_DIMENSIONS,)
    assert np.allclose(v0, v1)
    assert abs(np.linalg.norm(v0) - 1) < 1e-5
    flt = await client.embeddings.create(
        model="m", input="a cat", encoding_format="float", dimensions=64
    )
    assert len(flt.data[0].embedding) == 64
    assert np.allclose(flt.data[0].embedding, fake_embedding("a cat", 64), atol=1e-6)


async def test_embeddings_share_words_share_direction(fake_openai: FakeOpenAI) -> None:
    client = fake_openai.client()
    resp = await client.embeddings.create(
        model="m", input=["Ana loves pizza", "pizza is loved by Ana", "quantum tunnelling"]
    )
    a, b, c = (np.asarray(d.embedding) for d in resp.data)
    assert float(a @ b) > 0.3
    assert abs(float(a @ c)) < 0.3


async def test_embeddings_errors(fake_openai: FakeOpenAI) -> None:
    client = fake_openai.client()
    with pytest.raises(openai.BadRequestError):
        await client.embeddings.create(model="m", input="")
    fake_openai.fail_next("embeddings", Fault.status(429))
    with pytest.raises(openai.RateLimitError):
        await client.embeddings.create(model="m", input="x")


@pytest.mark.parametrize("fmt", ["json", "text", "verbose_json"])
async def test_transcriptions(fake_openai: FakeOpenAI, fmt: str) -> None:
    client = fake_openai.client()
    fake_openai.script_transcription("hello there")
    kw: dict[str, Any] = {"response_format": fmt, "language": "en"}
    resp: Any = await client.audio.transcriptions.create(
        model="whisper-1", file=("clip.wav", b"RIFF....WAVE", "audio/wav"), **kw
    )
    text = resp if isinstance(resp, str) else resp.text
    assert text.strip() == "hello there"
    rec = fake_openai.requests[-1]
    assert rec.endpoint == "transcriptions"
    assert rec.body["model"] == "whisper-1"
    assert rec.body["language"] == "en"
    assert rec.body["file"]["size"] == 12


async def test_transcription_handler_and_default(fake_openai: FakeOpenAI) -> None:
    client = fake_openai.client()
    resp = await client.audio.transcriptions.create(model="whisper-1", file=("a.wav", b"x"))
    assert resp.text == ""
    fake_openai.transcription_handler = lambda audio, fields: f"{len(audio)} bytes"
    resp = await client.audio.transcriptions.create(model="whisper-1", file=("a.wav", b"xyz"))
    assert resp.text == "3 bytes"
    fake_openai.fail_next("transcriptions", Fault.status(500))
    with pytest.raises(openai.InternalServerError):
        await client.audio.transcriptions.create(model="whisper-1", file=("a.wav", b"x"))


async def test_close_does_not_wait_for_sleeping_faults() -> None:
    async with FakeOpenAI() as fake:
        fake.fail_next("chat", Fault.timeout(60))
        task = asyncio.create_task(_chat(fake.client(timeout=30)))
        await fake.wait_for_requests(1, "chat")
    # close() woke the sleeping handler; the client sees an answer or a dropped connection
    with pytest.raises((openai.APIStatusError, openai.APIConnectionError)):
        await asyncio.wait_for(task, 30)


async def test_separate_process_with_script(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps({"chat": ["scripted", {"fault": "status", "code": 429}, {"facts": []}]})
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.fakeopenai",
        "--script",
        str(script),
        "--latency",
        "0.01",
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        base_url = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode().strip()
        assert base_url.startswith("http://127.0.0.1:")
        client = openai.AsyncOpenAI(api_key="test", base_url=base_url, max_retries=0)
        assert await _chat(client) == "scripted"
        with pytest.raises(openai.RateLimitError):
            await _chat(client)
        assert json.loads(await _chat(client)) == {"facts": []}
    finally:
        proc.terminate()
        await proc.wait()


TOOL: Any = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
}


async def test_scripted_tool_calls_and_their_pairing(fake_openai: FakeOpenAI) -> None:
    client = fake_openai.client()
    fake_openai.script_chat(ToolCalls.one("lookup", {"q": "tea"}), "done")
    messages: Any = [{"role": "user", "content": "hi"}]
    resp = await client.chat.completions.create(
        model="m", messages=messages, tools=[TOOL], tool_choice="auto"
    )
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "lookup" and json.loads(call.function.arguments) == {"q": "tea"}
    body = fake_openai.chat_requests()[0].body
    assert body["tools"] == [TOOL] and body["tool_choice"] == "auto"
    assistant = {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]}
    # A call left unanswered, or an answer to no call, is refused as OpenAI does.
    for bad in (
        [*messages, assistant],
        [*messages, {"role": "tool", "tool_call_id": "nope", "content": "x"}],
    ):
        with pytest.raises(openai.BadRequestError):
            await client.chat.completions.create(model="m", messages=bad, tools=[TOOL])
    answered = [*messages, assistant, {"role": "tool", "tool_call_id": call.id, "content": "x"}]
    resp = await client.chat.completions.create(model="m", messages=answered, tools=[TOOL])
    assert resp.choices[0].message.content == "done"


async def test_tool_calls_without_tools_answer_with_text(fake_openai: FakeOpenAI) -> None:
    client = fake_openai.client()
    fake_openai.script_chat(
        ToolCalls.one("lookup", "{}", content="plain"), ToolCalls.one("lookup", "{}")
    )
    assert await _chat(client, tools=[TOOL], tool_choice="none") == "plain"
    assert json.loads(await _chat(client))["text"] == "ok"


async def test_reject_tools_answers_400(fake_openai: FakeOpenAI) -> None:
    fake_openai.reject_tools = True
    client = fake_openai.client()
    with pytest.raises(openai.BadRequestError, match="tools is not supported"):
        await _chat(client, tools=[TOOL])
    assert json.loads(await _chat(client))["text"] == "ok"
    assert len(fake_openai.chat_requests()) == 2
