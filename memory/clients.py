"""The OpenAI-compatible clients a process uses, built in one place.

``build_clients`` makes the LLM endpoint's client (chat replies, LLM fact
extraction, OpenAI embeddings) and, when asked, the speech-to-text client:
the LLM's own when the transcription endpoint is the same, else one of its
own, so a voice key never goes to the LLM endpoint or the other way round.
``Clients.aclose`` closes each client it made, once.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from types import TracebackType

from openai import AsyncOpenAI

from memory.config import LLMConfig
from memory.extract.llm import LLMExtractor
from memory.llm import ChatModel, make_openai_client


@dataclass
class Clients:
    """``openai`` is None when no LLM is configured; ``extractor`` None means the
    offline rules; ``transcription`` None means no speech-to-text endpoint."""

    openai: AsyncOpenAI | None = None
    chat: ChatModel | None = None
    extractor: LLMExtractor | None = None
    transcription: AsyncOpenAI | None = None
    owned: list[AsyncOpenAI] = field(default_factory=list, repr=False)

    async def aclose(self) -> None:
        owned, self.owned = self.owned, []
        for client in owned:
            with contextlib.suppress(Exception):
                await client.close()

    async def __aenter__(self) -> Clients:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def build_clients(
    llm: LLMConfig,
    *,
    use_llm_extractor: bool = False,
    transcription: LLMConfig | None = None,
) -> Clients:
    """Clients for ``llm`` (nothing when it is not configured), the LLM extractor
    when ``use_llm_extractor``, and a client for ``transcription`` when given and
    configured. Close them with ``aclose`` (or ``async with``)."""
    clients = Clients()
    if llm.enabled:
        client = make_openai_client(llm)
        clients.owned.append(client)
        clients.openai = client
        clients.chat = ChatModel(client, llm.chat_model, timeout_s=llm.timeout_s)
        if use_llm_extractor:
            clients.extractor = LLMExtractor(
                client, llm.extract_model or llm.chat_model, llm.timeout_s
            )
    if transcription is not None and transcription.enabled:
        if clients.openai is not None and _same_endpoint(transcription, llm):
            clients.transcription = clients.openai
        else:
            own = make_openai_client(transcription)
            clients.owned.append(own)
            clients.transcription = own
    return clients


def _same_endpoint(a: LLMConfig, b: LLMConfig) -> bool:
    return (a.base_url, a.api_key, a.timeout_s, a.max_retries) == (
        b.base_url,
        b.api_key,
        b.timeout_s,
        b.max_retries,
    )
