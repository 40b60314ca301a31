"""Pull queries: planning (projection, schema, key access, refusals) and execution over rows."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from headwater.engine.errors import PullQueryError
from headwater.engine.pull.query import (
    KeyLookup,
    KeyRange,
    PullPlan,
    Row,
    TableScan,
    execute_pull,
    execute_stream_pull,
    plan_pull,
)
from headwater.metastore.catalog import Column, Source, SourceKind
from headwater.sqlparse_ext import Select, parse_one


def _source(kind: SourceKind, columns: str, partitions: int = 3, **extra: Any) -> Source:
    cols = []
    for spec in re.split(r",\s*(?=[A-Z_0-9]+ )", columns):
        name, type_text = spec.strip().split(" ", 1)
        key = type_text.endswith(" KEY")
        cols.append(Column(name, type_text.removesuffix(" KEY"), key=key))
    cols.sort(key=lambda c: not c.key)
    return Source(kind, "T", tuple(cols), "t", partitions, **extra)


USERS = _source(SourceKind.TABLE, "ID BIGINT KEY, NAME STRING, AGE INTEGER, S STRUCT<`A` INTEGER>")
PAIRS = _source(SourceKind.TABLE, "K1 STRING KEY, K2 INTEGER KEY, V DOUBLE")
EVENTS = _source(SourceKind.STREAM, "K INTEGER KEY, V INTEGER")


class MemoryReader:
    """A TableReader over a dict per partition, kept in key order; partition = hash of the key."""

    def __init__(self, rows: list[tuple[tuple[Any, ...], dict[str, Any]]], partitions: int = 3):
        self.partitions = partitions
        self.data: list[dict[tuple[Any, ...], Row]] = [{} for _ in range(partitions)]
        for offset, (key, value) in enumerate(rows):
            p = self.partition_of(key)
            self.data[p][_hashable(key)] = Row(key, value, 1000 + offset, p, offset)
        self.calls: list[tuple[Any, ...]] = []

    def partition_of(self, key: tuple[Any, ...]) -> int:
        return sum(len(str(v)) + (v if isinstance(v, int) else 0) for v in key) % self.partitions

    def get(self, partition: int, key: tuple[Any, ...]) -> Row | None:
        self.calls.append(("get", partition, key))
        return self.data[partition].get(_hashable(key))

    def range(
        self,
        partition: int,
        low: tuple[Any, ...] | None,
        high: tuple[Any, ...] | None,
        low_inclusive: bool,
        high_inclusive: bool,
    ) -> Iterator[Row]:
        self.calls.append(("range", partition, low, high, low_inclusive, high_inclusive))
        for key in sorted(self.data[partition]):
            if low is not None:
                head = key[: len(low)]
                if head < low or head == low and not low_inclusive:
                    continue
            if high is not None:
                head = key[: len(high)]
                if head > high or head == high and not high_inclusive:
                    continue
            yield self.data[partition][key]

    def scan(self, partition: int) -> Iterator[Row]:
        self.calls.append(("scan", partition))
        for key in sorted(self.data[partition], key=repr):
            yield self.data[partition][key]


def _hashable(key: tuple[Any, ...]) -> Any:
    """The dict key of a table key: ARRAY and STRUCT key values (lists, dicts) by their repr."""
    try:
        hash(key)
    except TypeError:
        return repr(key)
    return key


def _users() -> MemoryReader:
    names = ["ann", "bob", "cy", None, "dee", "ed"]
    return MemoryReader(
        [
            ((i,), {"NAME": n, "AGE": 20 + i if i != 4 else None, "S": {"A": i}})
            for i, n in enumerate(names, start=1)
        ]
    )


def plan(sql: str, source: Source = USERS, **kwargs: Any) -> PullPlan:
    statement = parse_one(sql)
    assert isinstance(statement, Select)
    return plan_pull(statement, source, {}, **kwargs)


def run(sql: str, reader: MemoryReader | None = None, source: Source = USERS) -> list[list[Any]]:
    return execute_pull(plan(sql, source), reader or _users()).rows


# -- key access -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "access"),
    [
        ("", TableScan()),
        ("ID = 2", KeyLookup(((2,),))),
        ("2 = ID", KeyLookup(((2,),))),
        ("ID = 2 AND NAME = 'x'", KeyLookup(((2,),))),
        ("ID IN (3, 1, 3)", KeyLookup(((3,), (1,)))),
        ("ID = 1 OR ID = 5 OR ID IN (2, 1)", KeyLookup(((1,), (5,), (2,)))),
        ("ID = 1 OR NAME = 'x'", TableScan()),
        ("ID = 1 AND ID = 2", KeyLookup(())),
        ("ID IN (1, 2) AND ID IN (2, 3)", KeyLookup(((2,),))),
        ("ID IN (1, 5) AND ID > 2", KeyLookup(((5,),))),
        ("ID > 2", KeyRange((2,), None, False, True)),
        ("ID > 2 AND ID <= 4", KeyRange((2,), (4,), False, True)),
        ("3 > ID", KeyRange(None, (3,), True, False)),
        ("ID BETWEEN 2 AND 4", KeyRange((2,), (4,), True, True)),
        ("ID > 1 AND ID > 3 AND ID < 9 AND ID <= 5", KeyRange((3,), (5,), False, True)),
        ("ID = 10 AND ID IN (1, 2, 10)", KeyLookup(((10,),))),
        ("ID <> 2", TableScan()),
        ("ID + 1 = 3", TableScan()),
        ("ID = AGE", TableScan()),
        ("ID < 2 OR ID > 4", TableScan()),
        ("(ID = 1 OR ID = 2) AND (NAME = 'a' OR AGE = 3)", KeyLookup(((1,), (2,)))),
    ],
)
def test_engine_pull_key_access_single_column(where: str, access: Any) -> None:
    sql = f"SELECT * FROM T{' WHERE ' + where if where else ''};"
    assert plan(sql).access == access


@pytest.mark.parametrize(
    ("where", "access"),
    [
        ("K1 = 'a' AND K2 = 1", KeyLookup((("a", 1),))),
        ("K1 IN ('a', 'b') AND K2 IN (1, 2)", KeyLookup((("a", 1), ("a", 2), ("b", 1), ("b", 2)))),
        ("(K1 = 'a' AND K2 = 1) OR (K1 = 'b' AND K2 = 2)", KeyLookup((("a", 1), ("b", 2)))),
        ("K1 = 'a'", KeyRange(("a",), ("a",), True, True)),
        ("K1 = 'a' AND K2 > 3", KeyRange(("a", 3), ("a",), False, True)),
        ("K1 = 'a' AND K2 BETWEEN 1 AND 3", KeyRange(("a", 1), ("a", 3), True, True)),
        ("K1 > 'a'", KeyRange(("a",), None, False, True)),
        ("K2 = 1", TableScan()),
        ("K1 IN ('a', 'b')", TableScan()),
        ("K1 = 'a' OR K2 = 1", TableScan()),
    ],
)
def test_engine_pull_key_access_multi_column(where: str, access: Any) -> None:
    assert plan(f"SELECT * FROM T WHERE {where};", PAIRS).access == access


def test_engine_pull_key_values_take_the_key_column_type() -> None:
    doubles = _source(SourceKind.TABLE, "K DOUBLE KEY, V INTEGER")
    decimals = _source(SourceKind.TABLE, "K DECIMAL(4, 2) KEY, V INTEGER")
    assert plan("SELECT * FROM T WHERE K = 1;", doubles).access == KeyLookup(((1.0,),))
    assert plan("SELECT * FROM T WHERE K IN (1, 2.5);", decimals).access == KeyLookup(
        ((Decimal(1),), (Decimal("2.5"),))
    )
    assert plan("SELECT * FROM T WHERE ID = 10000000000;").access == KeyLookup(((10**10,),))
    assert plan("SELECT * FROM T WHERE K IN (1, 2.50);", decimals).access == KeyLookup(
        ((Decimal(1),), (Decimal("2.5"),))
    )


@pytest.mark.parametrize(
    ("where", "key", "message"),
    [
        ("K = 10000000000", "K INTEGER", "'10000000000' can not be converted to the type of the "),
        (
            "K = 1.5",
            "K BIGINT",
            "'1.5' can not be converted to the type of the key column: K BIGINT",
        ),
        ("K = 2.0", "K BIGINT", "'2.0' can not be converted"),
        ("K > 1.5", "K INTEGER", "'1.5' can not be converted"),
        ("K = 1.25", "K DECIMAL(4, 1)", "'1.25' can not be converted"),
        ("K = 1000", "K DECIMAL(4, 1)", "'1000' can not be converted"),
        ("K = 1.5", "K DOUBLE", None),
        ("K = 100.0", "K DECIMAL(4, 1)", None),
        ("K IN (1, NULL)", "K BIGINT", "Primary key columns can not be NULL: (K = null)"),
        ("K = 1 AND V > 0 OR K IN (NULL)", "K BIGINT", "can not be NULL: (K = null)"),
    ],
)
def test_engine_pull_key_values_must_convert_strictly(
    where: str, key: str, message: str | None
) -> None:
    """ksqlDB resolves each value compared with a key column: NULL, or a value that does not fit
    the key type without loss (a DECIMAL for a BIGINT key), is refused, scans enabled or not."""
    source = _source(SourceKind.TABLE, f"{key} KEY, V INTEGER")
    if message is None:
        plan(f"SELECT * FROM T WHERE {where};", source)
        return
    with pytest.raises(PullQueryError) as caught:
        plan(f"SELECT * FROM T WHERE {where};", source)
    assert message in caught.value.message


# -- schema and projection ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "schema"),
    [
        (
            "SELECT * FROM T;",
            "`ID` BIGINT KEY, `NAME` STRING, `AGE` INTEGER, `S` STRUCT<`A` INTEGER>",
        ),
        (
            "SELECT T.* FROM T;",
            "`ID` BIGINT KEY, `NAME` STRING, `AGE` INTEGER, `S` STRUCT<`A` INTEGER>",
        ),
        ("SELECT NAME, ID FROM T;", "`NAME` STRING, `ID` BIGINT KEY"),
        (
            "SELECT ID AS X, AGE * 2, UCASE(NAME) FROM T;",
            "`X` BIGINT, `KSQL_COL_0` INTEGER, `KSQL_COL_1` STRING",
        ),
        ("SELECT ROWTIME, S->A, S->* FROM T;", "`ROWTIME` BIGINT, `A` INTEGER, `A_1` INTEGER"),
        ("SELECT u.name FROM T u;", "`NAME` STRING"),
        ("SELECT AGE + 0.5 AS HALF FROM T;", "`HALF` DECIMAL(12, 1)"),
    ],
)
def test_engine_pull_schema(sql: str, schema: str) -> None:
    assert plan(sql).schema_text() == schema


def test_engine_pull_stream_schema_has_no_key_marks() -> None:
    assert plan("SELECT * FROM T;", EVENTS).schema_text() == "`K` INTEGER, `V` INTEGER"


# -- execution ----------------------------------------------------------------------------------


def test_engine_pull_scan_orders_partitions_then_keys() -> None:
    reader = _users()
    result = execute_pull(plan("SELECT ID FROM T;"), reader)
    expected = [[k[0]] for p in range(3) for k in sorted(reader.data[p])]
    assert result.rows == expected and len(expected) == 6
    assert result.partitions == frozenset({0, 1, 2}) and not result.limit_reached


def test_engine_pull_lookup_follows_written_order_and_skips_missing() -> None:
    reader = _users()
    result = execute_pull(plan("SELECT ID, NAME FROM T WHERE ID IN (5, 99, 1);"), reader)
    assert result.rows == [[5, "dee"], [1, "ann"]]
    assert result.partitions == frozenset(reader.partition_of((k,)) for k in (5, 99, 1))
    assert all(c[0] == "get" for c in reader.calls)


def test_engine_pull_residual_filter_and_null_logic() -> None:
    assert run("SELECT ID FROM T WHERE ID IN (1, 4) AND NAME = 'ann';") == [[1]]
    assert run("SELECT ID FROM T WHERE ID = 4 AND NAME = 'x';") == []
    # AGE is NULL for ID 4: AGE > 0 is false there (ksqlDB's comparisons are never NULL), and
    # so is NOT (AGE > 0), written as ksqlDB accepts it.
    ids = {r[0] for r in run("SELECT ID FROM T WHERE AGE > 0;")}
    assert ids == {1, 2, 3, 5, 6}
    assert {r[0] for r in run("SELECT ID FROM T WHERE AGE <= 0;")} == set()
    assert {r[0] for r in run("SELECT ID FROM T WHERE AGE > 0 OR ID = 4;")} == set(range(1, 7))
    assert sorted(run("SELECT ID FROM T WHERE NAME LIKE '%e%';")) == [[5], [6]]


def test_engine_pull_range_reads_ranges_and_filters() -> None:
    reader = _users()
    result = execute_pull(plan("SELECT ID FROM T WHERE ID > 2 AND ID <= 5;"), reader)
    assert sorted(result.rows) == [[3], [4], [5]]
    assert {c[0] for c in reader.calls} == {"range"}
    assert sorted(run("SELECT ID FROM T WHERE ID BETWEEN 2 AND 3;")) == [[2], [3]]


def test_engine_pull_multi_column_keys() -> None:
    reader = MemoryReader([((k1, k2), {"V": float(k2)}) for k1 in "ab" for k2 in (1, 2, 3)])
    sql = "SELECT K1, K2 FROM T WHERE K1 = 'a' AND K2 >= 2;"
    assert sorted(execute_pull(plan(sql, PAIRS), reader).rows) == [["a", 2], ["a", 3]]
    sql = "SELECT V FROM T WHERE K1 IN ('b', 'a') AND K2 = 3;"
    assert execute_pull(plan(sql, PAIRS), reader).rows == [[3.0], [3.0]]


def test_engine_pull_limit_stops_early() -> None:
    reader = _users()
    result = execute_pull(plan("SELECT ID FROM T LIMIT 2;"), reader)
    assert len(result.rows) == 2 and result.limit_reached
    zero = execute_pull(plan("SELECT ID FROM T LIMIT 0;"), _users())
    assert zero.rows == [] and zero.limit_reached and zero.partitions == frozenset()
    lookup = execute_pull(plan("SELECT ID FROM T WHERE ID IN (1, 2, 3) LIMIT 1;"), _users())
    assert lookup.rows == [[1]] and len(lookup.partitions) == 1


def test_engine_pull_refuses_a_negative_limit() -> None:
    # ksqlDB's grammar takes any number after LIMIT; its pull-query validator refuses negatives
    with pytest.raises(PullQueryError) as caught:
        plan("SELECT ID FROM T LIMIT -1;")
    assert caught.value.message.startswith(
        "Pull queries don't support negative integers in the LIMIT clause."
    )


def test_engine_pull_only_some_partitions() -> None:
    reader = _users()
    result = execute_pull(plan("SELECT ID FROM T;"), reader, partitions=[2])
    assert result.partitions == frozenset({2})
    assert sorted(result.rows) == [[k[0]] for k in sorted(reader.data[2])]


def test_engine_pull_stream_scans_records_in_order() -> None:
    records = [Row((k,), {"V": k * 10}, 100 + k, k % 2, k) for k in (3, 1, 2, 5)]
    result = execute_stream_pull(
        plan("SELECT K, V * 2 FROM T WHERE V >= 20 LIMIT 2;", EVENTS), records
    )
    assert result.rows == [[3, 60], [2, 40]] and result.limit_reached
    assert result.partitions == frozenset({1, 0})


# -- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT * FROM T WINDOW TUMBLING (SIZE 1 SECOND) WHERE ID=10;",
            (
                "Pull queries don't support WINDOW clauses. See https://cnfl.io/queries for more info.\n"
                "Add EMIT CHANGES if you intended to issue a push query."
            ),
        ),
        ("SELECT * FROM T WHERE ID=10 GROUP BY ID;", "Pull queries don't support GROUP BY clauses"),
        ("SELECT * FROM T PARTITION BY ID;", "Pull queries don't support PARTITION BY clauses"),
        ("SELECT * FROM T A JOIN U B ON A.ID = B.ID;", "Pull queries don't support JOIN clauses"),
        ("SELECT * FROM T EMIT CHANGES;", "EMIT CHANGES makes a push query"),
        (
            "SELECT ID, ROWPARTITION FROM T;",
            "Pull queries don't support the following columns in SELECT clauses: `ROWPARTITION`",
        ),
        (
            "SELECT ID FROM T WHERE ID = 2 AND ROWOFFSET < 3;",
            "Pull queries don't support the following columns in WHERE clauses: `ROWOFFSET`",
        ),
        ("SELECT BOB FROM T;", "SELECT column 'BOB' cannot be resolved."),
        ("SELECT I.BOB FROM T I;", "SELECT column 'I.BOB' cannot be resolved."),
        (
            "SELECT * FROM T WHERE WINDOWSTART = 10;",
            "WHERE column 'WINDOWSTART' cannot be resolved.",
        ),
        (
            "SELECT * FROM T WHERE ID = '11';",
            ("Error in WHERE expression: Cannot compare ID (BIGINT) to '11' (STRING) with EQUAL."),
        ),
        (
            "SELECT * FROM T WHERE ID = NULL;",
            ("Error in WHERE expression: Comparison with NULL not supported: BIGINT = NULL"),
        ),
        (
            "SELECT * FROM T WHERE ID IN ('10', 8);",
            "'10' can not be converted to the type of the key column: ID BIGINT KEY",
        ),
        (
            "SELECT * FROM T WHERE NAME;",
            (
                "Type error in WHERE expression: Should evaluate to boolean "
                "but is NAME (STRING) instead."
            ),
        ),
        ("SELECT NAME, NAME FROM T;", "Duplicate value columns found in schema: `NAME` STRING"),
        ("SELECT NULL FROM T;", "Can't infer a type of null. Please explicitly cast it"),
        (
            "SELECT * FROM T WHERE ID LIKE 'x';",
            "The column type for Like condition must be VARCHAR. The column type is BIGINT",
        ),
        (
            "SELECT NAME FROM T WHERE NAME BETWEEN 10 AND 'x';",
            (
                "Invalid expression: Cannot compare "
                "NAME (STRING) to 10 (INTEGER) with GREATER_THAN_OR_EQUAL"
            ),
        ),
    ],
)
def test_engine_pull_refusals(sql: str, message: str) -> None:
    with pytest.raises(PullQueryError) as caught:
        plan(sql)
    assert message in caught.value.message
    assert caught.value.error_code == 40001


@pytest.mark.parametrize("source", [EVENTS, USERS])
def test_engine_pull_refuses_aggregate_functions_naming_them(source: Source) -> None:
    with pytest.raises(PullQueryError) as caught:  # was: Can't find any functions ... 'COUNT'
        plan("SELECT COUNT(*), max(v) + 1 AS m FROM T;", source)
    assert caught.value.message.startswith(
        "Pull queries don't support aggregate functions: COUNT, MAX. Aggregate with CREATE TABLE "
        "... AS SELECT ... GROUP BY and query that table."
    )
    assert caught.value.error_code == 40001


def test_engine_pull_windowed_tables_have_window_bounds_as_key_columns() -> None:
    windowed = _source(SourceKind.TABLE, "ID STRING KEY, C BIGINT", windowed="TUMBLING")
    planned = plan("SELECT * FROM T WHERE ID = 'a';", windowed)
    assert planned.schema_text() == (
        "`ID` STRING KEY, `WINDOWSTART` BIGINT KEY, `WINDOWEND` BIGINT KEY, `C` BIGINT"
    )
    assert planned.access == KeyRange(("a",), ("a",))  # every window of the key
    planned = plan(
        "SELECT C FROM T WHERE ID = 'a' AND WINDOWSTART >= 60000 AND WINDOWSTART < 120000;",
        windowed,
    )
    assert planned.access == KeyRange(("a", 60000), ("a", 120000), True, False)


@pytest.mark.parametrize(
    ("where", "source", "message"),
    [
        ("", USERS, "Missing WHERE clause."),
        ("WHERE AGE = 100", USERS, "WHERE clause missing key column for disjunct: (AGE = 100)"),
        (
            "WHERE ID <> 100",
            USERS,
            "Bound on key columns '[`ID` BIGINT KEY]' must currently be '='. ",
        ),
        (
            "WHERE 0 < ID AND ID < 100",
            USERS,
            (
                "A comparison condition on the key column cannot be "
                "combined with other comparisons such as an IN predicate"
            ),
        ),
        ("WHERE ID = 10 OR ID > 20", USERS, "Query requires table scan to be enabled"),
        ("WHERE ID >= 10 AND ID < 20", USERS, "cannot be combined with other comparisons"),
        ("WHERE ID + 10 = 20", USERS, "A comparison must directly reference a key column."),
        (
            "WHERE ID = AGE",
            USERS,
            ("A comparison must be between a key column and a resolvable expression."),
        ),
        ("WHERE ID IN (2, AGE + 1)", USERS, "between a key column and a resolvable expression"),
        (
            "WHERE ID = 1 OR AGE = 2",
            USERS,
            "WHERE clause missing key column for disjunct: (AGE = 2)",
        ),
        (
            "WHERE K1 = 'a'",
            PAIRS,
            "Multi-column sources must specify every key in the WHERE clause",
        ),
    ],
)
def test_engine_pull_scan_disabled_messages(where: str, source: Source, message: str) -> None:
    with pytest.raises(PullQueryError) as caught:
        plan(f"SELECT * FROM T {where};", source, table_scan_enabled=False)
    assert message in caught.value.message
    assert "ksql.query.pull.table.scan.enabled=true" in caught.value.message


def test_engine_pull_scan_disabled_allows_lookups_and_streams() -> None:
    assert plan(
        "SELECT * FROM T WHERE ID IN (1, 2);", table_scan_enabled=False
    ).access == KeyLookup(((1,), (2,)))
    assert plan("SELECT * FROM T;", EVENTS, table_scan_enabled=False).access == TableScan()


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("2020-02-22T23:45", 1582415100000),
        ("2020-02-24T24", 1582588800000),
        ("2020-02-23T22:45:12.000-0100", 1582501512000),
        ("2020-02-23T23:45:12.000Z", 1582501512000),
        ("2020", 1577836800000),
        ("2020-02", 1580515200000),
    ],
)
def test_window_bounds_read_ksqldb_partial_timestamps(text: str, millis: int) -> None:
    from headwater.engine.functions.temporal import parse_partial_timestamp

    assert parse_partial_timestamp(text) == millis


def test_window_bounds_given_as_timestamp_strings() -> None:
    from headwater.engine.errors import ExpressionError
    from headwater.engine.expressions import pseudo_timestamps_in_millis as _window_bounds_in_millis
    from headwater.sqlparse_ext import parse_one

    where = parse_one(
        "SELECT * FROM A WHERE ID = '10' AND '2020-02-22T23:45' <= WindowStart "
        "AND WINDOWEND BETWEEN '2020' AND '2021';"
    ).query.where
    assert _window_bounds_in_millis(where).sql() == (
        "ID = '10' AND 1582415100000 <= WindowStart AND WINDOWEND BETWEEN 1577836800000 AND "
        "1609459200000"
    )
    bad = parse_one("SELECT * FROM A WHERE WINDOWSTART > 'yesterday';").query.where
    with pytest.raises(ExpressionError, match="Failed to parse timestamp 'yesterday'"):
        _window_bounds_in_millis(bad)
    rowtime = parse_one("SELECT * FROM A WHERE ROWTIME > '2020';").query.where
    assert _window_bounds_in_millis(rowtime).sql() == "ROWTIME > 1577836800000"


def test_array_and_struct_keys_are_looked_up() -> None:
    arrays = _source(SourceKind.TABLE, "ID ARRAY<INTEGER> KEY, V INTEGER")
    structs = _source(SourceKind.TABLE, "ID STRUCT<`A` INTEGER> KEY, V INTEGER")
    reader = MemoryReader([((x,), {"V": i}) for i, x in enumerate(([1, 2], [3, 4]))])
    got = execute_pull(plan("SELECT * FROM T WHERE ID = ARRAY[3, 4];", arrays), reader).rows
    assert got == [[[3, 4], 1]]
    assert sorted(execute_pull(plan("SELECT * FROM T;", arrays), reader).rows) == [
        [[1, 2], 0],
        [[3, 4], 1],
    ]
    reader = MemoryReader([(({"A": 1},), {"V": 5})])
    got = execute_pull(plan("SELECT V FROM T WHERE ID = STRUCT(A := 1);", structs), reader).rows
    assert got == [[5]]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM USERS;",
        "SELECT NAME, ID, AGE FROM USERS;",
        "SELECT AGE, ID FROM USERS LIMIT 2;",
        "SELECT `NAME` FROM USERS U WHERE ID IN (2, 4, 9);",
    ],
)
def test_stored_columns_read_directly_equal_the_evaluators(sql: str) -> None:
    planned = plan(sql)
    if planned.filter is None:
        assert planned.direct is not None  # the shortcut is taken...
    evaluated = dataclasses.replace(planned, direct=None)
    # ...and answers exactly what the evaluators answer (missing and NULL values included)
    reader = MemoryReader(
        [((1,), {"NAME": "ann"}), ((2,), {"NAME": None, "AGE": 7}), ((4,), {"AGE": 3, "S": None})]
    )
    assert execute_pull(planned, reader).rows == execute_pull(evaluated, reader).rows
    assert execute_pull(planned, _users()).rows == execute_pull(evaluated, _users()).rows


def test_pseudo_columns_and_expressions_are_not_read_directly() -> None:
    assert plan("SELECT ID, AGE + 1 FROM USERS;").direct is None
    assert plan("SELECT S->A FROM USERS;").direct is None
    assert plan("SELECT ID FROM USERS WHERE NAME = 'ann';").direct is None


def test_windowed_key_columns_are_read_directly() -> None:
    windowed = _source(SourceKind.TABLE, "ID STRING KEY, C BIGINT", windowed="TUMBLING")
    planned = plan("SELECT WINDOWEND, C, ID FROM T;", windowed)
    assert planned.direct == ((2, "WINDOWEND"), (-1, "C"), (0, "ID"))
