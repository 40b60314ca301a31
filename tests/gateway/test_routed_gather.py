"""gateway.routed.gather: a forwarded scan to a host marked down while it answers moves on at
once to the partition's next replica (issue 21, item 6), without real servers."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from headwater.gateway import routed
from headwater.gateway.routed import PartialAnswer


@dataclass
class _Cluster:
    alive: set[str] = field(default_factory=lambda: {"a:1", "b:1", "c:1"})

    def live(self) -> frozenset[str]:
        return frozenset(self.alive)


@dataclass
class _Services:
    cluster: _Cluster
    advertised: str = "c:1"


@pytest.fixture
def frozen_a(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Host a:1 never answers (until released at teardown); b:1 answers at once."""
    release = threading.Event()

    def forward(
        services: Any,
        host: str,
        text: str,
        properties: Any,
        parts: Sequence[int],
        timeout_s: float | None = None,
    ) -> PartialAnswer:
        if host == "a:1":
            release.wait(10)
            raise httpx.ReadTimeout(f"{host}: no answer")
        return PartialAnswer(
            host, tuple(parts), [[host, p] for p in parts], [(p, host, 5, 0) for p in parts]
        )

    monkeypatch.setattr(routed, "forward", forward)
    yield release
    release.set()


def _no_local(parts: tuple[int, ...]) -> PartialAnswer:
    raise AssertionError("nothing is planned here")


def test_a_host_marked_down_while_answering_is_replaced_at_once(frozen_a: threading.Event) -> None:
    cluster = _Cluster()
    services: Any = _Services(cluster)
    threading.Timer(0.2, lambda: cluster.alive.discard("a:1")).start()  # its heartbeats stop
    started = time.monotonic()
    answers = routed.gather(services, {0: ["a:1", "b:1"], 1: ["b:1"]}, _no_local, "SELECT", {})
    assert time.monotonic() - started < 1.0
    assert [(a.host, a.partitions) for a in answers] == [("b:1", (0,)), ("b:1", (1,))]


def test_a_live_host_is_waited_for(frozen_a: threading.Event) -> None:
    services: Any = _Services(_Cluster())
    threading.Timer(0.5, frozen_a.set).start()  # slow, alive, then fails
    started = time.monotonic()
    answers = routed.gather(services, {0: ["a:1", "b:1"]}, _no_local, "SELECT", {})
    assert time.monotonic() - started >= 0.5
    assert [(a.host, a.partitions) for a in answers] == [("b:1", (0,))]
