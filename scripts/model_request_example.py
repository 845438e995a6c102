"""Print the chat requests of one real reply: what the model sees.

    python scripts/model_request_example.py                 # print the example
    python scripts/model_request_example.py --write FILE    # replace it between the markers
    python scripts/model_request_example.py --check FILE    # exit 1 if FILE's copy is stale

Runs the real engine on a temporary data directory (offline rule extractor,
the packaged MiniLM), ingests a short conversation, stores a lore line and
one of the bot's earlier replies, then composes a reply through the real
``openai`` client against the fake OpenAI server (tests/fakeopenai.py), which
answers first with a ``memory_query`` tool call and then with the reply.
Prints the first request (system prompt with the memory sections, the
window's turns, the member's message, the tool definition) and the turns the
follow-up adds (the call and its ``[M#]`` result), as docs/operating/model.md shows them
between ``<!-- model-request:start -->`` and ``<!-- model-request:end -->``
(a test keeps that copy current).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: make the project importable
    sys.path.insert(0, str(ROOT))

from memory import (  # noqa: E402
    ChatModel,
    IncomingMessage,
    Memory,
    MemoryConfig,
    ReplyRequest,
    compose_reply,
    iso,
    record_bot_reply,
)
from tests.fakeopenai import FakeOpenAI, ToolCalls  # noqa: E402

GUILD, CHANNEL = "111111111111111111", "333333333333333333"
ALICE, BOB = "444444444444444444", "555555555555555555"
START = datetime(2026, 11, 22, 18, 0, tzinfo=UTC)
BEGIN_MARK = "<!-- model-request:start -->"
END_MARK = "<!-- model-request:end -->"


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


async def example() -> str:
    """The example as Markdown."""
    now = START
    with tempfile.TemporaryDirectory() as tmp:
        mem = await Memory.open(MemoryConfig.for_data_dir(Path(tmp)), clock=lambda: now)
        said = [
            (ALICE, "Alice", "I love hiking in the Alps."),
            (BOB, "Bob", "My favourite food is ramen."),
            (BOB, "Bob", "Anyone up for the trip to Zermatt next month?"),
            (ALICE, "Alice", "Count me in, if we go by train."),
        ]
        for i, (author, name, text) in enumerate(said):
            at = START - timedelta(minutes=10 - i)
            m = IncomingMessage(
                f"90000000000000000{i}", GUILD, CHANNEL, author, name, text, iso(at)
            )
            await (await mem.ingest_message(m)).wait()
        await mem.lore.remember(
            GUILD, "the summer meetup is in Zermatt", source_text="the summer meetup is in Zermatt"
        )
        await record_bot_reply(
            mem,
            guild_id=GUILD,
            channel_id=CHANNEL,
            message_id="900000000000000005",
            reply_to_id="900000000000000003",
            to_user_id=ALICE,
            text="The train to Zermatt takes about four hours from Zurich.",
            created_at=iso(START - timedelta(minutes=5)),
        )
        question = "what should I pack for the trip to Zermatt?"
        trigger = IncomingMessage(
            "900000000000000009", GUILD, CHANNEL, ALICE, "Alice", question, iso(START)
        )
        await (await mem.ingest_message(trigger)).wait()
        await mem.settle()
        async with FakeOpenAI() as fake:
            fake.script_chat(
                ToolCalls.one("memory_query", {"query": "hiking", "about": ["Alice"], "top_k": 3}),
                json.dumps(
                    {
                        "text": "Good boots: you love hiking in the Alps [M1].",
                        "memoryLine": None,
                    }
                ),
            )
            request = ReplyRequest(
                guild_id=GUILD,
                guild_name="Hikers",
                channel_id=CHANNEL,
                channel_name="general",
                author_id=ALICE,
                author_name="Alice",
                message_id=trigger.id,
                text=question,
                visible_channels=frozenset({CHANNEL}),
                channel_names={CHANNEL: "general"},
                created_at=trigger.created_at,
            )
            chat = ChatModel(fake.client(), "gpt-4o-mini", timeout_s=5.0)
            result = await compose_reply(
                mem,
                chat,
                request,
                persona="You are guildlore, this server's friendly bot.",
                temperature=0.7,
                max_tokens=700,
            )
            first, follow = (r.body for r in fake.chat_requests())
        await mem.close()
    out = io.StringIO()

    def say(text: str) -> None:
        out.write(text + "\n")

    say("## The first request\n")
    say("System prompt:\n\n```text\n" + first["messages"][0]["content"] + "\n```\n")
    say("Turns after it (the window, oldest first, then the member's message):\n")
    say("```json\n" + _json(first["messages"][1:]) + "\n```\n")
    say(f"`tool_choice`: `{first['tool_choice']}`; the tool definition (`tools[0]`):\n")
    say("```json\n" + _json(first["tools"][0]) + "\n```\n")
    say("## The follow-up adds the call and its result\n")
    say("```json\n" + _json(follow["messages"][len(first["messages"]) :]) + "\n```\n")
    say(f"Reply posted: {result.text!r}")
    return out.getvalue()


def replace_example(document: str, text: str) -> str:
    if BEGIN_MARK not in document or END_MARK not in document:
        raise SystemExit(f"the document has no {BEGIN_MARK} … {END_MARK} markers")
    head, rest = document.split(BEGIN_MARK, 1)
    _, tail = rest.split(END_MARK, 1)
    return f"{head}{BEGIN_MARK}\n{text}{END_MARK}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", type=Path, help="update the example in this Markdown file")
    group.add_argument("--check", type=Path, help="fail if this file's example is out of date")
    args = parser.parse_args(argv)
    text = asyncio.run(example())
    if args.write is None and args.check is None:
        print(text, end="")
        return 0
    path: Path = args.write or args.check
    document = path.read_text(encoding="utf-8")
    updated = replace_example(document, text)
    if args.check is not None:
        if updated != document:
            print(f"{path}: the model request example is out of date; run --write", file=sys.stderr)
            return 1
        return 0
    path.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
