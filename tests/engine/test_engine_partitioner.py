"""Kafka's Java murmur2 and key placement: Kafka's own test vectors, and librdkafka's murmur2_random."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.engine.partitioner import murmur2, partition_for, to_positive
from headwater.kafka.clients import KafkaSettings, admin_client, create_topic, producer

# org.apache.kafka.common.utils.UtilsTest.testMurmur2 (the empty key: Kafka clients in other languages
# pin the same Java value).
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (bytes([12, 42, 56, 24, 109, 111]), 274204207),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
    (b"", 275646681),
]


@pytest.mark.parametrize(("data", "expected"), KAFKA_VECTORS)
def test_murmur2_matches_kafka_utils_test(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_partition_uses_to_positive_not_abs() -> None:
    # toPositive(-790332482) = 1357151166; abs() would give 790332482 and another partition.
    assert to_positive(-790332482) == 1357151166
    assert partition_for(b"foobar", 10) == 6
    assert partition_for(b"foobar", 1) == 0


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least one partition, got 0"):
        partition_for(b"k", 0)


@settings(derandomize=True, max_examples=300)
@given(st.binary(max_size=80), st.integers(min_value=1, max_value=1000))
def test_hash_is_a_java_int_and_partition_in_range(data: bytes, partitions: int) -> None:
    h = murmur2(data)
    assert -(2**31) <= h < 2**31
    assert 0 <= partition_for(data, partitions) < partitions
    assert partition_for(data, partitions) == (h & 0x7FFFFFFF) % partitions


def test_every_tail_length_is_hashed() -> None:
    # Keys sharing a prefix and differing only in the 1-3 trailing bytes hash differently.
    hashes = {murmur2(b"prefix-0123" + bytes([i]) * n) for n in range(4) for i in range(1, 4)}
    assert len(hashes) == 10


@pytest.mark.kafka
def test_librdkafka_murmur2_random_places_keys_like_partition_for(
    kafka_settings: KafkaSettings, topic_name: str
) -> None:
    partitions = 6
    create_topic(admin_client(kafka_settings), kafka_settings, topic_name, partitions)
    sender = producer(kafka_settings, "test-partitioner")
    placed: dict[bytes, int] = {}

    def delivered(err: object, message: object) -> None:
        assert err is None, err
        placed[message.key()] = message.partition()  # type: ignore[attr-defined]

    keys = [f"key-{i}".encode() for i in range(60)] + [data for data, _ in KAFKA_VECTORS if data]
    for key in keys:
        sender.produce(topic_name, key=key, value=b"v", on_delivery=delivered)
    assert sender.flush(30) == 0
    assert len(placed) == len(keys)
    wrong = {
        k: (p, partition_for(k, partitions))
        for k, p in placed.items()
        if p != partition_for(k, partitions)
    }
    assert wrong == {}


def test_the_memo_gives_partition_for_and_stays_bounded() -> None:
    from headwater.engine.partitioner import PartitionMemo

    memo = PartitionMemo(7, most=4, longest=8)
    keys = [f"k{i % 6}".encode() for i in range(40)] + [b"a longer key than 8 bytes"] * 3
    assert [memo(k) for k in keys] == [partition_for(k, 7) for k in keys]
    assert len(memo._known) <= 4  # emptied when full; the long key never kept
    assert b"a longer key than 8 bytes" not in memo._known
    with pytest.raises(ValueError, match="at least one partition"):
        PartitionMemo(0)(b"k")
