"""store.end_probe: end offsets from a fetch sent after the question, shared by waiting callers."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from headwater.kafka.clients import KafkaSettings, admin_client, create_topic, producer
from headwater.kafka.errors import EndOffsetsUnavailable
from headwater.store.end_probe import EndProbe

pytestmark = pytest.mark.kafka


@pytest.fixture
def probe(memory_kafka: KafkaSettings) -> Iterator[EndProbe]:
    made = EndProbe(memory_kafka)
    yield made
    made.close()


def _send(memory_kafka: KafkaSettings, topic: str, partition: int, count: int) -> None:
    sender = producer(memory_kafka, "probe-test")
    for i in range(count):
        sender.produce(topic, key=b"k%d" % i, value=b"v", partition=partition)
    assert sender.flush(10) == 0


def test_ends_count_every_acknowledged_record_whatever_the_hint(
    memory_kafka: KafkaSettings, topic_name: str, probe: EndProbe
) -> None:
    create_topic(admin_client(memory_kafka), memory_kafka, topic_name, 3)
    _send(memory_kafka, topic_name, 0, 5)
    assert probe.ends(topic_name, {0: 0, 1: 0}, 5) == {0: 5, 1: 0}
    _send(memory_kafka, topic_name, 0, 3)
    _send(memory_kafka, topic_name, 2, 2)
    # hints are where the caller last saw the end: stale ones, missing ones, none at all
    assert probe.ends(topic_name, {0: 5, 1: 0, 2: 0}, 5) == {0: 8, 1: 0, 2: 2}
    assert probe.ends(topic_name, {0: 2}, 5) == {0: 8}
    assert probe.ends(topic_name, {}, 5) == {}


def test_concurrent_callers_each_get_their_partitions(
    memory_kafka: KafkaSettings, topic_name: str, probe: EndProbe
) -> None:
    create_topic(admin_client(memory_kafka), memory_kafka, topic_name, 4)
    for partition in range(4):
        _send(memory_kafka, topic_name, partition, partition + 1)
    results: dict[int, dict[int, int]] = {}

    def ask(partition: int) -> None:
        results[partition] = probe.ends(topic_name, {partition: 0}, 10)

    threads = [threading.Thread(target=ask, args=(p,)) for p in range(4) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    assert results == {p: {p: p + 1} for p in range(4)}


def test_an_unknown_partition_is_unavailable_within_the_timeout(
    memory_kafka: KafkaSettings, topic_name: str, probe: EndProbe
) -> None:
    create_topic(admin_client(memory_kafka), memory_kafka, topic_name, 1)
    began = time.monotonic()
    with pytest.raises(EndOffsetsUnavailable) as caught:
        probe.ends(topic_name, {7: 0}, 0.5)
    assert caught.value.partitions == (7,)
    assert time.monotonic() - began < 1.5
    time.sleep(2)  # the round gives up on partition 7; the next question is answered
    assert probe.ends(topic_name, {0: 0}, 5) == {0: 0}
