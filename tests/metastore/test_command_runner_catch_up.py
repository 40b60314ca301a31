"""The command runner replays a long log of one-record batches quickly and is fresh afterwards.

Every command is one record in a batch of its own. On the durable embedded broker the runner's short
fetch wait (20 ms, for fresh decisions) crawled over such a log: a restarted server replaying it
gave up its start-up after 60 s (bench/chaos.py). The runner now reads far-behind logs with a
long-wait consumer and returns to the short one at the end (`kafka.lanes`).
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer

from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import KafkaSettings, admin_client, create_topic, producer_config
from headwater.metastore.records import CommandRecord, encode, new_command_id
from headwater.metastore.runner import CommandRunner

pytestmark = pytest.mark.kafka


def _command_topic(settings: KafkaSettings) -> str:
    name = f"_headwater-test-{uuid.uuid4().hex[:8]}_command_topic"
    create_topic(admin_client(settings), settings, name, 1)
    return name


def _write(settings: KafkaSettings, topic: str, count: int) -> list[str]:
    """``count`` records, one per batch; each is decided (as a conflict: validated at offset -1,
    which any record after the first lies beyond), so nothing needs a real catalog change."""
    config = producer_config(settings, "runner-test")
    config["batch.num.messages"] = 1
    sender = Producer(config)
    ids = []
    for _ in range(count):
        record = CommandRecord(new_command_id(), -1, "-- test", {"type": "nothing"})
        sender.produce(topic, value=encode(record), partition=0)
        sender.poll(0)
        ids.append(record.command_id)
    assert sender.flush(60) == 0
    return ids


def _replays_then_follows(settings: KafkaSettings, count: int, limit_s: float) -> None:
    topic = _command_topic(settings)
    ids = _write(settings, topic, count)
    runner = CommandRunner(settings, topic)
    started = time.monotonic()
    runner.start()
    try:
        assert runner.wait_until_read_to_end(limit_s + 30), runner.reason
        replay_s = time.monotonic() - started
        assert runner.position == count
        assert set(runner.outcomes()) == set(ids)
        assert replay_s < limit_s, f"replaying {count} one-record batches took {replay_s:.1f} s"

        started = time.monotonic()
        (new,) = _write(settings, topic, 1)
        assert runner.wait_for_outcome(new, 10) is not None
        assert time.monotonic() - started < 2, "not fresh again after the replay"
    finally:
        runner.stop()


def test_a_long_log_replays_and_the_runner_is_fresh_afterwards(
    memory_broker: EmbeddedBroker,
) -> None:
    _replays_then_follows(memory_broker.settings(), 500, 10)


@pytest.mark.durable
def test_a_long_log_of_one_record_batches_replays_quickly_on_the_durable_broker(
    durable_broker: EmbeddedBroker,
) -> None:
    _replays_then_follows(durable_broker.settings(), 1500, 15)


def test_waiting_to_read_to_the_end_gives_up_on_a_stopped_runner(
    memory_broker: EmbeddedBroker,
) -> None:
    runner = CommandRunner(memory_broker.settings(), "no-such-command-topic")
    runner.start()
    runner.stop()
    began = time.monotonic()
    assert not runner.wait_until_read_to_end(5)
    assert time.monotonic() - began < 1, "waited out the timeout instead of seeing it stopped"
