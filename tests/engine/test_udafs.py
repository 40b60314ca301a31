"""ksqlDB's aggregate functions: expected values from ksqlDB's functional tests (qtt/*.json) and
its Java sources, including nulls, overflow, undo over tables and ksqlDB's error messages."""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import pytest

from headwater.engine.errors import ExpressionError
from headwater.engine.functions.aggregates import (
    AGGREGATE_NAMES,
    HISTOGRAM_LIMIT,
    Udaf,
    constant_arity,
    intermediate_type,
    resolve_udaf,
)
from headwater.engine.functions.types import (
    BIGINT,
    BOOLEAN,
    BYTES,
    DATE,
    DOUBLE,
    INTEGER,
    NULL,
    STRING,
    TIME,
    TIMESTAMP,
    EvalFailure,
)
from headwater.sqlparse_ext.sqltypes import (
    ArrayType,
    DecimalType,
    MapType,
    SqlType,
    StructField,
    StructType,
)

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
STRUCT_AB = StructType((StructField("A", STRING), StructField("B", BIGINT)))


def udaf(name: str, *types: SqlType, consts: Sequence[Any] = (), **kw: Any) -> Udaf:
    return resolve_udaf(name, types, consts, **kw)


def stream(u: Udaf, rows: Sequence[Any]) -> list[Any]:
    """The result after each row; a non-tuple row is the single column argument."""
    state, out = u.initial(), []
    for row in rows:
        state = u.add(state, row if isinstance(row, tuple) else (row,))
        out.append(u.result(state))
    return out


def table(
    u: Udaf,
    changes: Sequence[tuple[str, Any]],
    group: Callable[[str, Any], Any] = lambda key, row: None,
) -> list[tuple[Any, Any]]:
    """A TABLE source: each change replaces its key's row (None: tombstone). The old row is undone
    from its group, the new one added to its own; returns (group, result) per update (one per
    change when both fall in the same group), as ksqlDB emits them."""
    assert u.undo is not None
    rows: dict[str, Any] = {}
    states: dict[Any, Any] = {}
    out: list[tuple[Any, Any]] = []
    for key, row in changes:
        old = rows.pop(key, None)
        touched = []
        if old is not None:
            g = group(key, old)
            states[g] = u.undo(states[g], old if isinstance(old, tuple) else (old,))
            touched.append(g)
        if row is not None:
            rows[key] = row
            g = group(key, row)
            states[g] = u.add(states.get(g, u.initial()), row if isinstance(row, tuple) else (row,))
            if g not in touched:
                touched.append(g)
        out.extend((g, u.result(states[g])) for g in touched)
    return out


def project(u: Udaf, columns: slice) -> Udaf:
    """The function over some columns of a wider row (the others pick the group)."""
    undo = u.undo
    assert undo is not None
    return Udaf(
        u.name,
        u.return_type,
        True,
        u.initial,
        lambda s, row, order=None: u.add(s, row[columns], order),
        lambda s, row: undo(s, row[columns]),
        u.result,
        u.merge,
    )


def error(name: str, types: Sequence[SqlType], consts: Sequence[Any] = ()) -> str:
    with pytest.raises(ExpressionError) as info:
        resolve_udaf(name, types, consts)
    return info.value.message


# -- the registry ----------------------------------------------------------------------------------


def test_aggregate_names() -> None:
    assert (
        set(AGGREGATE_NAMES)
        == AGGREGATE_NAMES.builtin
        == {
            "COUNT",
            "COUNT_DISTINCT",
            "SUM",
            "SUM_LIST",
            "AVG",
            "MIN",
            "MAX",
            "TOPK",
            "TOPKDISTINCT",
            "COLLECT_LIST",
            "COLLECT_SET",
            "HISTOGRAM",
            "EARLIEST_BY_OFFSET",
            "LATEST_BY_OFFSET",
            "STDDEV_SAMP",
            "STDDEV_SAMPLE",
            "CORRELATION",
            "ATTR",
        }
    )


@pytest.mark.parametrize(
    ("name", "total", "expected"),
    [
        ("COUNT", 0, 0),
        ("COUNT", 1, 0),
        ("SUM", 1, 0),
        ("CORRELATION", 2, 0),
        ("TOPK", 1, 0),
        ("TOPK", 2, 1),
        ("TOPK", 3, 1),
        ("topkdistinct", 2, 1),
        ("LATEST_BY_OFFSET", 1, 0),
        ("LATEST_BY_OFFSET", 2, 1),
        ("LATEST_BY_OFFSET", 3, 2),
        ("EARLIEST_BY_OFFSET", 2, 1),
        ("EARLIEST_BY_OFFSET", 4, 2),
        ("NOPE", 3, 0),
    ],
)
def test_constant_arity(name: str, total: int, expected: int) -> None:
    assert constant_arity(name, total) == expected


def test_table_capable_functions_are_ksqldbs_table_udafs() -> None:
    calls = {
        "COUNT": ((INTEGER,), ()),
        "COUNT_DISTINCT": ((INTEGER,), ()),
        "SUM": ((INTEGER,), ()),
        "SUM_LIST": ((ArrayType(INTEGER),), ()),
        "AVG": ((INTEGER,), ()),
        "MIN": ((INTEGER,), ()),
        "MAX": ((INTEGER,), ()),
        "TOPK": ((INTEGER,), (2,)),
        "TOPKDISTINCT": ((INTEGER,), (2,)),
        "COLLECT_LIST": ((INTEGER,), ()),
        "COLLECT_SET": ((INTEGER,), ()),
        "HISTOGRAM": ((STRING,), ()),
        "EARLIEST_BY_OFFSET": ((INTEGER,), ()),
        "LATEST_BY_OFFSET": ((INTEGER,), ()),
        "STDDEV_SAMP": ((INTEGER,), ()),
        "STDDEV_SAMPLE": ((INTEGER,), ()),
        "CORRELATION": ((INTEGER, INTEGER), ()),
        "ATTR": ((INTEGER,), ()),
    }
    assert set(calls) == AGGREGATE_NAMES.builtin
    resolved = {name: resolve_udaf(name, *call) for name, call in calls.items()}
    assert {n for n, u in resolved.items() if u.table} == {
        "COUNT",
        "SUM",
        "SUM_LIST",
        "AVG",
        "COLLECT_LIST",
        "HISTOGRAM",
        "STDDEV_SAMP",
        "STDDEV_SAMPLE",
        "CORRELATION",
        "ATTR",
    }
    assert all((u.undo is None) != u.table for u in resolved.values())
    assert all(u.name == name for name, u in resolved.items())


# -- COUNT, COUNT_DISTINCT -------------------------------------------------------------------------


def test_count_star_counts_rows_and_count_column_skips_nulls() -> None:
    assert stream(udaf("COUNT"), [(), (), ()]) == [1, 2, 3]
    assert stream(udaf("count", STRING), ["a", None, "b"]) == [1, 1, 2]
    assert udaf("COUNT", STRUCT_AB).return_type == BIGINT


def test_count_over_a_table_counts_back_to_zero() -> None:
    # count.json "count table": SELECT NAME, count(1) ... GROUP BY name (rows: (name, 1))
    changes = [("0", ("bob", 1)), ("0", ("john", 1)), ("100", ("john", 1)), ("100", None)]
    count = project(udaf("COUNT", INTEGER), slice(1, 2))
    assert table(count, changes, group=lambda key, row: row[0]) == [
        ("bob", 1),
        ("bob", 0),
        ("john", 1),
        ("john", 2),
        ("john", 1),
    ]
    # count.json "should count back to zero": COUNT() over a table
    assert table(udaf("COUNT"), [("1", ()), ("2", ()), ("1", None), ("2", None)]) == [
        (None, 1),
        (None, 2),
        (None, 1),
        (None, 0),
    ]


def test_count_distinct_counts_distinct_non_null_values() -> None:
    # count-distinct.json
    assert stream(udaf("COUNT_DISTINCT", STRING), ["one", "two", "one", "two", None]) == [
        1,
        2,
        2,
        2,
        2,
    ]
    nested = [[1, 2], [1, 2], {"A": [1]}, {"A": [1]}, [2, 1], float("nan"), float("nan")]
    assert stream(udaf("COUNT_DISTINCT", ArrayType(INTEGER)), nested)[-1] == 4
    assert udaf("COUNT_DISTINCT", STRING).undo is None


# -- SUM, SUM_LIST ---------------------------------------------------------------------------------


def test_sum_of_integers_wraps_like_java() -> None:
    # sum.json "sum int" and "sum with constant int arg"
    assert stream(udaf("SUM", INTEGER), [0, 100]) == [0, 100]
    assert stream(udaf("SUM", INTEGER), [2, 2, 2]) == [2, 4, 6]
    assert stream(udaf("SUM", INTEGER), [INT_MAX, 1, None]) == [INT_MAX, -(2**31), -(2**31)]
    assert stream(udaf("SUM", BIGINT), [2147483648, 100]) == [2147483648, 2147483748]
    assert stream(udaf("SUM", BIGINT), [LONG_MAX, 2]) == [LONG_MAX, -LONG_MAX]
    assert udaf("SUM", INTEGER).return_type == INTEGER
    assert udaf("SUM", BIGINT).return_type == BIGINT


def test_sum_of_doubles() -> None:
    assert stream(udaf("SUM", DOUBLE), [5.4, 100.1]) == [5.4, 105.5]
    assert stream(udaf("SUM", DOUBLE), [500.9, 300.8, None]) == [500.9, 801.7, 801.7]


def test_sum_with_only_nulls_is_zero() -> None:
    # sum.json "sum int left join of table": SUM over a missing right side is 0
    assert stream(udaf("SUM", INTEGER), [None]) == [0]
    assert stream(udaf("SUM", DOUBLE), [None]) == [0.0]


def test_sum_of_decimals_keeps_the_argument_type() -> None:
    t = DecimalType(4, 1)
    u = udaf("SUM", t)
    assert u.return_type == t
    assert str(u.result(u.initial())) == "0.0"
    assert stream(u, [Decimal("5.4"), Decimal("100.1")]) == [Decimal("5.4"), Decimal("105.5")]
    wide = udaf("SUM", DecimalType(6, 2))  # "sum decimal should not overflow with cast ..."
    values = [Decimal(v) for v in ("500.90", "300.80", "400.80")]
    assert stream(wide, values)[-1] == Decimal("1202.50")


def test_sum_of_decimals_fails_on_overflow_with_ksqldbs_message() -> None:
    u = udaf("SUM", DecimalType(4, 1))
    state = u.add(u.add(u.initial(), (Decimal("500.9"),)), (Decimal("300.8"),))
    with pytest.raises(EvalFailure) as info:
        u.add(state, (Decimal("400.8"),))
    assert str(info.value) == (
        "Numeric field overflow: A field with precision 4 and scale 1 must round to an absolute "
        "value less than 10^3. Got 1203"
    )
    narrow = udaf("SUM", DecimalType(3, 1))  # "sum decimal should overflow with cast to lower"
    state = narrow.add(narrow.initial(), (Decimal("50.9"),))
    with pytest.raises(EvalFailure, match="Numeric field overflow"):
        narrow.add(state, (Decimal("50.8"),))


def test_sum_undo() -> None:
    u = udaf("SUM", INTEGER)
    assert u.undo is not None
    assert u.undo(u.undo(5, (None,)), (7,)) == -2
    assert u.undo(-(2**31), (1,)) == INT_MAX
    d = udaf("SUM", DecimalType(4, 1))
    assert d.undo is not None
    assert d.undo(Decimal("105.5"), (Decimal("100.1"),)) == Decimal("5.4")
    assert table(udaf("SUM", DOUBLE), [("a", 1.5), ("b", 2.0), ("a", None)]) == [
        (None, 1.5),
        (None, 3.5),
        (None, 2.0),
    ]


def test_sum_list() -> None:
    # sum.json "sum list of ..."
    doubles = udaf("SUM_LIST", ArrayType(DOUBLE))
    assert doubles.return_type == DOUBLE
    assert stream(doubles, [[1.0, 1.0], [2.0, 2.0], [922337203685.0, 1.0], [1.0, 1.0, None]]) == [
        2.0,
        6.0,
        922337203692.0,
        922337203694.0,
    ]
    ints = udaf("sum_list", ArrayType(INTEGER))
    assert ints.return_type == INTEGER
    assert stream(ints, [[1, 1], [2, 2], [100, 100], [100, 100, None], None]) == [
        2,
        6,
        206,
        406,
        406,
    ]
    assert stream(ints, [[INT_MAX, 1]]) == [-(2**31)]
    assert udaf("SUM_LIST", ArrayType(BIGINT)).return_type == BIGINT
    assert ints.undo is not None
    assert ints.undo(406, ([100, 100, None],)) == 206


# -- AVG -------------------------------------------------------------------------------------------


def test_avg_is_a_double_as_ksqldb_computes_it() -> None:
    # average-udaf.json, per key
    assert stream(udaf("AVG", INTEGER), [1, 2, 2, None]) == [
        1.0,
        1.5,
        1.6666666666666667,
        1.6666666666666667,
    ]
    assert stream(udaf("avg", INTEGER), [2, 2, 0]) == [2.0, 2.0, 1.3333333333333333]
    assert stream(udaf("AVG", BIGINT), [-1, LONG_MAX, 1, None]) == [
        -1.0,
        4.611686018427388e18,
        3.0744573456182584e18,
        3.0744573456182584e18,
    ]
    assert stream(udaf("AVG", BIGINT), [2, -2, 0]) == [2.0, 0.0, 0.0]
    assert stream(udaf("AVG", DOUBLE), [-1.8, 9223372036854.775, 100.2, None]) == [
        -1.8,
        4611686018426.487,
        3074457345651.058,
        3074457345651.058,
    ]
    assert stream(udaf("AVG", DOUBLE), [2.3, -200000.6, 0.0]) == [2.3, -99999.15000000001, -66666.1]
    assert udaf("AVG", INTEGER).return_type == DOUBLE


def test_avg_of_nothing_is_zero_and_integer_sums_wrap() -> None:
    u = udaf("AVG", INTEGER)
    assert u.result(u.initial()) == 0.0
    assert stream(u, [INT_MAX, 1]) == [float(INT_MAX), -(2.0**31) / 2]


def test_avg_over_a_table() -> None:
    # average-udaf.json "average udaf with table"
    changes = [("alice", 1), ("bob", 2), ("alice", None), ("alice", 4)]
    # a row whose VALUE is null is still a row: its undo and add skip the null
    rows = [(k, (v,)) for k, v in changes]
    assert [r for _, r in table(udaf("AVG", INTEGER), rows)] == [1.0, 1.5, 2.0, 3.0]


# -- MIN, MAX --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "values", "low", "high"),
    [
        (INTEGER, [5, None, -3, 7], -3, 7),
        (BIGINT, [2147483648, 100, None], 100, 2147483648),
        (DOUBLE, [5.4, -0.5, 100.1], -0.5, 100.1),
        (DecimalType(4, 1), [Decimal("5.4"), Decimal("-1.0")], Decimal("-1.0"), Decimal("5.4")),
        (DATE, [18000, 17000], 17000, 18000),
        (TIME, [1000, 5], 5, 1000),
        (TIMESTAMP, [1, 1_600_000_000_000], 1, 1_600_000_000_000),
        (STRING, ["b", "a", "c"], "a", "c"),
        (BYTES, [b"B", b"A"], b"A", b"B"),
    ],
)
def test_min_max(t: SqlType, values: list[Any], low: Any, high: Any) -> None:
    assert stream(udaf("MIN", t), values)[-1] == low
    assert stream(udaf("MAX", t), values)[-1] == high
    assert udaf("MIN", t).return_type == t
    assert udaf("MAX", t).undo is None


def test_min_max_of_nulls_only_is_null() -> None:
    assert stream(udaf("MAX", BYTES), [None, None]) == [None, None]
    assert stream(udaf("MIN", INTEGER), [None, 3]) == [None, 3]


def test_min_max_order_like_java_compare_to() -> None:
    # String.compareTo: UTF-16 code units (U+FF5E sorts after the surrogate pair of U+1F600)
    assert stream(udaf("MAX", STRING), ["\U0001f600", "\uff5e"])[-1] == "\uff5e"
    # ByteBuffer.compareTo: signed bytes (0x80 is -128)
    assert stream(udaf("MAX", BYTES), [b"\x80", b"\x7f"])[-1] == b"\x7f"
    assert stream(udaf("MIN", BYTES), [b"\x7f", b"\x80"])[-1] == b"\x80"
    # Double.compareTo: NaN is the greatest, -0.0 is below 0.0
    assert math.isnan(stream(udaf("MAX", DOUBLE), [1.0, float("nan"), 2.0])[-1])
    assert stream(udaf("MIN", DOUBLE), [1.0, float("nan"), 2.0])[-1] == 1.0
    assert math.copysign(1.0, stream(udaf("MIN", DOUBLE), [0.0, -0.0])[-1]) == -1.0
    assert math.copysign(1.0, stream(udaf("MAX", DOUBLE), [-0.0, 0.0])[-1]) == 1.0


# -- TOPK, TOPKDISTINCT ----------------------------------------------------------------------------


def test_topk_keeps_the_k_largest_in_descending_order() -> None:
    # topk-group-by.json
    assert stream(udaf("TOPK", INTEGER, consts=(3,)), [0, 100, 99, 7, 100]) == [
        [0],
        [100, 0],
        [100, 99, 0],
        [100, 99, 7],
        [100, 100, 99],
    ]
    assert stream(udaf("TOPK", BIGINT, consts=(3,)), [2147483648, 100, 99, 7, 100])[-1] == [
        2147483648,
        100,
        100,
    ]
    assert stream(udaf("TOPK", DOUBLE, consts=(3,)), [2147483648.9, 100.5, 99.9, 7.3, 100.5])[
        -1
    ] == [2147483648.9, 100.5, 100.5]
    assert stream(udaf("TOPK", STRING, consts=(3,)), ["a", "b", "c", "b", "d"]) == [
        ["a"],
        ["b", "a"],
        ["c", "b", "a"],
        ["c", "b", "b"],
        ["d", "c", "b"],
    ]
    assert stream(udaf("TOPK", INTEGER, consts=(2,)), [None, 1]) == [[], [1]]
    assert udaf("TOPK", INTEGER, consts=(3,)).return_type == ArrayType(INTEGER)


def test_topk_with_other_columns_returns_structs_stable_among_equal_values() -> None:
    u = udaf("TOPK", INTEGER, STRING, consts=(3,))
    assert u.return_type == ArrayType(
        StructType((StructField("sort_col", INTEGER), StructField("col0", STRING)))
    )
    rows = [(0, "zero"), (100, "one"), (99, "two"), (None, "three"), (100, None)]
    out = stream(u, rows)
    assert (
        out[2]
        == out[3]
        == [
            {"sort_col": 100, "col0": "one"},
            {"sort_col": 99, "col0": "two"},
            {"sort_col": 0, "col0": "zero"},
        ]
    )
    assert out[4] == [
        {"sort_col": 100, "col0": "one"},
        {"sort_col": 100, "col0": None},
        {"sort_col": 99, "col0": "two"},
    ]
    strings = udaf("TOPK", STRING, STRING, consts=(3,))
    rows = [("a", "zero"), (None, "one"), ("c", "two"), ("b", "three"), ("d", None)]
    assert stream(strings, rows)[-1] == [
        {"sort_col": "d", "col0": None},
        {"sort_col": "c", "col0": "two"},
        {"sort_col": "b", "col0": "three"},
    ]
    many = udaf("TOPK", DOUBLE, STRING, BIGINT, consts=(1,))
    assert stream(many, [(1.5, "x", 7)]) == [[{"sort_col": 1.5, "col0": "x", "col1": 7}]]


def test_topk_sizes_ksqldb_does_not_check() -> None:
    assert stream(udaf("TOPK", INTEGER, consts=(0,)), [1, 2]) == [[], []]
    assert stream(udaf("TOPK", INTEGER, consts=(-1,)), [1, 3, 2]) == [[1], [3, 1], [3, 2, 1]]


def test_topk_distinct() -> None:
    # topk-distinct.json
    assert stream(udaf("TOPKDISTINCT", INTEGER, consts=(3,)), [0, 100, 99, 7, 100]) == [
        [0],
        [100, 0],
        [100, 99, 0],
        [100, 99, 7],
        [100, 99, 7],
    ]
    assert stream(udaf("TOPKDISTINCT", STRING, consts=(3,)), ["a", "b", "c", "b", "d"])[-1] == [
        "d",
        "c",
        "b",
    ]
    dec = udaf("TOPKDISTINCT", DecimalType(2, 1), consts=(3,))
    assert dec.return_type == ArrayType(DecimalType(2, 1))
    values = [Decimal(v) if v else None for v in ("9.8", "8.9", "", "7.8", "6.5", "9.9")]
    assert stream(dec, values)[-1] == [Decimal("9.9"), Decimal("9.8"), Decimal("8.9")]
    assert stream(udaf("TOPKDISTINCT", BYTES, consts=(3,)), [b"B", b"F", b"G", None, b"A", b"F"])[
        -1
    ] == [b"G", b"F", b"B"]
    assert stream(udaf("TOPKDISTINCT", DATE, consts=(3,)), [0, 100, 99, None, -7, 100])[-1] == [
        100,
        99,
        0,
    ]
    assert stream(udaf("TOPKDISTINCT", TIME, consts=(3,)), [0, 100, 99, None, 7, 100])[-1] == [
        100,
        99,
        7,
    ]
    assert udaf("TOPKDISTINCT", INTEGER, consts=(3,)).undo is None


# -- COLLECT_LIST, COLLECT_SET, HISTOGRAM ---------------------------------------------------------


def test_collect_list_keeps_nulls_and_order() -> None:
    # collect-list.json "collect_list string" and "... decimal"
    u = udaf("COLLECT_LIST", STRING)
    assert u.return_type == ArrayType(STRING)
    assert stream(u, ["baz", "baz", "foo", None]) == [
        ["baz"],
        ["baz", "baz"],
        ["baz", "baz", "foo"],
        ["baz", "baz", "foo", None],
    ]
    nested = udaf("collect_list", ArrayType(STRUCT_AB))
    rows = [[{"A": "x", "B": 1}], [None], None]
    assert stream(nested, rows)[-1] == [[{"A": "x", "B": 1}], [None], None]


def test_collect_list_limit_comes_from_the_query_config() -> None:
    assert stream(udaf("COLLECT_LIST", INTEGER), list(range(1500)))[-1] == list(range(1500))
    limited = udaf("COLLECT_LIST", INTEGER, config={"ksql.functions.collect_list.limit": 1})
    assert stream(limited, [0, 100]) == [[0], [0]]  # "collect_list with limit of 1"
    text = udaf("COLLECT_LIST", INTEGER, config={"ksql.functions.collect_list.limit": "2"})
    assert stream(text, [0, 1, 2])[-1] == [0, 1]
    negative = udaf("COLLECT_LIST", INTEGER, config={"ksql.functions.collect_list.limit": -1})
    assert stream(negative, [0, 1, 2])[-1] == [0, 1, 2]


def test_collect_list_undo_removes_the_last_equal_value() -> None:
    u = udaf("COLLECT_LIST", INTEGER)
    assert u.undo is not None
    assert u.undo([1, 2, 1, 3], (1,)) == [1, 2, 3]
    assert u.undo([1, 2], (9,)) == [1, 2]  # never added (past the limit): nothing to take out
    assert u.undo([None, 1, None], (None,)) == [None, 1]
    # collect-list.json "collect_list int table"
    changes = [("0", 0), ("0", 100), ("100", 500), ("100", 100)]
    assert table(u, changes, group=lambda key, row: key) == [
        ("0", [0]),
        ("0", [100]),
        ("100", [500]),
        ("100", [100]),
    ]


def test_collect_results_do_not_change_with_later_rows() -> None:
    u = udaf("COLLECT_LIST", INTEGER)
    state = u.add(u.initial(), (1,))
    first = u.result(state)
    u.add(state, (2,))
    assert first == [1]
    h = udaf("HISTOGRAM", STRING)
    state = h.add(h.initial(), ("a",))
    seen = h.result(state)
    h.add(state, ("a",))
    assert seen == {"a": 1}


def test_collect_set_keeps_distinct_values_in_first_seen_order() -> None:
    # collect-set.json
    assert stream(udaf("COLLECT_SET", STRING), ["baz", "baz", "foo", None, None])[-1] == [
        "baz",
        "foo",
        None,
    ]
    maps = udaf("COLLECT_SET", MapType(STRING, BIGINT))
    assert stream(maps, [{"R0": 100, "R2": 2}, {"R2": 2, "R0": 100}])[-1] == [{"R0": 100, "R2": 2}]
    assert stream(udaf("COLLECT_SET", ArrayType(INTEGER)), [[0, 1], [0, 1], [1, 0]])[-1] == [
        [0, 1],
        [1, 0],
    ]
    limited = udaf("COLLECT_SET", INTEGER, config={"ksql.functions.collect_set.limit": 1})
    assert stream(limited, [0, 100]) == [[0], [0]]
    assert udaf("COLLECT_SET", INTEGER).undo is None


def test_histogram() -> None:
    u = udaf("HISTOGRAM", STRING)
    assert u.return_type == MapType(STRING, BIGINT)
    assert stream(u, ["baz", "baz", "foo"]) == [{"baz": 1}, {"baz": 2}, {"baz": 2, "foo": 1}]
    capped = stream(u, [str(i) for i in range(1001)] + ["0", "1000"])[-1]
    assert len(capped) == 1000 and capped["0"] == 2 and "1000" not in capped


def test_histogram_on_a_table() -> None:
    # histogram.json "histogram on a table": GROUP BY region
    changes = [
        ("0", ("alice", "east")),
        ("1", ("bob", "east")),
        ("2", ("carol", "west")),
        ("3", ("dave", "west")),
        ("1", ("bob", "west")),
        ("1", None),
    ]
    by_name = project(udaf("HISTOGRAM", STRING), slice(0, 1))
    assert table(by_name, changes, group=lambda key, row: row[1]) == [
        ("east", {"alice": 1}),
        ("east", {"alice": 1, "bob": 1}),
        ("west", {"carol": 1}),
        ("west", {"carol": 1, "dave": 1}),
        ("east", {"alice": 1}),
        ("west", {"carol": 1, "dave": 1, "bob": 1}),
        ("west", {"carol": 1, "dave": 1}),
    ]


# -- EARLIEST_BY_OFFSET, LATEST_BY_OFFSET ----------------------------------------------------------


@pytest.mark.parametrize(
    ("consts", "rows", "expected"),
    [
        ((), [12, None, 13], [12, 12, 13]),
        ((True,), [12, None, 13], [12, 12, 13]),
        ((False,), [12, None, 13], [12, None, 13]),
        ((2, True), [12, None, 13], [[12], [12], [12, 13]]),
        ((2, False), [12, None, 13], [[12], [12, None], [None, 13]]),
        ((), [None, None], [None, None]),
        ((2,), [None, None], [[], []]),
        ((2,), [12, None], [[12], [12]]),
        ((2,), [1, 2, 3], [[1], [1, 2], [2, 3]]),
    ],
)
def test_latest_by_offset(consts: tuple[Any, ...], rows: list[Any], expected: list[Any]) -> None:
    assert stream(udaf("LATEST_BY_OFFSET", INTEGER, consts=consts), rows) == expected


@pytest.mark.parametrize(
    ("consts", "rows", "expected"),
    [
        ((True,), [None, 12, 13], [None, 12, 12]),
        ((), [12, None, 13], [12, 12, 12]),
        ((False,), [None, 12, 13], [None, None, None]),
        ((False,), [12, None, 13], [12, 12, 12]),
        ((2,), [None, 12, 13], [[], [12], [12, 13]]),
        ((2,), [12, None, 13], [[12], [12], [12, 13]]),
        ((2, False), [None, 12, 13], [[None], [None, 12], [None, 12]]),
        ((2, False), [12, None, 13], [[12], [12, None], [12, None]]),
        ((), [None, None], [None, None]),
        ((2,), [None, None], [[], []]),
    ],
)
def test_earliest_by_offset(consts: tuple[Any, ...], rows: list[Any], expected: list[Any]) -> None:
    assert stream(udaf("EARLIEST_BY_OFFSET", INTEGER, consts=consts), rows) == expected


def test_by_offset_types() -> None:
    t = ArrayType(STRUCT_AB)
    assert udaf("LATEST_BY_OFFSET", t).return_type == t
    assert udaf("EARLIEST_BY_OFFSET", t, consts=(3, False)).return_type == ArrayType(t)
    assert udaf("LATEST_BY_OFFSET", BOOLEAN, consts=(True,)).undo is None
    value = [{"A": "Early0", "B": 1}]
    assert stream(udaf("EARLIEST_BY_OFFSET", t), [value, [{"A": "x", "B": 2}]]) == [value, value]


def test_by_offset_n_must_be_positive() -> None:
    assert error("LATEST_BY_OFFSET", [INTEGER], [0]) == "latestN must be 1 or greater"
    assert error("EARLIEST_BY_OFFSET", [INTEGER], [-2, True]) == "earliestN must be 1 or greater"


# -- STDDEV_SAMP, STDDEV_SAMPLE, CORRELATION -----------------------------------------------------


def test_stddev_sample() -> None:
    # standarddeviation.json "stddev_sample ..." (per key)
    u = udaf("STDDEV_SAMPLE", INTEGER)
    assert u.return_type == DOUBLE
    assert stream(u, [0, 10, 7, 6]) == [
        0.0,
        7.0710678118654755,
        5.131601439446884,
        4.193248541803041,
    ]
    assert stream(u, [50, 10, 3, None]) == [
        0.0,
        28.284271247461902,
        25.357444666211933,
        25.357444666211933,
    ]
    assert stream(udaf("STDDEV_SAMPLE", BIGINT), [2147483648, 100, -2, None]) == [
        0.0,
        1518500179.2773468,
        1239850233.9629574,
        1239850233.9629574,
    ]
    assert stream(udaf("STDDEV_SAMPLE", BIGINT), [500, 100, 0, -6]) == [
        0.0,
        282.842712474619,
        264.5751311064591,
        239.32335169528832,
    ]
    assert stream(udaf("STDDEV_SAMPLE", DOUBLE), [-1.8, 2.3, 100.2, None]) == [
        0.0,
        2.899137802864845,
        57.74256084841869,
        57.74256084841869,
    ]
    assert stream(udaf("STDDEV_SAMPLE", DOUBLE), [9223372036854.775, 300.8, -200000.6, 0.0]) == [
        0.0,
        6521908912453.693,
        5325116385962.54,
        4611686051710.689,
    ]
    assert stream(udaf("STDDEV_SAMPLE", DOUBLE), [10.0, 12.0, 13.0, 14.0, 16.0]) == [
        0.0,
        1.4142135623730951,
        1.5275252316519465,
        1.707825127659933,
        2.23606797749979,
    ]


def test_stddev_samp_returns_the_variance_as_ksqldb_does() -> None:
    # standarddeviation.json "stddev_samp ..."
    assert stream(udaf("STDDEV_SAMP", INTEGER), [0, 10, 7, 6]) == [
        0.0,
        50.0,
        26.333333333333332,
        17.583333333333332,
    ]
    assert stream(udaf("STDDEV_SAMP", INTEGER), [50, 10, 3, None]) == [0.0, 800.0, 643.0, 643.0]
    assert stream(udaf("STDDEV_SAMP", BIGINT), [2147483648, 100, -2, None]) == [
        0.0,
        2.3058427944653343e18,
        1.5372286026580004e18,
        1.5372286026580004e18,
    ]
    assert stream(udaf("STDDEV_SAMP", BIGINT), [500, 100, 0, -6]) == [
        0.0,
        80000.0,
        70000.0,
        57275.666666666664,
    ]
    assert stream(udaf("STDDEV_SAMP", DOUBLE), [-1.8, 2.3, 100.2]) == [
        0.0,
        8.405,
        3334.2033333333347,
    ]
    assert stream(udaf("STDDEV_SAMP", DOUBLE), [9223372036854.775, 300.8, -200000.6, 0.0]) == [
        0.0,
        4.253529586234292e25,
        2.835686452404674e25,
        2.1267648239542927e25,
    ]
    assert stream(udaf("STDDEV_SAMP", DOUBLE), [10.0, 12.0, 13.0, 14.0, 16.0]) == [
        0.0,
        2.0,
        2.333333333333333,
        2.9166666666666665,
        5.0,
    ]


def test_stddev_undo_follows_ksqldbs_formula() -> None:
    u = udaf("STDDEV_SAMP", INTEGER)
    assert u.undo is not None
    state = u.initial()
    for v in (0, 10, 7):
        state = u.add(state, (v,))
    assert u.undo(state, (None,)) == state
    # ksqlDB removes delta**2 / (n * (n + 1)), delta = v * (count + 1) - (sum + v) with the
    # count and sum before the undo: (17, 3, 52.666...) - 7 -> delta = 28 - 24 = 4
    total, count, m2 = u.undo(state, (7,))
    assert (total, count) == (10, 2) and m2 == pytest.approx(52.666666666666664 - 16 / 6)
    one = u.add(u.initial(), (5,))
    assert u.undo(one, (5,)) == (0, 0, 0.0)


def test_correlation() -> None:
    # correlation-udaf.json, per key
    u = udaf("CORRELATION", DOUBLE, DOUBLE)
    assert u.return_type == DOUBLE
    out = stream(u, [(1.5, 8.0), (-1.0, -2.0), (-4.5, -1.0), (None, -6.0)])
    assert math.isnan(out[0]) and out[1:] == [1.0, 0.7580764521133173, 0.7580764521133173]
    out = stream(u, [(-3.5, -2.0), (13.1, None), (3.0, 11.0)])
    assert math.isnan(out[0]) and math.isnan(out[1]) and out[2] == 1.0
    for t in (INTEGER, BIGINT):
        ints = stream(udaf("correlation", t, t), [(1, 8), (-1, -2), (-4, -1), (None, -6)])
        assert math.isnan(ints[0]) and ints[1:] == [1.0, 0.7455284088780169, 0.7455284088780169]


def test_correlation_over_a_table() -> None:
    # correlation-udaf.json "correlation udaf with table"
    changes = [
        ("alice", (1.5, 8.0)),
        ("bob", (-3.5, -2.0)),
        ("alice", (-1.0, -2.0)),
        ("charlie", (-4.5, -1.0)),
    ]
    out = [r for _, r in table(udaf("CORRELATION", DOUBLE, DOUBLE), changes)]
    assert math.isnan(out[0]) and out[1] == 1.0 and math.isnan(out[2])
    assert out[3] == -0.7205766921228921


# -- ATTR ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (["s", "s", "s"], ["s", "s", "s"]),
        ([None, None, None], [None, None, None]),
        (["1", "2", "3"], ["1", None, None]),
        (["1", None, "1"], ["1", None, None]),
        ([None, "2", "2"], [None, None, None]),
    ],
)
def test_attr(rows: list[Any], expected: list[Any]) -> None:
    # attr.json
    assert stream(udaf("ATTR", STRING), rows) == expected


def test_attr_of_structured_values_and_over_a_table() -> None:
    assert udaf("ATTR", ArrayType(INTEGER)).return_type == ArrayType(INTEGER)
    assert stream(udaf("ATTR", ArrayType(INTEGER)), [[1, 2, 3], [1, 2, 3]])[-1] == [1, 2, 3]
    assert stream(udaf("ATTR", STRUCT_AB), [{"A": "a", "B": 1}] * 2)[-1] == {"A": "a", "B": 1}
    # attr.json "table attr with tombstones" (all rows in group 1)
    changes = [
        ("1", None),
        ("1", "1"),
        ("2", "1"),
        ("1", None),
        ("2", None),
        ("1", "2"),
        ("2", "3"),
        ("2", None),
    ]
    assert [r for _, r in table(udaf("ATTR", STRING), changes)] == [
        "1",
        "1",
        "1",
        None,
        "2",
        None,
        "2",
    ]


# -- resolution errors -----------------------------------------------------------------------------


def test_unknown_function() -> None:
    assert error("nope", [INTEGER]) == "Can not find any aggregate functions with the name 'NOPE'"


def test_unsupported_argument_types_give_ksqldbs_message() -> None:
    message = error("SUM", [STRING])
    assert message.splitlines() == [
        "Function 'SUM' does not accept parameters (STRING).",
        "Valid alternatives are:",
        "SUM(DECIMAL val1)",
        "SUM(DOUBLE val1)",
        "SUM(BIGINT val1)",
        "SUM(INT val1)",
        "For detailed information on a function run: DESCRIBE FUNCTION <Function-Name>;",
    ]


@pytest.mark.parametrize(
    ("name", "types", "consts", "first_line"),
    [
        (
            "AVG",
            [DecimalType(4, 1)],
            [],
            "Function 'avg' does not accept parameters (DECIMAL(4, 1)).",
        ),
        ("AVG", [], [], "Function 'avg' does not accept parameters ()."),
        ("HISTOGRAM", [INTEGER], [], "Function 'histogram' does not accept parameters (INTEGER)."),
        ("MIN", [BOOLEAN], [], "Function 'MIN' does not accept parameters (BOOLEAN)."),
        (
            "MAX",
            [ArrayType(INTEGER)],
            [],
            "Function 'MAX' does not accept parameters (ARRAY<INTEGER>).",
        ),
        (
            "COUNT",
            [INTEGER, STRING],
            [],
            "Function 'COUNT' does not accept parameters (INTEGER, STRING).",
        ),
        (
            "STDDEV_SAMP",
            [DecimalType(2, 1)],
            [],
            "Function 'STDDEV_SAMP' does not accept parameters (DECIMAL(2, 1)).",
        ),
        (
            "CORRELATION",
            [INTEGER, BIGINT],
            [],
            "Function 'correlation' does not accept parameters (INTEGER, BIGINT).",
        ),
        (
            "CORRELATION",
            [DOUBLE],
            [],
            "Function 'correlation' does not accept parameters (DOUBLE).",
        ),
        (
            "SUM_LIST",
            [ArrayType(STRING)],
            [],
            "Function 'sum_list' does not accept parameters (ARRAY<STRING>).",
        ),
        (
            "COLLECT_LIST",
            [MapType(STRING, STRUCT_AB)],
            [1],
            "Function 'collect_list' does not accept parameters (MAP<STRING, STRUCT<A STRING, B BIGINT>>, INTEGER).",
        ),
        ("TOPK", [BOOLEAN], [3], "Function 'TOPK' does not accept parameters (BOOLEAN, INTEGER)."),
        ("TOPK", [INTEGER], ["3"], "Function 'TOPK' does not accept parameters (INTEGER, STRING)."),
        (
            "TOPK",
            [INTEGER],
            [Decimal("3.5")],
            "Function 'TOPK' does not accept parameters (INTEGER, DECIMAL(2, 1)).",
        ),
        ("TOPK", [INTEGER], [], "Function 'TOPK' does not accept parameters (INTEGER)."),
        (
            "TOPKDISTINCT",
            [BOOLEAN],
            [3],
            "Function 'TOPKDISTINCT' does not accept parameters (BOOLEAN, INTEGER).",
        ),
        (
            "TOPKDISTINCT",
            [INTEGER, STRING],
            [3],
            "Function 'TOPKDISTINCT' does not accept parameters (INTEGER, STRING, INTEGER).",
        ),
        (
            "LATEST_BY_OFFSET",
            [INTEGER],
            [3_000_000_000],
            "Function 'LATEST_BY_OFFSET' does not accept parameters (INTEGER, BIGINT).",
        ),
        (
            "LATEST_BY_OFFSET",
            [INTEGER],
            [1, 2],
            "Function 'LATEST_BY_OFFSET' does not accept parameters (INTEGER, INTEGER, INTEGER).",
        ),
        (
            "EARLIEST_BY_OFFSET",
            [INTEGER],
            [True, 2],
            "Function 'EARLIEST_BY_OFFSET' does not accept parameters (INTEGER, BOOLEAN, INTEGER).",
        ),
        (
            "EARLIEST_BY_OFFSET",
            [INTEGER],
            ["x"],
            "Function 'EARLIEST_BY_OFFSET' does not accept parameters (INTEGER, STRING).",
        ),
        ("ATTR", [NULL], [], "Function 'ATTR' does not accept parameters (null)."),
    ],
)
def test_no_matching_signature(
    name: str, types: list[SqlType], consts: list[Any], first_line: str
) -> None:
    assert error(name, types, consts).splitlines()[0] == first_line


def test_function_names_resolve_in_any_case() -> None:
    assert udaf("latest_by_offset", INTEGER, consts=(2, False)).name == "LATEST_BY_OFFSET"
    assert udaf("Stddev_Sample", DOUBLE).name == "STDDEV_SAMPLE"


# -- intermediate types ----------------------------------------------------------------------------


def test_intermediate_types() -> None:
    def struct(*fields: tuple[str, SqlType]) -> StructType:
        return StructType(tuple(StructField(n, t) for n, t in fields))

    assert intermediate_type("COUNT", [], []) == BIGINT
    assert intermediate_type("SUM", [DecimalType(4, 1)], []) == DecimalType(4, 1)
    assert intermediate_type("AVG", [INTEGER], []) == struct(("SUM", INTEGER), ("COUNT", BIGINT))
    assert intermediate_type("TOPK", [INTEGER], [3]) == ArrayType(INTEGER)
    assert intermediate_type("LATEST_BY_OFFSET", [STRING], []) == struct(
        ("SEQ", BIGINT), ("VAL", STRING)
    )
    assert intermediate_type("LATEST_BY_OFFSET", [STRING], [2]) == ArrayType(
        struct(("SEQ", BIGINT), ("VAL", STRING))
    )
    assert intermediate_type("STDDEV_SAMPLE", [DOUBLE], []) == struct(
        ("SUM", DOUBLE), ("COUNT", BIGINT), ("M2", DOUBLE)
    )
    assert intermediate_type("HISTOGRAM", [STRING], []) == MapType(STRING, BIGINT)
    assert intermediate_type("COUNT_DISTINCT", [STRING], []) == ArrayType(INTEGER)
    assert intermediate_type("ATTR", [BIGINT], []) == ArrayType(
        struct(("VALUE", BIGINT), ("COUNT", INTEGER))
    )


# -- pickling --------------------------------------------------------------------------------------

PICKLE_CASES: list[tuple[str, tuple[SqlType, ...], tuple[Any, ...], list[Any]]] = [
    ("COUNT", (), (), [(), ()]),
    ("COUNT_DISTINCT", (ArrayType(INTEGER),), (), [[1], [1], [2]]),
    ("SUM", (DecimalType(6, 2),), (), [Decimal("1.25"), Decimal("2.50")]),
    ("SUM", (INTEGER,), (), [1, 2]),
    ("SUM_LIST", (ArrayType(DOUBLE),), (), [[1.0, None]]),
    ("AVG", (BIGINT,), (), [1, 2]),
    ("MIN", (BYTES,), (), [b"a", b"b"]),
    ("MAX", (DOUBLE,), (), [1.0, 2.0]),
    ("TOPK", (INTEGER, STRING), (2,), [(1, "a"), (3, "b")]),
    ("TOPKDISTINCT", (STRING,), (2,), ["a", "b"]),
    ("COLLECT_LIST", (STRUCT_AB,), (), [{"A": "x", "B": 1}]),
    ("COLLECT_SET", (STRING,), (), ["a", "a"]),
    ("HISTOGRAM", (STRING,), (), ["a", "a", "b"]),
    ("EARLIEST_BY_OFFSET", (INTEGER,), (), [1, 2]),
    ("EARLIEST_BY_OFFSET", (INTEGER,), (2, False), [None, 2]),
    ("LATEST_BY_OFFSET", (INTEGER,), (False,), [1, None]),
    ("LATEST_BY_OFFSET", (INTEGER,), (2,), [1, 2, 3]),
    ("STDDEV_SAMP", (INTEGER,), (), [1, 5]),
    ("STDDEV_SAMPLE", (DOUBLE,), (), [1.0, 5.0]),
    ("CORRELATION", (BIGINT, BIGINT), (), [(1, 2), (2, 5)]),
    ("ATTR", (STRING,), (), ["a", None]),
]


@pytest.mark.parametrize(("name", "types", "consts", "rows"), PICKLE_CASES)
def test_states_and_functions_survive_pickle(
    name: str, types: tuple[SqlType, ...], consts: tuple[Any, ...], rows: list[Any]
) -> None:
    u = resolve_udaf(name, types, consts)
    copy = pickle.loads(pickle.dumps(u))
    assert (copy.name, copy.return_type, copy.table) == (u.name, u.return_type, u.table)
    state = u.initial()
    for row in rows:
        state = pickle.loads(pickle.dumps(u.add(state, row if isinstance(row, tuple) else (row,))))
    expected = stream(u, rows)[-1]
    result = copy.result(state)
    assert result == expected or (math.isnan(result) and math.isnan(expected))
    more = rows[-1] if isinstance(rows[-1], tuple) else (rows[-1],)
    snapshot = pickle.dumps(state)
    assert copy.result(copy.add(state, more)) == u.result(u.add(pickle.loads(snapshot), more))


def test_initial_states_are_fresh() -> None:
    for name, types, consts, _ in PICKLE_CASES:
        u = resolve_udaf(name, types, consts)
        first, second = u.initial(), u.initial()
        assert first == second
        if isinstance(first, (list, dict, set)):
            assert first is not second


# -- session merges --------------------------------------------------------------------------------


def fold(u: Udaf, rows: Sequence[Any], first: int = 0) -> Any:
    """A session's state: the rows added in turn, the i-th with order (first + i,)."""
    state = u.initial()
    for i, row in enumerate(rows):
        state = u.add(state, row if isinstance(row, tuple) else (row,), (first + i,))
    return state


def bridge(u: Udaf, sessions: Sequence[Any], row: Any, order: tuple[int, ...]) -> Any:
    """What Kafka Streams does with a record that falls into existing sessions: folds them, oldest
    first, into an initial state with the merger, then adds the record."""
    state = u.initial()
    for session in sessions:
        state = u.merge(state, session)
    return u.add(state, row if isinstance(row, tuple) else (row,), order)


def same(x: Any, y: Any) -> bool:
    return x == y or (
        isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)
    )


SPLIT_CASES: list[tuple[str, tuple[SqlType, ...], tuple[Any, ...], list[Any]]] = [
    ("COUNT", (), (), [(), (), ()]),
    ("COUNT", (STRING,), (), ["a", None, "b", "c"]),
    ("COUNT_DISTINCT", (STRING,), (), ["a", "b", None, "a", "c", "b"]),
    ("SUM", (INTEGER,), (), [3, None, -7, 12]),
    ("SUM", (BIGINT,), (), [LONG_MAX, 5, 1]),
    ("SUM", (DOUBLE,), (), [1.5, 2.25, None, -8.0]),
    ("SUM", (DecimalType(6, 2),), (), [Decimal("1.25"), Decimal("-2.50"), Decimal("10.00")]),
    ("SUM_LIST", (ArrayType(INTEGER),), (), [[1, 2], None, [3, None], [INT_MAX]]),
    ("AVG", (INTEGER,), (), [1, 2, None, 2, 9]),
    ("AVG", (DOUBLE,), (), [0.5, 1.5, 4.0]),
    ("MIN", (STRING,), (), ["b", None, "a", "c"]),
    ("MAX", (DOUBLE,), (), [1.0, -0.0, 3.5, None, 2.0]),
    ("MAX", (BYTES,), (), [b"\x01", b"\x80", b"\x7f"]),
    ("TOPK", (INTEGER,), (3,), [5, 1, 9, None, 7, 2]),
    ("TOPK", (INTEGER, STRING), (2,), [(5, "a"), (9, "b"), (1, "c"), (7, "d")]),
    ("TOPK", (INTEGER,), (-1,), [4, 8, 6]),
    ("TOPKDISTINCT", (INTEGER,), (3,), [5, 9, 5, 1, 9, 7, 2]),
    ("COLLECT_LIST", (INTEGER,), (), [1, None, 2, 1]),
    ("COLLECT_SET", (STRING,), (), ["a", "b", "a", None, "c", None]),
    ("HISTOGRAM", (STRING,), (), ["a", "b", "a", "c", "a"]),
    ("EARLIEST_BY_OFFSET", (INTEGER,), (), [None, 4, 5, None]),
    ("EARLIEST_BY_OFFSET", (INTEGER,), (False,), [None, 4, 5]),
    ("EARLIEST_BY_OFFSET", (INTEGER,), (2,), [None, 4, 5, 6]),
    ("EARLIEST_BY_OFFSET", (INTEGER,), (3, False), [None, 4, 5, 6]),
    ("LATEST_BY_OFFSET", (INTEGER,), (), [4, None, 5, None]),
    ("LATEST_BY_OFFSET", (INTEGER,), (False,), [4, 5, None]),
    ("LATEST_BY_OFFSET", (INTEGER,), (5,), [4, None, 5, 6]),
    ("CORRELATION", (INTEGER, INTEGER), (), [(1, 8), (-1, -2), (None, 3), (-4, -1), (2, 2)]),
    ("ATTR", (STRING,), (), ["a", "a", None]),
    ("ATTR", (STRING,), (), ["a", "a", "a"]),
]


@pytest.mark.parametrize(("name", "types", "consts", "rows"), SPLIT_CASES)
def test_merging_the_states_of_split_rows_gives_the_whole(
    name: str, types: tuple[SqlType, ...], consts: tuple[Any, ...], rows: list[Any]
) -> None:
    # where ksqlDB's merge is exact (LATEST_BY_OFFSET(col, n) only up to n values, see below)
    u = resolve_udaf(name, types, consts)
    whole = u.result(fold(u, rows))
    for cut in range(len(rows) + 1):
        a, b = fold(u, rows[:cut]), fold(u, rows[cut:], first=cut)
        assert same(u.result(u.merge(a, b)), whole), cut
        assert same(u.result(u.merge(u.initial(), a)), u.result(a))
        assert same(u.result(u.merge(a, u.initial())), u.result(a))


@pytest.mark.parametrize("name", ["STDDEV_SAMP", "STDDEV_SAMPLE"])
def test_stddev_merge_of_doubles_matches_adding_in_turn(name: str) -> None:
    u = udaf(name, DOUBLE)
    rows = [10.0, 12.0, None, 13.0, 14.0, 16.0]
    whole = u.result(fold(u, rows))
    for cut in range(len(rows) + 1):
        merged = u.merge(fold(u, rows[:cut]), fold(u, rows[cut:]))
        assert u.result(merged) == pytest.approx(whole, rel=1e-12)
        assert merged[:2] == (65.0, 5)


def test_stddev_samp_merges_integer_means_in_integer_division() -> None:
    # ksqlDB's STDDEV_SAMP merger divides INT/BIGINT sums by counts as Java longs (truncating
    # toward zero), STDDEV_SAMPLE's as doubles; with one side empty, m2s just add
    samp, sample = udaf("STDDEV_SAMP", INTEGER), udaf("STDDEV_SAMPLE", BIGINT)
    a, b = fold(samp, [1, 2]), fold(samp, [4])
    assert samp.merge(a, b) == (7, 3, 0.5 + 2 * 1 * 9 / 3)  # means 3 / 2 = 1 and 4
    assert samp.result(samp.merge(a, b)) == 3.25  # adding in turn: 2.333...
    assert sample.merge(a, b) == (7, 3, 0.5 + 2 * 1 * 6.25 / 3)  # means 1.5 and 4.0
    assert sample.result(sample.merge(a, b)) == pytest.approx(math.sqrt(7 / 3))
    negative = samp.merge(fold(samp, [-1, -2]), fold(samp, [0]))
    assert negative == (-3, 3, 0.5 + 2 * 1 * 1 / 3)  # -3 / 2 = -1 in Java, not -2
    assert samp.merge(samp.initial(), a) == a and samp.merge(a, samp.initial()) == a
    wrapped = samp.merge(fold(samp, [INT_MAX]), fold(samp, [1]))
    assert wrapped[:2] == (-(2**31), 2)


def test_sums_merge_in_the_arguments_java_type() -> None:
    assert udaf("SUM", INTEGER).merge(INT_MAX, 1) == -(2**31)
    assert udaf("SUM", BIGINT).merge(LONG_MAX, 2) == -LONG_MAX
    assert udaf("SUM_LIST", ArrayType(INTEGER)).merge(INT_MAX, INT_MAX) == -2
    assert udaf("AVG", INTEGER).merge((INT_MAX, 1), (1, 1)) == (-(2**31), 2)
    assert udaf("COUNT").merge(3, 4) == 7
    assert udaf("CORRELATION", DOUBLE, DOUBLE).merge(
        (1.0, 2.0, 3.0, 4.0, 5.0, 1), (0.5, 0.5, 0.5, 0.5, 0.5, 2)
    ) == (1.5, 2.5, 3.5, 4.5, 5.5, 3)


def test_decimal_sum_merge_rounds_to_the_precision_and_never_fails() -> None:
    # DecimalSumKudaf.merge adds in the type's MathContext without the overflow check of add
    u = udaf("SUM", DecimalType(4, 1))
    assert u.merge(Decimal("999.9"), Decimal("1.0")) == 1001  # 1000.9 in 4 digits, HALF_UP
    assert u.merge(Decimal("5.4"), Decimal("100.1")) == Decimal("105.5")
    assert str(u.merge(u.initial(), Decimal("5.4"))) == "5.4"


def test_min_max_merge_as_ksqldb_aggregates_one_state_into_the_other() -> None:
    # merge(a, b) is aggregate(a, b): equal values (Java's compareTo) keep b
    high = udaf("MAX", DecimalType(3, 2))
    one, one_again = Decimal("1.0"), Decimal("1.00")
    assert str(high.merge(one, one_again)) == "1.00" and str(high.merge(one_again, one)) == "1.0"
    assert high.merge(None, one) == one and high.merge(one, None) == one
    assert high.merge(None, None) is None
    low = udaf("MIN", DOUBLE)
    assert math.copysign(1.0, low.merge(0.0, -0.0)) == -1.0
    assert low.merge(float("nan"), 1.0) == 1.0
    assert math.isnan(udaf("MAX", DOUBLE).merge(1.0, float("nan")))
    assert udaf("MIN", STRING).merge("\uff5e", "\U0001f600") == "\U0001f600"  # UTF-16 order


def test_topk_merge_keeps_the_top_k_earlier_state_first_among_equals() -> None:
    u = udaf("TOPK", INTEGER, consts=(3,))
    assert u.merge([5, 3], [5, 4, 1]) == [5, 5, 4]
    assert u.merge([], [2, 1]) == [2, 1] and u.merge([2, 1], []) == [2, 1]
    structs = udaf("TOPK", INTEGER, STRING, consts=(2,))
    a = [{"sort_col": 7, "col0": "a"}]
    b = [{"sort_col": 7, "col0": "b"}, {"sort_col": 6, "col0": "c"}]
    assert structs.merge(a, b) == [{"sort_col": 7, "col0": "a"}, {"sort_col": 7, "col0": "b"}]
    assert structs.merge(b, a) == [b[0], a[0]]
    assert udaf("TOPK", INTEGER, consts=(0,)).merge([], []) == []
    assert udaf("TOPK", INTEGER, consts=(-1,)).merge([9, 3], [5, 4, 1]) == [9, 5, 4, 3, 1]
    strings = udaf("TOPK", STRING, consts=(2,))
    assert strings.merge(["\U0001f600"], ["\uff5e"]) == ["\uff5e", "\U0001f600"]


def test_topk_distinct_merge_takes_a_value_in_both_states_once() -> None:
    u = udaf("TOPKDISTINCT", INTEGER, consts=(4,))
    assert u.merge([5, 3, 1], [4, 3, 2]) == [5, 4, 3, 2]
    assert u.merge([3, 2], [3, 2]) == [3, 2]
    assert u.merge([], [3]) == [3] and u.merge([3], []) == [3]
    assert udaf("TOPKDISTINCT", INTEGER, consts=(1,)).merge([3], [9]) == [9]


def test_collect_merges_append_the_later_state_up_to_the_limit() -> None:
    limited = udaf("COLLECT_LIST", INTEGER, config={"ksql.functions.collect_list.limit": 3})
    assert limited.merge([1, 2], [3, 4, 5]) == [1, 2, 3]
    assert limited.merge([1, 2, 3], [4]) == [1, 2, 3]
    assert udaf("COLLECT_LIST", INTEGER).merge([1, None], [None, 1]) == [1, None, None, 1]
    sets = udaf("COLLECT_SET", INTEGER, config={"ksql.functions.collect_set.limit": 3})
    assert sets.merge([1, 2], [2, 1, 3, 4]) == [1, 2, 3]
    assert sets.merge([1, 2, 3], [4]) == [1, 2, 3]
    assert udaf("COLLECT_SET", STRING).merge(["b", None], [None, "a", "b"]) == ["b", None, "a"]


def test_histogram_merge_sums_counts_and_adds_new_values_only_below_the_limit() -> None:
    u = udaf("HISTOGRAM", STRING)
    assert u.merge({"a": 1, "b": 2}, {"b": 3, "c": 1}) == {"a": 1, "b": 5, "c": 1}
    full = {str(i): 1 for i in range(HISTOGRAM_LIMIT)}
    merged = u.merge(full, {"new": 4, "7": 2})
    assert len(merged) == HISTOGRAM_LIMIT and "new" not in merged and merged["7"] == 3
    almost = {str(i): 1 for i in range(HISTOGRAM_LIMIT - 1)}
    merged = u.merge(almost, {"x": 1, "y": 1})  # in the later state's order
    assert "x" in merged and "y" not in merged


def test_count_distinct_merge_is_a_union() -> None:
    u = udaf("COUNT_DISTINCT", ArrayType(INTEGER))
    merged = u.merge(fold(u, [[1], [2]]), fold(u, [[2], [3], None]))
    assert u.result(merged) == 3


def test_attr_merge_adds_the_later_states_counts() -> None:
    u = udaf("ATTR", STRING)
    a = [["x", 1]]
    assert u.merge(a, [["x", 2], ["y", 0]]) == [["x", 3]]  # a zero count adds no entry
    assert u.merge([["x", 0]], [["y", 1]]) == [["x", 0], ["y", 1]]
    assert u.result(u.merge([["x", 0]], [["y", 1]])) == "y"
    assert u.result(u.merge([["x", 1]], [["y", 1]])) is None
    assert a == [["x", 1]]


# EARLIEST/LATEST_BY_OFFSET: add stores the order the caller gives, and merge compares them


def test_latest_by_offset_merge_takes_the_value_added_last() -> None:
    u = udaf("LATEST_BY_OFFSET", INTEGER)
    early, late = fold(u, [1], first=0), fold(u, [2], first=5)
    assert u.result(u.merge(early, late)) == 2
    assert u.result(u.merge(late, early)) == 2  # a later session whose record came first
    assert u.merge(u.initial(), early) == early and u.merge(early, u.initial()) == early
    assert u.merge(u.initial(), u.initial()) == u.initial()
    tie_a, tie_b = u.add(u.initial(), (1,), (3,)), u.add(u.initial(), (2,), (3,))
    assert u.result(u.merge(tie_a, tie_b)) == 1  # ksqlDB: compare(a, b) >= 0 keeps a
    # without orders: the earlier session's value counts as the earlier one
    assert u.result(u.merge(u.add(u.initial(), (1,)), u.add(u.initial(), (2,)))) == 2
    assert u.result(u.merge(u.add(u.initial(), (1,)), late)) == 2
    # with nulls kept, a null taken last wins; a state that took nothing never does
    keep = udaf("LATEST_BY_OFFSET", INTEGER, consts=(False,))
    assert keep.result(keep.merge(fold(keep, [1]), fold(keep, [None], first=1))) is None
    assert keep.result(keep.merge(fold(keep, [1]), keep.initial())) == 1


def test_earliest_by_offset_merge_takes_the_value_added_first() -> None:
    u = udaf("EARLIEST_BY_OFFSET", INTEGER)
    early, late = fold(u, [1], first=0), fold(u, [2], first=5)
    assert u.result(u.merge(early, late)) == 1
    assert u.result(u.merge(late, early)) == 1
    assert u.merge(u.initial(), late) == late and u.merge(late, u.initial()) == late
    tie_a, tie_b = u.add(u.initial(), (1,), (3,)), u.add(u.initial(), (2,), (3,))
    assert u.result(u.merge(tie_a, tie_b)) == 2  # ksqlDB: compare(a, b) < 0 or else b
    assert u.result(u.merge(u.add(u.initial(), (1,)), u.add(u.initial(), (2,)))) == 1
    keep = udaf("EARLIEST_BY_OFFSET", INTEGER, consts=(False,))
    assert keep.result(keep.merge(fold(keep, [5], first=1), fold(keep, [None]))) is None


def test_by_offset_n_merges_keep_the_first_n_added() -> None:
    earliest = udaf("EARLIEST_BY_OFFSET", INTEGER, consts=(2,))
    a = earliest.add(earliest.add([], (1,), (0,)), (4,), (3,))
    b = earliest.add(earliest.add([], (2,), (1,)), (3,), (2,))
    assert earliest.result(earliest.merge(a, b)) == [1, 2]
    assert earliest.result(earliest.merge(b, a)) == [1, 2]
    x, y = earliest.add([], (5,), (1,)), earliest.add([], (6,), (1,))
    assert earliest.result(earliest.merge(x, y)) == [5, 6]  # a stable sort, as ksqlDB's
    assert earliest.result(earliest.merge(y, x)) == [6, 5]
    later = fold(earliest, [7], first=9)
    assert earliest.result(earliest.merge(later, fold(earliest, [8]))) == [8, 7]
    assert earliest.result(earliest.merge(earliest.add([], (1,)), earliest.add([], (2,)))) == [1, 2]
    # ksqlDB's LATEST_BY_OFFSET(col, n) merger sorts the same way and keeps the *oldest* n
    latest = udaf("LATEST_BY_OFFSET", INTEGER, consts=(2,))
    a, b = fold(latest, [1, 2], first=0), fold(latest, [3, 4], first=2)
    assert latest.result(latest.merge(a, b)) == [1, 2]
    assert latest.result(latest.merge(b, a)) == [1, 2]
    assert latest.result(bridge(latest, [a, b], 5, (4,))) == [2, 5]


@pytest.mark.parametrize(
    ("consts", "rows", "expected"),
    [
        # (constants, values at t=0, 1500 and then 700 (bridging both), results after each)
        ((), [1, 3, 2], [1, 3, 2]),
        ((), [1, None, 2], [1, None, 2]),
        ((False,), [1, None, 2], [1, None, 2]),
        ((False,), [None, None, None], [None, None, None]),
        ((2, True), [1, None, 2], [[1], [], [1, 2]]),
        ((2, False), [1, None, 2], [[1], [None], [None, 2]]),
        ((2, False), [None, None, None], [[None], [None], [None, None]]),
    ],
)
def test_latest_by_offset_in_merging_session_windows(
    consts: tuple[Any, ...], rows: list[Any], expected: list[Any]
) -> None:
    # latest-offset-udaf.json "merging session windows ..."
    u = udaf("LATEST_BY_OFFSET", INTEGER, consts=consts)
    first, second = fold(u, rows[:1]), fold(u, rows[1:2], first=1)
    merged = bridge(u, [first, second], rows[2], (2,))
    assert [u.result(first), u.result(second), u.result(merged)] == expected


@pytest.mark.parametrize(
    ("consts", "rows", "expected"),
    [
        ((), [1, 3, 2], [1, 3, 1]),
        ((True,), [None, 1, None], [None, 1, 1]),
        ((False,), [None, 1, None], [None, 1, None]),
        ((False,), [None, None, None], [None, None, None]),
        ((2, True), [None, 1, None], [[], [1], [1]]),
        ((2, False), [None, 1, None], [[None], [1], [None, 1]]),
        ((2, False), [None, None, None], [[None], [None], [None, None]]),
    ],
)
def test_earliest_by_offset_in_merging_session_windows(
    consts: tuple[Any, ...], rows: list[Any], expected: list[Any]
) -> None:
    # earliest-offset-udaf.json "merging session windows ..."
    u = udaf("EARLIEST_BY_OFFSET", INTEGER, consts=consts)
    first, second = fold(u, rows[:1]), fold(u, rows[1:2], first=1)
    merged = bridge(u, [first, second], rows[2], (2,))
    assert [u.result(first), u.result(second), u.result(merged)] == expected


def test_latest_by_offset_merging_a_single_session() -> None:
    # "... with nulls (not) ignored when merging": a record joins one session
    ignoring = udaf("LATEST_BY_OFFSET", INTEGER)
    assert ignoring.result(bridge(ignoring, [fold(ignoring, [1])], None, (1,))) == 1
    keeping = udaf("LATEST_BY_OFFSET", INTEGER, consts=(False,))
    assert keeping.result(bridge(keeping, [fold(keeping, [1])], None, (1,))) is None


def test_count_in_merging_session_windows() -> None:
    # session-windows.json "session start stream": each record joins the one session so far
    u = udaf("COUNT", INTEGER)
    state = fold(u, [5])
    for i in range(2):
        state = bridge(u, [state], 5, (i + 1,))
    assert u.result(state) == 3


@pytest.mark.parametrize(("name", "types", "consts", "rows"), PICKLE_CASES)
def test_merge_leaves_its_inputs_alone(
    name: str, types: tuple[SqlType, ...], consts: tuple[Any, ...], rows: list[Any]
) -> None:
    u = resolve_udaf(name, types, consts)
    a, b = fold(u, rows), fold(u, rows[::-1], first=len(rows))
    a_before, b_before = pickle.loads(pickle.dumps(a)), pickle.loads(pickle.dumps(b))
    merged = u.merge(a, b)
    more = rows[0] if isinstance(rows[0], tuple) else (rows[0],)
    for _ in range(3):  # add may mutate the merged state: it must share nothing mutable
        merged = u.add(merged, more)
    assert a == a_before and b == b_before


@pytest.mark.parametrize(("name", "types", "consts", "rows"), PICKLE_CASES)
def test_merged_states_and_merge_survive_pickle(
    name: str, types: tuple[SqlType, ...], consts: tuple[Any, ...], rows: list[Any]
) -> None:
    u = resolve_udaf(name, types, consts)
    copy = pickle.loads(pickle.dumps(u))
    a, b = fold(u, rows), fold(u, rows, first=len(rows))
    merged = pickle.loads(pickle.dumps(u.merge(a, b)))
    again = copy.merge(pickle.loads(pickle.dumps(a)), pickle.loads(pickle.dumps(b)))
    assert same(copy.result(merged), u.result(again))
    more = rows[-1] if isinstance(rows[-1], tuple) else (rows[-1],)
    assert same(copy.result(copy.add(merged, more, (99,))), u.result(u.add(again, more, (99,))))


@pytest.mark.parametrize(("name", "types", "consts", "rows"), PICKLE_CASES)
def test_add_takes_an_order_that_only_by_offset_functions_keep(
    name: str, types: tuple[SqlType, ...], consts: tuple[Any, ...], rows: list[Any]
) -> None:
    u = resolve_udaf(name, types, consts)
    with_orders, without = u.initial(), u.initial()
    for i, row in enumerate(rows):
        args = row if isinstance(row, tuple) else (row,)
        with_orders, without = u.add(with_orders, args, (7, i)), u.add(without, args)
    assert same(u.result(with_orders), u.result(without))
    if not name.endswith("_BY_OFFSET"):
        assert with_orders == without
