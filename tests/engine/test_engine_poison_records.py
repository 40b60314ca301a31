"""A poison record costs one record, never a query (issue 28): each operator's per-record boundary
skips whatever a record causes and reports it as ksqlDB's processing log would, persistent queries
(projection, aggregation, join), pull queries (a stored row that does not decode, an expression that
raises) and push queries alike. Pure: no broker, no JVM."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from headwater.engine.persistent import InputRecord, RecordPipeline
from headwater.engine.persistent.aggregate_run import AggregatePipeline, LocalAggregation
from headwater.engine.persistent.join_run import JoinPipeline, LocalJoin
from headwater.engine.pull.query import Row, TableScan, execute_pull, plan_pull, select_rows
from headwater.engine.pull.tables import StoredTable
from headwater.engine.push import plan_push, push_rows
from headwater.metastore.catalog import Catalog, Column, Source, SourceKind
from headwater.metastore.plan import TopicFacts
from headwater.sqlparse_ext import Select, parse_one
from headwater.store.api import WriteBatch
from headwater.store.keys import encode_key
from headwater.store.local import LocalStores
from headwater.store.memory import MemoryEngine
from headwater.store.records import pack_value
from tests.support.catalogs import catalog_of

FACTS = TopicFacts({"orders": 1, "users": 1})
ORDERS = (
    "CREATE STREAM orders (id STRING KEY, item STRING, qty INT) "
    "WITH (kafka_topic='orders', value_format='JSON');"
)
USERS = (
    "CREATE TABLE users (id STRING PRIMARY KEY, name STRING) "
    "WITH (kafka_topic='users', value_format='JSON');"
)
DEEP = b'{"ITEM":' + b"[" * 5000 + b"]" * 5000 + b"}"  # the record, ~10 KB
POISON = {  # what the pipelines meet between good records, and what the processing log says
    "deep": (DEEP, "nested deeper than 256 levels"),
    "utf8": (b'{"ITEM": "a\xff", "QTY": 1}', "invalid JSON"),
    "nul": (b'{"ITEM": "a\x00", "QTY": 1}', "Invalid control character"),
    "type": (b'{"ITEM": "a", "QTY": "many"}', "QTY: expected INTEGER"),
    "cut": (b'{"ITEM": "a", "QT', "invalid JSON"),
}


def _records() -> list[InputRecord]:
    """Ten good records (items i0..i9, qty 1..10) with a poison record after every second one."""
    records, poison = [], iter(POISON.values())
    for i in range(10):
        value = json.dumps({"ITEM": f"i{i}", "QTY": i + 1}).encode()
        records.append(InputRecord(b"k%d" % i, value, 100 + i, 0, len(records)))
        if i % 2:
            records.append(InputRecord(b"bad", next(poison)[0], 100 + i, 0, len(records)))
    return records


def _check_errors(errors: list[Any], records: list[InputRecord]) -> None:
    bad = [r.offset for r in records if r.key == b"bad"]
    assert [(e.kind, e.offset) for e in errors] == [("deserialization", o) for o in bad]
    for error, (_data, says) in zip(errors, POISON.values()):
        assert error.topic == "orders" and says in error.message, error.message


def test_a_projection_skips_each_poison_record_and_writes_every_good_one() -> None:
    catalog = catalog_of(
        FACTS, ORDERS, "CREATE STREAM out AS SELECT id, item, qty * 2 AS q FROM orders;"
    )
    pipeline = RecordPipeline.for_query(catalog.queries["CSAS_OUT_1"], catalog)
    records = _records()
    out, errors = pipeline.process(records)
    assert [json.loads(o.value or b"") for o in out] == [
        {"ITEM": f"i{i}", "Q": 2 * (i + 1)} for i in range(10)
    ]
    _check_errors(errors, records)


def test_an_expression_that_raises_skips_its_record_only() -> None:
    """The boundary holds for failures no expression is meant to raise (a KeyError here, from a
    filter that breaks on one row), reported as a ``processing`` error with the exception named."""
    catalog = catalog_of(
        FACTS, ORDERS, "CREATE STREAM out AS SELECT id, item FROM orders WHERE qty > 0;"
    )
    pipeline = RecordPipeline.for_query(catalog.queries["CSAS_OUT_1"], catalog)
    keep = pipeline.compiled.row_filter
    assert keep is not None

    def breaks_on_i3(view: Any) -> Any:
        if view["ITEM"] == "i3":
            raise KeyError("MISSING")
        return keep(view)

    pipeline.compiled = dataclasses.replace(pipeline.compiled, row_filter=breaks_on_i3)
    good = [r for r in _records() if r.key != b"bad"]
    out, errors = pipeline.process(good)
    assert [json.loads(o.value or b"")["ITEM"] for o in out] == [
        f"i{i}" for i in range(10) if i != 3
    ]
    assert [(e.kind, e.offset, e.message) for e in errors] == [
        ("processing", good[3].offset, "KeyError: 'MISSING'")
    ]


def test_json_functions_give_null_for_text_nested_too_deep() -> None:
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE STREAM out AS SELECT id, EXTRACTJSONFIELD(item, '$.a') AS a, "
        "IS_JSON_STRING(item) AS j FROM orders;",
    )
    pipeline = RecordPipeline.for_query(catalog.queries["CSAS_OUT_1"], catalog)
    deep_text = json.dumps({"ITEM": "[" * 5000 + "]" * 5000}).encode()  # a string: reads fine
    out, errors = pipeline.process(
        [
            InputRecord(b"k", deep_text, 1, 0, 0),
            InputRecord(b"k", b'{"ITEM": "{\\"a\\": 1}"}', 2, 0, 1),
        ]
    )
    assert errors == []
    assert [json.loads(o.value or b"") for o in out] == [
        {"A": None, "J": False},
        {"A": "1", "J": True},
    ]


def test_an_aggregation_skips_each_poison_record_and_counts_every_good_one() -> None:
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE TABLE n AS SELECT id, COUNT(*) AS c, SUM(qty) AS s FROM orders GROUP BY id;",
    )
    local = LocalAggregation(AggregatePipeline.for_query(catalog.queries["CTAS_N_1"], catalog))
    # all under one key: every good record updates the same group
    records = [r._replace(key=b"bad" if r.key == b"bad" else b"k") for r in _records()]
    out, errors = local.process(records)
    assert json.loads(out[-1].value or b"") == {"C": 10, "S": 55}
    _check_errors(errors, records)


def test_a_join_skips_each_poison_record_and_joins_every_good_one() -> None:
    catalog = catalog_of(
        FACTS,
        ORDERS,
        USERS,
        "CREATE STREAM j AS SELECT o.id, item, name FROM orders o JOIN users u ON o.id = u.id;",
    )
    query = next(iter(catalog.queries.values()))
    after = RecordPipeline.for_query(query, catalog)
    assert after.compiled.join is not None
    local = LocalJoin(JoinPipeline(query.id, after.compiled.join, catalog.types), after)
    users = [InputRecord(b"k%d" % i, b'{"NAME": "u%d"}' % i, 1, 0, i) for i in range(10)]
    users.append(InputRecord(b"k0", b'{"NAME":' + b"{" * 5000, 1, 0, 10))  # poison on the table
    _out, user_errors = local.process_topic("users", users)
    assert [(e.kind, e.offset) for e in user_errors] == [("deserialization", 10)]
    records = _records()
    out, errors = local.process_topic("orders", records)
    assert [json.loads(o.value or b"")["NAME"] for o in out] == [f"u{i}" for i in range(10)]
    _check_errors(errors, records)


# -- pull and push queries ---------------------------------------------------------------------------


def _users_table(tmp_path: Path) -> StoredTable:
    source = Source(
        SourceKind.TABLE,
        "USERS",
        (Column("ID", "STRING", key=True), Column("NAME", "STRING")),
        "users",
        1,
        "KAFKA",
        "JSON",
    )
    stores = LocalStores(tmp_path, MemoryEngine())
    table = StoredTable(source, Catalog(), stores)
    values = {
        "a": b'{"NAME": "ann"}',
        "b": b'{"NAME":' + b"[" * 5000 + b"]" * 5000 + b"}",
        "c": b'{"NAME": "cy"}',
        "d": b'{"NAME": "\xff"}',
    }
    store = stores.open("USERS", 0)
    store.apply(
        WriteBatch.of(
            [
                (encode_key((k,), table.key_types), pack_value(1000, i, v))
                for i, (k, v) in enumerate(values.items())
            ],
            len(values),
        )
    )
    return table


def _select(text: str) -> Select:
    statement = parse_one(text)
    assert isinstance(statement, Select)
    return statement


def test_a_pull_query_skips_stored_rows_that_cannot_be_read(tmp_path: Path) -> None:
    table = _users_table(tmp_path)
    assert table.get(0, ("b",)) is None and table.get(0, ("d",)) is None  # no row, no error
    row = table.get(0, ("a",))
    assert row is not None and row.value == {"NAME": "ann"}
    assert [r.key for r in table.scan(0)] == [("a",), ("c",)]
    assert [r.key for r in table.range(0, ("a",), ("d",), True, True)] == [("a",), ("c",)]
    lookup = plan_pull(_select("SELECT * FROM users WHERE id = 'b';"), table.source, {})
    assert execute_pull(lookup, table).rows == []
    scan = plan_pull(_select("SELECT * FROM users;"), table.source, {})
    assert isinstance(scan.access, TableScan)
    assert execute_pull(scan, table).rows == [["a", "ann"], ["c", "cy"]]


def _breaking(plan: Any) -> Any:
    """``plan`` with a projection that raises a TypeError on one name (an evaluator meeting a value
    it was not made for)."""

    def name_length(view: Any) -> Any:
        if view["NAME"] == "ann":
            raise TypeError("unsupported operand")
        return len(view["NAME"])

    return dataclasses.replace(plan, projection=(plan.projection[0], name_length), direct=None)


def test_pull_and_push_queries_skip_rows_their_expressions_raise_on() -> None:
    source = Source(
        SourceKind.STREAM,
        "USERS",
        (Column("ID", "STRING", key=True), Column("NAME", "STRING")),
        "users",
        1,
        "KAFKA",
        "JSON",
    )
    rows = [Row((k,), {"NAME": n}, 1, 0, i) for i, (k, n) in enumerate([("a", "ann"), ("c", "cy")])]
    pulled = _breaking(plan_pull(_select("SELECT id, name FROM users;"), source, {}))
    assert list(select_rows(pulled, iter(rows))) == [["c", 2]]
    pushed = _breaking(plan_push(_select("SELECT id, name FROM users EMIT CHANGES;"), source, {}))
    assert push_rows(pushed, [(r, False) for r in rows], 0) == ([(["c", 2], False)], False)
