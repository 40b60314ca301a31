"""An aggregation's vectorized stage 3 against the per-group one: random buffered aggregations over
random records, update for update.

`ColumnarUpdates.aggregate` must give exactly what `AggregatePipeline.aggregate` gives group by
group (each update's key, value, time, partition and place, the tombstones HAVING writes, the
records skipped with their messages, and the states kept) for any aggregation it runs and any
records, hostile ones included. The mutation tests prove the check can fail.
"""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from headwater.engine.persistent import InputRecord
from headwater.engine.persistent import columnar_update as update_module
from headwater.engine.persistent.aggregate_run import AggregatePipeline, GroupedRow, GroupState
from headwater.engine.persistent.columnar_update import ColumnarUpdates, updates_refusal
from headwater.engine.persistent.query_run import OutputRecord, ProcessingError
from tests.engine.test_columnar_differential import (
    EXPRESSIONS,
    SOURCES,
    _catalog,
    input_records,
)
from tests.engine.test_columnar_group import _CLEAN_VALUES

#: (call, whether it is a number the projection may compute with)
_CALLS = st.one_of(
    st.just(("COUNT(*)", True)),
    st.tuples(st.builds("COUNT({})".format, st.one_of(*EXPRESSIONS.values())), st.just(True)),
    st.tuples(
        st.builds("SUM({})".format, st.one_of(EXPRESSIONS["ints"], EXPRESSIONS["bigs"])),
        st.just(True),
    ),
    st.tuples(st.builds("SUM({})".format, EXPRESSIONS["doubles"]), st.just(True)),
    st.tuples(st.builds("MAX({})".format, EXPRESSIONS["ints"]), st.just(True)),
    st.tuples(st.builds("COLLECT_LIST({})".format, EXPRESSIONS["strings"]), st.just(False)),
    st.tuples(st.builds("LATEST_BY_OFFSET({})".format, EXPRESSIONS["decimals"]), st.just(False)),
    st.tuples(st.builds("TOPK({}, 2)".format, EXPRESSIONS["ints"]), st.just(False)),
)
#: what the projection makes of a numeric call (``{}``: the call)
_NUMBER_ITEMS = st.sampled_from(
    ["{}", "{}", "({} * 2)", "({} + 1)", "CAST({} AS STRING)", "CONCAT(CAST({} AS STRING), 'x')"]
)
_HAVING = st.sampled_from(
    [
        "",
        "",
        " HAVING COUNT(*) > 1",
        " HAVING COUNT(*) % 2 = 0",  # passes, stops passing, passes again: tombstones
        " HAVING SUM(a) > 0",
        " HAVING MAX(s) <> 'x'",
    ]
)
_GROUPS = st.one_of(st.sampled_from(["k", "s", "a"]), EXPRESSIONS["strings"], EXPRESSIONS["ints"])


@st.composite
def aggregations(draw: st.DrawFn) -> str:
    """Random unwindowed aggregations, the projection computing with the calls, with HAVING."""
    groups = draw(st.lists(_GROUPS, min_size=1, max_size=2, unique=True))
    items = [f"{g} AS g{i}" for i, g in enumerate(groups)]
    for i, (call, numeric) in enumerate(draw(st.lists(_CALLS, min_size=1, max_size=3))):
        template = draw(_NUMBER_ITEMS) if numeric else "{}"
        items.append(f"{template.format(call)} AS x{i}")
    if draw(st.booleans()):
        items.append(f"AS_VALUE({groups[0]}) AS v")
    text = f"CREATE TABLE out AS SELECT {', '.join(items)} FROM src"
    if draw(st.integers(0, 3)) == 0:
        text += f" WHERE {draw(EXPRESSIONS['booleans'])}"
    return text + f" GROUP BY {', '.join(groups)}{draw(_HAVING)};"


def _update(o: OutputRecord) -> tuple[Any, ...]:
    return (
        o.source_rank,
        o.source_partition,
        o.source_offset,
        o.source_seq,
        o.key,
        o.value,
        o.timestamp,
        o.partition,
    )


def _error(e: ProcessingError) -> tuple[Any, ...]:
    return (e.partition, e.offset, e.kind, e.message, e.topic, e.query_id)


def differ(
    pipeline: AggregatePipeline,
    records: list[InputRecord],
    chunk: int = 9,
    calls: int = 2,
    modes: set[str] | None = None,
) -> str | None:
    """What the two paths disagree on (None: nothing): ``records`` a chunk at a time through
    stage 1 (combined where the source task combines), then each chunk's rows in ``calls``
    calls (as state buckets split them), per group on one side and per call on the other, each
    side with its own states (pickled between chunks, as Spark keeps them). ``modes``: how the
    calls' updates were written (columns, groups)."""
    updates = ColumnarUpdates(pipeline)
    expected_states: dict[bytes, bytes] = {}
    got_states: dict[bytes, bytes] = {}
    running: dict[int, int] = {}
    for start in range(0, len(records), chunk):
        items, group_errors = pipeline.group(records[start : start + chunk], running)
        rows = [i for i in items if isinstance(i, GroupedRow)]
        if pipeline.combines and pipeline.worth_combining(rows):
            rows = pipeline.combine(rows)
        for part in range(calls):
            call = [r for r in rows if hash(r.group) % calls == part]
            expected: list[OutputRecord] = []
            expected_errors: list[ProcessingError] = list(group_errors) if part == 0 else []
            by_group: dict[bytes, list[GroupedRow]] = {}
            for row in call:
                by_group.setdefault(row.group, []).append(row)
            for group, members in by_group.items():
                stored = expected_states.get(group)
                state, out, errors = pipeline.aggregate(
                    pickle.loads(stored) if stored else None, members
                )
                expected_states[group] = pickle.dumps(state)
                expected.extend(out)
                expected_errors.extend(errors)

            def load(group: bytes) -> GroupState | None:
                stored = got_states.get(group)
                return pickle.loads(stored) if stored else None

            def store(group: bytes, state: GroupState) -> None:
                got_states[group] = pickle.dumps(state)

            batch, slow, errors = updates.aggregate(call, load, store)
            got = [
                OutputRecord(**{k: v for k, v in r.items() if k != "error"})
                for r in batch.to_pylist()
            ]
            got_errors = (list(group_errors) if part == 0 else []) + errors
            if modes is not None and (got or slow):
                modes.add("columns and groups" if got and slow else "columns" if got else "groups")
            # repr: a NaN equals itself there
            want = repr((sorted(map(_update, expected)), sorted(map(_error, expected_errors))))
            have = repr((sorted(map(_update, got + slow)), sorted(map(_error, got_errors))))
            if have != want:
                return f"per group {want}\nvectorized {have}"
        if _states(got_states) != _states(expected_states):
            return f"states per group {_states(expected_states)}\nvectorized {_states(got_states)}"
    return None


def _states(states: dict[bytes, bytes]) -> str:
    return repr(sorted((g, pickle.loads(s)) for g, s in states.items()))


def _pipeline(query: str, source: str = "JSON") -> AggregatePipeline | None:
    catalog = _catalog(SOURCES[source], query)
    if catalog is None:
        return None
    (stored,) = catalog.queries.values()
    return AggregatePipeline.for_query(stored, catalog, buffering=True)


@pytest.mark.parametrize("source", ["JSON", "JSON, TIMESTAMP BIGINT"])
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    query=aggregations(),
    hostile=input_records(),
    values=st.lists(_CLEAN_VALUES, min_size=4, max_size=40),
    keys=st.sampled_from([1, 2, 3, 50]),
    chunk=st.sampled_from([3, 9, 40]),
)
def test_vectorized_and_per_group_updates_agree(
    source: str,
    query: str,
    hostile: list[InputRecord],
    values: list[dict[str, Any]],
    keys: int,
    chunk: int,
) -> None:
    pipeline = _pipeline(query, source)
    assume(pipeline is not None)
    assert pipeline is not None
    assert updates_refusal(pipeline.compiled, pipeline.sink) is None
    # clean records and hostile ones, fewer groups than records (so that groups update, combine
    # and stop passing HAVING)
    records = [
        InputRecord(b"k%d" % (i % keys), json.dumps(v).encode(), 1000 + (i * 7) % 5, i % 2, i)
        for i, v in enumerate(values)
    ]
    records += [
        InputRecord(r.key, r.value, r.timestamp, r.partition, len(records) + r.offset)
        for r in hostile
    ]
    modes: set[str] = set()
    assert differ(pipeline, records, chunk, modes=modes) is None
    for mode in modes:  # hypothesis's statistics: how the updates were written
        event(f"updates: {mode}")


def _counting() -> tuple[AggregatePipeline, list[InputRecord]]:
    pipeline = _pipeline(
        "CREATE TABLE out AS SELECT k, COUNT(*) AS n, SUM(a) * 2 AS x, CONCAT(k, '!') AS y "
        "FROM src GROUP BY k HAVING COUNT(*) % 2 = 1;"
    )
    assert pipeline is not None
    records = [
        InputRecord(b"k%d" % (i % 3), json.dumps({"a": 2**31 - i}).encode(), 1000 + i, i % 2, i)
        for i in range(40)
    ]
    return pipeline, records


def test_updates_are_written_as_columns_and_the_check_can_fail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The columns write every update (none group by group) on a clean aggregation; a wrong sink
    partition, a tombstone left out and a value computed per row wrongly are each caught."""
    pipeline, records = _counting()
    updates = ColumnarUpdates(pipeline)
    items, _errors = pipeline.group(records)
    rows = [i for i in items if isinstance(i, GroupedRow)]
    batch, slow, errors = updates.aggregate(rows, lambda _g: None, lambda _g, _s: None)
    assert batch.num_rows == 3 and not slow and not errors
    assert differ(pipeline, records, 5) is None
    with monkeypatch.context() as patched:  # every update on partition 0
        patched.setattr(update_module, "partitions_of", lambda keys, _n: [0] * len(keys))
        assert differ(pipeline, records, 5) is not None
    with monkeypatch.context() as patched:  # HAVING's failures leave no tombstone
        real = update_module._values

        def never_fails(column: Any) -> list[Any]:
            values = real(column)
            return [True if v is False else v for v in values]

        patched.setattr(update_module, "_values", never_fails)
        assert differ(pipeline, records, 5) is not None


def test_a_value_the_columns_cannot_write_is_written_by_the_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A group whose update a vectorized step fails on is written by `AggregatePipeline.write`
    (its error is the per-group path's), and the other groups still as columns."""
    pipeline = _pipeline(
        "CREATE TABLE out AS SELECT k, COUNT(*) AS n, MAX(s) AS m FROM src GROUP BY k;"
    )
    assert pipeline is not None
    records = [
        InputRecord(
            b"k%d" % (i % 2), json.dumps({"s": "\ud800" if i == 3 else "x"}).encode(), i, 0, i
        )
        for i in range(6)
    ]
    items, _errors = pipeline.group(records)
    rows = [i for i in items if isinstance(i, GroupedRow)]
    batch, slow, errors = ColumnarUpdates(pipeline).aggregate(
        rows, lambda _g: None, lambda _g, _s: None
    )
    assert batch.column("key").to_pylist() == [b"k0"]  # k1's MAX holds a lone surrogate
    assert not slow and [e.kind for e in errors] == ["serialization"]
    assert differ(pipeline, records) is None


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ("SELECT k, COUNT(*) AS n FROM src WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY k", "windowed"),
        ("SELECT k, COUNT(*) AS n FROM src GROUP BY k", None),
    ],
)
def test_updates_refusal_names_what_runs_per_group(query: str, why: str | None) -> None:
    pipeline = _pipeline(f"CREATE TABLE out AS {query};")
    assert pipeline is not None
    refusal = updates_refusal(pipeline.compiled, pipeline.sink)
    assert (refusal is None) if why is None else (why in (refusal or ""))
    unbuffered = updates_refusal(pipeline.compiled, pipeline.sink, buffering=False)
    assert "buffering" in (unbuffered or "")
    if refusal is None:
        with pytest.raises(ValueError, match="writes its updates per group"):
            ColumnarUpdates(
                AggregatePipeline(
                    pipeline.query_id, pipeline.compiled, pipeline.sink, {}, buffering=False
                )
            )


@given(
    rows=st.lists(
        st.builds(
            GroupedRow,
            st.binary(max_size=3),
            st.just(()),
            st.none(),
            st.none(),
            st.integers(0, 9),
            st.integers(0, 3),
            st.integers(0, 9),
            st.integers(0, 1),
            st.none(),
            st.integers(0, 5),
            partial=st.none(),
        ),
        max_size=20,
    )
)
def test_the_row_order_key_is_the_rows_order(rows: list[GroupedRow]) -> None:
    from headwater.engine.persistent.aggregate_run import ROW_ORDER

    assert [ROW_ORDER(r) for r in rows] == [r.order() for r in rows]
    assert sorted(rows, key=ROW_ORDER) == sorted(rows, key=GroupedRow.order)
