"""The client-config factory: each broker workaround is applied, user keys pass through."""

from __future__ import annotations

import threading
import time
from typing import cast

import pytest
from confluent_kafka import Producer, TopicPartition
from kafka_helpers import read_all

from headwater.kafka._ports import free_port
from headwater.kafka.clients import (
    KafkaSettings,
    admin_client,
    admin_config,
    close_producer,
    commit_transaction,
    consumer,
    consumer_config,
    create_topic,
    init_transactions,
    producer,
    producer_config,
)
from headwater.kafka.errors import KafkaConfigError, TopicError

SETTINGS = KafkaSettings(
    bootstrap_servers="127.0.0.1:1",
    client_config={"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
)


def test_user_keys_pass_through_to_every_client() -> None:
    for config in (
        admin_config(SETTINGS),
        producer_config(SETTINGS, "p"),
        consumer_config(SETTINGS, "c"),
    ):
        assert config["security.protocol"] == "SASL_SSL"
        assert config["sasl.mechanism"] == "PLAIN"
        assert config["bootstrap.servers"] == "127.0.0.1:1"


def test_settings_refuse_keys_the_factory_owns() -> None:
    with pytest.raises(KafkaConfigError, match="partitioner"):
        KafkaSettings(bootstrap_servers="x:1", client_config={"partitioner": "random"})
    with pytest.raises(KafkaConfigError):
        KafkaSettings(bootstrap_servers="")


def test_settings_are_frozen_values() -> None:
    with pytest.raises(TypeError):
        SETTINGS.client_config["x"] = "y"  # type: ignore[index]
    assert SETTINGS == KafkaSettings(
        bootstrap_servers="127.0.0.1:1",
        client_config={"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
    )


def test_producer_workarounds() -> None:
    plain = producer_config(SETTINGS, "sink")
    assert plain["partitioner"] == "murmur2_random"
    assert plain["client.id"] == "headwater-sink"
    assert "transactional.id" not in plain
    txn = producer_config(SETTINGS, "command-log", transactional_id="svc")
    assert txn["transactional.id"] == "svc"
    assert txn["transaction.timeout.ms"] == SETTINGS.transaction_timeout_ms


def test_consumer_workarounds() -> None:
    config = consumer_config(SETTINGS, "reader")
    assert config["allow.auto.create.topics"] is False
    assert config["isolation.level"] == "read_uncommitted"
    assert config["enable.auto.commit"] is False
    assert config["group.id"] == "headwater-reader"
    assert config["session.timeout.ms"] == 6000
    committed = consumer_config(
        SETTINGS, "log", group_id="g", read_committed=True, partition_eof=True
    )
    assert committed["isolation.level"] == "read_committed"
    assert committed["enable.partition.eof"] is True
    assert committed["group.id"] == "g"


def _java_murmur2(data: bytes) -> int:
    """Kafka's Java Utils.murmur2 (the reference for key placement)."""
    m, r = 0x5BD1E995, 24
    h = (0x9747B28C ^ len(data)) & 0xFFFFFFFF
    for i in range(0, len(data) - len(data) % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = data[len(data) - len(data) % 4 :]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


@pytest.mark.kafka
def test_keys_land_where_java_clients_put_them(memory_broker, topic_name: str) -> None:
    settings = memory_broker.settings()
    create_topic(admin_client(settings), settings, topic_name, 6)
    sender = producer(settings, "placement")
    keys = [f"user-{i}".encode() for i in range(60)]
    for key in keys:
        sender.produce(topic_name, key=key, value=b"x")
    assert sender.flush(10) == 0
    placed = {key: partition for partition, _, key, _ in read_all(settings, topic_name, range(6))}
    assert placed == {key: (_java_murmur2(key) & 0x7FFFFFFF) % 6 for key in keys}


@pytest.mark.kafka
def test_create_topic_is_idempotent_and_checks_partitions(memory_broker, topic_name: str) -> None:
    settings = memory_broker.settings()
    admin = admin_client(settings)
    assert create_topic(admin, settings, topic_name, 3, {"cleanup.policy": "compact"}) is True
    assert create_topic(admin, settings, topic_name, 3) is False
    with pytest.raises(TopicError, match="exists with 3 partitions, not 4"):
        create_topic(admin, settings, topic_name, 4)
    assert len(admin.list_topics(topic_name, timeout=5).topics[topic_name].partitions) == 3


@pytest.mark.kafka
def test_a_consumer_does_not_create_topics(memory_broker, topic_name: str) -> None:
    settings = memory_broker.settings()
    reader = consumer(settings, "no-autocreate")
    reader.assign([TopicPartition(topic_name, 0, 0)])
    for _ in range(5):
        reader.poll(0.2)
    reader.close()
    assert topic_name not in admin_client(settings).list_topics(timeout=5).topics


@pytest.mark.kafka
def test_transaction_helpers_commit(memory_broker, topic_name: str) -> None:
    settings = memory_broker.settings()
    create_topic(admin_client(settings), settings, topic_name, 1)
    sender = producer(settings, "txn", transactional_id=f"tx-{topic_name}")
    init_transactions(sender, settings)
    sender.begin_transaction()
    sender.produce(topic_name, key=b"k", value=b"committed")
    commit_transaction(sender, settings)
    assert [r[3] for r in read_all(settings, topic_name, [0])] == [b"committed"]


def test_a_producer_with_undeliverable_records_closes_within_its_bound() -> None:
    """confluent-kafka's close() flushes with no time limit: a record no broker will take (here: no
    broker at all) would hold it for message.timeout.ms (5 minutes). close_producer drops it first."""
    unreachable = KafkaSettings(bootstrap_servers=f"127.0.0.1:{free_port()}")
    stuck = producer(unreachable, "close-test")
    stuck.produce("nowhere", value=b"never delivered")
    started = time.monotonic()
    assert close_producer(stuck, 5.0)
    assert time.monotonic() - started < 5.0


def test_a_close_that_does_not_return_is_left_behind_after_the_bound() -> None:
    """Whatever close() waits for inside librdkafka, the caller (the submitter, holding the server's
    DDL lock) gets control back after the bound."""
    released = threading.Event()

    class Hanging:
        def purge(self) -> None:
            pass

        def flush(self, timeout: float) -> int:
            return 0

        def close(self) -> bool:
            released.wait(30)
            return True

    started = time.monotonic()
    try:
        assert not close_producer(cast(Producer, Hanging()), 0.2)
        assert time.monotonic() - started < 2.0
    finally:
        released.set()
