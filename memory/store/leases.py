"""SQL for job leases: work that must run once across processes sharing one
database takes a named lease first; a holder that stops renewing (a crash)
loses it once it expires, and the next taker gets it."""

from __future__ import annotations

import functools
import os
import secrets
import socket
from dataclasses import dataclass

from memory.db.core import Connection


@functools.cache
def process_holder() -> str:
    """This process's holder name, the same for every engine it opens: host,
    pid and a random part (a pid is reused after a restart; the random part
    tells the two runs apart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


@dataclass(frozen=True)
class Lease:
    name: str
    holder: str
    expires_at: str


def acquire(con: Connection, name: str, holder: str, now: str, expires_at: str) -> bool:
    """Take ``name`` for ``holder`` until ``expires_at``: a new lease, one the
    holder already has (extended), or one that expired at ``now`` (taken over).
    Run in one write transaction, so two contenders cannot both win."""
    con.execute(
        "INSERT INTO job_leases (name, holder, expires_at) VALUES (?, ?, ?) "
        "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, "
        "expires_at = excluded.expires_at "
        "WHERE job_leases.holder = excluded.holder OR job_leases.expires_at <= ?",
        (name, holder, expires_at, now),
    )
    row = con.execute("SELECT holder FROM job_leases WHERE name = ?", (name,)).fetchone()
    return row is not None and row[0] == holder


def renew(con: Connection, name: str, holder: str, expires_at: str) -> bool:
    """Extend a lease ``holder`` still has; False if another took it over."""
    cur = con.execute(
        "UPDATE job_leases SET expires_at = ? WHERE name = ? AND holder = ?",
        (expires_at, name, holder),
    )
    return int(cur.rowcount) == 1


def release(con: Connection, name: str, holder: str) -> bool:
    """Give a lease up (only its holder can); False if it was not held."""
    cur = con.execute("DELETE FROM job_leases WHERE name = ? AND holder = ?", (name, holder))
    return int(cur.rowcount) == 1


def leases(con: Connection) -> list[Lease]:
    rows = con.execute("SELECT name, holder, expires_at FROM job_leases ORDER BY name")
    return [Lease(str(r[0]), str(r[1]), str(r[2])) for r in rows.fetchall()]
