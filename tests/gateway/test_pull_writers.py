"""A pull answer from a table written by a persistent query says how current that query is, and a
bounded query is refused while it is not (issue 28, finding 6: for 75-110 s after a CTAS, while
Spark started, pull queries answered "0 rows ... lag 0"). The query engine is a fake here: its
statuses are what the Spark driver reports."""

from __future__ import annotations

import dataclasses
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from headwater.cluster._lags import lag_body, parse_lag_body
from headwater.gateway.app import create_app
from headwater.gateway.errors import KsqlError
from headwater.gateway.services import Services
from headwater.gateway.writers import WrittenBy, changelog_bound, check_writers, query_lag

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette wants httpx2 for its TestClient
    from starlette.testclient import TestClient


# -- pure ------------------------------------------------------------------------------------------


def test_a_querys_lag_is_what_its_sources_hold_beyond_what_it_processed() -> None:
    ends = {"a": {0: 10, 1: 4}, "b": {0: 7}}

    def now(topic: str, hints: Mapping[int, int]) -> Mapping[int, int] | None:
        return ends.get(topic)

    assert query_lag({"a": {"0": 8, "1": 4}}, [("a", 2)], now) == 2
    assert query_lag({"a": {"0": 8, "1": 4}, "b": {"0": 0}}, [("a", 2), ("b", 1)], now) == 9
    assert query_lag({"a": {"0": 8}}, [("a", 2)], now) is None  # a partition it never reported
    assert query_lag({"c": {"0": 0}}, [("c", 1)], now) is None  # end offsets unknown


def test_a_bounded_query_is_refused_unless_every_writer_runs_within_the_bound() -> None:
    running = WrittenBy("CTAS_T_3", "RUNNING", 4)
    check_writers("T", [running], 4, True)
    check_writers("T", [WrittenBy("CTAS_T_3", "PENDING", None, "starting")], 4, False)  # unbounded
    for writer, said in [
        (WrittenBy("CTAS_T_3", "PENDING", None, "starting"), "is PENDING (starting)"),
        (WrittenBy("CTAS_T_3", "ERROR", None, "boom"), "is ERROR (boom)"),
        (WrittenBy("CTAS_T_3", "RUNNING", None), "unknown lag"),
        (WrittenBy("CTAS_T_3", "RUNNING", 5), "5 records behind"),
    ]:
        with pytest.raises(KsqlError) as refused:
            check_writers("T", [writer], 4, True)
        assert refused.value.error_code == 50302 and refused.value.retriable
        assert "CTAS_T_3" in refused.value.message and said in refused.value.message
    assert changelog_bound(10, [running]) == 6 and changelog_bound(3, [running]) == 0


def test_lag_reports_carry_the_queries_their_server_runs() -> None:
    statuses = {
        "CTAS_T_3": {"state": "RUNNING", "message": "", "records": 5, "processed": {"s": {"0": 7}}},
        "CTAS_U_4": {"state": "PENDING", "message": "starting"},
    }
    body = lag_body("h:1", {}, 1000, statuses)
    sender, report = parse_lag_body(body, 1001)
    assert sender == "h:1"
    assert report.queries == {
        "CTAS_T_3": {"state": "RUNNING", "message": "", "processed": {"s": {"0": 7}}},
        "CTAS_U_4": {"state": "PENDING", "message": "starting"},
    }
    assert parse_lag_body(lag_body("h:1", {}, 1000), 1001)[1].queries == {}  # an older sender


# -- a server (the embedded broker, no Spark) ------------------------------------------------------


class _Engine:
    """Stands for the Spark query engine: reports whatever ``now`` holds."""

    spark_state = "UP"

    def __init__(self) -> None:
        self.now: dict[str, dict[str, Any]] = {}

    def statuses(self) -> dict[str, dict[str, Any]]:
        return {q: dict(s) for q, s in self.now.items()}


@pytest.fixture(scope="module")
def node(memory_services: Callable[..., Services]) -> Iterator[tuple[TestClient, _Engine]]:
    engine = _Engine()
    services = dataclasses.replace(memory_services("writers"), queries=engine)  # type: ignore[arg-type]
    with TestClient(create_app(services)) as client:
        yield client, engine


def _ksql(client: TestClient, text: str) -> Any:
    answer = client.post("/ksql", json={"ksql": text})
    assert answer.status_code == 200, answer.text
    return answer.json()


def _pull(client: TestClient, text: str, **properties: Any) -> Any:
    return client.post("/query", json={"ksql": text, "streamsProperties": properties})


@pytest.mark.kafka
def test_a_pull_answer_says_the_writing_querys_state_and_lag(
    node: tuple[TestClient, _Engine],
) -> None:
    client, engine = node
    name = uuid.uuid4().hex[:6].upper()
    source, table = f"S_{name}", f"T_{name}"
    _ksql(
        client,
        f"CREATE STREAM {source} (ID STRING KEY, V INT) WITH (kafka_topic="
        f"'{source.lower()}', partitions=1, value_format='JSON');",
    )
    _ksql(client, f"CREATE TABLE {table} AS SELECT ID, COUNT(*) AS N FROM {source} GROUP BY ID;")
    query_id = next(
        q["id"] for q in _ksql(client, "SHOW QUERIES;")[0]["queries"] if q["sinks"] == [table]
    )
    for i in range(3):
        _ksql(client, f"INSERT INTO {source} (ID, V) VALUES ('k{i}', {i});")
    text = f"SELECT * FROM {table};"

    engine.now = {query_id: {"state": "PENDING", "message": "starting: Spark has not ..."}}
    answer = _pull(client, text)  # unbounded: answered, saying the query is not running yet
    assert answer.status_code == 200, answer.text
    header = answer.json()[0]["header"]
    assert header["writtenBy"] == [{"queryId": query_id, "state": "PENDING", "lag": None}]
    assert "servedBy" in header
    refused = _pull(client, text, **{"acceptable.offset.lag": 10})
    assert refused.status_code == 503, refused.text
    body = refused.json()
    assert body["error_code"] == 50302 and f"query {query_id} is PENDING" in body["message"]

    engine.now = {query_id: {"state": "ERROR", "message": "boom"}}
    refused = _pull(client, text, **{"ksql.query.pull.max.allowed.offset.lag": 10})
    assert refused.status_code == 503 and "is ERROR (boom)" in refused.json()["message"]

    # running, but it has processed one of the three records of its source
    engine.now = {
        query_id: {"state": "RUNNING", "message": "", "processed": {source.lower(): {"0": 1}}}
    }
    deadline = time.monotonic() + 10
    while True:
        within = _pull(client, text, **{"acceptable.offset.lag": 2})
        if within.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.1)  # the inserts reach the source topic's end
    assert within.status_code == 200, within.text
    assert within.json()[0]["header"]["writtenBy"] == [
        {"queryId": query_id, "state": "RUNNING", "lag": 2}
    ]
    beyond = _pull(client, text, **{"acceptable.offset.lag": 1})
    assert beyond.status_code == 503, beyond.text
    assert f"query {query_id} is RUNNING, 2 records behind" in beyond.json()["message"]
    lookup = _pull(client, f"SELECT * FROM {table} WHERE ID = 'k1';")  # the event loop's path
    assert lookup.status_code == 200, lookup.text
    assert lookup.json()[0]["header"]["writtenBy"][0]["state"] == "RUNNING"
