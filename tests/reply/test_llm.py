"""memory.llm against the fake OpenAI server, through the real openai client."""

from __future__ import annotations

import json

import openai
import pytest

from memory.config import LLMConfig
from memory.errors import ConfigError, LLMError
from memory.llm import ChatModel, make_openai_client, parse_json_object
from tests.fakeopenai import FakeOpenAI, Fault

# -- parse_json_object ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('  \ufeff{"a": 1}\n', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('Sure! Here it is:\n```\n{"a": [1, 2]}\n```\nAnything else?', {"a": [1, 2]}),
        ('```JSON {"a": 1}```', {"a": 1}),
        (
            'The answer is {"text": "hi", "memoryLine": null} as requested.',
            {"text": "hi", "memoryLine": None},
        ),
        ('<think>maybe {"wrong": 1} or</think>{"right": 2}', {"right": 2}),
        ('```python\nx = 1\n```\n{"a": 1}', {"a": 1}),
    ],
)
def test_parse_json_object_tolerant(text: str, expected: dict[str, object]) -> None:
    assert parse_json_object(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", None, "no json here", "[1, 2, 3]", '"just a string"', "{not json", "{" * 10_000, "}{"],
)
def test_parse_json_object_gives_none(text: str | None) -> None:
    assert parse_json_object(text) is None


# -- client construction ----------------------------------------------------------------------


async def test_make_openai_client(fake_openai: FakeOpenAI) -> None:
    cfg = LLMConfig(base_url=fake_openai.base_url, chat_model="m", timeout_s=5, max_retries=0)
    client = make_openai_client(cfg)
    assert client.max_retries == 0
    model = ChatModel(client, "m")
    reply = await model.complete([{"role": "user", "content": "Reply in JSON please"}])
    assert json.loads(reply)["text"] == "ok"
    assert fake_openai.chat_requests()[0].headers["Authorization"] == "Bearer not-needed"


def test_make_openai_client_needs_an_endpoint() -> None:
    with pytest.raises(ConfigError):
        make_openai_client(LLMConfig())


# -- ChatModel --------------------------------------------------------------------------------


async def test_complete_json_mode_and_nudge(fake_openai: FakeOpenAI) -> None:
    model = ChatModel(fake_openai.client(), "gpt-test")
    fake_openai.script_chat('{"text": "hello", "memoryLine": null, "memoryLookupQuery": null}')
    out = await model.complete([{"role": "user", "content": "hi"}], temperature=0.3)
    assert json.loads(out)["text"] == "hello"
    body = fake_openai.chat_requests()[-1].body
    assert body["response_format"] == {"type": "json_object"}
    assert body["temperature"] == 0.3
    assert body["model"] == "gpt-test"
    # OpenAI refuses JSON mode without the word "json"; the model adds a line
    assert "json" in body["messages"][0]["content"].lower()


async def test_complete_plain_text(fake_openai: FakeOpenAI) -> None:
    model = ChatModel(fake_openai.client(), "m")
    fake_openai.script_chat("just words")
    out = await model.complete([{"role": "user", "content": "hi"}], json_mode=False)
    assert out == "just words"
    body = fake_openai.chat_requests()[-1].body
    assert "response_format" not in body
    assert body["messages"] == [{"role": "user", "content": "hi"}]


async def test_complete_json_parsed(fake_openai: FakeOpenAI) -> None:
    model = ChatModel(fake_openai.client(), "m")
    fake_openai.script_chat('```json\n{"text": "x"}\n```', "not json at all")
    assert await model.complete_json([{"role": "user", "content": "json"}]) == {"text": "x"}
    assert await model.complete_json([{"role": "user", "content": "json"}]) is None


@pytest.mark.parametrize(
    ("fault", "cause"),
    [
        (Fault.status(429), openai.RateLimitError),
        (Fault.status(500), openai.InternalServerError),
        (Fault.status(401), openai.AuthenticationError),
        (Fault.malformed(), ValueError),
    ],
)
async def test_complete_errors_are_llm_errors(
    fake_openai: FakeOpenAI, fault: Fault, cause: type[BaseException]
) -> None:
    model = ChatModel(fake_openai.client(), "m")
    fake_openai.fail_next("chat", fault)
    with pytest.raises(LLMError) as info:
        await model.complete([{"role": "user", "content": "json"}])
    assert isinstance(info.value.__cause__, cause)


async def test_complete_timeout(fake_openai: FakeOpenAI) -> None:
    model = ChatModel(fake_openai.client(), "m", timeout_s=0.2)
    fake_openai.fail_next("chat", Fault.timeout(600))
    with pytest.raises(LLMError, match="timed out") as info:
        await model.complete([{"role": "user", "content": "json"}])
    assert isinstance(info.value.__cause__, openai.APITimeoutError)


async def test_complete_latency_within_timeout(fake_openai: FakeOpenAI) -> None:
    fake_openai.latency_s = 0.1
    # Within the timeout however loaded the machine; then far beyond it.
    model = ChatModel(fake_openai.client(), "m", timeout_s=30)
    assert await model.complete([{"role": "user", "content": "json"}])
    fake_openai.latency_s = 600
    slow = ChatModel(fake_openai.client(), "m", timeout_s=0.2)
    with pytest.raises(LLMError):
        await slow.complete([{"role": "user", "content": "json"}])


async def test_connection_refused() -> None:
    async with FakeOpenAI() as fake:
        client = fake.client()
    # the server is closed now; its port refuses connections
    with pytest.raises(LLMError, match="connection") as info:
        await ChatModel(client, "m").complete([{"role": "user", "content": "json"}])
    assert isinstance(info.value.__cause__, openai.APIConnectionError)


async def test_response_format_fallback(fake_openai: FakeOpenAI) -> None:
    """Servers without structured output (older llama.cpp, LM Studio) get a plain retry."""
    body = '{"error": {"message": "response_format type json_object is not supported"}}'
    fake_openai.fail_next("chat", Fault.status(400, body))
    fake_openai.script_chat('{"text": "fine"}')
    model = ChatModel(fake_openai.client(), "m")
    assert json.loads(await model.complete([{"role": "user", "content": "json"}])) == {
        "text": "fine"
    }
    first, second = fake_openai.chat_requests()
    assert "response_format" in first.body and "response_format" not in second.body


async def test_other_400_is_not_retried(fake_openai: FakeOpenAI) -> None:
    fake_openai.fail_next("chat", Fault.status(400, '{"error": {"message": "bad model"}}'))
    with pytest.raises(LLMError, match="HTTP 400"):
        await ChatModel(fake_openai.client(), "m").complete([{"role": "user", "content": "json"}])
    assert len(fake_openai.chat_requests()) == 1
