"""How a submission gives way after a lost attempt (pure policy, and the wait on the log)."""

from __future__ import annotations

import threading
import time

import pytest

from headwater.kafka.clients import KafkaSettings
from headwater.metastore.submit import CommandSubmitter, _Lost, retry_pause


def test_the_pause_grows_with_the_attempts_and_with_how_long_one_takes() -> None:
    assert retry_pause(1, 0.01, 0.05, 1.0) == pytest.approx(0.05)
    assert retry_pause(2, 0.01, 0.05, 1.0) == pytest.approx(0.10)
    # An attempt that took 0.3 s (a slow broker, a loaded machine): the rival's whole attempt must
    # fit in the pause, so it scales with that, not with the fixed backoff.
    assert retry_pause(1, 0.3, 0.05, 1.0) == pytest.approx(0.3)
    assert retry_pause(3, 0.3, 0.05, 0.5) == pytest.approx(0.6)
    assert retry_pause(9, 5.0, 0.05, 1.5) == 2.0  # bounded


class _Runner:
    """The part of CommandRunner a pause uses: the log's position moves when a rival commits."""

    def __init__(self) -> None:
        self.position = 10
        self._changed = threading.Condition()

    def advance(self, to: int) -> None:
        with self._changed:
            self.position = to
            self._changed.notify_all()

    def wait_for_position(self, offset: int, timeout_s: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self.position >= offset, timeout_s)


def _submitter(runner: _Runner) -> CommandSubmitter:
    return CommandSubmitter(KafkaSettings("127.0.0.1:1"), "svc", "t", runner, None)  # type: ignore[arg-type]


def test_a_lost_attempt_waits_for_the_rivals_record_and_no_longer() -> None:
    runner = _Runner()
    submitter = _submitter(runner)
    threading.Timer(0.2, runner.advance, args=(12,)).start()
    started = time.monotonic()
    # attempt 4 of one that took 1 s: a pause of at least 4 s, cut short by the rival's commit
    submitter._yield_to_others(_Lost(10, "fenced"), 4, 1.0)
    assert 0.15 < time.monotonic() - started < 1.5


def test_a_lost_attempt_that_never_read_the_log_just_pauses() -> None:
    runner = _Runner()
    started = time.monotonic()
    _submitter(runner)._yield_to_others(_Lost(None, "init_transactions timed out"), 1, 0.2)
    assert 0.09 < time.monotonic() - started < 1.0
