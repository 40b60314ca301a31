"""Every server stops reading a topic DROP ... DELETE TOPIC deletes (metastore.topic_retirement)."""

from __future__ import annotations

import time
import uuid

import pytest

from headwater.kafka import readers
from headwater.kafka.clients import KafkaSettings, consumer_config, consumer_from_config
from headwater.metastore.catalog import Catalog
from headwater.metastore.records import CommandRecord
from headwater.metastore.replay import CommandState, Outcome
from headwater.metastore.topic_retirement import DeletionWatcher, deleted_topic, retiring


def _record(command: dict[str, object]) -> CommandRecord:
    return CommandRecord(uuid.uuid4().hex, 0, "-- test", command)


def _outcome(state: CommandState = CommandState.SUCCESS) -> Outcome:
    return Outcome("id", 3, state, "done")


def test_only_an_applied_drop_with_delete_topic_deletes_a_topic() -> None:
    drop = _record({"type": "drop_source", "name": "T", "delete_topic": "t"})
    assert deleted_topic(drop, _outcome()) == "t"
    assert deleted_topic(drop, _outcome(CommandState.ERROR)) is None
    assert deleted_topic(_record({"type": "drop_source", "name": "T"}), _outcome()) is None
    # records written before the command named its topic
    assert (
        deleted_topic(_record({"type": "create_source", "delete_topic": "t"}), _outcome()) is None
    )


def test_the_listener_retires_the_topic_and_calls_on() -> None:
    topic = f"retiring-{uuid.uuid4().hex[:8]}"
    seen: list[str] = []
    listener = retiring(None, lambda record, _o, _c: seen.append(record.kind))
    try:
        listener(
            _record({"type": "drop_source", "name": "T", "delete_topic": topic}),
            _outcome(),
            Catalog(),
        )
        assert topic in readers.retired_topics()
        assert seen == ["drop_source"]
    finally:
        readers.release_holds([topic])


@pytest.mark.kafka
def test_the_watcher_notes_a_deletion_so_readers_that_follow_new_topics_renew(
    memory_kafka: KafkaSettings,
) -> None:
    follower = consumer_from_config(
        consumer_config(memory_kafka, "watch-test"), follows_new_topics=True
    )
    try:
        assert not follower.needs_renewal()
        DeletionWatcher(memory_kafka).watch(f"never-made-{uuid.uuid4().hex[:8]}")
        deadline = time.monotonic() + 10
        while not follower.needs_renewal():
            assert time.monotonic() < deadline, "the deletion was not noted"
            time.sleep(0.05)
    finally:
        follower.close()
