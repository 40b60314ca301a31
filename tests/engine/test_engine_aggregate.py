"""Aggregating persistent queries, the pure side: CREATE TABLE ... AS SELECT ... GROUP BY planned
with ksqlDB's rules, and the group / change / aggregate stages run in-process (as Spark runs them,
states pickled between batches). No broker, no JVM."""

from __future__ import annotations

import json

import pytest

from headwater.engine.formats.windows import split_windowed_key, window_size_ms
from headwater.engine.partitioner import partition_for
from headwater.engine.persistent import QUERY_ANALYZER, InputRecord, OutputRecord
from headwater.engine.persistent.aggregate_plan import compile_aggregate
from headwater.engine.persistent.aggregate_run import (
    AggregatePipeline,
    GroupedRow,
    LocalAggregation,
    is_aggregate_statement,
)
from headwater.engine.persistent.analyzer import describe_query
from headwater.engine.persistent.query_plan import QueryCompileError
from headwater.metastore.apply import apply_command
from headwater.metastore.catalog import Catalog, SourceKind
from headwater.metastore.errors import ValidationError
from headwater.metastore.plan import TopicFacts, plan
from headwater.metastore.records import CommandRecord
from headwater.sqlparse_ext import parse_one
from headwater.sqlparse_ext import statements as ast
from tests.support.catalogs import catalog_of

FACTS = TopicFacts({"orders": 2, "items": 1})
ORDERS = (
    "CREATE STREAM orders (id STRING KEY, item STRING, qty INT, price DOUBLE) "
    "WITH (kafka_topic='orders', value_format='JSON');"
)
ITEMS = (
    "CREATE TABLE items (id STRING PRIMARY KEY, kind STRING, qty INT) "
    "WITH (kafka_topic='items', value_format='JSON');"
)


def _compile(select_text: str, *sources: str) -> object:
    statement = parse_one(f"CREATE TABLE OUT AS {select_text};")
    assert isinstance(statement, ast.CreateAsSelect)
    return compile_aggregate(statement.query, catalog_of(FACTS, *(sources or (ORDERS,))), "OUT")


def _run(
    catalog: Catalog,
    query_id: str,
    records: list[InputRecord],
    *,
    buffering: bool = False,
    batches: int = 1,
) -> list[tuple[object, object]]:
    """The (key, value) the query writes for ``records``, fed in ``batches`` batches."""
    local = LocalAggregation(
        AggregatePipeline.for_query(catalog.queries[query_id], catalog, buffering=buffering)
    )
    out = []
    size = max(1, len(records) // batches)
    for start in range(0, len(records), size):
        written, _errors = local.process(records[start : start + size])
        out.extend(
            (
                o.key.decode() if o.key else None,
                json.loads(o.value) if o.value is not None else None,
            )
            for o in written
        )
    return out


def _order(
    offset: int, key: str | None, value: dict | None, ts: int = 0, partition: int = 0
) -> InputRecord:
    return InputRecord(
        key.encode() if key else None,
        json.dumps(value).encode() if value is not None else None,
        ts,
        partition,
        offset,
    )


def test_ctas_plans_a_table_keyed_by_the_grouping_expressions() -> None:
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE TABLE totals AS SELECT item, COUNT(*) AS n, SUM(qty) AS q "
        "FROM orders GROUP BY item;",
    )
    sink = catalog.source("TOTALS")
    assert sink is not None and sink.kind is SourceKind.TABLE and sink.query_id == "CTAS_TOTALS_1"
    assert [(c.name, c.type, c.key) for c in sink.columns] == [
        ("ITEM", "STRING", True),
        ("N", "BIGINT", False),
        ("Q", "INTEGER", False),
    ]
    assert is_aggregate_statement(catalog.queries["CTAS_TOTALS_1"].statement_text)


def test_multiple_grouping_expressions_are_key_columns_in_group_by_order() -> None:
    compiled = _compile("SELECT qty, item, qty * 2 AS d, COUNT(*) FROM orders GROUP BY item, qty")
    assert [(c.name, c.key) for c in compiled.columns] == [  # type: ignore[attr-defined]
        ("ITEM", True),
        ("QTY", True),
        ("D", False),
        ("KSQL_COL_0", False),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "SELECT item, qty, COUNT(*) FROM orders GROUP BY item",
            "Non-aggregate SELECT expression(s) not part of GROUP BY: QTY",
        ),
        (
            "SELECT item, COUNT(*) FROM orders GROUP BY item HAVING qty > 1",
            "Non-aggregate HAVING expression not part of GROUP BY: QTY",
        ),
        (  # a grouping expression is one key column: selected twice, it is refused
            "SELECT item, item AS item2, COUNT(*) FROM orders GROUP BY item",
            "The projection contains a key column more than once: `ITEM` and `ITEM2`.",
        ),
        (
            "SELECT COUNT(*) AS n FROM orders GROUP BY item",
            (
                "The query used to build `OUT` must include the grouping expression ITEM in its "
                "projection (eg, SELECT ITEM...)."
            ),
        ),
        (
            "SELECT item FROM orders GROUP BY item",
            "GROUP BY requires aggregate functions in either the SELECT or HAVING clause.",
        ),
        (
            "SELECT item, COUNT(*) FROM orders GROUP BY COUNT(*)",
            "GROUP BY does not support aggregate functions: COUNT is an aggregate function.",
        ),
        ("SELECT item, SUM(COUNT(*)) FROM orders GROUP BY item", "can not be nested"),
        (
            "SELECT item, COUNT(*) FROM orders GROUP BY item HAVING COUNT(*)",
            "Should evaluate to boolean",
        ),
        (
            "SELECT item, COUNT(*) FROM orders WHERE COUNT(*) > 1 GROUP BY item",
            "Aggregate functions can not be used in the WHERE clause",
        ),
        (
            "SELECT item, NOPE(qty) FROM orders GROUP BY item",
            "Can't find any functions with the name 'NOPE'",
        ),
    ],
)
def test_ksqldb_refusals(text: str, message: str) -> None:
    with pytest.raises(QueryCompileError) as error:
        _compile(text)
    assert message in error.value.message


def test_a_delimited_source_refuses_functions_whose_state_it_cannot_hold() -> None:
    """ksqlDB keeps an aggregation's state in the source's value format: DELIMITED holds no
    STRUCT (AVG's SUM and COUNT) or ARRAY (TOPK's values)."""
    delimited = ORDERS.replace("value_format='JSON'", "value_format='DELIMITED'")
    for call in ("AVG(qty)", "TOPK(qty, 2)", "STDDEV_SAMP(price)"):
        with pytest.raises(QueryCompileError, match="has an intermediate type that the value"):
            _compile(f"SELECT item, {call} AS x FROM orders GROUP BY item", delimited)
    _compile("SELECT item, SUM(qty) AS x, COUNT(*) AS n FROM orders GROUP BY item", delimited)
    with pytest.raises(QueryCompileError) as error:
        _compile("SELECT item, TOPK(qty, qty) AS x FROM orders GROUP BY item")
    assert error.value.message == (
        "Parameter 2 passed to function TOPK must be a literal constant, but was expression: 'QTY'"
    )


def test_a_table_source_refuses_functions_that_cannot_undo() -> None:
    with pytest.raises(
        QueryCompileError,
        match="The aggregation functions LATEST_BY_OFFSET and "
        "MAX cannot be applied to a table source",
    ):
        _compile("SELECT kind, LATEST_BY_OFFSET(qty), MAX(qty) FROM items GROUP BY kind", ITEMS)


def test_insert_into_a_stream_from_an_aggregation_is_refused() -> None:
    catalog = catalog_of(FACTS, ORDERS, "CREATE STREAM copy AS SELECT * FROM orders;")
    with pytest.raises(ValidationError, match="Incompatible data sink and query result"):
        plan(
            parse_one("INSERT INTO copy SELECT id, COUNT(*) AS n FROM orders GROUP BY id;"),
            catalog,
            FACTS,
            QUERY_ANALYZER,
        )


def test_one_update_per_input_record_in_input_order_even_within_one_batch() -> None:
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE TABLE n AS SELECT item, COUNT(*) AS c, SUM(qty) AS q FROM orders GROUP BY item;",
    )
    records = [
        _order(i, "k", {"ITEM": item, "QTY": q})
        for i, (item, q) in enumerate([("a", 1), ("a", 10), ("b", 100), ("a", 1000)])
    ]
    expected = [
        ("a", {"C": 1, "Q": 1}),
        ("a", {"C": 2, "Q": 11}),
        ("b", {"C": 1, "Q": 100}),
        ("a", {"C": 3, "Q": 1011}),
    ]
    assert _run(catalog, "CTAS_N_1", records) == expected
    assert _run(catalog, "CTAS_N_1", records, batches=4) == expected


def test_with_buffering_each_group_writes_its_last_update_per_batch() -> None:
    catalog = catalog_of(
        FACTS, ORDERS, "CREATE TABLE n AS SELECT item, COUNT(*) AS c FROM orders GROUP BY item;"
    )
    records = [_order(i, "k", {"ITEM": item}) for i, item in enumerate("aaba")]
    assert _run(catalog, "CTAS_N_1", records, buffering=True) == [("b", {"C": 1}), ("a", {"C": 3})]


def test_null_group_values_and_missing_values_are_skipped() -> None:
    catalog = catalog_of(
        FACTS, ORDERS, "CREATE TABLE n AS SELECT item, COUNT(*) AS c FROM orders GROUP BY item;"
    )
    local = LocalAggregation(AggregatePipeline.for_query(catalog.queries["CTAS_N_1"], catalog))
    out, errors = local.process(
        [_order(0, "k", {"ITEM": None}), _order(1, "k", None), _order(2, "k", {"ITEM": "a"})]
    )
    assert [json.loads(o.value) for o in out] == [{"C": 1}]  # type: ignore[arg-type]
    assert [(e.kind, e.offset) for e in errors] == [("serialization", 0)]
    assert "Group-by column with index 0 resolved to null" in errors[0].message


def test_having_writes_a_tombstone_only_when_a_group_stops_passing() -> None:
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE TABLE n AS SELECT item, COUNT(*) AS c FROM orders "
        "GROUP BY item HAVING COUNT(*) = 2;",
    )
    records = [_order(i, "k", {"ITEM": "bob"}, ts=i + 1) for i in range(4)]
    assert _run(catalog, "CTAS_N_1", records) == [("bob", {"C": 2}), ("bob", None)]


def test_a_table_source_takes_a_changed_row_out_of_its_old_group_first() -> None:
    catalog = catalog_of(
        FACTS,
        ITEMS,
        "CREATE TABLE kinds AS SELECT kind, COUNT(*) AS c, SUM(qty) AS q FROM items GROUP BY kind;",
    )
    records = [
        _order(0, "1", {"KIND": "a", "QTY": 1}),
        _order(1, "2", {"KIND": "b", "QTY": 2}),
        _order(2, "1", {"KIND": "b", "QTY": 3}),
        _order(3, "2", None),
        _order(4, "1", {"KIND": "b", "QTY": 5}),
    ]
    assert _run(catalog, "CTAS_KINDS_1", records) == [
        ("a", {"C": 1, "Q": 1}),
        ("b", {"C": 1, "Q": 2}),
        ("a", {"C": 0, "Q": 0}),
        ("b", {"C": 2, "Q": 5}),  # key 1 moves from a to b
        ("b", {"C": 1, "Q": 3}),  # key 2 deleted
        ("b", {"C": 1, "Q": 5}),  # key 1 updated within its group: one update
    ]


def test_output_partition_and_timestamp_follow_the_key_and_the_newest_input() -> None:
    catalog = catalog_of(
        FACTS, ORDERS, "CREATE TABLE n AS SELECT item, COUNT(*) AS c FROM orders GROUP BY item;"
    )
    local = LocalAggregation(AggregatePipeline.for_query(catalog.queries["CTAS_N_1"], catalog))
    out, _ = local.process(
        [_order(0, "k", {"ITEM": "a"}, ts=50), _order(1, "k", {"ITEM": "a"}, ts=20)]
    )
    assert [o.timestamp for o in out] == [50, 50]
    assert {o.partition for o in out} == {partition_for(b"a", 2)}


def test_explain_shows_the_aggregation_steps() -> None:
    catalog = catalog_of(FACTS, ORDERS)
    statement = parse_one(
        "CREATE TABLE n AS SELECT item, COUNT(*) AS c FROM orders WHERE qty > 1 "
        "GROUP BY item HAVING COUNT(*) > 1;"
    )
    assert isinstance(statement, ast.CreateAsSelect)
    described = describe_query(statement.query, catalog, "N")
    text = "\n".join(described.steps)
    assert "[ AGGREGATE ] | Aggregations: COUNT(*)" in text
    assert "[ GROUP BY ] | ORDERS.ITEM" in text or "[ GROUP BY ] | ITEM" in text
    assert "[ FILTER ] | Condition: (COUNT(*) > 1)" in text


# -- windows -------------------------------------------------------------------------------------


def _windowed(
    select: str, records: list[InputRecord], *, batches: int = 1, sink: str = "W"
) -> list[tuple[object, object, tuple[int, int], int]]:
    """(key, value, window, timestamp) of what a windowed query writes for ``records``."""
    catalog = catalog_of(FACTS, ORDERS, f"CREATE TABLE {sink} AS {select};")
    query = next(iter(catalog.queries.values()))
    local = LocalAggregation(AggregatePipeline.for_query(query, catalog))
    source = catalog.source(sink)
    assert source is not None and source.windowed
    session = source.windowed == "SESSION"
    out = []
    size = max(1, len(records) // batches)
    for start in range(0, len(records), size):
        written, _ = local.process(records[start : start + size])
        for o in written:
            assert o.key is not None
            key, w_start, w_end = split_windowed_key(o.key, session, window_size_ms(source))
            out.append(
                (
                    key.decode(),
                    json.loads(o.value) if o.value is not None else None,
                    (w_start, w_end),
                    o.timestamp,
                )
            )
    return out


def _at(offset: int, item: str, ts: int, qty: int = 1) -> InputRecord:
    return _order(offset, "k", {"ITEM": item, "QTY": qty}, ts=ts)


def test_tumbling_windows_count_per_window_and_drop_records_after_grace() -> None:
    select = (
        "SELECT item, COUNT(*) AS n, WINDOWSTART AS ws FROM orders "
        "WINDOW TUMBLING (SIZE 30 SECONDS, GRACE PERIOD 1 MINUTE) GROUP BY item"
    )
    records = [
        _at(0, "a", 0),
        _at(1, "a", 89_999),
        _at(2, "a", 10_009),
        _at(3, "a", 90_000),
        _at(4, "a", 10_010),
    ]  # the last: window [0, 30 s) closed at stream time 90 s
    assert _windowed(select, records) == [
        ("a", {"N": 1, "WS": 0}, (0, 30_000), 0),
        ("a", {"N": 1, "WS": 60_000}, (60_000, 90_000), 89_999),
        ("a", {"N": 2, "WS": 0}, (0, 30_000), 10_009),
        ("a", {"N": 1, "WS": 90_000}, (90_000, 120_000), 90_000),
    ]
    assert _windowed(select, records, batches=5) == _windowed(select, records)


def test_hopping_windows_update_every_window_a_record_falls_in() -> None:
    select = (
        "SELECT item, COUNT(*) AS n FROM orders "
        "WINDOW HOPPING (SIZE 30 SECONDS, ADVANCE BY 10 SECONDS) GROUP BY item"
    )
    out = _windowed(select, [_at(0, "a", 25_000)])
    assert [w for _, _, w, _ in out] == [(0, 30_000), (10_000, 40_000), (20_000, 50_000)]


def test_sessions_merge_and_write_a_tombstone_for_each_merged_session() -> None:
    select = "SELECT item, COUNT(*) AS n FROM orders WINDOW SESSION (30 SECONDS) GROUP BY item"
    out = _windowed(select, [_at(0, "a", 0), _at(1, "a", 50_000), _at(2, "a", 25_000)])
    assert out == [
        ("a", {"N": 1}, (0, 0), 0),
        ("a", {"N": 1}, (50_000, 50_000), 50_000),
        ("a", None, (0, 0), 0),  # 25 s is within 30 s of both: the sessions merge
        ("a", None, (50_000, 50_000), 50_000),
        ("a", {"N": 3}, (0, 50_000), 50_000),
    ]


def test_emit_final_writes_each_window_once_when_it_closes() -> None:
    select = (
        "SELECT item, COUNT(*) AS n FROM orders WINDOW TUMBLING (SIZE 2 MILLISECONDS, "
        "GRACE PERIOD 1 MILLISECONDS) GROUP BY item EMIT FINAL"
    )
    records = [_at(i, "a", ts) for i, ts in enumerate([0, 1, 3, 4, 5])]
    # Kafka Streams' emit-on-window-close, as ksqlDB runs it: [0, 2) closes at stream time 3,
    # [2, 4) at 5; each result carries the newest timestamp of its window
    assert _windowed(select, records) == [("a", {"N": 2}, (0, 2), 1), ("a", {"N": 1}, (2, 4), 3)]
    # a jump past a window's retention (size + grace) loses it, as it does there
    jumped = [_at(i, "a", ts) for i, ts in enumerate([0, 1, 3, 4, 6])]
    assert _windowed(select, jumped) == [("a", {"N": 2}, (0, 2), 1)]


def test_windowed_ctas_is_a_windowed_table_in_the_catalog() -> None:
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE TABLE w AS SELECT item, COUNT(*) AS n FROM orders "
        "WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY item;",
    )
    sink = catalog.source("W")
    assert sink is not None and sink.windowed == "TUMBLING"
    assert window_size_ms(sink) == 60_000


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "SELECT item, MIN(WINDOWSTART) FROM orders WINDOW TUMBLING (SIZE 1 SECOND) GROUP BY item",
            "Window bounds column WINDOWSTART can only be used in the SELECT clause",
        ),
        (
            (
                "SELECT item, COUNT(*) FROM orders WINDOW TUMBLING (SIZE 1 SECOND) GROUP BY item, "
                "WINDOWSTART"
            ),
            "Window bounds column WINDOWSTART can only be used in the SELECT clause",
        ),
        (
            "SELECT item, COUNT(*) FROM orders GROUP BY item EMIT FINAL",
            "EMIT FINAL is only supported for windowed aggregations.",
        ),
    ],
)
def test_window_refusals(text: str, message: str) -> None:
    with pytest.raises(QueryCompileError) as error:
        _compile(text)
    assert message in error.value.message


def test_combining_before_the_shuffle_gives_what_record_by_record_gives() -> None:
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE TABLE n AS SELECT item, COUNT(*) AS c, SUM(qty) AS q, "
        "LATEST_BY_OFFSET(price) AS p, COLLECT_LIST(qty) AS l, "
        "MAX(qty) AS m FROM orders GROUP BY item HAVING COUNT(*) > 1;",
    )
    query = catalog.queries["CTAS_N_1"]
    records = [
        _order(
            i // 2,
            "k",
            {"ITEM": "ab"[i % 3 % 2], "QTY": i, "PRICE": i / 2},
            ts=1000 + i,
            partition=i % 2,
        )
        for i in range(12)
    ]
    combined = AggregatePipeline.for_query(query, catalog, buffering=True)
    assert combined.combines
    one_by_one = AggregatePipeline.for_query(query, catalog, buffering=True)

    def run(pipeline: AggregatePipeline, combine: bool) -> list[tuple[bytes | None, bytes | None]]:
        rows = [r for r in pipeline.group(records)[0] if isinstance(r, GroupedRow)]
        if combine:
            rows = pipeline.combine(rows)
        written = []
        for group in sorted({r.group for r in rows}):
            _state, out, _ = pipeline.aggregate(None, [r for r in rows if r.group == group])
            written.extend((o.key, o.value) for o in out)
        return written

    assert (
        len(combined.combine([r for r in combined.group(records)[0] if isinstance(r, GroupedRow)]))
        == 2
    )
    assert run(combined, True) == run(one_by_one, False)
    # what a source task hands on: combined where that halves the rows, else the rows themselves
    grouped = combined.group(records)[0]
    assert repr(combined.combined(grouped)) == repr(
        combined.combine([r for r in grouped if isinstance(r, GroupedRow)])
    )
    few = grouped[:2]  # two groups, a row each
    assert combined.combined(few) is few
    plain = AggregatePipeline.for_query(query, catalog)  # no buffering: never combined
    assert plain.combined(grouped) is grouped
    # "a" gets i = 0, 2, 3, 5, 6, 8, 9, 11 over both partitions; the batch order is by time
    assert json.loads(run(combined, True)[0][1] or b"") == {
        "C": 8,
        "Q": 44,
        "P": 5.5,
        "L": [0, 2, 3, 5, 6, 8, 9, 11],
        "M": 11,
    }


@pytest.mark.parametrize(
    "select",
    [
        (
            "SELECT item, COUNT(*) AS c, SUM(qty) AS q FROM orders "
            "WINDOW HOPPING (SIZE 10 SECONDS, ADVANCE BY 5 SECONDS) GROUP BY item"
        ),
        (
            "SELECT item, COUNT(*) AS c FROM orders WINDOW TUMBLING (SIZE 4 SECONDS, GRACE PERIOD "
            "2 SECONDS) GROUP BY item HAVING COUNT(*) % 3 <> 1"
        ),
    ],
)
def test_a_buffered_time_window_writes_its_last_update_of_each_batch(select: str) -> None:
    # ksqlDB's record cache holds windowed keys as it holds a group's: with buffering, each
    # window's last update of a batch, at its record's place; the table it makes is the same
    catalog = catalog_of(FACTS, ORDERS, f"CREATE TABLE w AS {select};")
    query = next(iter(catalog.queries.values()))
    every = LocalAggregation(AggregatePipeline.for_query(query, catalog))
    buffered = LocalAggregation(AggregatePipeline.for_query(query, catalog, buffering=True))
    records = [
        _order(i, "k", {"ITEM": "ab"[i % 3 % 2], "QTY": i}, ts=1000 * i + 700 * (i % 4 == 3))
        for i in range(30)
    ]
    records.insert(20, _order(99, "k", {"ITEM": "a", "QTY": 1}, ts=0))  # late: dropped
    table: dict[bytes | None, bytes | None] = {}
    buffered_table: dict[bytes | None, bytes | None] = {}
    fewer = False
    for start in range(0, len(records), 8):
        batch = records[start : start + 8]
        all_updates, _ = every.process(batch)
        last_updates, errors = buffered.process(batch)
        assert errors == []
        last: dict[bytes | None, OutputRecord] = {}
        for o in all_updates:
            last.pop(o.key, None)
            last[o.key] = o
            table[o.key] = o.value
        for o in last_updates:
            buffered_table[o.key] = o.value
        fewer = fewer or len(last_updates) < len(all_updates)
        key = OutputRecord.order
        assert [o.key for o in last_updates] == [o.key for o in sorted(last.values(), key=key)]
        for o in last_updates:
            expected = last[o.key]
            assert (o.value, o.timestamp, o.partition, o.source_offset) == (
                expected.value,
                expected.timestamp,
                expected.partition,
                expected.source_offset,
            )
        assert {k: v for k, v in buffered_table.items() if v is not None} == {
            k: v for k, v in table.items() if v is not None
        }
    assert fewer


def test_rows_are_combined_only_when_that_halves_them() -> None:
    def rows(*groups: bytes) -> list[GroupedRow]:
        return [GroupedRow(g, (g,), ((),), None, 0, 0, i) for i, g in enumerate(groups)]

    assert AggregatePipeline.worth_combining(rows(b"a", b"a", b"b", b"b"))
    assert not AggregatePipeline.worth_combining(rows(b"a", b"b", b"c", b"c"))
    assert not AggregatePipeline.worth_combining(rows(b"a"))
    assert AggregatePipeline.worth_combining([])


def test_group_by_refusals_ksqldb_makes() -> None:
    catalog = Catalog()
    for text in (
        "CREATE STREAM raw (V STRING) WITH (kafka_topic='orders', value_format='KAFKA');",
        (
            "CREATE TABLE per_min (K STRING PRIMARY KEY, C BIGINT) WITH (kafka_topic='items', "
            "value_format='JSON', window_type='TUMBLING', window_size='1 MINUTE');"
        ),
    ):
        planned = plan(parse_one(text), catalog, FACTS, QUERY_ANALYZER)
        catalog, _ = apply_command(catalog, CommandRecord("c", 0, text, planned.command), 0)
    with pytest.raises(
        (ValidationError, QueryCompileError),
        match="Source\\(s\\) RAW are using the 'KAFKA' value "
        "format. This format does not yet support GROUP BY.",
    ):
        plan(
            parse_one("CREATE TABLE t AS SELECT V, COUNT(*) FROM raw GROUP BY V;"),
            catalog,
            FACTS,
            QUERY_ANALYZER,
        )
    with pytest.raises(
        (ValidationError, QueryCompileError),
        match="does not support persistent queries on windowed tables",
    ):
        plan(parse_one("CREATE TABLE t2 AS SELECT * FROM per_min;"), catalog, FACTS, QUERY_ANALYZER)
