"""Bounded admission of pull queries: at most N at once, at most Q waiting, the rest turned away.

No I/O. A query that finds the queue full is answered 429 with Retry-After at once (ksqlDB's
42900), never left to hang: overload must be visible to clients so they back off or go elsewhere.
Used from the event loop only (one per app), so an ``asyncio.Semaphore`` plus a waiting counter is
enough.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from headwater.gateway.errors import KsqlError


class Admission:
    """Admits at most ``running`` queries at once with at most ``waiting`` more queued.

    Args:
        running: queries executed at the same time (>= 1).
        waiting: queries allowed to wait for a slot (>= 0).
        what: what is admitted, for the 429 message.
    """

    def __init__(self, running: int, waiting: int, what: str = "pull queries") -> None:
        if running < 1 or waiting < 0:
            raise ValueError(f"running must be >= 1 and waiting >= 0, not {running}, {waiting}")
        self.running = running
        self.waiting = waiting
        self.what = what
        self._slots: asyncio.Semaphore | None = None
        self._queued = 0

    @property
    def queued(self) -> int:
        """Queries waiting now."""
        return self._queued

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a slot for the body of the ``async with``.

        Raises:
            KsqlError: 42900 (HTTP 429, retriable) when the queue is full.
        """
        await self.acquire()
        try:
            yield
        finally:
            self.release()

    async def acquire(self) -> None:
        """Take a slot (waiting in the queue); :meth:`release` it exactly once, on the loop.

        Raises:
            KsqlError: 42900 (HTTP 429, retriable) when the queue is full.
        """
        if self._slots is None:  # created lazily: it binds to the running loop
            self._slots = asyncio.Semaphore(self.running)
        slots = self._slots
        if slots.locked():
            if self._queued >= self.waiting:
                raise KsqlError(
                    f"too many {self.what}: {self.running} running and {self._queued} waiting; "
                    "retry shortly or use another server",
                    42900,
                    kind="generic_error",
                    retriable=True,
                )
            self._queued += 1
            try:
                await slots.acquire()
            finally:
                self._queued -= 1
        else:
            await slots.acquire()

    def release(self) -> None:
        """Give back a slot taken with :meth:`acquire`."""
        assert self._slots is not None, "release() without acquire()"
        self._slots.release()
