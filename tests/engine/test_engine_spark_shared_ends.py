"""The shared end watcher (`engine.spark.shared_ends`): the file's rules, the event-time lag from
its samples, and one consumer on the embedded broker following exactly the topics it is given."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from headwater.engine.spark.shared_ends import (
    _SAMPLE_EVERY_S,
    MAX_AGE_S,
    EndWatch,
    ends_text,
    event_time_lag_ms,
    read_shared_ends,
    shared_ends,
    takes_sample,
    thinned,
)
from headwater.kafka.clients import KafkaSettings, admin_client, create_topic, producer


def test_the_file_gives_every_partition_of_a_topic_or_nothing() -> None:
    text = ends_text({"t": {0: 5, 1: 7}, "u": {0: 1}}, now=100.0)
    assert shared_ends(text, "t", 2, now=100.5) == {"0": 5, "1": 7}
    assert shared_ends(text, "u", 2, now=100.5) is None  # partition 1 not known yet
    assert shared_ends(text, "v", 1, now=100.5) is None  # a topic it does not watch
    assert shared_ends(text, "t", 2, now=100.0 + MAX_AGE_S + 0.1) is None  # stale: its watcher
    for broken in ("", "{", "[]", json.dumps({"at": "x", "ends": {}}), json.dumps({"at": 1})):
        assert shared_ends(broken, "t", 2, now=1.0) is None


def test_the_event_time_lag_is_the_newest_sample_minus_the_last_one_at_the_position() -> None:
    samples = [(10, 1_000), (20, 3_000), (30, 7_000)]
    assert event_time_lag_ms(samples, 40, 40) == 0  # caught up
    assert event_time_lag_ms(samples, 45, 40) == 0
    assert event_time_lag_ms([], 40, 40) == 0  # caught up needs no sample
    assert event_time_lag_ms(samples, 25, 40) == 4_000  # 7000 - the sample at 20
    assert event_time_lag_ms(samples, 20, 40) == 4_000  # exactly at a sample
    assert event_time_lag_ms(samples, 10, 40) == 6_000
    assert event_time_lag_ms(samples, 35, 40) == 0  # past the newest sample
    assert event_time_lag_ms(samples, 9, 40) is None  # older than every sample: unknown
    assert event_time_lag_ms([], 5, 40) is None  # no samples: unknown
    assert event_time_lag_ms([(10, 9_000), (20, 2_000)], 15, 40) == 0  # out of order: clamped


def test_a_partition_is_sampled_at_most_every_quarter_second_at_growing_offsets() -> None:
    assert takes_sample(None, 5, now=100.0)  # the first always
    assert not takes_sample((5, 100.0), 6, now=100.0 + _SAMPLE_EVERY_S / 2)  # too soon
    assert takes_sample((5, 100.0), 6, now=100.0 + _SAMPLE_EVERY_S)
    assert not takes_sample((5, 100.0), 5, now=200.0)  # no later offset
    assert not takes_sample((5, 100.0), 3, now=200.0)


def _wait(check: object, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.kafka
def test_one_consumer_follows_the_ends_of_the_topics_it_is_given(
    memory_kafka: KafkaSettings, topic_name: str, tmp_path: Path
) -> None:
    admin = admin_client(memory_kafka)
    create_topic(admin, memory_kafka, topic_name, 2)
    writer = producer(memory_kafka, "test")
    for i in range(5):
        writer.produce(topic_name, b"v", f"k{i}".encode(), partition=i % 2)
    writer.flush()
    path = tmp_path / "ends.json"
    watch = EndWatch(memory_kafka, path)
    try:
        watch.follow({topic_name: 2})
        _wait(lambda: read_shared_ends(str(path), topic_name, 2) == {"0": 3, "1": 2})
        writer.produce(topic_name, b"v", b"late", partition=1)
        writer.flush()
        _wait(lambda: read_shared_ends(str(path), topic_name, 2) == {"0": 3, "1": 3}, 5)
        watch.follow({})  # its query stopped: the topic is let go at once
        text = path.read_text()
        assert topic_name not in json.loads(text)["ends"]
    finally:
        watch.close()
    assert not path.exists(), "the file goes with its watcher"


@pytest.mark.kafka
def test_after_a_burst_the_watcher_sees_a_new_end_at_once(
    memory_kafka: KafkaSettings, topic_name: str, tmp_path: Path
) -> None:
    """A try that let its consumer fetch little (a queue of 1 KB) made librdkafka postpone its
    next fetch by a second once a fetched batch filled that queue: after a burst, the next
    record's end was seen ~1 s late (bench.race's p99)."""
    create_topic(admin_client(memory_kafka), memory_kafka, topic_name, 1)
    writer = producer(memory_kafka, "test")
    path = tmp_path / "ends.json"
    watch = EndWatch(memory_kafka, path)
    try:
        watch.follow({topic_name: 1})
        _wait(lambda: read_shared_ends(str(path), topic_name, 1) == {"0": 0})
        for i in range(20_000):  # a burst: record batches far over the watcher's queue
            writer.produce(topic_name, b"x" * 50, partition=0)
            if i % 2_000 == 0:
                writer.poll(0)
        writer.flush()
        _wait(lambda: read_shared_ends(str(path), topic_name, 1) == {"0": 20_000})
        late: list[float] = []
        for n in range(20_001, 20_006):
            writer.produce(topic_name, b"x", partition=0)
            writer.flush()
            sent = time.monotonic()
            _wait(lambda n=n: read_shared_ends(str(path), topic_name, 1) == {"0": n}, 5)
            late.append(time.monotonic() - sent)
            time.sleep(0.05)
        assert max(late) < 0.5, late  # ~0.1 s here (the file's polling); 1 s with that queue
    finally:
        watch.close()


@pytest.mark.kafka
def test_the_watcher_tells_a_query_its_lag_in_event_time(
    memory_kafka: KafkaSettings, topic_name: str, tmp_path: Path
) -> None:
    admin = admin_client(memory_kafka)
    create_topic(admin, memory_kafka, topic_name, 1)
    writer = producer(memory_kafka, "test")
    base = int(time.time() * 1000) - 600_000
    writer.produce(topic_name, b"v", b"before", partition=0, timestamp=base)  # offset 0: unseen
    writer.flush()
    watch = EndWatch(memory_kafka, tmp_path / "ends.json")
    try:
        watch.follow({topic_name: 1})
        _wait(lambda: watch.ends().get(topic_name) == {0: 1})
        writer.produce(topic_name, b"v", b"a", partition=0, timestamp=base + 1_000)  # offset 1
        writer.flush()
        _wait(  # offset 1 read and sampled: a reader at it is not caught up, and no lag yet
            lambda: (
                watch.ends().get(topic_name) == {0: 2}
                and watch.time_lags({topic_name: {"0": 1}}) == {topic_name: {"0": 0}}
            )
        )
        time.sleep(_SAMPLE_EVERY_S + 0.05)
        writer.produce(topic_name, b"v", b"b", partition=0, timestamp=base + 61_000)  # offset 2
        writer.flush()
        _wait(lambda: watch.time_lags({topic_name: {"0": 1}}) == {topic_name: {"0": 60_000}})
        assert watch.time_lags({topic_name: {"0": 2}}) == {topic_name: {"0": 0}}
        assert watch.time_lags({topic_name: {"0": 3}}) == {topic_name: {"0": 0}}  # caught up
        assert watch.time_lags({topic_name: {"0": 0}}) == {}  # older than every sample: unknown
        assert watch.time_lags({"other": {"0": 0}}) == {}  # not watched: no end
        watch.follow({})
        assert watch.time_lags({topic_name: {"0": 1}}) == {}  # let go with its samples
    finally:
        watch.close()


_WATCH_IN_A_CHILD = """
import sys, time
from pathlib import Path
from headwater.engine.spark.shared_ends import EndWatch, read_shared_ends
from headwater.kafka.clients import KafkaSettings
watch = EndWatch(KafkaSettings(sys.argv[1]), Path(sys.argv[2]))
gone, kept = sys.argv[3], sys.argv[4]
watch.follow({gone: 1, kept: 1})
print("watching", flush=True)
assert sys.stdin.readline().strip() == "stop gone"
watch.follow({kept: 1})  # the query of `gone` stopped: the parent deletes it and creates it again
print("let go", flush=True)
assert sys.stdin.readline().strip() == "recreated"
watch.follow({kept: 1, gone: 1})  # a new query on the new topic of the same name
deadline = time.monotonic() + 10
while read_shared_ends(sys.argv[2], gone, 1) != {"0": 1}:
    assert time.monotonic() < deadline, "no end of the new topic"
    time.sleep(0.05)
time.sleep(1)
watch.close()
print("done", flush=True)
"""


@pytest.mark.kafka
def test_the_watcher_survives_a_topic_deleted_and_created_again(
    memory_kafka: KafkaSettings, topic_name: str, tmp_path: Path
) -> None:
    """On the embedded broker a client that knew a topic dies (SIGSEGV) when it is deleted and
    created again: the watcher takes a new consumer whenever its topics change (bench.drop_cleanup
    saw the Spark child die in 3 of 4 repetitions before)."""
    import subprocess
    import sys

    gone, kept = f"{topic_name}-gone", f"{topic_name}-kept"
    admin = admin_client(memory_kafka)
    for name in (gone, kept):
        create_topic(admin, memory_kafka, name, 1)
    with subprocess.Popen(
        [
            sys.executable,
            "-c",
            _WATCH_IN_A_CHILD,
            memory_kafka.bootstrap_servers,
            str(tmp_path / "ends.json"),
            gone,
            kept,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        _drive(child, admin, memory_kafka, gone)


def _drive(child: Any, admin: Any, memory_kafka: KafkaSettings, gone: str) -> None:
    from headwater.kafka.clients import delete_topics

    try:
        assert child.stdin is not None and child.stdout is not None
        assert child.stdout.readline().strip() == "watching"
        time.sleep(0.5)  # it fetches both
        child.stdin.write("stop gone\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "let go"
        delete_topics(admin, memory_kafka, [gone])
        create_topic(admin, memory_kafka, gone, 1)
        writer = producer(memory_kafka, "test")
        writer.produce(gone, b"v", b"k")
        writer.flush()
        child.stdin.write("recreated\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "done"
        assert child.wait(20) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_full_samples_are_thinned_and_keep_their_reach() -> None:
    samples = [(i * 10, 1_000 + i) for i in range(8)]
    assert thinned(samples, 9) is samples  # not full: untouched
    kept = thinned(samples, 8)
    assert kept == [(0, 1_000), (20, 1_002), (40, 1_004), (60, 1_006)]
    # the oldest stays: a reader far behind still has a (conservative) lag
    assert event_time_lag_ms([*kept, (80, 1_010)], 5, 81) == 10
