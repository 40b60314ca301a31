"""End offsets from fetch responses: right for batched producers and open transactions, both modes."""

from __future__ import annotations

from collections import Counter

from confluent_kafka import TopicPartition
from kafka_helpers import make_topic, produce, read_all

from headwater.kafka.clients import (
    KafkaSettings,
    commit_transaction,
    consumer,
    init_transactions,
    producer,
)
from headwater.kafka.offsets import LagInfo, cached_end_offsets, end_offsets


def test_lag_info_never_negative() -> None:
    assert LagInfo.of(current=3, end=10) == LagInfo(current=3, end=10, lag=7)
    assert LagInfo.of(current=12, end=10).lag == 0


def test_end_offsets_after_multi_record_batches(
    kafka_settings: KafkaSettings, topic_name: str
) -> None:
    make_topic(kafka_settings, topic_name, 3)
    produce(kafka_settings, topic_name, 600)  # one burst: librdkafka sends multi-record batches
    records = read_all(kafka_settings, topic_name, range(3))
    assert len(records) == 600
    counts = Counter(partition for partition, *_ in records)
    expected = {p: counts[p] for p in range(3)}
    assert end_offsets(kafka_settings, topic_name, range(3)) == expected
    assert end_offsets(kafka_settings, topic_name, range(3), read_committed=True) == expected

    reader = consumer(kafka_settings, "cached-probe")
    reader.assign([TopicPartition(topic_name, p, 0) for p in range(3)])
    seen: set[int] = set()
    while seen != {0, 1, 2}:
        message = reader.poll(1.0)
        if message is not None and message.error() is None:
            seen.add(message.partition())
    assert cached_end_offsets(reader, topic_name, range(3)) == expected
    reader.close()


def test_end_offsets_with_an_open_transaction(
    kafka_settings: KafkaSettings, topic_name: str
) -> None:
    make_topic(kafka_settings, topic_name, 1)
    produce(kafka_settings, topic_name, 50)
    txn = producer(kafka_settings, "open-txn", transactional_id=f"tx-{topic_name}")
    init_transactions(txn, kafka_settings)
    txn.begin_transaction()
    for i in range(7):
        txn.produce(topic_name, key=b"t", value=f"in-txn-{i}".encode())
    assert txn.flush(10) == 0

    # Open: read_uncommitted sees the 7 records; read_committed stops at the last stable offset.
    assert end_offsets(kafka_settings, topic_name, [0]) == {0: 57}
    assert end_offsets(kafka_settings, topic_name, [0], read_committed=True) == {0: 50}
    assert end_offsets(
        kafka_settings, topic_name, [0], read_committed=True, start_offsets={0: 20}
    ) == {0: 50}

    commit_transaction(txn, kafka_settings)
    # Committed: both ends move past the 7 records and the commit marker (offset 57).
    assert end_offsets(kafka_settings, topic_name, [0]) == {0: 58}
    assert end_offsets(kafka_settings, topic_name, [0], read_committed=True) == {0: 58}


def test_list_offsets_latest_is_wrong_on_tansu(
    kafka_settings: KafkaSettings, topic_name: str
) -> None:
    """Documents the Tansu bug the helper avoids (would fail on Apache Kafka, where it is right)."""
    make_topic(kafka_settings, topic_name, 1)
    produce(kafka_settings, topic_name, 100)
    assert end_offsets(kafka_settings, topic_name, [0]) == {0: 100}
    probe = consumer(kafka_settings, "list-offsets")
    _low, high = probe.get_watermark_offsets(
        TopicPartition(topic_name, 0), timeout=10, cached=False
    )
    probe.close()
    assert high < 100
