"""ksqlDB's rules for a pull query's WHERE on a table (engine.pull.where_rules): the plan kind each
WHERE takes under the two settings, and ksqlDB's refusals word for word."""

from __future__ import annotations

import pytest
from sqlglot import exp

from headwater.engine.errors import PullQueryError
from headwater.engine.functions.types import BIGINT, INTEGER, STRING
from headwater.engine.pull.query import KeyLookup, KeyRange, TableScan, plan_pull
from headwater.engine.pull.where_rules import (
    MAX_DISJUNCTS,
    SCAN_REQUIRED,
    PlanKind,
    plan_where,
)
from headwater.metastore.catalog import Column, Source, SourceKind
from headwater.sqlparse_ext import Select, parse_one
from headwater.sqlparse_ext.sqltypes import SqlType

NAMES = Source(
    SourceKind.TABLE,
    "T",
    (Column("ID", "STRING", key=True), Column("V0", "STRING"), Column("N", "INTEGER")),
    "t",
    2,
)
NUMBERS = Source(
    SourceKind.TABLE, "T", (Column("ID", "INTEGER", key=True), Column("V0", "STRING")), "t", 2
)
PAIRS = Source(
    SourceKind.TABLE,
    "T",
    (Column("ID1", "STRING", key=True), Column("ID2", "INTEGER", key=True), Column("C", "BIGINT")),
    "t",
    2,
)
WINDOWED = Source(
    SourceKind.TABLE,
    "T",
    (Column("ID", "STRING", key=True), Column("C", "BIGINT")),
    "t",
    2,
    windowed="TUMBLING",
)

SCANS_OFF = {"table_scan_enabled": False, "range_scan_enabled": True}
BOTH_OFF = {"table_scan_enabled": False, "range_scan_enabled": False}
SCANS_ON = {"table_scan_enabled": True, "range_scan_enabled": True}


def _where(sql: str) -> exp.Expr | None:
    statement = parse_one(f"SELECT * FROM T WHERE {sql};")
    assert isinstance(statement, Select)
    return statement.query.where


def kind(
    where: str,
    keys: list[tuple[str, SqlType]] | None = None,
    *,
    scans: bool = True,
    ranges: bool = True,
    windowed: bool = False,
) -> PlanKind:
    keys = keys or [("ID", STRING)]
    columns = {**dict(keys), "V0": STRING, "N": INTEGER, "ROWTIME": BIGINT}
    return plan_where(
        _where(where),
        keys,
        columns,
        windowed=windowed,
        table_scans=scans,
        range_scans=ranges,
    ).kind


def refusal(sql: str, source: Source, **options: bool) -> str:
    statement = parse_one(sql)
    assert isinstance(statement, Select)
    with pytest.raises(PullQueryError) as caught:
        plan_pull(statement, source, {}, **options)
    return caught.value.message


def access(sql: str, source: Source, **options: bool) -> object:
    statement = parse_one(sql)
    assert isinstance(statement, Select)
    return plan_pull(statement, source, {}, **options).access


@pytest.mark.parametrize(
    ("where", "scans", "ranges", "expected"),
    [
        ("ID = 'a'", False, False, PlanKind.KEY_LOOKUP),
        ("ID IN ('a', 'b')", False, False, PlanKind.KEY_LOOKUP),
        ("ID = 'a' OR ID = 'b'", False, False, PlanKind.KEY_LOOKUP),
        ("ID < 'a'", False, True, PlanKind.RANGE_SCAN),
        ("'a' >= ID", False, True, PlanKind.RANGE_SCAN),
        ("ID < 'a' AND V0 > 'x'", False, True, PlanKind.RANGE_SCAN),
        ("ID BETWEEN 'a' AND 'c'", True, True, PlanKind.RANGE_SCAN),  # the first bound is kept
        ("ID = 'a' AND ID > 'b'", True, True, PlanKind.KEY_LOOKUP),  # = wins over a range
        ("ID < 'a'", True, False, PlanKind.TABLE_SCAN),
        ("ID < 'a' OR ID > 'c'", True, True, PlanKind.TABLE_SCAN),
        ("ID = 'a' OR ID > 'c'", True, True, PlanKind.TABLE_SCAN),
        ("V0 = 'x'", True, True, PlanKind.TABLE_SCAN),
        ("ID = V0", True, True, PlanKind.TABLE_SCAN),
        ("LCASE(ID) = 'a'", True, True, PlanKind.TABLE_SCAN),
        ("ID <> 'a'", True, True, PlanKind.TABLE_SCAN),
        ("ID LIKE 'a%'", True, True, PlanKind.TABLE_SCAN),
        ("ID = 'a' OR V0 = 'x'", True, True, PlanKind.TABLE_SCAN),
    ],
)
def test_plan_kind_of_a_string_key(where: str, scans: bool, ranges: bool, expected: str) -> None:
    assert kind(where, scans=scans, ranges=ranges) == expected


def test_ranges_on_other_key_types_and_windowed_tables_are_table_scans() -> None:
    assert kind("ID >= 12", [("ID", INTEGER)]) == PlanKind.TABLE_SCAN
    assert kind("ID >= 'a'", windowed=True) == PlanKind.TABLE_SCAN
    assert kind("ID1 <= 'a' AND ID2 >= 10", [("ID1", STRING), ("ID2", INTEGER)]) == (
        PlanKind.TABLE_SCAN
    )
    assert kind("ID1 = 'a' AND ID2 = 10", [("ID1", STRING), ("ID2", INTEGER)], scans=False) == (
        PlanKind.KEY_LOOKUP
    )


@pytest.mark.parametrize(
    ("where", "source", "options", "message"),
    [
        ("ID <= '10'", NAMES, BOTH_OFF, SCAN_REQUIRED),
        ("ID >= 12", NUMBERS, SCANS_OFF, SCAN_REQUIRED),
        ("ID <= '11' OR ID >= '13'", NAMES, SCANS_OFF, SCAN_REQUIRED),
        ("ID1 <= '11' AND ID2 >= 10", PAIRS, SCANS_OFF, SCAN_REQUIRED),
        ("ID <= '10'", WINDOWED, SCANS_OFF, SCAN_REQUIRED),
        (
            "ID >= '11' AND ID <= '13'",
            NAMES,
            SCANS_OFF,
            (
                "A comparison condition on the key column cannot be combined with other "
                "comparisons such as an IN predicate.  See https://cnfl.io/queries for more info."
            ),
        ),
        ("V0 >= '13a'", NAMES, SCANS_OFF, "WHERE clause missing key column for disjunct: "),
        (
            "ID1 <= '11' OR ID2 >= 10",
            PAIRS,
            SCANS_OFF,
            (
                "Multi-column sources must specify every key in the WHERE clause. Specified: "
                "[`ID1`] Expected: [`ID1` STRING KEY, `ID2` INTEGER KEY]"
            ),
        ),
        ("ID1 <= '09'", PAIRS, SCANS_OFF, "Multi-column sources must specify every key in the"),
        ("ID <> 'a'", NAMES, SCANS_OFF, "Bound on key columns '[`ID` STRING KEY]' must currently"),
        ("LCASE(ID) = 'a'", NAMES, SCANS_OFF, "A comparison must directly reference a key column"),
        ("ID = V0", NAMES, SCANS_OFF, "between a key column and a resolvable expression"),
        ("V0 LIKE 'a%'", NAMES, SCANS_OFF, "WHERE clause missing key column for disjunct"),
        ("N LIKE 'a%'", NAMES, SCANS_ON, "The column type for Like condition must be VARCHAR."),
        ("V0 IS NULL", NAMES, SCANS_ON, "Unsupported expression in WHERE clause: (V0 IS NULL)."),
        ("NOT (ID = 'a')", NAMES, SCANS_ON, "Unsupported expression in WHERE clause: (NOT (ID"),
        ("ID NOT IN ('a')", NAMES, SCANS_ON, "Unsupported expression in WHERE clause: (NOT (ID"),
        ("TRUE", NAMES, SCANS_ON, "Unsupported expression in WHERE clause: true."),
        ("WINDOWSTART > 1", NAMES, SCANS_ON, "WINDOWSTART"),  # not a column of this table
        (
            "ID = 'a' AND WINDOWSTART > 1 AND WINDOWSTART >= 2",
            WINDOWED,
            SCANS_ON,
            "Duplicate `WINDOWSTART` bounds on: GREATER_THAN",
        ),
        (
            "ID = 'a' AND WINDOWEND = 1 AND WINDOWEND < 5",
            WINDOWED,
            SCANS_ON,
            "`(WINDOWEND < 5)` cannot be combined with other `WINDOWEND` bounds",
        ),
        (
            "ID = 'a' AND WINDOWSTART <> 1",
            WINDOWED,
            SCANS_ON,
            "Unsupported `WINDOWSTART` bounds: NOT_EQUAL",
        ),
    ],
)
def test_ksqldb_refusals(where: str, source: Source, options: dict, message: str) -> None:
    assert message in refusal(f"SELECT * FROM T WHERE {where};", source, **options)


def test_refusals_name_what_a_where_clause_needs() -> None:
    text = refusal("SELECT * FROM T WHERE V0 = 'x';", NAMES, **SCANS_OFF)
    assert text.startswith("WHERE clause missing key column for disjunct: (V0 = 'x'). ")
    assert "range scans need to be enabled by setting ksql.query.pull.range.scan.enabled" in text
    assert "table scans can be enabled by setting ksql.query.pull.table.scan.enabled=true" in text
    assert "Bounds on [`WINDOWSTART`, `WINDOWEND`]" not in text
    windowed = refusal("SELECT * FROM T WHERE C = 1;", WINDOWED, **SCANS_OFF)
    assert "Bounds on [`WINDOWSTART`, `WINDOWEND`] are supported" in windowed
    assert refusal("SELECT * FROM T;", NAMES, **SCANS_OFF).startswith("Missing WHERE clause. ")


def test_the_rows_read_stay_narrow_whatever_ksqldb_calls_the_plan() -> None:
    """The plan kind decides what is answered; the rows read may be fewer than ksqlDB reads."""
    sql = "SELECT * FROM T WHERE ID >= '11' AND ID <= '13';"
    assert access(sql, NAMES, **SCANS_ON) == KeyRange(("11",), ("13",))
    assert access("SELECT * FROM T WHERE ID < '12';", NAMES, **SCANS_OFF) == KeyRange(
        None, ("12",), True, False
    )
    assert access("SELECT * FROM T WHERE ID IN ('b', 'a');", NAMES, **BOTH_OFF) == KeyLookup(
        (("b",), ("a",))
    )
    assert access("SELECT * FROM T WHERE V0 >= 'v';", NAMES, **SCANS_ON) == TableScan()


def test_a_where_that_explodes_in_normal_form_is_bounded() -> None:
    terms = " AND ".join(f"(ID = '{i}' OR N = {i})" for i in range(20))  # 2**20 disjuncts
    assert kind(terms) == PlanKind.TABLE_SCAN
    with pytest.raises(PullQueryError) as caught:
        kind(terms, scans=False)
    assert str(MAX_DISJUNCTS) in caught.value.message
