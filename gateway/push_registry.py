"""The push queries and PRINTs a server runs: ids, stop flags, a bound, and what SHOW QUERIES lists.
Pure (threads only, no I/O)."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, replace

from headwater.gateway.errors import KsqlError


@dataclass(frozen=True, slots=True)
class RunningPush:
    """A running push query, as SHOW QUERIES lists it (ksqlDB's queryType PUSH).

    Attributes:
        query_id: its id (the header's ``queryId``; ``/close-query`` takes it).
        statement_text: the statement.
        engine_query_id: the transient Spark query that computes it (a push query with state),
            whose state is the push query's; None: it reads its source's topic directly.
    """

    query_id: str
    statement_text: str
    engine_query_id: str | None = None


class PushQueries:
    """The push queries a server runs: their ids and stop flags, at most ``max_running``."""

    def __init__(self, max_running: int = 100) -> None:
        self.max_running = max_running
        self._lock = threading.Lock()
        self._running: dict[str, threading.Event] = {}
        self._listed: dict[str, RunningPush] = {}

    def start(
        self, statement_text: str | None = None, prefix: str = "transient_"
    ) -> tuple[str, threading.Event]:
        """A new query id (``prefix`` and 16 hex digits) and its stop flag; with
        ``statement_text`` (a push query, not a PRINT) SHOW QUERIES lists it.

        Raises:
            KsqlError: 429 when ``max_running`` queries run already.
        """
        with self._lock:
            if len(self._running) >= self.max_running:
                raise KsqlError(
                    f"this server runs {self.max_running} push queries already "
                    "(the most it runs at once): retry later",
                    42900,
                    retriable=True,
                )
            query_id = f"{prefix}{uuid.uuid4().hex[:16]}"
            stop = self._running[query_id] = threading.Event()
            if statement_text is not None:
                self._listed[query_id] = RunningPush(query_id, statement_text)
            return query_id, stop

    def computed_by(self, query_id: str, engine_query_id: str) -> None:
        """Records the transient Spark query that computes push query ``query_id``."""
        with self._lock:
            listed = self._listed.get(query_id)
            if listed is not None:
                self._listed[query_id] = replace(listed, engine_query_id=engine_query_id)

    def end(self, query_id: str) -> None:
        with self._lock:
            self._running.pop(query_id, None)
            self._listed.pop(query_id, None)

    def close(self, query_id: str) -> bool:
        """Stops a running query; whether it was running."""
        with self._lock:
            stop = self._running.get(query_id)
        if stop is None:
            return False
        stop.set()
        return True

    def running(self) -> list[str]:
        with self._lock:
            return sorted(self._running)

    def listed(self) -> list[RunningPush]:
        """The running push queries (not PRINTs), by id."""
        with self._lock:
            return [self._listed[q] for q in sorted(self._listed)]
