"""``gateway/broker_probe.py``: Kafka asked off the scrape's path, at most once per interval."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from headwater.gateway.broker_probe import BrokerProbe


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _wait_for(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_the_first_answer_is_waited_for_and_later_ones_are_not() -> None:
    asked: list[int] = []
    release = threading.Event()
    release.set()

    def ask() -> int:
        asked.append(1)
        assert release.wait(5)
        return 3

    clock = _Clock()
    probe = BrokerProbe(ask, interval_s=5, clock=clock)
    first = probe.latest()
    assert first is not None and first.up and first.brokers == 3 and len(asked) == 1
    assert first.seconds >= 0 and first.at > 1e9

    clock.now += 1  # within the interval: the same answer, Kafka not asked
    assert probe.latest() is first and len(asked) == 1

    # due: the next probe starts in the background, and a slow Kafka holds no scrape
    release.clear()
    clock.now += 5
    started = time.monotonic()
    assert probe.latest() is first
    assert probe.latest() is first  # one probe in flight at most
    assert time.monotonic() - started < 0.5
    _wait_for(lambda: len(asked) == 2)
    release.set()
    _wait_for(lambda: probe.latest() is not first)
    assert len(asked) == 2


def test_a_kafka_that_does_not_answer_reads_as_down_with_the_reason() -> None:
    def ask() -> int:
        raise RuntimeError("KafkaError{code=_TRANSPORT,val=-195}")

    seen = BrokerProbe(ask).latest()
    assert seen is not None and not seen.up and seen.brokers == 0
    assert "_TRANSPORT" in seen.error


def test_the_first_wait_is_bounded() -> None:
    hold = threading.Event()
    probe = BrokerProbe(lambda: int(hold.wait(5)), first_wait_s=0.05)
    started = time.monotonic()
    assert probe.latest() is None  # nothing known yet: nothing said
    assert time.monotonic() - started < 1
    hold.set()
    _wait_for(lambda: probe.latest() is not None)
