"""An aggregation's vectorized stage 1 against the per-record one: random aggregations over random
records, row for row.

`ColumnarGrouping.group` must give exactly what `AggregatePipeline.group` gives (each record's
group, grouping values, aggregate arguments, time, position and rank, and the records skipped with
their messages, in the same order) for any aggregation it runs and any records, hostile ones
included: the expressions and records are the stateless differential test's. The mutation tests
prove the check can fail.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sqlglot import exp

from headwater.engine.columnar import kernels
from headwater.engine.persistent import InputRecord
from headwater.engine.persistent import columnar_group as group_module
from headwater.engine.persistent.aggregate_run import (
    AggregatePipeline,
    GroupedRow,
    batch_ranks,
    rank_records,
)
from headwater.engine.persistent.analyzer import describe_query
from headwater.engine.persistent.columnar_group import ColumnarGrouping, grouping_refusal
from headwater.engine.persistent.query_run import parse_persistent
from headwater.metastore.catalog import Catalog
from tests.engine.test_columnar_differential import (
    EXPRESSIONS,
    SOURCES,
    _catalog,
    _object,
    input_records,
)

#: the aggregate calls a query draws from, by their arguments' kind
_CALLS = st.one_of(
    st.just("COUNT(*)"),
    st.builds("COUNT({})".format, st.one_of(*EXPRESSIONS.values())),
    st.builds("SUM({})".format, st.one_of(EXPRESSIONS["ints"], EXPRESSIONS["bigs"])),
    st.builds("SUM({})".format, EXPRESSIONS["doubles"]),
    st.builds("MAX({})".format, st.one_of(EXPRESSIONS["ints"], EXPRESSIONS["doubles"])),
    st.builds("MIN({})".format, EXPRESSIONS["bigs"]),
    st.builds("COLLECT_LIST({})".format, EXPRESSIONS["strings"]),
    st.builds("LATEST_BY_OFFSET({})".format, EXPRESSIONS["decimals"]),
    st.builds("TOPK({}, 2)".format, EXPRESSIONS["ints"]),
)
_GROUPS = st.one_of(
    st.sampled_from(["k", "s", "a"]),
    EXPRESSIONS["strings"],
    EXPRESSIONS["ints"],
    EXPRESSIONS["bigs"],
)


@st.composite
def aggregations(
    draw: st.DrawFn,
    call_texts: st.SearchStrategy[str] = _CALLS,
    windows: bool = True,
    where_one_in: int = 2,
) -> str:
    """Random aggregations of ``call_texts``, TUMBLING half the time when ``windows``, with a
    WHERE once in ``where_one_in``."""
    groups = draw(st.lists(_GROUPS, min_size=1, max_size=2, unique=True))
    calls = draw(st.lists(call_texts, min_size=1, max_size=3))
    select = ", ".join(
        [f"{g} AS g{i}" for i, g in enumerate(groups)]
        + [f"{c} AS x{i}" for i, c in enumerate(calls)]
    )
    text = f"CREATE TABLE out AS SELECT {select} FROM src"
    if windows and draw(st.booleans()):
        text += " WINDOW TUMBLING (SIZE 1 MINUTE)"
    if draw(st.integers(0, where_one_in - 1)) == 0:
        text += f" WHERE {draw(EXPRESSIONS['booleans'])}"
    return text + f" GROUP BY {', '.join(groups)};"


def _only_pipeline(catalog: Catalog) -> AggregatePipeline:
    (query,) = catalog.queries.values()
    return AggregatePipeline.for_query(query, catalog)


def differ(pipeline: AggregatePipeline, records: list[InputRecord]) -> str | None:
    """What the two paths disagree on (None: nothing), in chunks as a source task feeds them,
    the batch's ranks running on across chunks."""
    columnar = ColumnarGrouping(pipeline)
    expected_running: dict[int, int] = {}
    got_running: dict[int, int] = {}
    for start in range(0, len(records), 7):
        chunk = records[start : start + 7]
        expected = pipeline.group(chunk, expected_running)
        got = columnar.group(chunk, got_running)
        # repr: a NaN argument equals itself there
        if repr(got) != repr(expected) or got_running != expected_running:
            return f"per record {expected}\nvectorized {got}"
    assert columnar.fallbacks == 0
    return None


def differ_combined(pipeline: AggregatePipeline, records: list[InputRecord]) -> str | None:
    """`differ` for `group_combined` against the per-record grouping, then `combine` where the
    source task combines (`worth_combining`)."""
    columnar = ColumnarGrouping(pipeline)
    expected_running: dict[int, int] = {}
    got_running: dict[int, int] = {}
    for start in range(0, len(records), 9):
        chunk = records[start : start + 9]
        items, errors = pipeline.group(chunk, expected_running)
        rows = [i for i in items if isinstance(i, GroupedRow)]
        if pipeline.combines and pipeline.worth_combining(rows):
            items = list(pipeline.combine(rows))
        got = columnar.group_combined(chunk, got_running)
        if repr(got) != repr((items, errors)) or got_running != expected_running:
            return f"per record {(items, errors)}\nvectorized {got}"
    return None


@pytest.mark.parametrize("source", sorted(SOURCES))
@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(query=aggregations(), records=input_records())
def test_vectorized_and_per_record_grouping_agree(
    source: str, query: str, records: list[InputRecord]
) -> None:
    catalog = _catalog(SOURCES[source], query)
    assume(catalog is not None)
    assert catalog is not None
    pipeline = _only_pipeline(catalog)
    assert grouping_refusal(pipeline.compiled) is None
    assert differ(pipeline, records) is None


@pytest.mark.parametrize("source", ["JSON", "JSON, TIMESTAMP BIGINT"])
@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(query=aggregations(), records=input_records(), keys=st.sampled_from([2, 3, 50]))
def test_vectorized_combining_agrees_with_combining_grouped_rows(
    source: str, query: str, records: list[InputRecord], keys: int
) -> None:
    catalog = _catalog(SOURCES[source], query)
    assume(catalog is not None)
    assert catalog is not None
    (stored,) = catalog.queries.values()
    pipeline = AggregatePipeline.for_query(stored, catalog, buffering=True)
    # fewer distinct groups than records, so that chunks combine
    records = [
        InputRecord(b"k%d" % (r.offset % keys), r.value, r.timestamp, r.partition, r.offset)
        for r in records
    ]
    assert differ_combined(pipeline, records) is None


_COUNTING_CALLS = st.one_of(
    st.just("COUNT(*)"),
    st.builds("COUNT({})".format, st.one_of(*EXPRESSIONS.values())),
    st.builds("SUM({})".format, st.one_of(EXPRESSIONS["ints"], EXPRESSIONS["bigs"])),
)


#: objects whose every field holds its column's type (a batch of them is clean, `_Computed.clean`)
_CLEAN_VALUES = st.fixed_dictionaries(
    {
        "a": st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1), st.integers(-3, 3)),
        "b": st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([2**63 - 1, -(2**63)])),
        "c": st.floats(allow_nan=False, allow_infinity=False),
        "s": st.sampled_from(["x", "y", "ß", ""]),
        "f": st.booleans(),
    }
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    # unwindowed COUNT and integer SUM calls (what `_counted` takes), mostly without WHERE: a
    # random WHERE often keeps no row
    query=aggregations(_COUNTING_CALLS, windows=False, where_one_in=4),
    values=st.lists(st.one_of(_CLEAN_VALUES, _CLEAN_VALUES, _CLEAN_VALUES, _object()), max_size=30),
    keys=st.sampled_from([1, 2, 3, 50]),
    partitions=st.sampled_from([1, 1, 2]),
)
def test_counting_on_columns_agrees_with_combining_grouped_rows(
    query: str, values: list[dict[str, Any]], keys: int, partitions: int
) -> None:
    """COUNT and integer SUM combine on the columns (`_counted`) where a chunk is clean and of
    one partition; its rows must be `combine`'s, Java's wrapping SUM included."""
    catalog = _catalog(SOURCES["JSON"], query)
    assume(catalog is not None)
    assert catalog is not None
    (stored,) = catalog.queries.values()
    pipeline = AggregatePipeline.for_query(stored, catalog, buffering=True)
    assert ColumnarGrouping(pipeline)._counts is not None
    records = [
        InputRecord(
            b"k%d" % (i % keys), json.dumps(v).encode(), 1000 + (i * 7) % 5, i % partitions, i
        )
        for i, v in enumerate(values)
    ]
    assert differ_combined(pipeline, records) is None


def test_counting_on_columns_runs_and_its_check_can_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """The columns' COUNT and SUM are taken for a clean chunk of one partition, wrap BIGINT as
    Java does, and a sum that does not wrap or a count of NULLs is caught."""
    catalog = _catalog(
        SOURCES["JSON"],
        "CREATE TABLE out AS SELECT k, COUNT(*) AS n, COUNT(a) AS m, SUM(b) AS x, SUM(a) AS y "
        "FROM src WHERE f GROUP BY k;",
    )
    assert catalog is not None
    (stored,) = catalog.queries.values()
    pipeline = AggregatePipeline.for_query(stored, catalog, buffering=True)
    values = [
        {"a": None if i == 2 else 2**31 - 1 - i, "b": 2**63 - 1, "f": i != 4, "s": "x"}
        for i in range(8)
    ]
    records = [
        InputRecord(b"k%d" % (i % 2), json.dumps(v).encode(), 50 - i, 0, i)
        for i, v in enumerate(values)
    ]
    columnar = ColumnarGrouping(pipeline)
    taken: list[int] = []
    counted = ColumnarGrouping._counted

    def spy(self: ColumnarGrouping, *args: Any) -> Any:
        taken.append(1)
        return counted(self, *args)

    monkeypatch.setattr(ColumnarGrouping, "_counted", spy)
    out, errors = columnar.group_combined(records)
    assert taken and not errors
    # k0: rows 0, 2, 6 (row 4 filtered out, row 2's a NULL); k1: rows 1, 3, 5, 7. BIGINT and
    # INTEGER sums wrap: 3 * (2^63 - 1) is 2^63 - 3, (2^31 - 1) + (2^31 - 7) is -8
    assert [(r.group, r.offset, r.partial) for r in out] == [
        (b"k0", 6, [3, 2, 2**63 - 3, -8]),
        (b"k1", 7, [4, 4, -4, -20]),
    ]
    assert differ_combined(pipeline, records) is None
    with monkeypatch.context() as patched:  # an INTEGER sum left unwrapped
        patched.setattr(group_module, "wrap_int", lambda v, _t: v)
        assert differ_combined(pipeline, records) is not None
    with monkeypatch.context() as patched:  # COUNT(a) counting NULLs too
        patched.setattr(group_module, "_present", pc.is_valid)
        assert differ_combined(pipeline, records) is not None


def test_combining_columns_with_other_semantics_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    catalog = _catalog(
        SOURCES["JSON"],
        "CREATE TABLE out AS SELECT k, COUNT(*) AS n, LATEST_BY_OFFSET(a) AS l FROM src GROUP BY k;",
    )
    assert catalog is not None
    (stored,) = catalog.queries.values()
    pipeline = AggregatePipeline.for_query(stored, catalog, buffering=True)
    assert pipeline.combines
    records = [
        InputRecord(b"k", json.dumps({"a": i}).encode(), 100 - i, i % 2, i) for i in range(6)
    ]
    assert differ_combined(pipeline, records) is None
    out, _ = ColumnarGrouping(pipeline).group_combined(records)
    assert len(out) == 1 and out[0].partial is not None  # six rows, one combined row
    monkeypatch.setattr(group_module, "_ORDER", lambda e: e[5])  # input order, not batch order
    assert differ_combined(pipeline, records) is not None


# -- the check fails when semantics differ --------------------------------------------------------


def _pipeline(query: str, source: str = "JSON") -> AggregatePipeline:
    catalog = _catalog(SOURCES[source], query)
    assert catalog is not None
    return _only_pipeline(catalog)


def _records(*values: dict[str, Any] | None, key: bytes | None = b"k") -> list[InputRecord]:
    return [
        InputRecord(key, None if v is None else json.dumps(v).encode(), 1000 - i, i % 2, i)
        for i, v in enumerate(values)
    ]


def test_a_where_kernel_with_other_semantics_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    pipeline = _pipeline(
        "CREATE TABLE out AS SELECT s, COUNT(*) AS n FROM src WHERE a > 5 GROUP BY s;"
    )
    records = _records({"a": 5, "s": "x"}, {"a": 6, "s": "y"}, {"a": None, "s": "z"})
    assert differ(pipeline, records) is None
    monkeypatch.setitem(kernels._COMPARE, exp.GT, pc.greater_equal)
    assert differ(pipeline, records) is not None


def test_a_group_key_written_otherwise_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    pipeline = _pipeline("CREATE TABLE out AS SELECT s, SUM(a) AS n FROM src GROUP BY s;")
    records = _records({"a": 1, "s": "Straße"}, {"a": 2, "s": "x"})
    assert differ(pipeline, records) is None
    real = ColumnarGrouping._groups

    def latin(self: ColumnarGrouping, keys: list[list[Any]], size: int) -> list[bytes | None]:
        return [None if g is None else g.decode().encode("latin-1") for g in real(self, keys, size)]

    monkeypatch.setattr(ColumnarGrouping, "_groups", latin)
    assert differ(pipeline, records) is not None


def test_ranks_computed_otherwise_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    pipeline = _pipeline("CREATE TABLE out AS SELECT s, COUNT(*) AS n FROM src GROUP BY s;")
    records = _records({"s": "x"}, {"s": "y"}, {"s": "x"})
    assert differ(pipeline, records) is None
    one = [r._replace(partition=0) for r in records]  # a source task's chunk
    assert differ(pipeline, one) is None
    monkeypatch.setattr(group_module, "batch_ranks", lambda rs, running: list(range(len(rs))))
    assert differ(pipeline, records) is not None
    assert differ(pipeline, one) is not None


@given(
    stamps=st.lists(st.integers(0, 50), max_size=30),
    partitions=st.sampled_from([1, 1, 2]),
    before=st.one_of(st.none(), st.integers(0, 50)),
)
def test_batch_ranks_are_rank_records_ranks(
    stamps: list[int], partitions: int, before: int | None
) -> None:
    """`batch_ranks`' one-step running maximum (one partition) gives `rank_records`' ranks, and
    leaves the same running ranks for the batch's next chunk."""
    records = [InputRecord(None, b"{}", t, i % partitions, i) for i, t in enumerate(stamps)]
    running = {} if before is None else {0: before}
    expected_running = dict(running)
    expected = [rank for rank, _ in rank_records(records, expected_running)]
    assert batch_ranks(records, running) == expected
    assert running == expected_running


def test_null_groups_and_bad_records_are_the_per_record_paths() -> None:
    pipeline = _pipeline("CREATE TABLE out AS SELECT s, COUNT(*) AS n FROM src GROUP BY s;")
    records = _records({"s": None}, None, {"s": "x"}, {"s": ["not", "a", "string"]})
    records.append(InputRecord(b"k", b"not json", 5, 0, 99))
    out, errors = ColumnarGrouping(pipeline).group(records)
    assert [r.offset for r in out] == [2, 3]  # an array is a STRING's text, as ksqlDB reads it
    null_group = (
        "Group-by column with index 0 resolved to null. The source row will be excluded "
        "from the table."
    )
    assert (errors[0].offset, errors[0].message) == (0, null_group)
    assert [e.offset for e in errors] == [0, 99]
    assert differ(pipeline, records) is None


#: a TABLE source: its changelog groups record by record
TABLE_SOURCE = (
    "CREATE TABLE src (k STRING PRIMARY KEY, a INT, s STRING) WITH (kafka_topic='src', "
    "partitions=2, value_format='JSON');"
)
TABLE_COUNT = "CREATE TABLE out AS SELECT s, COUNT(*) AS n FROM src GROUP BY s;"


def _explained(source: str, query: str) -> str:
    """The last line of EXPLAIN for the aggregation ``query`` over ``source``."""
    catalog = _catalog(source, query)
    assert catalog is not None
    (stored,) = catalog.queries.values()
    select, sink = parse_persistent(stored.statement_text)
    return describe_query(select, catalog, sink).steps[-1]


def test_queries_it_does_not_run_say_why() -> None:
    catalog = _catalog(TABLE_SOURCE, TABLE_COUNT)
    assert catalog is not None
    assert (
        grouping_refusal(_only_pipeline(catalog).compiled) == "a table's changelog runs row by row"
    )
    with pytest.raises(ValueError, match="groups record by record"):
        ColumnarGrouping(_only_pipeline(catalog))


def test_explain_says_how_the_aggregation_groups() -> None:
    query = (
        "CREATE TABLE out AS SELECT s, COUNT(*) AS n, SUM(a * 2) AS t, MAX(ABS(a)) AS m "
        "FROM src WHERE a > 1 GROUP BY s;"
    )
    assert _explained(SOURCES["JSON"], query) == (
        "Execution: grouped in Arrow batches; WHERE vectorized, GROUP BY S vectorized, "
        "SUM((A * 2)) arguments vectorized, MAX(ABS(A)) arguments per record; "
        "aggregates per group; updates in Arrow batches where buffered (N vectorized, "
        "T vectorized, M vectorized)"
    )
    counting = "CREATE TABLE out AS SELECT s, COUNT(*) AS n, SUM(a) AS t FROM src GROUP BY s;"
    assert _explained(SOURCES["JSON"], counting) == (
        "Execution: grouped in Arrow batches; GROUP BY S vectorized, SUM(A) arguments vectorized, "
        "counts and sums combined per group by Arrow where updates are buffered; "
        "aggregates per group; updates in Arrow batches where buffered (N vectorized, "
        "T vectorized)"
    )
    windowed = counting.replace(" GROUP BY", " WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY")
    assert "combined" not in _explained(SOURCES["JSON"], windowed)  # windows are not combined
    assert _explained(TABLE_SOURCE, TABLE_COUNT) == (
        "Execution: grouped record by record (a table's changelog runs row by row); "
        "aggregates per group; updates per group (a table's changes undo and add)"
    )
