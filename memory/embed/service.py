"""Background embedding of facts and messages, model resolution, re-index.

Work arrives as ids (facts changed by a batch, messages processed by a
batch); the worker embeds them in batches off the event loop and writes the
vectors in one transaction per batch. ``reindex`` scans for anything without
a vector for its guild's model — after a crash or a model change — and
reports progress. Calls and failures go to the action log through
``EmbeddingActivity``. When the worker starts it first embeds the active facts
that have no vector for their guild's model: a crash loses the ids that were
still queued, not the facts.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np

from memory.clock import Clock, iso
from memory.config import EmbeddingConfig
from memory.db.core import Database
from memory.embed.activity import EmbeddingActivity, EmbeddingStats
from memory.embed.base import (
    Embedder,
    content_hash,
    fact_embedding_text,
    make_embedder,
    provider_default_model,
    resolve_embedding_model,
    vector_to_blob,
)
from memory.embed.catalog import check_embedding_model
from memory.embed.e5 import QueryEmbedder
from memory.embed.query_cache import QueryCache
from memory.embed.threads import lower_thread_priority
from memory.errors import ConfigError, EmbeddingError
from memory.models import Fact
from memory.store import facts as store_facts
from memory.store import pending_vectors
from memory.store import vectors as store_vectors
from memory.store.relations import NearestFacts, relate_written

log = logging.getLogger(__name__)

GUILD_MODEL_KEY = "embedding_model"
BACKLOG_CALL_MAX = 256  # texts per background embedding call
MESSAGE_BACKFILL_WINDOW = 2048  # messages read and length-sorted together when back-filling
MESSAGE_BACKFILL_CALL = 256  # texts per embedding call when back-filling
QUERY_CACHE_SIZE = 512


class EmbeddingService:
    def __init__(
        self,
        db: Database,
        cfg: EmbeddingConfig,
        *,
        client: Any = None,
        clock: Clock,
        env_default: str | None = None,
        embed_messages: bool = True,
        embedder: Embedder | None = None,
    ) -> None:
        self.db = db
        self.cfg = cfg
        self.client = client
        self.clock = clock
        self.env_default = env_default
        self.embed_messages = embed_messages
        # While set, processed messages get no vector here: a bulk caller (the
        # importer) embeds them afterwards with ``reindex``, so facts and their
        # vectors are not queued behind thousands of message embeddings.
        self.defer_messages = False
        # Background work runs niced so a live bot's event loop keeps a core. A foreground
        # command (import, demo start-up) has nothing to protect and turns it off: under
        # other load a nice-10 thread gets about a tenth of a core, so a niced import would crawl.
        self.low_priority = True
        self.nearest_facts: NearestFacts | None = None  # unset: sqlite-vec's KNN
        self._embedders: dict[str, Embedder] = {}
        self._owned: set[str] = set()  # embedders made here (closed here); given ones are not
        self.enabled = cfg.provider != "none" or embedder is not None
        if embedder is not None:
            self._embedders[embedder.model] = embedder
            self.default_model: str | None = embedder.model
        elif self.enabled:
            self.default_model = resolve_embedding_model(
                None, env_default or cfg.model, provider_default_model(cfg.provider)
            )
        else:
            self.default_model = None
        self._guild_models: dict[str, str] = {}
        self._checked_models: set[str] = set()
        self._pending_facts: dict[int, str] = {}  # fact id → guild id
        self._pending_messages: dict[str, str] = {}  # message id → guild id
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._query_cache = QueryCache(QUERY_CACHE_SIZE)
        self._background_pool: ThreadPoolExecutor | None = None
        self.stats = EmbeddingStats()
        self.activity = EmbeddingActivity(db, clock)

    # -- models -------------------------------------------------------------------
    def set_guild_model(self, guild_id: str, model: str | None) -> None:
        if model:
            self._guild_models[guild_id] = model
        else:
            self._guild_models.pop(guild_id, None)

    async def check_model(self, model: str) -> None:
        """Raise ``InvalidInput`` unless ``model`` can embed here (``memory.embed.catalog``)."""
        if model in self._checked_models:
            return
        configured = {m for m in (self.default_model, *self._embedders) if m}
        await check_embedding_model(model, client=self.client, configured=configured)
        self._checked_models.add(model)

    def model_for_guild(self, guild_id: str) -> str | None:
        if not self.enabled or self.default_model is None:
            return None
        return resolve_embedding_model(self._guild_models.get(guild_id), None, self.default_model)

    def embedder(self, model: str) -> Embedder:
        found = self._embedders.get(model)
        if found is None:
            try:
                made = make_embedder(replace(self.cfg, model=model), self.client)
            except ConfigError as exc:
                raise EmbeddingError(str(exc)) from exc
            if made is None:
                raise EmbeddingError("embeddings are turned off")
            self._embedders[model] = made
            self._owned.add(model)
            found = made
        return found

    async def warm_up(self, guild_id: str = "") -> bool:
        """Load the (guild's) model now rather than on the first message, on the
        background thread; False when embeddings are off."""
        model = self.model_for_guild(guild_id)
        if model is None:
            return False
        await self._embed(self.embedder(model), ["warm-up"])
        return True

    def forget_queries(self) -> None:
        """Drop cached query vectors (they may hold a forgotten member's words)."""
        self._query_cache.clear()

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        if self.enabled and self._task is None:
            self._idle.clear()  # settle() waits for the start-up repair too
            self._task = asyncio.create_task(self._run(), name="embedding-worker")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.activity.flush()
        pool, self._background_pool = self._background_pool, None
        if pool is not None:
            await asyncio.to_thread(pool.shutdown, True)
        for model in list(self._owned):
            with contextlib.suppress(Exception):
                await self._embedders[model].aclose()
            self._embedders.pop(model, None)
        self._owned.clear()

    def schedule_facts(self, facts: Sequence[Fact]) -> None:
        if not self.enabled:
            return
        for f in facts:
            self._pending_facts[f.id] = f.guild_id
        self._kick()

    def schedule_messages(self, items: Sequence[tuple[str, str]]) -> None:
        """items: (message id, guild id)."""
        if not self.enabled or not self.embed_messages or self.defer_messages:
            return
        for message_id, guild_id in items:
            self._pending_messages[message_id] = guild_id
        self._kick()

    def _kick(self) -> None:
        self._idle.clear()
        self._wake.set()

    @property
    def backlog(self) -> int:
        return len(self._pending_facts) + len(self._pending_messages)

    async def settle(self, timeout: float = 30.0) -> bool:
        """Wait until everything scheduled so far has a vector."""
        if not self.enabled:
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    async def _run(self) -> None:
        try:
            await self._embed_facts_without_vectors()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the next start, a re-index or an import tries again
            await self._failed(exc, None, "start-up repair")
        if not self._pending_facts and not self._pending_messages:
            self._idle.set()
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending_facts or self._pending_messages:
                try:
                    failed = await self._step()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # never let one failure stop the worker
                    await self._failed(exc, None, "background")
                    failed = True
                if failed:  # a failing endpoint is not retried in a tight loop
                    await asyncio.sleep(1.0)
            if not self._pending_facts and not self._pending_messages:
                self._idle.set()

    async def _step(self) -> bool:
        """Embed the next batch of each guild; True if one of them failed (its
        ids are left to the next re-index)."""
        # A backlog goes in larger calls (up to BACKLOG_CALL_MAX): the local
        # embedder sorts a call by length before padding each inner batch, and
        # the larger the call, the less padding.
        limit = max(self.cfg.batch_size * 2, BACKLOG_CALL_MAX)
        failed = False
        if self._pending_facts:
            ids = list(itertools.islice(self._pending_facts.items(), limit))
            for fid, _ in ids:
                self._pending_facts.pop(fid, None)
            by_guild: dict[str, list[int]] = {}
            for fid, gid in ids:
                by_guild.setdefault(gid, []).append(fid)
            for gid, fids in by_guild.items():
                try:
                    n = await self.embed_facts(gid, fids)
                except Exception as exc:
                    await self._failed(exc, gid, "facts")
                    failed = True
                    continue
                await self._batch_done(gid, facts=n, messages=0)
        elif self._pending_messages:
            items = list(itertools.islice(self._pending_messages.items(), limit))
            for mid, _ in items:
                self._pending_messages.pop(mid, None)
            by_guild_m: dict[str, list[str]] = {}
            for mid, gid in items:
                by_guild_m.setdefault(gid, []).append(mid)
            for gid, mids in by_guild_m.items():
                try:
                    n = await self.embed_messages_by_id(gid, mids)
                except Exception as exc:
                    await self._failed(exc, gid, "messages")
                    failed = True
                    continue
                await self._batch_done(gid, facts=0, messages=n)
        return failed

    async def _embed_facts_without_vectors(self) -> None:
        guild_ids = await self.db.read(store_facts.guilds_with_active_facts)
        totals = await self.reindex(guild_ids, include_messages=False)
        if totals["facts"]:
            log.info("embedded %d facts that had no vector", totals["facts"])

    async def _batch_done(self, guild_id: str, *, facts: int, messages: int) -> None:
        model = self.model_for_guild(guild_id)
        if model is not None:
            await self.activity.batch(
                guild_id, model, facts=facts, messages=messages, source="background"
            )

    async def _failed(self, exc: BaseException, guild_id: str | None, source: str) -> None:
        self.stats.errors += 1
        self.stats.last_error = str(exc)[:300]
        log.warning("embedding failed: %s", exc)
        model = self.model_for_guild(guild_id) if guild_id is not None else self.default_model
        await self.activity.error(exc, guild_id=guild_id, model=model, source=source)

    # -- work ----------------------------------------------------------------------------
    async def embed_facts(self, guild_id: str, fact_ids: Sequence[int]) -> int:
        model = self.model_for_guild(guild_id)
        if model is None or not fact_ids:
            return 0
        facts = await self.db.read(
            pending_vectors.facts_needing, guild_id, model, list(fact_ids), _fact_text_hash
        )
        if not facts:
            return 0
        texts = [fact_embedding_text(t, f, e) for _, t, f, e in facts]
        emb = self.embedder(model)
        vectors = await self._embed(emb, texts)
        rows = [
            (fid, guild_id, content_hash(text), vector_to_blob(vec))
            for (fid, _, _, _), text, vec in zip(facts, texts, vectors, strict=True)
        ]
        now = iso(self.clock())
        written = sum(
            await self.db.write_each(
                lambda con, chunk: store_vectors.put_fact_vectors(con, model, emb.dims, chunk, now),
                _chunked(rows),
            )
        )
        self.stats.fact_vectors += written
        await relate_written(self.db, model, rows, now, self.nearest_facts)
        return int(written)

    async def embed_messages_by_id(self, guild_id: str, message_ids: Sequence[str]) -> int:
        model = self.model_for_guild(guild_id)
        if model is None or not message_ids:
            return 0
        rows = await self.db.read(
            pending_vectors.messages_without_vector, guild_id, model, list(message_ids)
        )
        return await self._embed_message_rows(guild_id, model, rows)

    async def _embed_message_rows(
        self, guild_id: str, model: str, rows: Sequence[tuple[int, str]]
    ) -> int:
        if not rows:
            return 0
        emb = self.embedder(model)
        vectors = await self._embed(emb, [text for _, text in rows])
        payload = [
            (seq, guild_id, vector_to_blob(vec))
            for (seq, _), vec in zip(rows, vectors, strict=True)
        ]
        now = iso(self.clock())
        written = sum(
            await self.db.write_each(
                lambda con, chunk: store_vectors.put_message_vectors(
                    con, model, emb.dims, chunk, now
                ),
                _chunked(payload),
            )
        )
        self.stats.message_vectors += written
        return int(written)

    async def _embed(
        self, emb: Embedder, texts: list[str], *, background: bool = True
    ) -> np.ndarray:
        """Background work (facts, messages, re-index) runs on a low-priority
        thread when the embedder computes locally; a query (someone is waiting
        for a reply) keeps the embedder's own, normal-priority path."""
        self.stats.calls += 1
        if not background and isinstance(emb, QueryEmbedder):  # e5: the "query: " side
            return await emb.embed_queries(texts)
        compute = getattr(emb, "embed_sync", None)
        if not background or not self.low_priority or compute is None:
            return await emb.embed(texts)
        if self._background_pool is None:
            self._background_pool = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="embed-bg", initializer=lower_thread_priority
            )
        loop = asyncio.get_running_loop()
        result: np.ndarray = await loop.run_in_executor(self._background_pool, compute, texts)
        return result

    async def embed_query(self, guild_id: str, text: str) -> tuple[str, np.ndarray] | None:
        """The query vector for a guild's model, or None when embeddings are off or fail."""
        model = self.model_for_guild(guild_id)
        if model is None or len(text.strip()) < 3:
            return None
        cached = self._query_cache.get(model, text)
        if cached is not None:
            self.stats.query_cache_hits += 1
            return model, cached
        try:
            vec = (await self._embed(self.embedder(model), [text], background=False))[0]
        except EmbeddingError as exc:
            await self._failed(exc, guild_id, "query")
            return None
        return model, self._query_cache.put(model, text, vec)

    async def reindex(
        self,
        guild_ids: Sequence[str],
        *,
        progress: Callable[[str, int], None] | None = None,
        include_messages: bool = True,
        include_facts: bool = True,
        should_stop: Callable[[], bool] | None = None,
    ) -> dict[str, int]:
        """Embed every active fact (and message) lacking a vector for its guild's
        model; ``should_stop`` is asked between calls (what is left stays missing
        and the next run finds it)."""
        totals = {"facts": 0, "messages": 0}

        def stopping() -> bool:
            return should_stop is not None and should_stop()

        for gid in guild_ids:
            model = self.model_for_guild(gid)
            if model is None:
                continue
            before = dict(totals)
            try:
                await self._reindex_guild(
                    gid, model, totals, progress, include_facts, include_messages, stopping
                )
            except Exception as exc:
                await self._failed(exc, gid, "reindex")
                raise
            finally:
                # Vectors written before a failure or a cancel count too. Counting
                # does not await (safe while cancelled); the row is written by the
                # next flush, at the latest when the service stops.
                self.activity.count(
                    gid,
                    model,
                    facts=totals["facts"] - before["facts"],
                    messages=totals["messages"] - before["messages"],
                    source="reindex",
                )
            await self.activity.flush()
        return totals

    async def _reindex_guild(
        self,
        gid: str,
        model: str,
        totals: dict[str, int],
        progress: Callable[[str, int], None] | None,
        include_facts: bool,
        include_messages: bool,
        stopping: Callable[[], bool],
    ) -> None:
        chunk = max(8, self.cfg.batch_size * 4)
        while include_facts and not stopping():
            missing = await self.db.read(store_vectors.facts_missing_vectors, model, chunk, gid)
            if not missing:
                break
            n = await self.embed_facts(gid, [m[0] for m in missing])
            if n == 0:
                break
            totals["facts"] += n
            if progress:
                progress("facts", totals["facts"])
        if not (include_messages and self.embed_messages):
            return
        # Resume after the last seq seen: rows too short to embed stay
        # "missing" for ever, and rescanning from the start each call would
        # make a big back-fill quadratic. A window of rows is sorted by
        # length before it is cut into calls: each call then pads little
        # (the local embedder pads a batch to its longest text), while a
        # call stays short enough for Ctrl-C to be answered soon.
        after = 0
        while not stopping():
            rows = await self.db.read(
                pending_vectors.guild_messages_without_vector,
                gid,
                model,
                MESSAGE_BACKFILL_WINDOW,
                after,
            )
            if not rows:
                break
            after = rows[-1][0]
            rows.sort(key=lambda r: len(r[1]))
            for start in range(0, len(rows), MESSAGE_BACKFILL_CALL):
                if start and stopping():
                    break
                n = await self._embed_message_rows(
                    gid, model, rows[start : start + MESSAGE_BACKFILL_CALL]
                )
                totals["messages"] += n
                if progress:
                    progress("messages", totals["messages"])


# Vector rows per write transaction: short transactions let the ingest
# acknowledgement in between (see Database.write_each).
WRITE_CHUNK = 16


def _chunked(rows: Sequence[Any]) -> list[Sequence[Any]]:
    return [rows[i : i + WRITE_CHUNK] for i in range(0, len(rows), WRITE_CHUNK)]


def _fact_text_hash(fact_type: str, fact: str, evidence: str | None) -> str:
    return content_hash(fact_embedding_text(fact_type, fact, evidence))
