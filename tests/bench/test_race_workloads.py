"""bench.race's contenders and its count follower, without a broker: the plain loop's steps and the
rule that decides when a contender has counted everything."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from bench._race_loop import _counting, _filtering
from bench.race import _follow_counts


@dataclass
class Message:
    _key: bytes | None
    _value: bytes | None

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def error(self) -> None:
        return None


def test_the_loop_writes_each_changed_key_once_per_batch_with_its_count() -> None:
    sent: list[tuple[bytes | None, bytes]] = []
    step = _counting(lambda key, value: sent.append((key, value)))
    step([Message(b"a", b"{}"), Message(b"b", b"{}"), Message(b"a", b"{}")])
    step([Message(b"a", b"{}")])
    counts = [(k, orjson.loads(v)["N"]) for k, v in sent]
    assert sorted(counts[:2]) == [(b"a", 2), (b"b", 1)]
    assert counts[2:] == [(b"a", 3)]


def test_the_loop_filters_and_projects_as_the_csas() -> None:
    sent: list[tuple[bytes | None, bytes]] = []
    step = _filtering(lambda key, value: sent.append((key, value)))
    rows = [{"ITEM": "x", "AMOUNT": 50, "PRICE": 1.5}, {"ITEM": "y", "AMOUNT": 51, "PRICE": 2.0}]
    step([Message(b"k", orjson.dumps(r)) for r in rows])
    assert [(k, orjson.loads(v)) for k, v in sent] == [
        (b"k", {"ITEM": "Y", "TOTAL": 102.0, "AMOUNT": 51})
    ]


class Reader:
    def __init__(self, batches: list[list[Message]]) -> None:
        self.batches = batches

    def consume(self, _n: int, _timeout: float) -> list[Message]:
        return self.batches.pop(0) if self.batches else []


def test_counting_is_done_when_the_latest_counts_add_up_not_when_updates_do() -> None:
    """Updates of one key replace each other: 3 updates of key a (1, 2, 3) and one of b add up to
    4 records, not 7."""

    def count(key: bytes, n: int) -> Message:
        return Message(key, orjson.dumps({"N": n}))

    reader = Reader([[count(b"a", 1), count(b"a", 2)], [count(b"b", 1), count(b"a", 3)]])
    latest: dict[bytes | None, int] = {}
    _follow_counts(reader, latest, 4, float("inf"), "test", root=0)
    assert latest == {b"a": 3, b"b": 1}
    assert reader.batches == []
