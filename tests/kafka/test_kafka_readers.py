"""No topic is deleted under a fetching consumer (headwater.kafka.readers, clients.delete_topics).

On the embedded broker a consumer fetching a topic that is deleted kills its process (SIGSEGV in
librdkafka's main thread). Each scenario runs in a child process so that a crash fails the test
instead of ending the session; the first test shows the hazard is real, so that the others can fail.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid

import pytest
from confluent_kafka import TopicPartition

from headwater.kafka import readers
from headwater.kafka.clients import KafkaSettings, admin_client, consumer, delete_topics

pytestmark = pytest.mark.kafka

_SCENARIO = textwrap.dedent("""
    import sys, time
    from confluent_kafka import TopicPartition
    from headwater.kafka.clients import (KafkaSettings, admin_client, consumer, create_topic,
                                         delete_topics, producer)

    settings = KafkaSettings(sys.argv[1])
    topic, how = sys.argv[2], sys.argv[3]
    admin = admin_client(settings)
    create_topic(admin, settings, topic, 2)
    sender = producer(settings, "p")
    sender.produce(topic, b"x", partition=0)
    sender.flush(10)
    reader = consumer(settings, "r", fetch_wait_max_ms=50)
    reader.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and reader.poll(0.05) is None:
        pass
    if how == "guarded":
        assert delete_topics(admin, settings, [topic]) == {}
        assert topic in reader.retired()
    else:  # what headwater did before: the admin client alone
        for future in admin.delete_topics([topic]).values():
            future.result(10)
    for _ in range(40):  # 2 s of polling after the deletion
        reader.poll(0.05)
    reader.close()
    print("survived")
""")


def _run(settings: KafkaSettings, how: str) -> subprocess.CompletedProcess[str]:
    topic = f"retire-{uuid.uuid4().hex[:8]}"
    return subprocess.run([sys.executable, "-c", _SCENARIO, settings.bootstrap_servers, topic, how],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


def test_deleting_a_topic_under_a_fetching_consumer_kills_it(memory_kafka: KafkaSettings) -> None:
    # The hazard the guard exists for; if the broker or librdkafka stop crashing, this says so.
    done = _run(memory_kafka, "unguarded")
    assert done.returncode == -11, (done.returncode, done.stdout, done.stderr[-2000:])


def test_delete_topics_pauses_the_readers_first(memory_kafka: KafkaSettings) -> None:
    done = _run(memory_kafka, "guarded")
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "survived" in done.stdout


def test_a_retired_topic_is_not_assigned_until_reinstated(memory_kafka: KafkaSettings) -> None:
    topic, other = f"retired-{uuid.uuid4().hex[:8]}", f"kept-{uuid.uuid4().hex[:8]}"
    reader = consumer(memory_kafka, "retire-test")
    try:
        readers.retire([topic], wait=False)
        reader.assign([TopicPartition(topic, 0, 0), TopicPartition(other, 0, 0)])
        assert reader.topics() == {other}
        assert [tp.topic for tp in reader.assignment()] == [other]
        readers.reinstate([topic])
        reader.incremental_assign([TopicPartition(topic, 0, 0)])
        assert reader.topics() == {topic, other}
        assert readers.readers_of(topic) == 1
    finally:
        readers.reinstate([topic])
        reader.close()
    assert readers.readers_of(topic) == 0
    reader.close()  # a second close is a no-op, never a use of a destroyed handle


def test_a_hold_lapses_and_can_be_released(memory_kafka: KafkaSettings) -> None:
    topic = f"held-{uuid.uuid4().hex[:8]}"
    readers.retire([topic], wait=False, hold_s=0.0)
    assert topic not in readers.retired_topics()  # lapsed at once
    readers.retire([topic], wait=False, hold_s=60)
    assert topic in readers.retired_topics()
    readers.release_holds([topic])
    assert topic not in readers.retired_topics()


def test_retire_pauses_only_the_retired_topic(memory_kafka: KafkaSettings) -> None:
    topic, other = f"paused-{uuid.uuid4().hex[:8]}", f"going-{uuid.uuid4().hex[:8]}"
    admin = admin_client(memory_kafka)
    reader = consumer(memory_kafka, "retire-test")
    try:
        reader.assign([TopicPartition(topic, 0, 0), TopicPartition(other, 0, 0)])
        assert readers.retire([topic], wait=False) == 1
        assert reader.retired() == {topic}
        assert delete_topics(admin, memory_kafka, [f"never-made-{uuid.uuid4().hex[:8]}"]) == {}
    finally:
        readers.reinstate([topic])
        reader.close()
