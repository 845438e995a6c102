"""The long-message guild of ``bench/search.py``: chat messages of realistic
length with real MiniLM vectors, and the questions asked about them.

Texts come from the real export the tests ship (``tests/data``: short chat
lines, quoted excerpts, long explanations) and, when a LongMemEval file is
given (``--data``), from its haystack turns (a median of about 400
characters, a long tail of several thousand). Without it, the export's
messages are re-mixed into longer ones: one to four consecutive messages of
the export joined into one, as a member who writes in paragraphs would.

``pool`` distinct texts are embedded with the offline model; message ``i`` of
the guild is pool text ``i mod pool`` (consecutive texts stay neighbours in
time and channel, as in the source conversation) with that text's vector,
perturbed (σ=``noise``) and re-normalised. Deterministic for a seed.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench._common import EXPORT

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{3,}")
# Question starts a member might type; the rest is words taken from a message.
ASKS = [
    "what did we say about {w}",
    "{w}?",
    "who mentioned {w}",
    "when did someone talk about {w}",
    "remind me about {w}",
    "did anyone bring up {w} before",
]
STOP = frozenset(
    "that this with have from they there their what about would could should which when were "
    "been just like your will into more some also than then them only other very know think "
    "make really because these those here over where while does doing being after before "
    "https http www com".split()
)


def export_texts(path: Path = EXPORT) -> list[str]:
    """The export's non-empty messages, in order."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    return [m["content"] for m in raw.get("messages", []) if (m.get("content") or "").strip()]


def remixed(texts: list[str], seed: int) -> list[str]:
    """The export re-mixed into longer messages: 1–4 consecutive ones joined."""
    rng = random.Random(seed)
    out: list[str] = []
    i = 0
    while i < len(texts):
        n = rng.choice((1, 1, 2, 3, 4))
        out.append("\n".join(texts[i : i + n]))
        i += n
    return out


def longmemeval_texts(path: Path) -> tuple[list[str], list[str]]:
    """(haystack turns in order, without repeats; the questions) of a LongMemEval file."""
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    items = json.loads(raw)
    seen: dict[str, None] = {}
    for item in items:
        for session in item.get("haystack_sessions", []):
            for turn in session:
                text = (turn.get("content") or "").strip()
                if text:
                    seen.setdefault(text, None)
    return list(seen), [str(item["question"]) for item in items if item.get("question")]


def ask(rng: random.Random, text: str) -> str | None:
    """A member's question about ``text``: one to three of its content words."""
    words = [w.lower() for w in _WORD.findall(text) if w.lower() not in STOP]
    if not words:
        return None
    start = rng.randrange(len(words))
    picked = " ".join(words[start : start + rng.choice((1, 2, 2, 3))])
    return rng.choice(ASKS).format(w=picked)


class MessageCorpus:
    """The texts, their pooled vectors, and the questions."""

    def __init__(self, data: Path | None, pool: int, noise: float, seed: int = 17) -> None:
        rng = random.Random(seed)
        asked: list[str] = []
        if data is not None:
            texts, asked = longmemeval_texts(data)
            texts = texts + export_texts()
            self.source = f"LongMemEval haystack turns ({data.name}) and the export"
        else:
            texts = remixed(export_texts(), seed)
            self.source = "the export's messages, re-mixed (1-4 consecutive joined)"
        # A contiguous run keeps the conversations' order; the start is random.
        start = rng.randrange(max(1, len(texts) - pool))
        self.texts = texts[start : start + pool]
        self.noise = noise
        self.seed = seed
        self.asked = asked
        self.vecs: np.ndarray | None = None
        self.embed_seconds = 0.0

    def embed(self, emb: Any) -> None:
        started = time.perf_counter()
        self.vecs = emb.embed_sync(self.texts)
        self.embed_seconds = time.perf_counter() - started

    def questions(self, n: int) -> list[str]:
        """The data's own questions first (LongMemEval), then questions made
        from random messages' words, ``n`` distinct in all."""
        rng = random.Random(self.seed + 1)
        out: dict[str, None] = dict.fromkeys(self.asked[: n // 2])
        for _ in range(50 * n):
            if len(out) >= n:
                break
            q = ask(rng, rng.choice(self.texts))
            if q:
                out.setdefault(q, None)
        return list(out)

    def messages(
        self, guild: str, first: int, n: int, channels: list[str], members: list[tuple[str, str]]
    ) -> list[tuple[Any, np.ndarray]]:
        """Messages ``first`` .. ``first + n`` of the guild, with vectors: about
        ten minutes apart over the guild's history, a conversation (a run of
        pool texts) per channel and a few speakers in each."""
        from memory.models import IncomingMessage

        assert self.vecs is not None
        rng = random.Random(self.seed * 1000 + first)
        nrng = np.random.default_rng(self.seed * 1000 + first)
        base = time.time() - 3 * 365 * 86400
        out: list[tuple[Any, np.ndarray]] = []
        idx = [(first + i) % len(self.texts) for i in range(n)]
        noise = nrng.normal(0.0, self.noise, (n, self.vecs.shape[1])).astype(np.float32)
        vecs = self.vecs[idx] + noise
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        for i in range(n):
            seq = first + i
            run = seq // 40  # 40 messages per conversation: its channel and speakers
            crng = random.Random(run)
            who = members[
                crng.randrange(len(members)) if rng.random() < 0.5 else run % len(members)
            ]
            m = IncomingMessage(
                id=str(7 * 10**17 + seq),
                guild_id=guild,
                channel_id=channels[crng.randrange(len(channels))],
                author_id=who[0],
                author_name=who[1],
                content=self.texts[idx[i]],
                created_at=_iso(base + seq * 600 + rng.random() * 300),
                source="import",
            )
            out.append((m, vecs[i].astype(np.float32)))
        return out


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(ts))
