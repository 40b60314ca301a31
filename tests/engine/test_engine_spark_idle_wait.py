"""An idle query's source holds Spark's question for new records until some arrive (bounded), so
an idle query costs a few triggers a second rather than ten (kafka_source.KafkaStreamReader)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

from headwater.engine.spark import file_change
from headwater.engine.spark.file_change import FileChange, changed_at
from headwater.engine.spark.kafka_source import KafkaStreamReader
from headwater.engine.spark.shared_ends import _write_atomically, ends_text

IDLE_WAIT_S = 0.5


def _reader(path: Path, idle_wait_ms: int = 500) -> KafkaStreamReader:
    return KafkaStreamReader(
        {
            "bootstrap.servers": "127.0.0.1:1",  # never reached: the ends file answers
            "topic": "t",
            "partitions": "2",
            "endsfile": str(path),
            "idlewaitms": str(idle_wait_ms),
        }
    )


def _write(path: Path, first: int, second: int) -> None:
    _write_atomically(path, ends_text({"t": {0: first, 1: second}}, time.time()))


def _answered_once(path: Path, start: dict[str, int], idle_wait_ms: int = 500) -> KafkaStreamReader:
    """A reader whose source has already read the ends file once (only then does it hold)."""
    reader = _reader(path, idle_wait_ms)
    reader.latestOffset(start, ReadAllAvailable())
    return reader


def test_records_waiting_are_answered_at_once(tmp_path: Path) -> None:
    path = tmp_path / "ends.json"
    _write(path, 5, 3)
    reader = _reader(path)
    started = time.monotonic()
    assert reader.latestOffset({"0": 2, "1": 3}, ReadAllAvailable()) == {"0": 5, "1": 3}
    assert time.monotonic() - started < 0.2


def test_nothing_new_holds_the_answer_until_records_arrive(tmp_path: Path) -> None:
    path = tmp_path / "ends.json"
    _write(path, 5, 3)
    start = {"0": 5, "1": 3}
    reader = _answered_once(path, start)

    began = time.monotonic()
    assert reader.latestOffset(start, ReadAllAvailable()) == start
    held = time.monotonic() - began
    assert IDLE_WAIT_S * 0.9 < held < IDLE_WAIT_S + 0.3

    threading.Timer(0.15, _write, args=(path, 5, 7)).start()
    began = time.monotonic()
    assert reader.latestOffset(start, ReadAllAvailable()) == {"0": 5, "1": 7}
    assert 0.1 < time.monotonic() - began < IDLE_WAIT_S * 0.9


def test_ends_replaced_just_after_the_source_read_them_are_not_missed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ends.json"
    _write(path, 5, 3)
    start = {"0": 5, "1": 3}
    reader = _answered_once(path, start)
    read_ends = reader._ends

    def read_then_replaced(start: dict[str, int]) -> dict[str, int]:
        ends = read_ends(start)
        _write(path, 5, 7)  # the end watcher replaces the file right after the source read it
        return ends

    monkeypatch.setattr(reader, "_ends", read_then_replaced)
    began = time.monotonic()
    assert reader.latestOffset(start, ReadAllAvailable()) == {"0": 5, "1": 7}
    assert time.monotonic() - began < IDLE_WAIT_S * 0.5  # not the whole idle wait


def test_a_source_of_a_join_does_not_hold_its_answer(tmp_path: Path) -> None:
    path = tmp_path / "ends.json"
    _write(path, 1, 1)
    start = {"0": 1, "1": 1}
    reader = _answered_once(path, start, idle_wait_ms=0)
    began = time.monotonic()
    assert reader.latestOffset(start, ReadAllAvailable()) == start
    assert time.monotonic() - began < 0.1


def test_a_heartbeat_without_records_keeps_it_waiting(tmp_path: Path) -> None:
    path = tmp_path / "ends.json"
    _write(path, 1, 1)
    start = {"0": 1, "1": 1}
    reader = _answered_once(path, start)
    threading.Timer(0.1, _write, args=(path, 1, 1)).start()  # rewritten, same ends
    began = time.monotonic()
    assert reader.latestOffset(start, ReadAllAvailable()) == start
    assert time.monotonic() - began > IDLE_WAIT_S * 0.9


def test_a_file_change_wakes_on_the_rename_and_not_before(tmp_path: Path) -> None:
    path = tmp_path / "ends.json"
    _write(path, 1, 1)
    change = FileChange(str(path))
    try:
        assert not change.polling  # Linux: inotify
        since = changed_at(str(path))
        began = time.monotonic()
        assert change.wait(since, 0.3) == since  # nothing happened: the whole timeout
        assert time.monotonic() - began >= 0.29
        threading.Timer(0.1, _write, args=(path, 2, 2)).start()
        began = time.monotonic()
        assert change.wait(since, 5) != since
        assert time.monotonic() - began < 1
    finally:
        change.close()


def test_without_inotify_it_polls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_change.sys, "platform", "darwin")
    path = tmp_path / "ends.json"
    _write(path, 1, 1)
    change = FileChange(str(path))
    assert change.polling
    since = changed_at(str(path))
    threading.Timer(0.1, _write, args=(path, 2, 2)).start()
    assert change.wait(since, 5) != since


def test_an_idle_wait_costs_next_to_no_cpu(tmp_path: Path) -> None:
    path = tmp_path / "ends.json"
    _write(path, 1, 1)
    change = FileChange(str(path))
    try:
        cpu = time.thread_time()  # this thread only: other tests may leave threads running
        change.wait(changed_at(str(path)), 1.0)
        # a poll every 20 ms costs ~6 ms of CPU a second here; a blocked select, well under 1 ms
        assert time.thread_time() - cpu < 0.003
    finally:
        change.close()
