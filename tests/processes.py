"""A real ``guildlore`` subprocess under a test: its output collected line by
line, waited on by condition (a line appearing), stopped by a signal. Shared
by the tests that run whole processes (tests/bot/test_shards.py,
tests/bot/test_catch_up_processes.py, tests/db/test_pg_outage.py)."""

from __future__ import annotations

import asyncio
import signal
from dataclasses import dataclass, field

# A condition's deadline: reached only when something is wrong, so generous
# enough for a saturated machine.
WAIT_S = 120.0


@dataclass
class Proc:
    """A subprocess (stdout and stderr piped) whose lines are kept."""

    name: str
    proc: asyncio.subprocess.Process
    lines: list[str] = field(default_factory=list)
    _readers: list[asyncio.Task[None]] = field(default_factory=list)
    _new_line: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        for stream in (self.proc.stdout, self.proc.stderr):
            assert stream is not None
            self._readers.append(asyncio.create_task(self._read(stream)))

    async def _read(self, stream: asyncio.StreamReader) -> None:
        while raw := await stream.readline():
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))
            self._new_line.set()

    def count(self, text: str) -> int:
        return sum(text in line for line in self.lines)

    async def line_with(self, text: str, *, times: int = 1, timeout: float = WAIT_S) -> str:
        """The ``times``-th line holding ``text``, waiting for it; fails at
        once if the process exits first."""
        async with asyncio.timeout(timeout):
            while True:
                found = [line for line in self.lines if text in line]
                if len(found) >= times:
                    return found[times - 1]
                if self.proc.returncode is not None:
                    raise AssertionError(f"{self.name} exited: {self.log()}")
                self._new_line.clear()
                await self._new_line.wait()

    def log(self) -> str:
        return "\n".join(self.lines[-80:])

    async def wait(self, timeout: float = WAIT_S) -> int:
        """Its exit status, once it exited and its output is read."""
        code = await asyncio.wait_for(self.proc.wait(), timeout)
        for task in self._readers:
            await task
        return code

    async def stop(self, sig: int = signal.SIGTERM, timeout: float = WAIT_S) -> int:
        if self.proc.returncode is None:
            self.proc.send_signal(sig)
        return await self.wait(timeout)
