"""The vectorized path against the per-record one: random queries over random records, row for row.

`ColumnarPipeline` (Arrow batches) must give exactly the records `RecordPipeline` gives (keys,
values, timestamps, partitions, processing errors with their messages) for any stateless query and
any records, hostile ones included. The generator writes typed expressions over every operator the
kernels run (and some they leave to the per-record closures, nested inside kernels), and records
with fields of the wrong type, in other letter cases, missing, NULL, huge, non-ASCII, not JSON at
all. The mutation tests prove the check can fail: a kernel whose semantics differ is caught.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sqlglot import exp

from headwater.engine.columnar import json_columns, kernels
from headwater.engine.persistent import QUERY_ANALYZER, InputRecord, RecordPipeline
from headwater.engine.persistent.analyzer import describe_query
from headwater.engine.persistent.columnar_run import ColumnarPipeline, output_batch, refusal
from headwater.engine.persistent.join_run import JoinPipeline, JoinTask, KeyState, TaskState
from headwater.metastore.catalog import Catalog
from headwater.metastore.plan import TopicFacts, plan
from headwater.metastore.records import CommandRecord, encode
from headwater.metastore.replay import Fold
from headwater.sqlparse_ext import parse_one

SOURCES = {
    "JSON": (
        "CREATE STREAM src (k STRING KEY, a INT, b BIGINT, c DOUBLE, s STRING, t STRING, "
        "f BOOLEAN, d DECIMAL(6, 2)) WITH (kafka_topic='src', partitions=2, value_format='JSON');"
    ),
    "DELIMITED": (
        "CREATE STREAM src (k INT KEY, a INT, b BIGINT, c DOUBLE, s STRING, t STRING, "
        "f BOOLEAN, d DECIMAL(6, 2)) WITH (kafka_topic='src', partitions=2, key_format='JSON', "
        "value_format='DELIMITED');"
    ),
    # event time from a column: ROWTIME and the output's timestamps are the column's
    "JSON, TIMESTAMP BIGINT": (
        "CREATE STREAM src (k STRING KEY, a INT, b BIGINT, c DOUBLE, s STRING, t STRING, "
        "f BOOLEAN, d DECIMAL(6, 2)) WITH (kafka_topic='src', partitions=2, value_format='JSON', "
        "timestamp='b');"
    ),
    "JSON, TIMESTAMP STRING": (
        "CREATE STREAM src (k STRING KEY, a INT, b BIGINT, c DOUBLE, s STRING, t STRING, "
        "f BOOLEAN, d DECIMAL(6, 2)) WITH (kafka_topic='src', partitions=2, value_format='JSON', "
        "timestamp='t', timestamp_format='yyyy-MM-dd HH:mm:ss.SSS');"
    ),
}


def _catalog(*statements: str) -> Catalog | None:
    fold = Fold()
    for offset, text in enumerate(statements):
        try:
            planned = plan(parse_one(text), fold.catalog, TopicFacts({"src": 2}), QUERY_ANALYZER)
        except Exception:  # noqa: BLE001 - a generated query the planner refuses
            return None
        if planned.command is None:
            return None
        outcome = fold.feed(
            offset, encode(CommandRecord(f"c{offset}", offset, text, planned.command))
        )
        if outcome is None or outcome.state.value != "SUCCESS":
            return None
    return fold.catalog


def rows(batch: pa.RecordBatch) -> list[tuple[Any, ...]]:
    """A batch's rows, in a canonical order."""
    return sorted(
        (tuple(r.values()) for r in batch.to_pylist()),
        key=lambda r: (r[4], r[5], r[6] or "", r[0] or b"", r[1] or b""),
    )


def differ(pipeline: RecordPipeline, records: list[InputRecord]) -> str | None:
    """What the two paths disagree on (None: nothing), in chunks as a source task feeds them."""
    columnar = ColumnarPipeline(pipeline)
    for start in range(0, len(records), 7):
        chunk = records[start : start + 7]
        expected = rows(output_batch(*pipeline.process(chunk)))
        got = rows(columnar.process(chunk))
        if got != expected:
            return f"per record {expected}\nvectorized {got}"
    return None


# -- expressions ----------------------------------------------------------------------------------

_INT_LITERALS = st.sampled_from(["0", "1", "-7", "2147483647", "100"])
_BIG_LITERALS = st.sampled_from(["10000000000", "9223372036854775807", "-3"])
_DOUBLE_LITERALS = st.sampled_from(["1.5E0", "0.0E0", "-2.25E0", "1E300", "3E-5"])
_STRING_LITERALS = st.sampled_from(["'x'", "'ß'", "''", "'a\"b'", "'ABC'", "'k1'"])


def _expressions() -> dict[str, st.SearchStrategy[str]]:
    ints = st.deferred(
        lambda: st.one_of(
            st.just("a"),
            st.just("a"),
            _INT_LITERALS,
            st.builds("({} {} {})".format, ints, st.sampled_from("+-*/%"), ints),
            st.builds("(-{})".format, ints),
            st.builds("LEN({})".format, strings),
            st.builds("ABS({})".format, ints),
        )
    )
    bigs = st.deferred(
        lambda: st.one_of(
            st.just("b"),
            st.just("ROWTIME"),
            _BIG_LITERALS,
            st.builds("({} {} {})".format, st.one_of(bigs, ints), st.sampled_from("+-*"), bigs),
            st.builds("CAST({} AS BIGINT)".format, ints),
        )
    )
    doubles = st.deferred(
        lambda: st.one_of(
            st.just("c"),
            _DOUBLE_LITERALS,
            st.builds(
                "({} {} {})".format,
                st.one_of(doubles, ints, bigs),
                st.sampled_from("+-*/"),
                doubles,
            ),
            st.builds("(-{})".format, doubles),
        )
    )
    strings = st.deferred(
        lambda: st.one_of(
            st.sampled_from(["s", "t", "k"]),
            _STRING_LITERALS,
            st.builds("UCASE({})".format, strings),
            st.builds("LCASE({})".format, strings),
            st.builds("({} + {})".format, strings, strings),
            st.builds("CONCAT({}, {})".format, strings, strings),
            st.builds("SUBSTRING({}, 2)".format, strings),
            st.builds("CAST({} AS STRING)".format, st.one_of(ints, doubles)),
        )
    )
    comparisons = st.one_of(
        *(
            st.builds(
                "({} {} {})".format, left, st.sampled_from(["=", "<>", "<", "<=", ">", ">="]), right
            )
            for left, right in (
                (ints, ints),
                (ints, bigs),
                (ints, doubles),
                (bigs, doubles),
                (doubles, doubles),
                (strings, strings),
                (st.just("f"), st.just("f")),
            )
        )
    )
    booleans = st.deferred(
        lambda: st.one_of(
            st.just("f"),
            comparisons,
            st.builds("({} AND {})".format, booleans, booleans),
            st.builds("({} OR {})".format, booleans, booleans),
            st.builds("(NOT {})".format, booleans),
            st.builds("({} IS NULL)".format, st.one_of(ints, strings, doubles, st.just("d"))),
            st.builds("({} IS NOT NULL)".format, st.one_of(ints, strings, bigs)),
        )
    )
    decimals = st.one_of(st.just("d"), st.builds("(d + {})".format, st.sampled_from(["1.5", "a"])))
    return {
        "ints": ints,
        "bigs": bigs,
        "doubles": doubles,
        "strings": strings,
        "booleans": booleans,
        "decimals": decimals,
    }


EXPRESSIONS = _expressions()
ANY_EXPRESSION = st.one_of(*EXPRESSIONS.values())


@st.composite
def queries(draw: st.DrawFn) -> str:
    items = draw(st.lists(ANY_EXPRESSION, min_size=1, max_size=4))
    select = ", ".join(f"{e} AS x{i}" for i, e in enumerate(items))
    where = draw(st.one_of(st.none(), EXPRESSIONS["booleans"]))
    partition = draw(st.sampled_from([None, None, "s", "a"]))
    key = "k" if partition is None else partition
    text = f"CREATE STREAM out AS SELECT {key}, {select} FROM src"
    if where is not None:
        text += f" WHERE {where}"
    if partition is not None:
        text += f" PARTITION BY {partition}"
    return text + ";"


# -- records --------------------------------------------------------------------------------------

_TEXT = st.one_of(
    st.sampled_from(
        ["", "x", "ß", "Straße", 'q"uote', "back\\slash", "tab\there", "\u00e9t\u00e9"]
    ),
    st.text(max_size=6),
)
_VALUES = st.one_of(
    st.none(),
    st.integers(min_value=-(2**31), max_value=2**31 - 1),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e-5, 1e7, 9999999.5, 0.001, -0.0, 75.0, 1e20, 123456789.125]),
    st.booleans(),
    _TEXT,
    st.sampled_from(["12", "-4", "1.5", "true", "NaN", "1e3", "99999999999"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["x", "y"]), st.floats(allow_nan=False), max_size=2),
)
_DOUBLES = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e-5, 1e7, 9999999.5, 0.001, -0.0, 75.0, 1e20, 123456789.125, 2.5]),
    st.integers(-(2**60), 2**60),
)
#: a TIMESTAMP column's texts: mostly instants (a batch of them all is read at once), some not
_EVENT_TIMES = st.one_of(
    st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31)).map(
        lambda d: d.strftime("%Y-%m-%d %H:%M:%S.").rjust(20, "0") + f"{d.microsecond // 1000:03d}"
    ),
    st.sampled_from(["2023-02-30 10:00:00.000", "0000-01-01 00:00:00.000", "2023-1-1"]),
)
#: per column: values of its type and what ksqlDB coerces into it (`_object` adds anything)
_FIELD_VALUES = {
    "a": st.one_of(st.integers(-(2**31), 2**31 - 1), st.integers(-100, 100), st.just("12")),
    "b": st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-5, 5)),
    "c": _DOUBLES,
    "s": _TEXT,
    "t": st.one_of(_EVENT_TIMES, _EVENT_TIMES, _TEXT),
    "f": st.booleans(),
    "d": st.sampled_from([1.25, "3.5", 10, 9999.99]),
}


@st.composite
def _object(draw: st.DrawFn) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name, values in _FIELD_VALUES.items():
        how = draw(st.integers(0, 29))
        if how == 0:
            continue  # missing: NULL
        spelled = name.upper() if how < 8 else name
        fields[spelled] = draw(_VALUES if how == 1 else values)
    if draw(st.booleans()):
        fields["other"] = draw(_VALUES)
    return fields


@st.composite
def record_values(draw: st.DrawFn) -> bytes | None:
    kind = draw(st.sampled_from(["object"] * 16 + ["null", "text", "array", "bytes", "delimited"]))
    if kind == "null":
        return None
    if kind == "text":
        return draw(st.sampled_from([b"null", b"42", b'"x"', b"[1]"]))
    if kind == "array":
        return b"[]"
    if kind == "bytes":
        return draw(st.binary(max_size=8))
    if kind == "delimited":
        fields = draw(
            st.lists(
                st.sampled_from(["1", "", "x", "2.5", "true", "99999999999"]),
                min_size=7,
                max_size=8,
            )
        )
        return ",".join(fields).encode()
    fields = draw(_object())
    text = json.dumps(fields, ensure_ascii=draw(st.booleans()))
    if draw(st.integers(0, 9)) == 0:
        text = text.replace("1", "1" * 20, 1)  # an integer too long for 64 bits
    return text.encode("utf-8", "surrogatepass")


_KEYS = st.one_of(
    st.none(),
    st.sampled_from([b"k1", b"", b"7", b"\xff\xfe", "ß".encode(), b'"x"', b"12"]),
    st.binary(max_size=4),
)


@st.composite
def input_records(draw: st.DrawFn) -> list[InputRecord]:
    count = draw(st.integers(1, 20))
    return [
        InputRecord(
            draw(_KEYS),
            draw(record_values()),
            draw(st.integers(0, 2**41)),
            draw(st.integers(0, 1)),
            offset,
        )
        for offset in range(count)
    ]


@pytest.mark.parametrize("source", sorted(SOURCES))
@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(query=queries(), records=input_records())
def test_vectorized_and_per_record_paths_agree(
    source: str, query: str, records: list[InputRecord]
) -> None:
    catalog = _catalog(SOURCES[source], query)
    assume(catalog is not None)
    assert catalog is not None
    pipeline = RecordPipeline.for_query(catalog.queries["CSAS_OUT_1"], catalog)
    assert refusal(pipeline.compiled, pipeline.sink) is None
    assert differ(pipeline, records) is None


# -- a join's output: rows already decoded --------------------------------------------------------

JOIN_TABLE = (
    "CREATE TABLE tab (tk STRING PRIMARY KEY, n STRING, v INT) WITH (kafka_topic='tab', "
    "partitions=2, value_format='JSON');"
)


@st.composite
def join_queries(draw: st.DrawFn) -> str:
    """`queries` over the stream joined to a table, some of the table's columns selected."""
    select, _, rest = draw(queries()).partition(" FROM src")
    extra = draw(st.sampled_from(["", ", n", ", v + a AS vv", ", UCASE(n) AS un, v"]))
    return f"{select}{extra} FROM src LEFT JOIN tab ON src.k = tab.tk{rest}"


def joined(pipeline: RecordPipeline, table: list[InputRecord], stream: list[InputRecord]) -> list:
    """The join's output records (rows decoded) of ``table`` then ``stream``, in one task."""
    assert pipeline.compiled.join is not None
    join = JoinPipeline("q", pipeline.compiled.join, {})
    keys: dict[Any, KeyState] = {}
    task = JoinTask(TaskState(), keys.get)
    out: list[InputRecord] = []
    for leaf, records in ((1, table), (0, stream)):
        entering, _errors = join.enter(leaf, records)
        out.extend(join.join(task, entering, 0, len(out)))
        for ident, state in task.changed.items():
            if state is not None:
                keys[ident] = state
    return out


_TABLE_ROWS = [
    InputRecord(key, json.dumps(value).encode(), 5, 0, i)
    for i, (key, value) in enumerate(
        [
            (b"k1", {"N": "straße", "V": 2}),
            (b"7", {"N": None, "V": 2147483647}),
            ("ß".encode(), {"N": "x", "V": -1}),
            (b"12", {"N": "ab", "V": None}),
        ]
    )
]


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(query=join_queries(), records=input_records())
def test_a_joins_output_agrees_on_both_paths(query: str, records: list[InputRecord]) -> None:
    catalog = _catalog(SOURCES["JSON"], JOIN_TABLE, query)
    assume(catalog is not None)
    assert catalog is not None
    pipeline = RecordPipeline.for_query(next(iter(catalog.queries.values())), catalog)
    assert refusal(pipeline.compiled, pipeline.sink) is None
    assert differ(pipeline, joined(pipeline, _TABLE_ROWS, records)) is None


def test_a_join_kernel_with_other_semantics_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = _catalog(
        SOURCES["JSON"],
        JOIN_TABLE,
        "CREATE STREAM out AS SELECT k, a, n FROM src LEFT JOIN tab ON src.k = tab.tk WHERE a > 5;",
    )
    assert catalog is not None
    pipeline = RecordPipeline.for_query(next(iter(catalog.queries.values())), catalog)
    stream = [r._replace(key=b"k1") for r in _records({"a": 5}, {"a": 6}, {"a": None})]
    out = joined(pipeline, _TABLE_ROWS, stream)
    assert [r.row["TAB_N"] for r in out if r.row is not None] == ["straße"] * 3  # joined
    assert differ(pipeline, out) is None
    monkeypatch.setitem(kernels._COMPARE, exp.GT, pc.greater_equal)
    assert differ(pipeline, out) is not None


# -- the check fails when semantics differ --------------------------------------------------------


def _pipeline(query: str) -> RecordPipeline:
    catalog = _catalog(SOURCES["JSON"], query)
    assert catalog is not None
    return RecordPipeline.for_query(catalog.queries["CSAS_OUT_1"], catalog)


def _records(*values: dict[str, Any]) -> list[InputRecord]:
    return [InputRecord(b"k", json.dumps(v).encode(), 1, 0, i) for i, v in enumerate(values)]


def test_a_comparison_kernel_with_other_semantics_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pipeline = _pipeline("CREATE STREAM out AS SELECT k, a FROM src WHERE a > 5;")
    records = _records({"a": 5}, {"a": 6}, {"a": None})
    assert differ(pipeline, records) is None
    monkeypatch.setitem(kernels._COMPARE, exp.GT, pc.greater_equal)
    assert differ(pipeline, records) is not None


def test_a_case_kernel_with_other_semantics_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    pipeline = _pipeline("CREATE STREAM out AS SELECT k, UCASE(s) AS u FROM src;")
    records = _records({"s": "straße"}, {"s": "abc"})
    assert differ(pipeline, records) is None
    # Arrow's Unicode upper-casing where Java's differs (ß -> SS), without the ASCII guard
    monkeypatch.setattr(kernels.pc, "string_is_ascii", lambda column: pc.is_valid(column))
    monkeypatch.setitem(kernels._ASCII_FUNCTIONS, "UCASE", (pc.utf8_upper, kernels.STRING))
    assert differ(pipeline, records) is not None


def test_a_double_text_with_other_semantics_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    pipeline = _pipeline("CREATE STREAM out AS SELECT k, c FROM src;")
    records = _records({"c": 1e20}, {"c": 2.5})
    assert differ(pipeline, records) is None
    monkeypatch.setattr(json_columns, "_PLAIN_DOUBLE", (1e-3, math.inf))  # Java writes 1.0E20
    assert differ(pipeline, records) is not None


def test_explain_says_how_each_expression_runs() -> None:
    catalog = _catalog(
        SOURCES["JSON"],
        "CREATE STREAM out AS SELECT k, UCASE(s) AS u, a / 2 AS half, a * c + 1 AS x, "
        "CAST(a AS STRING) + s AS y FROM src WHERE a > 5 AND s IS NOT NULL;",
    )
    assert catalog is not None
    query = catalog.queries["CSAS_OUT_1"]
    select = parse_one(query.statement_text)
    description = describe_query(select.query, catalog, "OUT")  # type: ignore[attr-defined]
    assert description.steps[-1] == (
        "Execution: Arrow batches; WHERE vectorized, K vectorized, U vectorized, HALF per record, "
        "X vectorized, Y partly vectorized"
    )


def test_explain_says_why_a_query_runs_record_by_record() -> None:
    catalog = _catalog(
        SOURCES["JSON"].replace("STREAM src", "TABLE src").replace("KEY", "PRIMARY KEY"),
        "CREATE TABLE out AS SELECT k, a FROM src;",
    )
    assert catalog is not None
    select = parse_one(catalog.queries["CTAS_OUT_1"].statement_text)
    description = describe_query(select.query, catalog, "OUT")  # type: ignore[attr-defined]
    assert (
        description.steps[-1] == "Execution: record by record (a table's changelog runs row by row)"
    )
