"""A server's state for routing and forwarding pull queries: pooled HTTP connections to its peers,
and the cluster's routing inputs, reused for a few milliseconds.

Two clients: :meth:`Forwarding.client` (httpx, from worker threads: scans and fan-outs with
replica failover) and :meth:`Forwarding.exchange` (on the event loop: a key lookup forwarded to
the one server that holds its partition). The second writes HTTP/1.1 requests on kept-alive
asyncio connections and reads ``Content-Length`` answers, nothing more: what a forwarded lookup
needs, at a fraction of a general client's cost per request (bench.pull_qps).

Routing a pull query reads the assignment, every server's liveness and every replica's lag
report. Those change when the controller decides, a check marks a server up or down, or a lag
report arrives (every few hundred milliseconds at most); reading them afresh for every query cost
more than the query itself (bench.pull_qps). :meth:`Forwarding.routing_inputs` reads them at most
once per ``ttl_s`` (50 ms): a server marked down is routed around at most that much later. Bounds
stay exact: the replica that answers checks its own lag against the query's bound before it reads.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = ["ROUTING_TTL_S", "ExchangeFailed", "Forwarding", "RoutingInputs"]


class ExchangeFailed(Exception):
    """A peer did not answer (connection refused or lost, timeout, a malformed answer)."""


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

    def __init__(
        self,
        ttl_s: float = ROUTING_TTL_S,
        clock: Callable[[], float] = time.monotonic,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._ttl_s = ttl_s
        self._tls = tls
        self._clock = clock
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None
        self._inputs: RoutingInputs | None = None
        # idle connections per peer, for one event loop (a new loop starts an empty pool)
        self._idle: dict[str, list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]] = {}
        self._idle_loop: asyncio.AbstractEventLoop | None = None

    @property
    def scheme(self) -> str:
        """``https`` when peers are reached over TLS, else ``http``."""
        return "http" if self._tls is None else "https"

    def client(self, timeout_s: float) -> httpx.Client:
        """The pooled client to peers (made on first use)."""
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    limits = httpx.Limits(max_connections=64, max_keepalive_connections=32)
                    self._client = httpx.Client(
                        timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 0.5)),
                        limits=limits,
                        verify=self._tls or True,
                    )
                client = self._client
        return client

    def routing_inputs(
        self, read: Callable[[], RoutingInputs], fresh: bool = False
    ) -> RoutingInputs:
        """The routing inputs, read again when older than the TTL (or when ``fresh``)."""
        inputs = self._inputs
        now = self._clock()
        if fresh or inputs is None or now - inputs.read_at > self._ttl_s:
            inputs = read()
            self._inputs = inputs
        return inputs

    async def exchange(
        self, host: str, path: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> tuple[int, bytes]:
        """POST ``body`` to ``http(s)://host/path`` on a kept-alive connection: (status, body).

        A request that fails on a reused connection (the peer closed it meanwhile) is sent once
        more on a new one; pull queries are reads, so sending twice is harmless.

        Raises:
            ExchangeFailed: no answer within ``timeout_s``, or none at all.
        """
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        request = (
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\n{head}Content-Length: {len(body)}\r\n\r\n"
        ).encode("latin-1") + body
        try:
            async with asyncio.timeout(timeout_s):
                for attempt in (0, 1):
                    connection, reused = await self._connection(host, fresh=attempt > 0)
                    try:
                        answer = await _exchange(connection, request)
                    except (OSError, asyncio.IncompleteReadError, ValueError) as error:
                        connection[1].close()
                        if reused and attempt == 0:
                            continue
                        raise ExchangeFailed(f"{host}: {error or type(error).__name__}") from None
                    self._idle.setdefault(host, []).append(connection)
                    return answer
        except TimeoutError:
            raise ExchangeFailed(f"{host}: no answer within {timeout_s:g} s") from None
        raise ExchangeFailed(f"{host}: no answer")  # pragma: no cover - the loop returns or raises

    async def _connection(
        self, host: str, fresh: bool
    ) -> tuple[tuple[asyncio.StreamReader, asyncio.StreamWriter], bool]:
        loop = asyncio.get_running_loop()
        if self._idle_loop is not loop:
            self._idle, self._idle_loop = {}, loop
        idle = self._idle.get(host)
        while idle and not fresh:
            connection = idle.pop()
            if not connection[1].is_closing():
                return connection, True
        name, _, port = host.rpartition(":")
        try:
            if self._tls is None:
                return await asyncio.open_connection(name, int(port)), False
            return await asyncio.open_connection(
                name, int(port), ssl=self._tls, server_hostname=name.strip("[]")
            ), False
        except (OSError, ValueError, ssl.SSLError) as error:
            raise ExchangeFailed(f"{host}: {error}") from None

    def invalidate(self) -> None:
        """Forget the routing inputs: the next query reads them afresh."""
        self._inputs = None

    def close(self) -> None:
        """Close the peers' connections."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()
        for connections in self._idle.values():
            for _, writer in connections:
                writer.close()
        self._idle = {}


async def _exchange(
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter], request: bytes
) -> tuple[int, bytes]:
    """One request and its answer on ``connection`` (HTTP/1.1, Content-Length bodies)."""
    reader, writer = connection
    writer.write(request)
    header = await reader.readuntil(b"\r\n\r\n")
    status = int(header[9:12])
    length = None
    for line in header.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if length is None:
        raise ValueError("an answer without Content-Length")
    return status, await reader.readexactly(length)
