"""A source task's read of its offset range (`kafka_source._read_range`) against a scripted
consumer: an end-of-partition event past records the read has not had is checked by fetching
again, so a stale event (a kept consumer's earlier assignment had fetched ahead) loses nothing,
and a true gap (offsets holding no record: transaction markers) still ends the range."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError

from headwater.engine.spark import kafka_source


class _Error:
    def __init__(self, code: int) -> None:
        self._code = code

    def code(self) -> int:
        return self._code


class _Message:
    def __init__(self, offset: int, eof: bool = False, out_of_range: bool = False) -> None:
        self._offset, self._eof, self._out_of_range = offset, eof, out_of_range

    def error(self) -> _Error | None:
        if self._out_of_range:
            return _Error(KafkaError._AUTO_OFFSET_RESET)
        return _Error(KafkaError._PARTITION_EOF) if self._eof else None

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"k%d" % self._offset

    def value(self) -> bytes:
        return b'{"V": %d}' % self._offset

    def timestamp(self) -> tuple[int, int]:
        return (1, 1000 + self._offset)

    def headers(self) -> None:
        return None


class _Consumer:
    """What each fetch from an offset brings (``log``: offset -> the events a fetch from there
    queues), plus events already queued before the read starts (``stale``)."""

    def __init__(self, log: dict[int, list[Any]], stale: list[_Message]) -> None:
        self._log, self.queue = log, deque(stale)
        self.fetches: list[int] = []

    def _fetch(self, offset: int) -> None:
        self.fetches.append(offset)
        answers = self._log.get(offset, [])
        # a list of lists: what the first fetch from there brings, then the next, ...
        if answers and isinstance(answers[0], list):
            self.queue.extend(answers.pop(0) if len(answers) > 1 else answers[0])
        else:
            self.queue.extend(answers)

    def assign(self, partitions: list[Any]) -> None:
        self._fetch(partitions[0].offset)  # behind the stale events, as librdkafka delivered one

    def seek(self, partition: Any) -> None:
        self.queue.clear()  # a seek drops what was fetched before it
        self._fetch(partition.offset)

    def poll(self, _timeout: float) -> _Message | None:
        return self.queue.popleft() if self.queue else None

    def consume(self, count: int, _timeout: float) -> list[_Message]:
        out = []
        while self.queue and len(out) < count:
            out.append(self.queue.popleft())
        return out


def _read(
    monkeypatch: pytest.MonkeyPatch, consumer: _Consumer, start: int, end: int
) -> Iterator[Any]:
    monkeypatch.setattr(kafka_source, "_reader", lambda *_: consumer)
    monkeypatch.setattr(kafka_source, "_give_back", lambda *_: None)
    return kafka_source._read_range({}, "t", kafka_source._Range(1, start, end))


def test_a_stale_end_past_the_records_loses_none_of_them(monkeypatch: pytest.MonkeyPatch) -> None:
    records = [_Message(o) for o in (461, 462, 463)]
    consumer = _Consumer({461: [*records, _Message(464, eof=True)]}, [_Message(464, eof=True)])
    read = [r.offset for r in _read(monkeypatch, consumer, 461, 464)]
    assert read == [461, 462, 463]
    assert consumer.fetches == [461, 461]  # fetched again from where the doubtful end came


def test_offsets_without_records_still_end_the_range(monkeypatch: pytest.MonkeyPatch) -> None:
    # 11 and 12 hold transaction markers: every fetch from 11 answers the end, 13, with nothing
    log = {10: [_Message(10), _Message(13, eof=True)], 11: [_Message(13, eof=True)]}
    consumer = _Consumer(log, [])
    read = [r.offset for r in _read(monkeypatch, consumer, 10, 13)]
    assert read == [10]
    assert consumer.fetches == [10, 11]  # one more fetch, then the gap is believed


def test_an_end_below_the_range_waits_for_the_records(monkeypatch: pytest.MonkeyPatch) -> None:
    log = {5: [_Message(6, eof=True), _Message(5), _Message(6), _Message(7, eof=True)]}
    consumer = _Consumer(log, [])
    assert [r.offset for r in _read(monkeypatch, consumer, 5, 7)] == [5, 6]
    assert consumer.fetches == [5]


def test_an_offset_out_of_range_is_asked_again_not_jumped_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A restarting broker answers "out of range" for offsets it holds; librdkafka, told not to
    # reset (strict offsets), reports it and waits: the read asks again from where it was.
    monkeypatch.setattr(kafka_source, "_OUT_OF_RANGE_PAUSE_S", 0.0)
    first = [_Message(20), _Message(21, out_of_range=True)]
    then = [_Message(21), _Message(22), _Message(23, eof=True)]
    consumer = _Consumer({20: [first], 21: [then]}, [])
    assert [r.offset for r in _read(monkeypatch, consumer, 20, 23)] == [20, 21, 22]
    assert consumer.fetches == [20, 21]


def test_records_fetched_twice_are_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # After a seek, a fetch that had already brought 30-31 may still deliver them: the range's
    # records come out once each, in order.
    log = {30: [_Message(30), _Message(31), _Message(30), _Message(31), _Message(32)]}
    consumer = _Consumer(log, [])
    assert [r.offset for r in _read(monkeypatch, consumer, 30, 33)] == [30, 31, 32]


def test_the_source_reader_never_jumps_on_its_own() -> None:
    from headwater.kafka.clients import KafkaSettings, consumer_config

    settings = KafkaSettings("127.0.0.1:9", client_config={"auto.offset.reset": "latest"})
    strict = consumer_config(settings, "query-source", strict_offsets=True)
    assert strict["auto.offset.reset"] == "error"
    assert consumer_config(settings, "other")["auto.offset.reset"] == "latest"
