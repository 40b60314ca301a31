"""Whether Kafka answers, for ``/metrics``: a metadata request now and then, off the scrape's path.

A scrape must not wait on Kafka (a broker that is down would hold every scrape for the probe's
timeout), and must not make one request per scrape either. So :class:`BrokerProbe` answers with
the last probe's result and, when that is older than its interval, starts the next one in a
background thread: at most one probe in flight, at most one every ``interval_s``. Only the first
scrape, when nothing is known yet, waits for an answer (bounded by the probe's own timeout).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

#: How often Kafka is asked at most (Prometheus scrapes every 15-60 s by default).
INTERVAL_S = 5.0


@dataclass(frozen=True, slots=True)
class BrokerSeen:
    """One probe's answer: whether Kafka answered, with how many brokers, when and how fast."""

    up: bool
    brokers: int
    at: float  # Unix time the probe started
    seconds: float
    error: str = ""


class BrokerProbe:
    """Asks ``ask`` (which returns the number of brokers in a metadata answer, or raises) at most
    every ``interval_s`` (see the module docstring)."""

    def __init__(
        self,
        ask: Callable[[], int],
        *,
        interval_s: float = INTERVAL_S,
        first_wait_s: float = 2.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ask = ask
        self._interval_s = interval_s
        self._first_wait_s = first_wait_s
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: BrokerSeen | None = None
        self._asked_at: float | None = None
        self._running: threading.Thread | None = None

    def latest(self) -> BrokerSeen | None:
        """The last answer (None: none yet), starting the next probe when it is due."""
        with self._lock:
            now = self._clock()
            due = self._asked_at is None or now - self._asked_at >= self._interval_s
            if due and self._running is None:
                self._asked_at = now
                self._running = threading.Thread(target=self._probe, name="broker-probe")
                self._running.daemon = True
                self._running.start()
            running, seen = self._running, self._seen
        if seen is None and running is not None:
            running.join(self._first_wait_s)
            with self._lock:
                seen = self._seen
        return seen

    def _probe(self) -> None:
        started, wall = time.perf_counter(), time.time()
        try:
            seen = BrokerSeen(True, self._ask(), wall, time.perf_counter() - started)
        except Exception as exc:  # noqa: BLE001 - any failure to answer is "down", with its reason
            seen = BrokerSeen(False, 0, wall, time.perf_counter() - started, str(exc))
        with self._lock:
            self._seen = seen
            self._running = None
