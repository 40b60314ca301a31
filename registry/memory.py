"""A registry kept in this process's memory, with the rules of the real one. Pure (no I/O).

Decisions are applied to a :class:`~headwater.registry.state.RegistryState` directly instead of
through a topic: for tests and the conformance runners, which mock a registry per case as ksqlDB's
own runners do, with the same parsing, canonical texts, ids and compatibility rules as the node's.
It has :class:`~headwater.registry.log.RegistryLog`'s ``read`` and ``write``, and pickles (the
QTT runner ships a case's registry to Spark's workers).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from headwater.registry.operations import Decision
from headwater.registry.state import RegistryState


class MemoryRegistryLog:
    """A registry's state in memory, written and read as a ``RegistryLog`` is."""

    def __init__(self) -> None:
        self._state = RegistryState()
        self._lock = threading.Lock()

    def read(self, reader: Callable[[RegistryState], Any]) -> Any:
        with self._lock:
            return reader(self._state)

    def write(self, decide: Callable[[RegistryState], Decision], timeout_s: float = 0.0) -> Any:
        with self._lock:
            decision = decide(self._state)
            if decision.record is not None:
                self._state.feed(self._state.next_offset, decision.record)
            return decision.answer

    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            return {"state": self._state}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._state = state["state"]
        self._lock = threading.Lock()
