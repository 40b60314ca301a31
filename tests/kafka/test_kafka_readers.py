"""No topic is deleted under a fetching consumer (headwater.kafka.readers, clients.delete_topics).

On the embedded broker a consumer fetching a topic that is deleted kills its process (SIGSEGV in
librdkafka's main thread). Each scenario runs in a child process so that a crash fails the test
instead of ending the session; the first test shows the hazard is real, so that the others can fail.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from confluent_kafka import TopicPartition

from headwater.kafka import readers
from headwater.kafka.clients import (
    KafkaSettings,
    admin_client,
    consumer,
    create_topic,
    delete_topics,
    producer,
)

pytestmark = pytest.mark.kafka

_SCENARIO = textwrap.dedent("""
    import sys, time
    from confluent_kafka import TopicPartition
    from headwater.kafka.clients import (KafkaSettings, admin_client, consumer, create_topic,
                                         delete_topics, producer)
    from headwater.kafka.errors import TopicError

    settings = KafkaSettings(sys.argv[1], topic_operation_timeout_ms=1000)
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
    if how == "guarded":  # a topic of the same name again: first the reader must be renewed
        assert reader.needs_renewal()
        try:
            create_topic(admin, settings, topic, 1)
            raise AssertionError("created under a reader that knew the deleted topic")
        except TopicError:
            pass
        reader.close()
        reader = consumer(settings, "r", fetch_wait_max_ms=50)
        create_topic(admin, settings, topic, 1)
        sender.produce(topic, b"again", partition=0)
        sender.flush(10)
        reader.assign([TopicPartition(topic, 0, 0)])
        message = None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (message is None or message.error()):
            message = reader.poll(0.05)
        assert message is not None and message.value() == b"again"
    reader.close()
    print("survived")
""")


_RECREATE = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    servers, topic = sys.argv[1], sys.argv[2]
    admin = AdminClient({"bootstrap.servers": servers})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(10)
    reader = Consumer({"bootstrap.servers": servers, "group.id": "g", "fetch.wait.max.ms": 50})
    reader.assign([TopicPartition(topic, 0, 0)])
    for _ in range(10):
        reader.poll(0.05)
    reader.unassign()
    admin.delete_topics([topic])[topic].result(10)
    admin.create_topics([NewTopic(topic, 1)])[topic].result(10)
    for _ in range(100):
        reader.poll(0.05)
    print("survived")
""")


def _run(settings: KafkaSettings, how: str) -> subprocess.CompletedProcess[str]:
    topic = f"retire-{uuid.uuid4().hex[:8]}"
    return subprocess.run(
        [sys.executable, "-c", _SCENARIO, settings.bootstrap_servers, topic, how],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_topic_created_again_under_a_consumer_that_knew_it_kills_it(
    memory_kafka: KafkaSettings,
) -> None:
    # The second hazard: even unassigned, a consumer that read a topic dies when a topic of the
    # same name is created again (so readers that knew a deleted topic are renewed first).
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _RECREATE,
            memory_kafka.bootstrap_servers,
            f"again-{uuid.uuid4().hex[:8]}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == -11, (done.returncode, done.stdout, done.stderr[-2000:])


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


def test_a_retired_partition_assigned_again_is_read_again(memory_kafka: KafkaSettings) -> None:
    # librdkafka keeps a partition paused across unassign and assign: a topic of the same name,
    # created again after a deletion, must be read again by a reader that had it paused.
    topic = f"again-{uuid.uuid4().hex[:8]}"
    admin = admin_client(memory_kafka)
    create_topic(admin, memory_kafka, topic, 1)
    reader = consumer(memory_kafka, "retire-test", fetch_wait_max_ms=50)
    try:
        reader.assign([TopicPartition(topic, 0, 0)])
        readers.retire([topic], wait=False)
        reader.incremental_unassign([TopicPartition(topic, 0)])
        readers.reinstate([topic])
        sender = producer(memory_kafka, "retire-test")
        sender.produce(topic, b"after", partition=0)
        assert sender.flush(10) == 0
        reader.incremental_assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 10
        message = None
        while message is None and time.monotonic() < deadline:
            message = reader.poll(0.1)
        assert message is not None and message.value() == b"after"
        assert reader.retired() == set()
    finally:
        reader.close()
