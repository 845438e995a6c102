"""``Memory.receipts``: deletion receipts — what an erase removed, as counts
per kind, under an id the member is shown (``/memory forget-me``,
``forget-fact``, ``guildlore forget``). A receipt holds no erased text; it
stays after the erase (and after a purge of the guild) so an operator can
look it up by id and check that nothing from before it came back
(``verify``)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from memory.clock import Clock, iso
from memory.db.core import Connection, Database
from memory.store import receipts as store
from memory.store.receipts import Receipt

# Crockford's base 32 without the look-alikes: an id read aloud or retyped
# from a screenshot survives.
_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
ID_PREFIX = "R-"


def new_receipt_id() -> str:
    """``R-`` and 12 random characters in three groups (60 bits)."""
    chars = "".join(secrets.choice(_ALPHABET) for _ in range(12))
    return f"{ID_PREFIX}{chars[:4]}-{chars[4:8]}-{chars[8:]}"


def normalise_receipt_id(text: str) -> str:
    """A receipt id as typed (any case, spaces, O for 0) in its stored form."""
    raw = "".join(text.split()).upper().replace("-", "")
    if len(raw) == 13 and raw.startswith("R"):  # the prefix; the id itself may start with R
        raw = raw[1:]
    raw = raw.replace("O", "0").replace("I", "1").replace("L", "1")
    if len(raw) != 12 or any(c not in _ALPHABET for c in raw):
        return ""
    return f"{ID_PREFIX}{raw[:4]}-{raw[4:8]}-{raw[8:]}"


@dataclass(frozen=True)
class Verification:
    """A receipt, and what memory still holds of its member from before it."""

    receipt: Receipt
    remaining: dict[str, int]

    @property
    def clean(self) -> bool:
        return not any(self.remaining.values())


class Receipts:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    @staticmethod
    def add(
        con: Connection,
        *,
        guild_id: str | None,
        user_id: str,
        scope: str,
        actor: str,
        counts: Mapping[str, int],
        now: str,
    ) -> Receipt:
        """Write a receipt inside the erase's own transaction."""
        return store.add_receipt(
            con,
            new_receipt_id(),
            guild_id=guild_id,
            user_id=user_id,
            scope=scope,
            actor=actor,
            counts=counts,
            now=now,
        )

    async def record(
        self,
        *,
        guild_id: str | None,
        user_id: str,
        scope: str,
        actor: str,
        counts: Mapping[str, int],
    ) -> Receipt:
        now = iso(self._clock())

        def work(con: Connection) -> Receipt:
            return self.add(
                con,
                guild_id=guild_id,
                user_id=user_id,
                scope=scope,
                actor=actor,
                counts=counts,
                now=now,
            )

        receipt: Receipt = await self._db.write(work)
        return receipt

    async def get(self, receipt_id: str) -> Receipt | None:
        key = normalise_receipt_id(receipt_id)
        if not key:
            return None
        found: Receipt | None = await self._db.read(store.get_receipt, key)
        return found

    async def recent(self, guild_id: str | None = None, limit: int = 20) -> list[Receipt]:
        return list(await self._db.read(store.recent_receipts, guild_id, max(1, min(200, limit))))

    async def verify(self, receipt_id: str) -> Verification | None:
        """The receipt and what memory holds now of its member from before it
        (None: no such receipt)."""
        receipt = await self.get(receipt_id)
        if receipt is None:
            return None
        left = await self._db.read(store.remaining, receipt)
        return Verification(receipt, dict(left))
