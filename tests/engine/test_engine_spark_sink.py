"""The exactly-once sink on a real broker, without Spark: a batch replayed after a crash (whole, or
after part of it was written) is recognised from the sink topic's tail and not written twice."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaError, TopicPartition

from headwater.engine.spark.sink import CheckpointBehind, ExactlyOnceSink
from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import admin_client, consumer, create_topic

pytestmark = pytest.mark.kafka


def _rows(n: int, partitions: int = 2) -> list[dict]:
    return [
        {
            "key": f"k{i}".encode(),
            "value": f"v{i}".encode(),
            "timestamp": 1000 + i,
            "partition": i % partitions,
            "source_partition": 0,
            "source_offset": i,
            "error": None,
        }
        for i in range(n)
    ]


def _values(broker: EmbeddedBroker, topic: str) -> list[bytes]:
    reader = consumer(broker.settings(), "sink-check", partition_eof=True)
    reader.assign([TopicPartition(topic, p, 0) for p in range(2)])
    found, eof = [], set()
    while len(eof) < 2:
        for message in reader.consume(100, 1.0):
            if message.error() is not None:
                eof.add(message.partition())
            else:
                found.append(message.value())
    reader.close()
    return sorted(found)


@pytest.fixture
def topic(memory_broker: EmbeddedBroker) -> str:
    name = f"sink_{uuid.uuid4().hex[:8]}"
    create_topic(admin_client(memory_broker.settings()), memory_broker.settings(), name, 2)
    return name


def test_a_replayed_batch_is_not_written_again(memory_broker: EmbeddedBroker, topic: str) -> None:
    settings = memory_broker.settings()
    first = ExactlyOnceSink(settings, "Q1", topic, 2)
    first.write(_rows(6), 0)
    first.close()
    restarted = ExactlyOnceSink(settings, "Q1", topic, 2)  # a new process replays batch 0
    restarted.write(_rows(6), 0)
    restarted.write(_rows(8)[6:], 1)
    restarted.close()
    assert _values(memory_broker, topic) == sorted(f"v{i}".encode() for i in range(8))
    assert restarted.stats.skipped_replayed == 6


def test_a_batch_cut_off_half_way_is_completed(memory_broker: EmbeddedBroker, topic: str) -> None:
    settings = memory_broker.settings()
    rows = _rows(10)
    crashed = ExactlyOnceSink(settings, "Q2", topic, 2)
    crashed.write(rows[:4], 3)  # as if the process died after 4 of the batch's 10 records
    crashed.close()
    other = ExactlyOnceSink(settings, "OTHER", topic, 2)  # another writer on the same topic
    other.write([{**r, "value": b"other"} for r in _rows(2)], 0)
    other.close()
    resumed = ExactlyOnceSink(settings, "Q2", topic, 2)
    resumed.write(rows, 3)
    resumed.close()
    assert _values(memory_broker, topic) == sorted(
        [f"v{i}".encode() for i in range(10)] + [b"other", b"other"]
    )
    assert resumed.stats.skipped_replayed == 4


def test_skipped_records_are_counted_and_logged_not_written(
    memory_broker: EmbeddedBroker, topic: str
) -> None:
    settings = memory_broker.settings()
    seen: list[dict] = []
    sink = ExactlyOnceSink(settings, "Q3", topic, 2, on_error=seen.append)
    bad = {
        "key": None,
        "value": b'{"kind": "deserialization", "message": "bad JSON", "topic": "in"}',
        "timestamp": 0,
        "partition": -1,
        "source_partition": 1,
        "source_offset": 7,
        "error": "deserialization",
    }
    sink.write([*_rows(2), bad], 0)
    sink.close()
    assert sink.stats.errors == 1 and sink.stats.last_error == "bad JSON"
    assert seen[0]["MESSAGE"]["OFFSET"] == 7 and seen[0]["MESSAGE"]["TOPIC"] == "in"
    assert _values(memory_broker, topic) == [b"v0", b"v1"]


def test_a_checkpoint_behind_the_output_refuses_to_write(
    memory_broker: EmbeddedBroker, topic: str
) -> None:
    """The chaos soak's servers each had their own checkpoint root: a new owner started the query at
    batch 0 while its output held batch 140, skipped new records as 'already written' and wrote
    old ones again (651 duplicated, 7 missing). Such a sink now fails the batch with the reason."""
    settings = memory_broker.settings()
    first = ExactlyOnceSink(settings, "Q9", topic, 2)
    for batch in range(5):
        first.write(_rows(2 * (batch + 1))[2 * batch :], batch)
    first.close()
    elsewhere = ExactlyOnceSink(settings, "Q9", topic, 2)  # a server with an empty checkpoint
    with pytest.raises(CheckpointBehind, match="already holds batch 4 .* resumes at batch 0"):
        elsewhere.write(_rows(12)[10:], 0)
    with pytest.raises(CheckpointBehind):  # every retry too, until the checkpoint is right
        elsewhere.write(_rows(12)[10:], 0)
    elsewhere.close()
    assert _values(memory_broker, topic) == sorted(f"v{i}".encode() for i in range(10))
    resumed = ExactlyOnceSink(settings, "Q9", topic, 2)  # the checkpoint replays batch 4
    resumed.write(_rows(10)[8:], 4)
    resumed.write(_rows(12)[10:], 5)
    resumed.close()
    assert _values(memory_broker, topic) == sorted(f"v{i}".encode() for i in range(12))


class _PackedBatch:
    """What Spark's ``foreachBatch`` hands the sink of a stateless query: packed rows."""

    def __init__(self, rows: list[dict]) -> None:
        from headwater.engine.persistent.columnar_run import OUTPUT_ARROW
        from headwater.engine.spark.packed import pack

        batch = pa.RecordBatch.from_pylist(rows, schema=OUTPUT_ARROW)
        self._table = pa.Table.from_batches([pack(batch.slice(0, 3)), pack(batch.slice(3))])

    def toArrow(self) -> pa.Table:  # pyspark's name
        return self._table


def test_a_packed_batch_is_written_as_its_rows(memory_broker: EmbeddedBroker, topic: str) -> None:
    sink = ExactlyOnceSink(memory_broker.settings(), "Q1", topic, 2)
    sink(_PackedBatch(_rows(7)), 0)
    sink.close()
    assert _values(memory_broker, topic) == sorted(f"v{i}".encode() for i in range(7))
    assert sink.stats.records == 7


def test_a_batch_is_written_in_the_order_it_was_computed_whichever_its_form() -> None:
    """Arrow's stable sort of a batch's columns (packed batches) orders records as the sort of
    its rows does: by source rank, partition, offset and seq, ties in batch order."""
    import random

    from headwater.engine.spark.aggregation import AGGREGATED_ARROW
    from headwater.engine.spark.sink import _Columns

    rng = random.Random(7)
    rows = [
        {
            "key": f"k{i}".encode(),
            "value": f"v{i}".encode(),
            "timestamp": i,
            "partition": rng.randrange(2),
            "source_partition": rng.randrange(2),
            "source_offset": rng.randrange(5),
            "source_seq": rng.choice([0, 1, None]),
            "source_rank": rng.choice([0, 1, 2, None]),
            "error": rng.choice([None, None, None, "serialization"]),
        }
        for i in range(300)
    ]
    from_rows = _Columns.of_rows(rows)
    from_table = _Columns.of_table(pa.Table.from_pylist(rows, schema=AGGREGATED_ARROW))
    assert from_table == from_rows
    assert from_rows.value != [r["value"] for r in rows]  # the batch was out of order
    stateless = [
        {k: v for k, v in r.items() if k not in ("source_seq", "source_rank")} for r in rows
    ]
    from headwater.engine.persistent.columnar_run import OUTPUT_ARROW

    assert _Columns.of_table(pa.Table.from_pylist(stateless, schema=OUTPUT_ARROW)) == (
        _Columns.of_rows(stateless)
    )
    assert _Columns.of_table(None) == _Columns.of_rows([])


class _Report:
    """A delivery report's message, as the producer hands it to the callback."""

    def __init__(self, partition: int, offset: int | None) -> None:
        self._partition, self._offset = partition, offset

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int | None:
        return self._offset


def test_a_confirmation_at_an_offset_already_passed_is_suspect() -> None:
    """The embedded broker, restarted after a kill -9, confirmed records at offsets 0-3 of a
    partition holding thousands, and kept none of them (the chaos soak's missing output)."""
    from headwater.engine.spark.sink import Confirmations

    confirmed = Confirmations()
    confirmed.passed(0, 4)  # the tail read found offsets up to 4
    for partition, offset in [(0, 5), (0, 6), (0, 0), (0, 1), (0, None), (0, 7), (1, 0), (1, 0)]:
        confirmed(None, _Report(partition, offset))
    assert [(m.partition(), m.offset()) for m in confirmed.suspect] == [
        (0, 0),
        (0, 1),
        (0, None),
        (1, 0),
    ]
    assert "[0]@0" in confirmed.describe() and "after [0]@7, [1]@0" in confirmed.describe()
    confirmed(KafkaError(KafkaError._MSG_TIMED_OUT), _Report(0, None))
    assert len(confirmed.failures) == 1


def test_records_confirmed_where_the_partition_had_passed_are_written_again(
    memory_broker: EmbeddedBroker, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from headwater.engine.spark import sink as sink_module

    class _Doubting(sink_module.Confirmations):
        """Reports the first two confirmations as a regressed broker would: offset 0."""

        lies = 2

        def __call__(self, error: KafkaError | None, message: Any) -> None:
            lie = error is None and _Doubting.lies > 0
            if lie:
                _Doubting.lies -= 1
                self.passed(message.partition(), 10**6)  # as if it had passed them
            super().__call__(error, message)
            if lie and _Doubting.lies == 0:
                self._top.clear()  # the broker's log is right again

    monkeypatch.setattr(sink_module, "Confirmations", _Doubting)
    monkeypatch.setattr(sink_module, "_REWRITE_PAUSE_S", 0.0)
    sink = ExactlyOnceSink(memory_broker.settings(), "Q7", topic, 2)
    sink.write(_rows(6), 0)
    sink.close()
    assert sink.stats.rewritten == 2
    # the fake broker had kept them after all: written twice; every record is there
    assert set(_values(memory_broker, topic)) == {f"v{i}".encode() for i in range(6)}
    assert len(_values(memory_broker, topic)) == 8


def test_a_broker_whose_log_stays_behind_fails_the_batch(
    memory_broker: EmbeddedBroker, topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from headwater.engine.spark import sink as sink_module

    monkeypatch.setattr(sink_module, "_REWRITE_PAUSE_S", 0.0)
    sink = ExactlyOnceSink(memory_broker.settings(), "Q8", topic, 2)
    sink.write(_rows(2), 0)
    sink._confirmed.passed(0, 10**6)  # as if partition 0 had been at offset 1,000,000
    with pytest.raises(RuntimeError, match="at offsets its partitions had passed .* went back"):
        sink.write(_rows(4)[2:], 1)
    sink.close()
