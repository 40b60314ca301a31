"""TableRestorer on the embedded broker: restore, follow, tombstones, skips, lags, restarts.

Most tests use the in-memory broker (fast); one runs on both storage modes. Stores are LocalStores
over MemoryEngine and LmdbEngine.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import (
    KafkaSettings,
    admin_client,
    commit_transaction,
    create_topic,
    init_transactions,
    producer,
    producer_config,
)
from headwater.kafka.offsets import end_offsets
from headwater.store.api import StoreEngine
from headwater.store.errors import TableNotMaterialized
from headwater.store.lag import LagInfo
from headwater.store.lmdb import LmdbEngine, LmdbSettings
from headwater.store.local import LocalStores
from headwater.store.memory import MemoryEngine
from headwater.store.records import PartitionState, StoredValue, unpack_value
from headwater.store.restorer import RestorerSettings, TableRestorer

pytestmark = pytest.mark.kafka

ENGINES: dict[str, Callable[[], StoreEngine]] = {
    "memory": MemoryEngine,
    "lmdb": lambda: LmdbEngine(LmdbSettings(map_size_bytes=64 * 2**20)),
}
Row = tuple[bytes | None, bytes | None, int]  # key, value, partition


@pytest.fixture(params=sorted(ENGINES))
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalStores]:
    local = LocalStores(tmp_path / "state", ENGINES[request.param]())
    yield local
    local.close_all()


@pytest.fixture
def restorers() -> Iterator[Callable[[KafkaSettings, LocalStores], TableRestorer]]:
    """Makes restorers (small batches, so batching is exercised); all are stopped at teardown."""
    made: list[TableRestorer] = []

    def make(settings: KafkaSettings, local: LocalStores) -> TableRestorer:
        restorer = TableRestorer(settings, local, RestorerSettings(max_batch_records=64))
        made.append(restorer)
        return restorer

    yield make
    for restorer in made:
        restorer.stop()


def make_topic(settings: KafkaSettings, name: str, partitions: int) -> None:
    create_topic(admin_client(settings), settings, name, partitions)


def raw_key(key: bytes | None) -> bytes:
    """The store key is the record key; a record without one cannot be stored."""
    if key is None or key.startswith(b"bad"):
        raise ValueError(f"undecodable key {key!r}")
    return key


def send(settings: KafkaSettings, topic: str, rows: Iterable[Row]) -> None:
    sender = producer(settings, "restorer-test")
    for key, value, partition in rows:
        sender.produce(topic, key=key, value=value, partition=partition)
    assert sender.flush(30) == 0


def stored(local: LocalStores, table: str, partition: int, key: bytes) -> StoredValue | None:
    data = local.open(table, partition).get(key)
    return None if data is None else unpack_value(data)


def eventually(check: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_restores_existing_records_then_follows_new_ones(
    memory_kafka: KafkaSettings, topic_name: str, stores: LocalStores, restorers: Callable
) -> None:
    make_topic(memory_kafka, topic_name, 2)
    send(memory_kafka, topic_name, ((b"k%d" % (i % 10), b"v%d" % i, i % 2) for i in range(300)))
    restorer = restorers(memory_kafka, stores)
    restorer.add_table("T", topic_name, [0, 1], raw_key)
    restorer.start()
    assert restorer.wait_until_caught_up("T", 15)
    status = restorer.status("T")
    assert {p: (s.position, s.end_offset, s.state) for p, s in status.items()} == {
        0: (150, 150, PartitionState.READY),
        1: (150, 150, PartitionState.READY),
    }
    latest = stored(stores, "T", 0, b"k4")  # key k4 went to partition 0: values 4, 14, ..., 294
    assert latest is not None and latest.value == b"v294" and latest.offset == 147
    assert latest.timestamp_ms > 1_600_000_000_000
    assert stores.open("T", 1).approximate_count() == 5

    started = time.monotonic()
    send(memory_kafka, topic_name, [(b"k4", b"fresh", 0), (b"new", b"n", 1)])
    assert restorer.wait_for_positions("T", {0: 151, 1: 151}, 5)
    assert time.monotonic() - started < 2  # fetches wait at most fetch_wait_max_ms (20 ms) here
    fresh = stored(stores, "T", 0, b"k4")
    assert fresh is not None and fresh.value == b"fresh" and fresh.offset == 150
    assert stored(stores, "T", 1, b"new") is not None
    assert restorer.lags() == {"T": {0: LagInfo(151, 151, 0), 1: LagInfo(151, 151, 0)}}


def test_tombstones_delete_and_the_later_value_wins(
    memory_kafka: KafkaSettings, topic_name: str, restorers: Callable, tmp_path: Path
) -> None:
    local = LocalStores(tmp_path, LmdbEngine(LmdbSettings(map_size_bytes=64 * 2**20)))
    make_topic(memory_kafka, topic_name, 1)
    send(
        memory_kafka,
        topic_name,
        [
            (b"a", b"1", 0),
            (b"b", b"1", 0),
            (b"a", None, 0),
            (b"b", b"2", 0),
            (b"c", b"1", 0),
        ],
    )
    restorer = restorers(memory_kafka, local)
    restorer.add_table("T", topic_name, [0], raw_key)
    restorer.start()
    assert restorer.wait_until_caught_up("T", 15)
    assert stored(local, "T", 0, b"a") is None
    assert [(k, unpack_value(v).value) for k, v in local.open("T", 0).scan()] == [
        (b"b", b"2"),
        (b"c", b"1"),
    ]
    send(memory_kafka, topic_name, [(b"c", None, 0), (b"a", b"back", 0)])
    assert restorer.wait_for_positions("T", {0: 7}, 10)
    assert [k for k, _ in local.open("T", 0).scan()] == [b"a", b"b"]
    local.close_all()


def test_records_with_unusable_keys_are_skipped_and_counted(
    memory_kafka: KafkaSettings,
    topic_name: str,
    stores: LocalStores,
    restorers: Callable,
    caplog: pytest.LogCaptureFixture,
) -> None:
    make_topic(memory_kafka, topic_name, 1)
    send(
        memory_kafka,
        topic_name,
        [
            (b"good", b"1", 0),
            (b"bad-key", b"x", 0),
            (None, b"no key", 0),
            (b"k" * 600, b"too long", 0),
            (b"bad-tombstone", None, 0),
            (b"last", b"2", 0),
        ],
    )
    restorer = restorers(memory_kafka, stores)
    restorer.add_table("T", topic_name, [0], raw_key)
    restorer.start()
    assert restorer.wait_until_caught_up("T", 15)
    status = restorer.status("T")[0]
    assert (status.position, status.skipped, status.state) == (6, 4, PartitionState.READY)
    assert [k for k, _ in stores.open("T", 0).scan()] == [b"good", b"last"]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(f"{topic_name}[0]@1" in w and "undecodable key" in w for w in warnings)
    assert any(f"{topic_name}[0]@3" in w and "600 bytes" in w for w in warnings)


def test_many_partitions_report_lags_from_fetch_responses(
    memory_kafka: KafkaSettings, topic_name: str, stores: LocalStores, restorers: Callable
) -> None:
    make_topic(memory_kafka, topic_name, 4)
    send(memory_kafka, topic_name, ((b"key-%d" % i, b"v", i % 3) for i in range(240)))
    restorer = restorers(memory_kafka, stores)
    restorer.add_table("T", topic_name, range(4), raw_key)
    assert restorer.lags() == {"T": {}}  # no end offset known before the first fetch
    assert restorer.status("T")[2].state is PartitionState.RESTORING
    restorer.start()
    assert restorer.wait_until_caught_up("T", 15)
    assert restorer.lags() == {"T": {p: LagInfo(n, n, 0) for p, n in enumerate([80, 80, 80, 0])}}
    assert sum(stores.open("T", p).approximate_count() for p in range(4)) == 240


def test_a_restart_resumes_from_the_store_positions(
    memory_kafka: KafkaSettings, topic_name: str, restorers: Callable, tmp_path: Path
) -> None:
    make_topic(memory_kafka, topic_name, 2)
    send(memory_kafka, topic_name, ((b"k%d" % i, b"first", i % 2) for i in range(100)))
    engine = LmdbEngine(LmdbSettings(map_size_bytes=64 * 2**20))
    local = LocalStores(tmp_path, engine)
    restorer = restorers(memory_kafka, local)
    restorer.add_table("T", topic_name, [0, 1], raw_key)
    restorer.start()
    assert restorer.wait_until_caught_up("T", 15)
    restorer.stop()
    local.close_all()

    send(memory_kafka, topic_name, ((b"k%d" % i, b"second", i % 2) for i in range(10)))
    decoded = itertools.count()

    def counting_key(key: bytes | None) -> bytes:
        next(decoded)
        return raw_key(key)

    local = LocalStores(tmp_path, engine)
    assert local.on_disk() == {("T", 0): 50, ("T", 1): 50}
    again = restorers(memory_kafka, local)
    again.add_table("T", topic_name, [0, 1], counting_key)
    assert {p: s.position for p, s in again.status("T").items()} == {0: 50, 1: 50}
    again.start()
    assert again.wait_for_positions("T", {0: 55, 1: 55}, 15)
    assert next(decoded) == 10  # only the new records were read
    assert unpack_value(local.open("T", 0).get(b"k0") or b"").value == b"second"
    assert unpack_value(local.open("T", 1).get(b"k99") or b"").value == b"first"
    local.close_all()


def test_transaction_markers_do_not_hold_a_partition_behind(
    memory_kafka: KafkaSettings, topic_name: str, stores: LocalStores, restorers: Callable
) -> None:
    make_topic(memory_kafka, topic_name, 1)
    writer = producer(memory_kafka, "restorer-tx", transactional_id=f"{topic_name}-tx")
    init_transactions(writer, memory_kafka)
    for batch in range(3):
        writer.begin_transaction()
        for i in range(5):
            writer.produce(topic_name, key=b"k%d" % i, value=b"%d" % batch, partition=0)
        commit_transaction(writer, memory_kafka)
    (end,) = end_offsets(memory_kafka, topic_name, [0]).values()
    assert end > 15  # 15 records and the commit markers
    restorer = restorers(memory_kafka, stores)
    restorer.add_table("T", topic_name, [0], raw_key)
    restorer.start()
    assert restorer.wait_until_caught_up("T", 15)
    lag = restorer.lags()["T"][0]
    assert lag == LagInfo(end, end, 0)  # past the last commit marker
    assert stores.open("T", 0).position() == lag.current_offset_position


def test_restores_on_both_storage_modes(
    kafka_settings: KafkaSettings, topic_name: str, restorers: Callable, tmp_path: Path
) -> None:
    local = LocalStores(tmp_path, LmdbEngine(LmdbSettings(map_size_bytes=64 * 2**20)))
    make_topic(kafka_settings, topic_name, 2)
    send(kafka_settings, topic_name, ((b"k%d" % i, b"v%d" % i, i % 2) for i in range(50)))
    restorer = restorers(kafka_settings, local)
    restorer.add_table("T", topic_name, [0, 1], raw_key)
    restorer.start()
    assert restorer.wait_until_caught_up("T", 30)
    assert restorer.lags() == {"T": {0: LagInfo(25, 25, 0), 1: LagInfo(25, 25, 0)}}
    send(kafka_settings, topic_name, [(b"k1", b"later", 1)])
    assert restorer.wait_for_positions("T", {1: 26}, 15)
    assert unpack_value(local.open("T", 1).get(b"k1") or b"").value == b"later"
    local.close_all()


@pytest.mark.durable
def test_a_backlog_of_one_record_batches_restores_quickly_on_the_durable_broker(
    durable_broker: EmbeddedBroker, topic_name: str, restorers: Callable, tmp_path: Path
) -> None:
    """On Tansu a short fetch wait crawls over one-record batches (what INSERT ... VALUES writes),
    the slower the more batches a partition has: 1,500 in one partition took about a minute with
    the live consumer's 20 ms wait alone; the catch-up consumer reads them in a second or two,
    and the caught-up table is then fresh again (`kafka.lanes`)."""
    settings = durable_broker.settings()
    make_topic(settings, topic_name, 1)
    config = producer_config(settings, "restorer-test")
    config["batch.num.messages"] = 1  # one record per batch, as INSERT ... VALUES writes them
    sender = Producer(config)
    for i in range(1500):
        sender.produce(topic_name, key=b"k%d" % i, value=b"v%d" % i, partition=0)
        sender.poll(0)
    assert sender.flush(60) == 0
    local = LocalStores(tmp_path, LmdbEngine(LmdbSettings(map_size_bytes=64 * 2**20)))
    restorer = restorers(settings, local)
    restorer.start()
    started = time.monotonic()
    restorer.add_table("T", topic_name, [0], raw_key)
    assert restorer.wait_until_caught_up("T", 30)
    assert time.monotonic() - started < 15
    assert restorer.lags() == {"T": {0: LagInfo(1500, 1500, 0)}}
    started = time.monotonic()
    send(settings, topic_name, [(b"k1", b"later", 0)])
    assert restorer.wait_for_positions("T", {0: 1501}, 15)
    assert time.monotonic() - started < 2  # fresh again once caught up
    assert unpack_value(local.open("T", 0).get(b"k1") or b"").value == b"later"
    local.close_all()


def test_the_lag_stays_known_while_a_partition_moves_to_the_catch_up_consumer(
    memory_kafka: KafkaSettings, topic_name: str, tmp_path: Path
) -> None:
    """A partition far behind moves to the catch-up consumer, whose queued statistics were taken
    while it was still connecting ("no broker up"). They used to mark the partition's end offset
    not current, so the lag read as unknown (and routers refused bounded reads as LAG_UNKNOWN)
    until its first fetch; now a consumer says nothing of a partition before fetching it."""
    make_topic(memory_kafka, topic_name, 1)
    send(memory_kafka, topic_name, ((b"k%d" % i, b"v", 0) for i in range(20_000)))
    local = LocalStores(tmp_path, MemoryEngine())
    restorer = TableRestorer(
        memory_kafka, local, RestorerSettings(statistics_interval_ms=50, max_batch_records=500)
    )
    restorer.start()
    try:
        time.sleep(0.5)  # statistics pile up in the idle catch-up consumer's queue
        restorer.add_table("T", topic_name, [0], raw_key)
        unknown: list[tuple[int, int | None]] = []
        deadline = time.monotonic() + 30
        while not (status := restorer.status("T")[0]).ready:
            assert time.monotonic() < deadline, status
            if not status.end_current:
                unknown.append((status.position, status.end_offset))
            time.sleep(0.002)
        assert unknown == [], f"lag unknown at (position, end) {unknown[:5]}"
    finally:
        restorer.stop()
        local.close_all()


def test_unknown_tables_raise_table_not_materialized(
    memory_kafka: KafkaSettings, stores: LocalStores
) -> None:
    restorer = TableRestorer(memory_kafka, stores)
    with pytest.raises(TableNotMaterialized):
        restorer.status("NOPE")
    with pytest.raises(TableNotMaterialized):
        restorer.wait_until_caught_up("NOPE", 0.1)
    with pytest.raises(TableNotMaterialized):
        restorer.remove_table("NOPE", drop_stores=True)
    with pytest.raises(ValueError):
        restorer.add_table("T", "topic", [], raw_key)
    restorer.add_table("T", "topic", [0], raw_key)
    with pytest.raises(ValueError):
        restorer.add_table("T", "topic", [0], raw_key)
    assert restorer.tables() == {"T": "topic"}
    restorer.stop()  # never started: nothing to do
