"""Heartbeat messages (KLIP-12) and the book of heartbeats received. No I/O, no clock.

The body of ``POST /heartbeat`` is ksqlDB's ``HeartbeatMessage``:
``{"hostInfo": {"host": ..., "port": ...}, "timestamp": <sender's ms>}``. The receiver ignores the
sender's timestamp for liveness: it records the arrival time on its own clock (passed in), as
``liveness.decide`` expects. :class:`HeartbeatBook` is the thread-safe state the agent's receiver
(HTTP handler) and checker thread share; every method takes ``now_ms`` from its caller.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Collection, Mapping
from typing import Any

from headwater.cluster.liveness import HeartbeatSettings, HostStatus, decide


class BadClusterMessage(ValueError):
    """A heartbeat or lag report whose body is not in the expected shape."""


def host_info(server_id: str) -> dict[str, Any]:
    """ksqlDB's ``KsqlHostInfoEntity`` of a ``host:port`` server id."""
    host, port = server_id.rsplit(":", 1)
    return {"host": host, "port": int(port)}


def sender_of(body: Mapping[str, Any]) -> str:
    """The ``host:port`` id named by a message's ``hostInfo``.

    Args:
        body: a decoded heartbeat or lag report.

    Returns:
        The sender's server id.

    Raises:
        BadClusterMessage: ``hostInfo`` is missing or malformed.
    """
    info = body.get("hostInfo") if isinstance(body, Mapping) else None
    if not isinstance(info, Mapping):
        raise BadClusterMessage('the message needs a "hostInfo" object')
    host, port = info.get("host"), info.get("port")
    if (
        not isinstance(host, str)
        or not host
        or isinstance(port, bool)
        or not isinstance(port, int)
        or not 0 < port < 65536
    ):
        raise BadClusterMessage('"hostInfo" needs a "host" string and a "port" in 1..65535')
    return f"{host}:{port}"


def timestamp_of(body: Mapping[str, Any]) -> int:
    """The sender's ``timestamp`` (ms) of a message.

    Raises:
        BadClusterMessage: it is missing or not an integer.
    """
    value = body.get("timestamp")
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadClusterMessage('the message needs an integer "timestamp"')
    return value


def heartbeat_body(server_id: str, now_ms: int) -> dict[str, Any]:
    """The ``POST /heartbeat`` body this server sends at ``now_ms``."""
    return {"hostInfo": host_info(server_id), "timestamp": now_ms}


def parse_heartbeat(body: Mapping[str, Any]) -> tuple[str, int]:
    """A heartbeat's sender id and timestamp.

    Raises:
        BadClusterMessage: the body is not a heartbeat.
    """
    return sender_of(body), timestamp_of(body)


_STALL_CHECKS = 3
"""A gap of more than this many check intervals between two decisions means this server stalled."""


class HeartbeatBook:
    """Heartbeat arrival times per peer and the latest decision over them. Thread-safe.

    Args:
        settings: the heartbeat settings (window and thresholds).
    """

    def __init__(self, settings: HeartbeatSettings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        # Enough slots for every heartbeat of a window sent at twice the agreed rate.
        self._keep = 2 * settings.window_ms // settings.send_interval_ms + 8
        self._received: dict[str, deque[int]] = {}
        self._statuses: dict[str, HostStatus] = {}
        self._last_decide_ms: int | None = None
        self._resumed_ms: int | None = None

    def record(self, host: str, now_ms: int) -> None:
        """Note that a heartbeat from ``host`` arrived at ``now_ms`` (this server's clock)."""
        with self._lock:
            times = self._received.get(host)
            if times is None:
                times = self._received[host] = deque(maxlen=self._keep)
            times.append(now_ms)

    def senders(self) -> frozenset[str]:
        """Every host a heartbeat was received from within the window (a server that left, or
        died for good, stops being one)."""
        with self._lock:
            return frozenset(host for host, times in self._received.items() if times)

    def decide(self, members: Collection[str], now_ms: int) -> dict[str, HostStatus]:
        """Run ``liveness.decide`` for ``members`` at ``now_ms`` and keep the result.

        Args:
            members: the peers to decide (never the local server).
            now_ms: the decision time (this server's clock).

        Returns:
            The new status of each member.
        """
        with self._lock:
            last, self._last_decide_ms = self._last_decide_ms, now_ms
            if (
                last is not None
                and now_ms - last > _STALL_CHECKS * self._settings.check_interval_ms
            ):
                self._resumed_ms = now_ms
            grace = (self._settings.missed_threshold + 1) * self._settings.send_interval_ms
            if self._resumed_ms is not None and now_ms - self._resumed_ms <= grace:
                # This server was frozen (SIGSTOP, a long GC or swap): the heartbeats it "missed"
                # were sent but not read. Decide nothing until peers have had the time to be heard.
                return dict(self._statuses)
            start = now_ms - self._settings.window_ms
            for times in self._received.values():
                while times and times[0] < start:
                    times.popleft()
            heartbeats = {host: tuple(times) for host, times in self._received.items()}
            self._statuses = decide(
                self._statuses, heartbeats, now_ms, self._settings, members=members
            )
            return dict(self._statuses)

    def statuses(self) -> dict[str, HostStatus]:
        """The latest decision (empty before the first)."""
        with self._lock:
            return dict(self._statuses)
