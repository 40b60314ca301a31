"""A server's state for routing and forwarding pull queries: one pooled HTTP client to its peers,
and the cluster's routing inputs, reused for a few milliseconds.

Routing a pull query reads the assignment, every server's liveness and every replica's lag
report. Those change when the controller decides, a check marks a server up or down, or a lag
report arrives (every few hundred milliseconds at most); reading them afresh for every query cost
more than the query itself (bench.pull_qps). :meth:`Forwarding.routing_inputs` reads them at most
once per ``ttl_s`` (50 ms): a server marked down is routed around at most that much later. Bounds
stay exact: the replica that answers checks its own lag against the query's bound before it reads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = ["ROUTING_TTL_S", "Forwarding", "RoutingInputs"]

ROUTING_TTL_S = 0.05


@dataclass(slots=True)
class RoutingInputs:
    """The cluster as routing reads it at one moment."""

    state: Any  # cluster.epochs.ControlState
    alive: Mapping[str, bool]
    host_lags: Mapping[str, Any]  # {host: {table: {partition: LagInfo}}}
    read_at: float
    replica_lags: dict[tuple[str, int], Any] = field(default_factory=dict)
    routes: dict[tuple[Any, ...], Any] = field(default_factory=dict)  # decisions, by bound


class Forwarding:
    """Per server: the peers' HTTP client (kept-alive connections) and routing inputs."""

    def __init__(self, ttl_s: float = ROUTING_TTL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        self._ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None
        self._inputs: RoutingInputs | None = None

    def client(self, timeout_s: float) -> httpx.Client:
        """The pooled client to peers (made on first use)."""
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    limits = httpx.Limits(max_connections=64, max_keepalive_connections=32)
                    self._client = httpx.Client(
                        timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 0.5)),
                        limits=limits)  # fmt: skip
                client = self._client
        return client

    def routing_inputs(self, read: Callable[[], RoutingInputs], fresh: bool = False) -> RoutingInputs:
        """The routing inputs, read again when older than the TTL (or when ``fresh``)."""
        inputs = self._inputs
        now = self._clock()
        if fresh or inputs is None or now - inputs.read_at > self._ttl_s:
            inputs = read()
            self._inputs = inputs
        return inputs

    def close(self) -> None:
        """Close the peers' connections."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()
