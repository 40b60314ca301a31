"""TableRestorer lifecycle on the in-memory broker: tables added and removed while running, DROP
TABLE, two tables on one topic, a store that fails, stop and start again."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from headwater.kafka.clients import KafkaSettings, admin_client, create_topic, producer
from headwater.store.errors import TableNotMaterialized
from headwater.store.lmdb import LmdbEngine, LmdbSettings
from headwater.store.local import LocalStores
from headwater.store.memory import MemoryEngine
from headwater.store.records import PartitionState, unpack_value
from headwater.store.restorer import RestorerSettings, TableRestorer

pytestmark = pytest.mark.kafka


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalStores]:
    stores = LocalStores(tmp_path, LmdbEngine(LmdbSettings(map_size_bytes=64 * 2**20)))
    yield stores
    stores.close_all()


@pytest.fixture
def restorer(memory_kafka: KafkaSettings, local: LocalStores) -> Iterator[TableRestorer]:
    made = TableRestorer(memory_kafka, local, RestorerSettings(max_batch_records=50))
    yield made
    made.stop()


def key(raw: bytes | None) -> bytes:
    if raw is None:
        raise ValueError("no key")
    return raw


def topic_with(
    memory_kafka: KafkaSettings, name: str, partitions: int, rows: Iterable[tuple]
) -> str:
    create_topic(admin_client(memory_kafka), memory_kafka, name, partitions)
    send(memory_kafka, name, rows)
    return name


def send(memory_kafka: KafkaSettings, topic: str, rows: Iterable[tuple]) -> None:
    sender = producer(memory_kafka, "lifecycle-test")
    for k, value, partition in rows:
        sender.produce(topic, key=k, value=value, partition=partition)
    assert sender.flush(30) == 0


def values(stores: LocalStores, table: str, partition: int) -> dict[bytes, bytes]:
    return {k: unpack_value(v).value for k, v in stores.open(table, partition).scan()}


def test_tables_added_and_dropped_while_running(
    memory_kafka: KafkaSettings, topic_name: str, local: LocalStores, restorer: TableRestorer
) -> None:
    first = topic_with(
        memory_kafka, f"{topic_name}-a", 2, ((b"a%d" % i, b"1", i % 2) for i in range(40))
    )
    second = topic_with(
        memory_kafka, f"{topic_name}-b", 1, ((b"b%d" % i, b"2", 0) for i in range(30))
    )
    restorer.start()
    restorer.add_table("A", first, [0, 1], key)
    assert restorer.wait_until_caught_up("A", 15)
    restorer.add_table("B", second, [0], key)
    assert restorer.wait_until_caught_up("B", 15)
    assert len(values(local, "B", 0)) == 30

    restorer.remove_table("A", drop_stores=True)
    assert not local.path_of("A", 0).exists() and not local.path_of("A", 1).exists()
    with pytest.raises(TableNotMaterialized):
        restorer.status("A")
    assert set(restorer.lags()) == {"B"}
    send(memory_kafka, second, [(b"b-new", b"3", 0)])  # B is still followed
    assert restorer.wait_for_positions("B", {0: 31}, 10)

    restorer.add_table("A", first, [0, 1], key)  # re-created: restored from the beginning
    assert {s.position for s in restorer.status("A").values()} == {0}
    assert restorer.wait_until_caught_up("A", 15)
    assert len(values(local, "A", 0)) + len(values(local, "A", 1)) == 40


def test_removing_without_dropping_keeps_the_stores_for_later(
    memory_kafka: KafkaSettings, topic_name: str, local: LocalStores, restorer: TableRestorer
) -> None:
    topic = topic_with(memory_kafka, topic_name, 1, ((b"k%d" % i, b"v", 0) for i in range(20)))
    restorer.add_table("T", topic, [0], key)
    restorer.start()
    assert restorer.wait_until_caught_up("T", 15)
    restorer.remove_table("T", drop_stores=False)
    assert local.get("T", 0) is None  # closed
    assert local.on_disk() == {("T", 0): 20}
    restorer.add_table("T", topic, [0], key)
    assert restorer.status("T")[0].position == 20


def test_two_tables_on_one_topic_each_get_every_record(
    memory_kafka: KafkaSettings, topic_name: str, local: LocalStores, restorer: TableRestorer
) -> None:
    topic = topic_with(
        memory_kafka, topic_name, 1, ((b"k%d" % (i % 7), b"%d" % i, 0) for i in range(70))
    )
    restorer.add_table("FIRST", topic, [0], key)
    restorer.start()
    assert restorer.wait_until_caught_up("FIRST", 15)
    # The second table starts at 0 while the partition is read at 70: it is read again from 0.
    restorer.add_table("SECOND", topic, [0], key)
    assert restorer.wait_until_caught_up("SECOND", 15)
    send(memory_kafka, topic, [(b"k0", b"last", 0)])
    assert restorer.wait_for_positions("FIRST", {0: 71}, 10)
    assert restorer.wait_for_positions("SECOND", {0: 71}, 10)
    assert values(local, "FIRST", 0) == values(local, "SECOND", 0)
    assert values(local, "FIRST", 0)[b"k0"] == b"last"
    restorer.remove_table("FIRST", drop_stores=True)  # the partition stays assigned for SECOND
    send(memory_kafka, topic, [(b"k1", b"after", 0)])
    assert restorer.wait_for_positions("SECOND", {0: 72}, 10)


def test_a_store_that_refuses_a_batch_fails_its_partition_only(
    memory_kafka: KafkaSettings, topic_name: str, local: LocalStores, restorer: TableRestorer
) -> None:
    topic = topic_with(memory_kafka, topic_name, 2, ((b"k%d" % i, b"v", i % 2) for i in range(10)))
    restorer.add_table("T", topic, [0, 1], key)
    restorer.start()
    assert restorer.wait_until_caught_up("T", 15)
    local.close("T", 0)  # the restorer's store object is closed under it: StoreClosed
    send(memory_kafka, topic, [(b"x", b"v", 0), (b"y", b"v", 1)])
    assert restorer.wait_for_positions("T", {1: 6}, 10)
    deadline = time.monotonic() + 10
    while restorer.status("T")[0].state is not PartitionState.FAILED:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    failed = restorer.status("T")[0]
    assert failed.position == 5 and failed.error is not None and "closed" in failed.error
    assert not restorer.wait_until_caught_up("T", 0.5)


def test_stop_and_start_again_resumes(
    memory_kafka: KafkaSettings, topic_name: str, tmp_path: Path
) -> None:
    stores = LocalStores(tmp_path, MemoryEngine())
    topic = topic_with(memory_kafka, topic_name, 1, ((b"k%d" % i, b"v", 0) for i in range(10)))
    restorer = TableRestorer(memory_kafka, stores)
    restorer.add_table("T", topic, [0], key)
    restorer.start()
    with pytest.raises(RuntimeError):
        restorer.start()
    assert restorer.wait_until_caught_up("T", 15)
    restorer.stop()
    restorer.stop()  # idempotent
    send(memory_kafka, topic, [(b"k0", b"while stopped", 0)])
    restorer.add_table("U", topic, [0], key)  # added while stopped: assigned at the next start
    restorer.start()
    try:
        assert restorer.wait_for_positions("T", {0: 11}, 10)
        assert restorer.wait_until_caught_up("U", 15)
        assert values(stores, "T", 0)[b"k0"] == b"while stopped"
    finally:
        restorer.stop()
