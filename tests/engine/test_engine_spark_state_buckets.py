"""An aggregation's Spark operators over state buckets (`engine.spark.aggregation`): stage 1's rows
shuffled by bucket, then the change and aggregate processors run as Spark runs them (one call per
Spark key and batch, a value state per key), here with an in-memory state store and no JVM. They
must write what the stages run in process write (`LocalAggregation`), and what one state per group
(the layout before buckets) writes; a checkpoint's layout is decided once and kept."""

from __future__ import annotations

import json
import pickle
import zlib
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import Row

from headwater.engine.persistent import InputRecord
from headwater.engine.persistent.aggregate_run import (
    AggregatePipeline,
    GroupedRow,
    GroupState,
    LocalAggregation,
)
from headwater.engine.spark.aggregation import (
    LAYOUT_FILE,
    STATE_BUCKETS,
    AggregateProcessor,
    ChangeProcessor,
    bucket_of,
    group_state,
    group_state_bytes,
    grouped_rows,
    shipped,
    state_layout,
)
from headwater.engine.spark.settings import EngineSettings
from headwater.engine.spark.source_rows import rows_of
from headwater.metastore.catalog import Catalog
from headwater.metastore.codec import catalog_to_dict
from headwater.metastore.plan import TopicFacts
from tests.support.catalogs import catalog_of

FACTS = TopicFacts({"orders": 2, "items": 1})
ORDERS = (
    "CREATE STREAM orders (id STRING KEY, item STRING, qty INT) "
    "WITH (kafka_topic='orders', value_format='JSON');"
)
ITEMS = (
    "CREATE TABLE items (id STRING PRIMARY KEY, kind STRING, qty INT) "
    "WITH (kafka_topic='items', value_format='JSON');"
)


class _Store:
    """Spark's state store for one stateful operator: values per (state name, Spark key)."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, Any], tuple[Any, ...]] = {}
        self.key: Any = None
        self.calls = 0  # state calls (each is a round trip to the JVM on Spark)


class _ValueState:
    def __init__(self, store: _Store, name: str) -> None:
        self.store, self.name = store, name

    def exists(self) -> bool:
        self.store.calls += 1
        return (self.name, self.store.key) in self.store.values

    def get(self) -> tuple[Any, ...] | None:
        self.store.calls += 1
        return self.store.values.get((self.name, self.store.key))

    def update(self, value: tuple[Any, ...]) -> None:
        self.store.calls += 1
        self.store.values[(self.name, self.store.key)] = value

    def clear(self) -> None:
        self.store.calls += 1
        self.store.values.pop((self.name, self.store.key), None)


class _Handle:
    def __init__(self, store: _Store) -> None:
        self.store = store

    def getValueState(self, name: str, _schema: str) -> _ValueState:
        return _ValueState(self.store, name)


def _run_operator(processor: Any, store: _Store, rows: list[Row]) -> list[Row]:
    """One micro-batch through a stateful operator: rows shuffled by ``group``, one call per key."""
    processor.init(_Handle(store))
    by_key: dict[Any, list[Row]] = {}
    for row in rows:
        by_key.setdefault(row.group, []).append(row)
    out: list[Row] = []
    for key, members in by_key.items():
        store.key = key
        out.extend(processor.handleInputRows((key,), iter(members), None))
    return out


class _SparkAggregation:
    """The operators of one aggregating query, batch after batch, as `aggregate_frame` chains them."""

    def __init__(self, catalog: Catalog, query_id: str, buckets: int, buffering: bool) -> None:
        self.payload = json.dumps(
            {
                "queryId": query_id,
                "catalog": catalog_to_dict(catalog),
                "buffering": buffering,
                "stateBuckets": buckets,
            },
            sort_keys=True,
        )
        self.buckets = buckets
        self.pipeline = AggregatePipeline.for_query(
            catalog.queries[query_id], catalog, buffering=buffering
        )
        self.changes, self.groups = _Store(), _Store()

    def process(self, records: list[InputRecord]) -> list[tuple[Any, ...]]:
        items, errors = self.pipeline.group(records, {})
        if self.pipeline.combines:
            items = list(self.pipeline.combine([i for i in items if isinstance(i, GroupedRow)]))
        columns = grouped_rows(self.pipeline, items, errors, self.buckets)
        rows = [Row(**dict(zip(columns, v, strict=True))) for v in zip(*columns.values())]
        if self.pipeline.table_source:
            rows = _run_operator(ChangeProcessor(self.payload), self.changes, rows)
        out = _run_operator(AggregateProcessor(self.payload), self.groups, rows)
        written = sorted(
            (r for r in out if r.error is None),
            key=lambda r: (r.source_rank, r.source_partition, r.source_offset, r.source_seq),
        )
        skipped = sorted((r.error, r.source_partition, r.source_offset) for r in out if r.error)
        return [(r.key, r.value, r.timestamp, r.partition) for r in written] + skipped


def _local(catalog: Catalog, query_id: str, buffering: bool) -> LocalAggregation:
    pipeline = AggregatePipeline.for_query(catalog.queries[query_id], catalog, buffering=buffering)
    return LocalAggregation(pipeline)


def _expected(local: LocalAggregation, records: list[InputRecord]) -> list[tuple[Any, ...]]:
    written, errors = local.process(records)
    skipped = sorted((e.kind, e.partition, e.offset) for e in errors)
    return [(o.key, o.value, o.timestamp, o.partition) for o in written] + skipped


def _record(offset: int, key: str | None, value: dict[str, Any] | None, partition: int = 0) -> Any:
    return InputRecord(
        key.encode() if key else None,
        None if value is None else json.dumps(value).encode(),
        1000 + offset,
        partition,
        offset,
    )


def _batches(table: bool) -> list[list[InputRecord]]:
    """Three batches over 300 groups (or source keys), with a NULL group and a bad record."""
    batches = []
    offset = 0
    for size in (400, 1, 250):
        batch = []
        for _ in range(size):
            i = offset * 7919 % 300
            value: dict[str, Any] | None = {"ITEM": f"g{i % 37}", "KIND": f"k{i % 11}", "QTY": i}
            if offset % 97 == 5:
                value = {"ITEM": None, "KIND": None, "QTY": 1}
            if offset % 89 == 3:
                value = None if table else {"QTY": "not a number"}
            batch.append(_record(offset, f"id{i}", value, partition=offset % 2))
            offset += 1
        batches.append(batch)
    return batches


QUERIES = {
    "stream": (
        ORDERS,
        "CREATE TABLE n AS SELECT item, COUNT(*) AS c, SUM(qty) AS q FROM orders GROUP BY item;",
    ),
    "having": (
        ORDERS,
        (
            "CREATE TABLE n AS SELECT item, COUNT(*) AS c FROM orders GROUP BY item "
            "HAVING COUNT(*) < 12;"
        ),
    ),
    "table": (
        ITEMS,
        "CREATE TABLE n AS SELECT kind, COUNT(*) AS c, SUM(qty) AS q FROM items GROUP BY kind;",
    ),
}


@pytest.mark.parametrize("buffering", [False, True])
@pytest.mark.parametrize("query", sorted(QUERIES))
@pytest.mark.parametrize("buckets", [STATE_BUCKETS, 3, 0])
def test_the_operators_write_what_the_stages_write_in_process(
    query: str, buffering: bool, buckets: int
) -> None:
    query_id = "CTAS_N_1"
    source, ctas = QUERIES[query]
    catalog = catalog_of(FACTS, source, ctas)
    spark = _SparkAggregation(catalog, query_id, buckets, buffering)
    local = _local(catalog, query_id, buffering)
    for batch in _batches(table=query == "table"):
        assert spark.process(batch) == _expected(local, batch)


def test_a_batch_reads_and_writes_each_bucket_it_touches_once() -> None:
    query_id = "CTAS_N_1"
    source, ctas = QUERIES["stream"]
    catalog = catalog_of(FACTS, source, ctas)
    bucketed = _SparkAggregation(catalog, query_id, 4, buffering=True)
    per_group = _SparkAggregation(catalog, query_id, 0, buffering=True)
    records = [_record(i, "k", {"ITEM": f"g{i}", "QTY": 1}) for i in range(1000)]
    assert bucketed.process(records) == per_group.process(records)
    assert bucketed.groups.calls == 4 * 2  # get + update per bucket
    assert per_group.groups.calls == 1000 * 2  # exists + update per group (new groups: no get)
    assert len({k for _name, k in bucketed.groups.values}) == 4
    more = [_record(1000 + i, "k", {"ITEM": f"g{i}", "QTY": 1}) for i in range(1000)]
    assert bucketed.process(more) == per_group.process(more)
    assert bucketed.groups.calls == 4 * 2 * 2
    assert per_group.groups.calls == 1000 * 2 + 1000 * 3


def test_bucket_of_is_the_same_in_every_process() -> None:
    # crc32, not Python's per-process hash of bytes: every worker, and a restarted one, agree
    assert [bucket_of(k, 128) for k in (b"", b"alice")] == [
        b"0",
        b"%d" % (zlib.crc32(b"alice") % 128),
    ]
    assert {bucket_of(b"k%d" % i, 8) for i in range(1000)} == {b"%d" % i for i in range(8)}


def test_a_new_checkpoint_records_its_layout_and_an_old_one_keeps_a_state_per_group(
    tmp_path: Path,
) -> None:
    new = tmp_path / "new"
    assert state_layout(str(new)) == STATE_BUCKETS
    assert json.loads((new / LAYOUT_FILE).read_text()) == {"stateBuckets": STATE_BUCKETS}
    assert state_layout(str(new)) == STATE_BUCKETS  # kept on a restart
    (new / LAYOUT_FILE).write_text(json.dumps({"stateBuckets": 16}))
    assert state_layout(str(new)) == 16  # what the checkpoint says, not today's default

    old = tmp_path / "old"
    (old / "offsets").mkdir(parents=True)
    (old / "offsets" / "0").write_text("v1")
    assert state_layout(str(old)) == 0  # written before buckets: one state per group
    assert not (old / LAYOUT_FILE).exists()

    empty = tmp_path / "empty"
    (empty / "offsets").mkdir(parents=True)  # Spark never finished a batch: no state yet
    assert state_layout(str(empty)) == STATE_BUCKETS

    assert state_layout("s3a://bucket/checkpoints/q") == 0  # unreadable here: the safe layout


def test_a_bucket_state_pickles_its_groups_states() -> None:
    query_id = "CTAS_N_1"
    source, ctas = QUERIES["stream"]
    catalog = catalog_of(FACTS, source, ctas)
    spark = _SparkAggregation(catalog, query_id, 2, buffering=True)
    spark.process([_record(0, "k", {"ITEM": "a", "QTY": 5})])
    [(name, key)] = list(spark.groups.values)
    entries = pickle.loads(spark.groups.values[(name, key)][0])
    assert key == bucket_of(next(iter(entries)), 2)
    state = group_state(entries[next(iter(entries))])
    assert state is not None and state.aggregates[0] is not None


def test_a_group_state_is_kept_as_a_tuple_and_one_kept_before_still_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = GroupState([3, 12], 1_700_000_000_000, True)
    kept = group_state_bytes(state)
    assert type(pickle.loads(kept)) is tuple
    assert len(kept) < 40
    assert group_state(kept) == state
    assert group_state(None) is None and group_state(b"") is None
    with monkeypatch.context() as patched:  # what a checkpoint written before this layout holds
        patched.delattr(GroupState, "__reduce__")
        before = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    assert b"GroupState" in before and len(before) > 100
    assert group_state(before) == state


def test_a_checkpoint_keeps_20_batches_of_changelogs_not_100() -> None:
    # a bucketed aggregation's changelog can approach its whole state per batch: Spark's default
    # retention (100 batches) would keep 100 copies of it on disk
    conf = EngineSettings().spark_conf()
    assert conf["spark.sql.streaming.minBatchesToRetain"] == "20"


def test_a_source_task_hands_on_its_chunks_rows_combined_per_group() -> None:
    # what a live aggregation's source task yields (buffering, ksqlDB's default): per state
    # bucket, the chunk's rows combined per group, as `combine` makes them from the grouped rows
    source, ctas = QUERIES["stream"]
    catalog = catalog_of(FACTS, source, ctas)
    query = catalog.queries["CTAS_N_1"]
    payload = json.dumps(
        {
            "queryId": query.id,
            "catalog": catalog_to_dict(catalog),
            "buffering": True,
            "stateBuckets": 4,
        }
    )
    records = [_record(i, "k", {"ITEM": f"g{i % 3}", "QTY": i}, partition=i % 2) for i in range(30)]
    records.append(_record(30, "k", {"ITEM": None, "QTY": 1}))  # a NULL group: skipped
    batches = list(rows_of({"query": payload, "output": "grouped"}, iter(records)))
    rows = [r for b in batches for r in b.to_pylist()]
    sent = [g for r in rows if r["row"] is not None for g in shipped(r["row"])]
    pipeline = AggregatePipeline.for_query(query, catalog, buffering=True)
    grouped, errors = pipeline.group(records)
    expected = pipeline.combine([g for g in grouped if isinstance(g, GroupedRow)])
    assert len(sent) == 3
    assert sorted(map(repr, sent)) == sorted(map(repr, expected))
    assert [(r["source_offset"], r["error"]) for r in rows if r["error"]] == [(30, "serialization")]
    assert [e.offset for e in errors] == [30]


def test_shipped_items_are_the_items_and_a_cycle_is_refused() -> None:
    """`ship` pickles without a memo (`flat`): the rows come back equal, named tuples again, table
    changes as they were; a value with a cycle raises instead of recursing forever."""
    from decimal import Decimal

    from headwater.engine.persistent.aggregate_run import TableChange
    from headwater.engine.spark.aggregation import flat, ship

    shared = ("x", Decimal("1.50"), [1, 2])
    rows = [
        GroupedRow(b"g", shared, ((shared,),), None, 5, 1, 7, 0, b"k", 3),
        GroupedRow(b"h", ("y",), None, None, 6, 0, 8, 1, None, 4, [2, {b"a"}]),
    ]
    change = TableChange(b"k", rows[0], 2, 1, 9)
    back = shipped(ship([*rows, change]))
    assert back[:2] == rows and all(type(r) is GroupedRow for r in back[:2])
    assert back[2] == change
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(ValueError, match="cyclic"):
        flat(looped)
