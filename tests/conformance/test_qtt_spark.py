"""The QTT runner's Spark replay (`conformance.qtt_spark`): a case's stateless query stages, made
again in a Spark job through `source_rows.rows_of` (a live query's source task), agree with the
in-process rows, and a difference is reported, never passed over.

The cases are written here (no corpus needed): a filter + projection over JSON, one over AVRO with
the case's schema registry (the worker must use it), and a stateless query over a table's changelog
(the per-record path, whose pipeline a worker keeps between calls).
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Iterator

import pytest

from conformance import qtt
from conformance.qtt_spark import _difference, replay
from conformance.stages import CaseStages, RecordedStage, comparable
from headwater.engine.formats import schema_registry

JSON_CASE = {
    "name": "filter and project",
    "statements": [
        "CREATE STREAM S (ID STRING KEY, A INT, B STRING) WITH (kafka_topic='s', value_format='JSON');",
        "CREATE STREAM OUT AS SELECT ID, A * 2 AS A2, UCASE(B) AS B FROM S WHERE A > 1;",
    ],
    "inputs": [
        {"topic": "s", "key": "k1", "value": {"A": 1, "B": "x"}},
        {"topic": "s", "key": "k2", "value": {"A": 5, "B": "y"}},
        {"topic": "s", "key": "k3", "value": "not json"},
        {"topic": "s", "key": "k4", "value": {"A": 7, "B": None}},
    ],
    "outputs": [
        {"topic": "OUT", "key": "k2", "value": {"A2": 10, "B": "Y"}},
        {"topic": "OUT", "key": "k4", "value": {"A2": 14, "B": None}},
    ],
}

AVRO_CASE = {
    "name": "avro through the registry",
    "statements": [
        "CREATE STREAM S (ID STRING KEY, A INT) WITH (kafka_topic='s', value_format='AVRO');",
        "CREATE STREAM OUT AS SELECT ID, A + 1 AS A1 FROM S;",
    ],
    "inputs": [{"topic": "s", "key": "k", "value": {"A": 1}}],
    "outputs": [{"topic": "OUT", "key": "k", "value": {"A1": 2}}],
}

TABLE_CASE = {
    "name": "a table's changelog",
    "statements": [
        "CREATE TABLE T (ID STRING PRIMARY KEY, A INT) WITH (kafka_topic='t', value_format='JSON');",
        "CREATE TABLE OUT AS SELECT ID, A * 10 AS A10 FROM T;",
    ],
    "inputs": [
        {"topic": "t", "key": "k", "value": {"A": 1}},
        {"topic": "t", "key": "k", "value": {"A": 2}},
        {"topic": "t", "key": "k", "value": None},
    ],
    "outputs": [
        {"topic": "OUT", "key": "k", "value": {"A10": 10}},
        {"topic": "OUT", "key": "k", "value": {"A10": 20}},
        {"topic": "OUT", "key": "k", "value": None},
    ],
}


AGGREGATE_CASE = {
    "name": "count and sum per group, with HAVING and skipped records",
    "statements": [
        "CREATE STREAM S (ID STRING KEY, G STRING, V INT) WITH (kafka_topic='s', value_format='JSON');",
        (
            "CREATE TABLE OUT AS SELECT G, COUNT(*) AS C, SUM(V) AS T FROM S GROUP BY G "
            "HAVING COUNT(*) < 3;"
        ),
    ],
    "inputs": [
        {"topic": "s", "key": "1", "value": {"G": "a", "V": 1}},
        {"topic": "s", "key": "2", "value": {"G": "a", "V": 2}},
        {"topic": "s", "key": "3", "value": "not json"},
        {"topic": "s", "key": "4", "value": {"G": "b", "V": 5}},
        {"topic": "s", "key": "5", "value": {"G": None, "V": 5}},
        {"topic": "s", "key": "6", "value": {"G": "a", "V": 3}},
    ],
    "outputs": [
        {"topic": "OUT", "key": "a", "value": {"C": 1, "T": 1}},
        {"topic": "OUT", "key": "a", "value": {"C": 2, "T": 3}},
        {"topic": "OUT", "key": "b", "value": {"C": 1, "T": 5}},
        {"topic": "OUT", "key": "a", "value": None},
    ],
}

TABLE_AGGREGATE_CASE = {
    "name": "count over a table: a changed row leaves its old group",
    "statements": [
        "CREATE TABLE T (ID STRING PRIMARY KEY, G STRING) WITH (kafka_topic='t', value_format='JSON');",
        "CREATE TABLE OUT AS SELECT G, COUNT(*) AS C FROM T GROUP BY G;",
    ],
    "inputs": [
        {"topic": "t", "key": "k1", "value": {"G": "a"}},
        {"topic": "t", "key": "k2", "value": {"G": "a"}},
        {"topic": "t", "key": "k1", "value": {"G": "b"}},
        {"topic": "t", "key": "k2", "value": None},
    ],
    "outputs": [
        {"topic": "OUT", "key": "a", "value": {"C": 1}},
        {"topic": "OUT", "key": "a", "value": {"C": 2}},
        {"topic": "OUT", "key": "a", "value": {"C": 1}},
        {"topic": "OUT", "key": "b", "value": {"C": 1}},
        {"topic": "OUT", "key": "a", "value": {"C": 0}},
    ],
}

WINDOWED_CASE = {
    "name": "a tumbling count",
    "statements": [
        "CREATE STREAM S (ID STRING KEY, G STRING) WITH (kafka_topic='s', value_format='JSON');",
        (
            "CREATE TABLE OUT AS SELECT G, COUNT(*) AS C FROM S "
            "WINDOW TUMBLING (SIZE 10 SECONDS) GROUP BY G;"
        ),
    ],
    "inputs": [
        {"topic": "s", "key": "1", "value": {"G": "a"}, "timestamp": 0},
        {"topic": "s", "key": "2", "value": {"G": "a"}, "timestamp": 5000},
        {"topic": "s", "key": "3", "value": {"G": "a"}, "timestamp": 12000},
    ],
    "outputs": [
        {"topic": "OUT", "key": "a", "value": {"C": 1}, "timestamp": 0,
         "window": {"start": 0, "end": 10000, "type": "time"}},
        {"topic": "OUT", "key": "a", "value": {"C": 2}, "timestamp": 5000,
         "window": {"start": 0, "end": 10000, "type": "time"}},
        {"topic": "OUT", "key": "a", "value": {"C": 1}, "timestamp": 12000,
         "window": {"start": 10000, "end": 20000, "type": "time"}},
    ],
}  # fmt: skip


_JOIN_SOURCES = [
    "CREATE STREAM S (ID STRING KEY, V INT) WITH (kafka_topic='s', value_format='JSON');",
    "CREATE TABLE T (ID STRING PRIMARY KEY, NAME STRING) WITH (kafka_topic='t', value_format='JSON');",
]
_JOIN_INPUTS = [
    {"topic": "t", "key": "k1", "value": {"NAME": "x"}},
    {"topic": "s", "key": "k1", "value": {"V": 1}},
    {"topic": "s", "key": "k2", "value": {"V": 2}},
    {"topic": "t", "key": "k1", "value": {"NAME": "y"}},
    {"topic": "s", "key": "k1", "value": {"V": 3}},
]

JOIN_CASE = {
    "name": "a stream-table join",
    "statements": [
        *_JOIN_SOURCES,
        "CREATE STREAM OUT AS SELECT S.ID AS ID, V, NAME FROM S JOIN T ON S.ID = T.ID;",
    ],
    "inputs": _JOIN_INPUTS,
    "outputs": [
        {"topic": "OUT", "key": "k1", "value": {"V": 1, "NAME": "x"}},
        {"topic": "OUT", "key": "k1", "value": {"V": 3, "NAME": "y"}},
    ],
}

JOIN_AGGREGATE_CASE = {
    "name": "a count over a stream-table join",
    "statements": [
        *_JOIN_SOURCES,
        "CREATE TABLE OUT AS SELECT NAME, COUNT(*) AS C FROM S JOIN T ON S.ID = T.ID GROUP BY NAME;",
    ],
    "inputs": _JOIN_INPUTS,
    "outputs": [
        {"topic": "OUT", "key": "x", "value": {"C": 1}},
        {"topic": "OUT", "key": "y", "value": {"C": 1}},
    ],
}


@pytest.fixture(autouse=True)
def _process_registry() -> Iterator[None]:
    before = schema_registry.current()
    yield
    schema_registry.use(before)


def _recorded(case: dict) -> bytes:
    outcome = qtt.run_case("here", case, record=True)
    assert outcome.verdict == "passed", outcome
    assert outcome.stages is not None
    return outcome.stages


def _tampered(stages: bytes) -> bytes:
    """The same case with one in-process row changed, as if the two paths computed differently."""
    case: CaseStages = copy.deepcopy(pickle.loads(stages))
    stage = next(iter(case.stages.values()))
    rows = next(rows for _, rows in stage.calls if rows and rows[0]["error"] is None)
    rows[0]["value"] = b'{"A2":11,"B":"Y"}'
    return pickle.dumps(case)


def test_a_difference_is_named_by_query_and_call() -> None:
    case: CaseStages = pickle.loads(_recorded(JSON_CASE))
    answer = [[rows for _, rows in stage.calls] for stage in case.stages.values()]
    assert _difference(case, answer) == ""
    changed = copy.deepcopy(answer)
    changed[0][1][0]["timestamp"] += 1
    assert _difference(case, changed).startswith("CSAS_OUT_1, call 2 (1 record(s))")
    assert "failed: boom" in _difference(case, ["boom"])


def test_skipped_records_compare_by_kind_and_message_not_json_text() -> None:
    row = {
        "key": None,
        "timestamp": 0,
        "partition": -1,
        "source_partition": 0,
        "source_offset": 3,
        "error": "deserialization",
    }
    one = {**row, "value": b'{"kind": "deserialization", "message": "m", "topic": "s"}'}
    other = {**row, "value": b'{"topic":"s","message":"m","kind":"deserialization"}'}
    assert comparable([one]) == comparable([other])
    assert RecordedStage("p").calls == []


def _tampered_aggregate(stages: bytes) -> bytes:
    """An aggregation's case with one in-process update changed."""
    case: CaseStages = copy.deepcopy(pickle.loads(stages))
    stage = next(s for s in case.stages.values() if s.shape)
    rows = next(rows for _, rows in stage.calls if rows and rows[0]["error"] is None)
    rows[0]["value"] = b'{"C":7,"T":1}'
    return pickle.dumps(case)


def test_an_aggregation_is_recorded_with_the_shape_of_its_plan() -> None:
    shapes = {
        name: [s.shape for s in pickle.loads(_recorded(case)).stages.values()]
        for name, case in (
            ("stream", AGGREGATE_CASE),
            ("table", TABLE_AGGREGATE_CASE),
            ("windowed", WINDOWED_CASE),
            ("join", JOIN_CASE),
            ("join aggregate", JOIN_AGGREGATE_CASE),
            ("stateless", JSON_CASE),
        )
    }
    assert shapes == {
        "stream": ["stream"],
        "table": ["table"],
        "windowed": ["windowed"],
        "join": ["join"],
        "join aggregate": ["join+stream"],
        "stateless": [""],
    }


def test_cases_replayed_on_spark_agree_and_a_tampered_one_differs() -> None:
    recorded = [
        ("here: json", _recorded(JSON_CASE)),
        ("here: avro", _recorded(AVRO_CASE)),
        ("here: table", _recorded(TABLE_CASE)),
        ("here: tampered", _tampered(_recorded(JSON_CASE))),
        ("here: aggregate", _recorded(AGGREGATE_CASE)),
        ("here: table aggregate", _recorded(TABLE_AGGREGATE_CASE)),
        ("here: windowed", _recorded(WINDOWED_CASE)),
        ("here: tampered aggregate", _tampered_aggregate(_recorded(AGGREGATE_CASE))),
        ("here: join", _recorded(JOIN_CASE)),
        ("here: join aggregate", _recorded(JOIN_AGGREGATE_CASE)),
    ]
    result = replay(recorded)
    assert result.replayed == 10
    assert sorted(name for name, _ in result.differences) == [
        "here: tampered",
        "here: tampered aggregate",
    ], result.differences
    [(_, what)] = [d for d in result.differences if d[0] == "here: tampered aggregate"]
    assert what.startswith("CTAS_OUT_1, call 1 (1 record(s))"), what
    assert result.agreed == 8
    assert result.stateful == 6
    assert result.calls == 4 + 1 + 3 + 4 + 6 + 4 + 3 + 6 + 5 + 5
