"""``GET /metrics`` (gateway/metrics.py): Prometheus' text format, traffic and state.

In process (no Spark): HTTP, pull-query and error counters, table partitions and the command log,
checked against what the server itself reports. As a user runs it (a ``headwater server`` with
Spark): a CSAS and a CTAS under load, scraped twice; the rates and lags move, and the values match
SHOW QUERIES EXTENDED and ``/clusterStatus``.
"""

from __future__ import annotations

import os
import re
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from headwater.engine.spark.host import EngineHealth
from headwater.gateway.app import ROUTES, create_app
from headwater.gateway.exposition import go_float
from headwater.gateway.metrics import UNMATCHED, ServerMetrics, route_templates
from headwater.gateway.metrics_state import tree_rss
from headwater.gateway.services import Services
from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import producer
from headwater.metastore.runner import ApplyLatency

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette wants httpx2 for its TestClient
    from starlette.testclient import TestClient

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str) -> Samples:
    """Every sample of an exposition, by name and labels (the parser rejects a malformed one)."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: Samples, name: str, **labels: str) -> float | None:
    return found.get((name, frozenset(labels.items())))


def named(found: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: v for (n, labels), v in found.items() if n == name}


# -- pure --------------------------------------------------------------------------------------


def test_route_labels_are_the_routes_templates() -> None:
    templates = route_templates(ROUTES)
    assert "/query" in templates.values() and "/status/{command_id:path}" in templates.values()
    assert "/metrics" in templates.values()
    assert any(t.startswith("/registry/subjects") for t in templates.values())


def test_tree_rss_sums_a_process_tree() -> None:
    mine = tree_rss(os.getpid())
    assert mine.get("python", 0) > 10 << 20  # this pytest process alone
    assert tree_rss(2**22 + 7) == {}  # no such process
    assert tree_rss(1, Path("/nonexistent")) == {}


def _stand_in(statuses: dict[str, dict[str, Any]]) -> Any:
    """Just what StateCollector reads of a server, with ``statuses`` as its engine's."""
    engine = SimpleNamespace(
        statuses=lambda: statuses, health=lambda: EngineHealth("UP", os.getpid(), 1.5e9)
    )
    return SimpleNamespace(
        queries=engine,
        tables=None,
        control=None,
        cluster=None,
        advertised="127.0.0.1:1",
        runner=SimpleNamespace(
            position=7,
            end_seen=lambda: 9,
            catalog=SimpleNamespace(sources={}, queries={}),
            apply_latency=lambda: ApplyLatency(3, 0.125, 0.05),
        ),
        admin=SimpleNamespace(list_topics=lambda timeout: SimpleNamespace(brokers={1: "b"})),
        limits=SimpleNamespace(kafka_probe_timeout_s=1.0),
        admission=SimpleNamespace(queued=0),
        scans=SimpleNamespace(queued=1),
        push=SimpleNamespace(running=lambda: ["p1"]),
    )


def test_the_fast_text_format_writes_what_prometheus_client_writes() -> None:
    # Label values a hostile name could bring: quotes, backslashes, newlines, non-ASCII.
    odd = 'Q"1\\x\nÿ'
    statuses = {
        odd: {
            "state": "ERROR",
            "records": 3,
            "errors": 1,
            "lastErrorMs": 1_700_000_000_123,
            "processed": {'t"opic\n': {"0": 5, "1": 7}},
            "ends": {'t"opic\n': {"0": 9, "1": 7}},
            "lagMs": {'t"opic\n': {"0": 1_500, "1": 0}},
            "lastBatchMs": 12,
        },
        "CSAS_OK_1": {"state": "RUNNING", "records": 1e20, "batches": 2, "restarts": 1},
    }
    metrics = ServerMetrics()
    metrics.watch(_stand_in(statuses))  # type: ignore[arg-type]
    metrics.pull_answered(0.002)
    metrics.error(40001)
    fast, media_type = metrics.exposition()
    assert media_type.startswith("text/plain; version=0.0.4")
    assert fast == generate_latest(metrics.everything)  # byte for byte, sorted labels included
    found = samples(fast.decode())
    assert value(found, "headwater_query_state", query_id=odd, state="ERROR") == 1.0
    lag = value(
        found, "headwater_query_source_lag_records", query_id=odd, topic='t"opic\n', partition="0"
    )
    assert lag == 4.0
    behind = value(
        found, "headwater_query_source_lag_seconds", query_id=odd, topic='t"opic\n', partition="0"
    )
    assert behind == 1.5
    assert value(found, "headwater_query_records_written_total", query_id="CSAS_OK_1") == 1e20
    assert value(found, "headwater_queries", state="ERROR") == 1.0
    assert value(found, "headwater_command_log_lag_records") == 2.0
    assert value(found, "headwater_commands_applied_total") == 3.0
    assert value(found, "headwater_command_apply_seconds_total") == 0.125
    assert value(found, "headwater_kafka_up") == 1.0
    assert value(found, "headwater_kafka_brokers") == 1.0
    # OpenMetrics on request, from the library
    text, media_type = metrics.exposition("application/openmetrics-text; version=1.0.0")
    assert media_type.startswith("application/openmetrics-text") and text.endswith(b"# EOF\n")


@pytest.mark.parametrize(
    "number",
    [
        0.0,
        -0.0,
        1.0,
        -3.5,
        0.1,
        999_999.0,
        1_000_000.0,
        1234567.5,
        1e15,
        1e16,
        1e20,
        1e-7,
        -1e20,
        float("inf"),
        float("-inf"),
        float("nan"),
        2.0**53 + 2,
    ],
)
def test_float_spelling_is_prometheus_clients(number: float) -> None:
    from prometheus_client.utils import floatToGoString

    assert go_float(number) == floatToGoString(number)


# -- in process --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def services(memory_services: Callable[..., Services]) -> Services:
    return memory_services("metrics")


@pytest.fixture(scope="module")
def client(services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(services)) as test_client:
        yield test_client


def _scrape(client: TestClient) -> Samples:
    answer = client.get("/metrics")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    return samples(answer.text)


def _statement(client: TestClient, ksql: str) -> None:
    answer = client.post("/ksql", json={"ksql": ksql})
    assert answer.status_code == 200, answer.text


@pytest.mark.kafka
def test_traffic_and_state_are_counted_and_match_the_server(
    client: TestClient, services: Services
) -> None:
    name = f"M_{uuid.uuid4().hex[:6].upper()}"
    _statement(
        client,
        f"CREATE TABLE {name} (ID STRING PRIMARY KEY, N INT) WITH "
        f"(kafka_topic='{name.lower()}', partitions=2, value_format='JSON');",
    )
    before = _scrape(client)
    for i in range(6):
        _statement(client, f"INSERT INTO {name} (ID, N) VALUES ('k{i}', {i});")
    deadline = time.monotonic() + 15
    while True:
        answer = client.post("/query", json={"ksql": f"SELECT * FROM {name};"})
        rows = [i for i in answer.json() if "row" in i] if answer.status_code == 200 else []
        if len(rows) == 6:
            break
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.05)
    looked_up = client.post("/query", json={"ksql": f"SELECT * FROM {name} WHERE ID = 'k1';"})
    assert looked_up.status_code == 200
    bad = client.post("/ksql", json={"ksql": "SELEKT 1;"})
    assert bad.status_code == 400 and bad.json()["error_code"] == 40001
    missing = client.post("/query", json={"ksql": "SELECT * FROM NO_SUCH_TABLE;"})
    assert missing.status_code == 400
    for path in ("/nope", "/made/up/1", "/made/up/2"):
        assert client.get(path).status_code == 404

    after = _scrape(client)
    ok = value(after, "headwater_pull_queries_total", outcome="ok") or 0
    assert ok - (value(before, "headwater_pull_queries_total", outcome="ok") or 0) >= 2
    assert (value(after, "headwater_pull_query_duration_seconds_count") or 0) >= ok
    posted = value(
        after, "headwater_http_requests_total", route="/ksql", method="POST", status="200"
    )
    assert posted is not None and posted >= 7
    assert value(after, "headwater_errors_total", code="40001") == 2.0  # both refused statements
    assert value(after, "headwater_errors_total", code="40400") == 3.0  # the made-up paths
    failed_answers = sum(
        v
        for labels, v in named(after, "headwater_http_requests_total").items()
        if int(dict(labels)["status"]) >= 400
    )
    assert sum(named(after, "headwater_errors_total").values()) == failed_answers
    # made-up paths share one series: a client cannot grow the exposition
    assert (
        value(after, "headwater_http_requests_total", route=UNMATCHED, method="GET", status="404")
        == 3.0
    )
    routes = {dict(labels)["route"] for labels in named(after, "headwater_http_requests_total")}
    assert not any(r.startswith("/made") or r == "/nope" for r in routes)

    # state: what the server's own objects say now
    tables = services.tables
    assert tables is not None
    lags = tables.local_lags()[name]
    for partition, info in lags.items():
        labels = {"table": name, "partition": str(partition), "role": "active"}
        assert (
            value(after, "headwater_table_partition_offset", **labels)
            == info.current_offset_position
        )
        assert value(after, "headwater_table_partition_lag_records", **labels) == 0.0
    assert sum(info.current_offset_position for info in lags.values()) == 6
    assert value(after, "headwater_command_log_offset") == services.runner.position
    assert value(after, "headwater_catalog_sources") == len(services.runner.catalog.sources)
    assert value(after, "headwater_pull_queue_depth", kind="any") == 0.0
    # the CREATE, decided live: its latency counted, as the runner reports it
    applied = value(after, "headwater_commands_applied_total") or 0
    assert applied >= 1 and applied == services.runner.apply_latency().commands
    assert 0 <= (value(after, "headwater_command_last_apply_seconds") or -1) < 10
    assert value(after, "headwater_kafka_up") == 1.0
    assert (value(after, "headwater_kafka_brokers") or 0) >= 1
    assert 0 < (value(after, "headwater_kafka_probe_duration_seconds") or 0) < 2


@pytest.mark.kafka
def test_refused_push_and_pull_queries_are_counted_apart(
    client: TestClient, services: Services
) -> None:
    name = f"R_{uuid.uuid4().hex[:6].upper()}"
    _statement(
        client,
        f"CREATE STREAM {name} (ID STRING KEY, N INT) WITH "
        f"(kafka_topic='{name.lower()}', partitions=1, value_format='JSON');",
    )
    registry = client.app.state.push_queries  # type: ignore[attr-defined]
    before = _scrape(client)
    most, registry.max_running = registry.max_running, 0
    try:
        refused = client.post("/query", json={"ksql": f"SELECT * FROM {name} EMIT CHANGES;"})
    finally:
        registry.max_running = most
    assert refused.status_code == 429, refused.text
    after = _scrape(client)

    def moved(name: str, **labels: str) -> float:
        return (value(after, name, **labels) or 0) - (value(before, name, **labels) or 0)

    assert moved("headwater_push_queries_refused_total", code="42900") == 1
    assert moved("headwater_push_queries_started_total") == 0
    assert moved("headwater_errors_total", code="42900") == 1

    metrics = ServerMetrics()  # the pull side's outcomes, and a push start's time
    metrics.pull_failed(0.001, rejected=True)
    metrics.pull_failed(0.001)
    metrics.push_began(0.25)
    found = samples(generate_latest(metrics.registry).decode())
    assert value(found, "headwater_pull_queries_total", outcome="rejected") == 1
    assert value(found, "headwater_pull_queries_total", outcome="error") == 1
    assert value(found, "headwater_push_query_start_duration_seconds_count") == 1
    assert value(found, "headwater_push_query_start_duration_seconds_bucket", le="0.25") == 1
    assert value(found, "headwater_push_query_start_duration_seconds_bucket", le="0.1") == 0


@pytest.mark.kafka
def test_a_scrape_is_quick_and_needs_the_same_authentication(
    memory_services: Callable[..., Services],
) -> None:
    from headwater.gateway.auth import Authentication, Credential

    services = memory_services("metrics-auth")
    users = {"ops": Credential("s3cret", None)}
    guarding = Authentication("headwater", users)
    with TestClient(create_app(services, authentication=guarding)) as guarded:
        refused = guarded.get("/metrics")
        assert refused.status_code == 401
        started = time.perf_counter()
        for _ in range(20):
            assert guarded.get("/metrics", auth=("ops", "s3cret")).status_code == 200
        assert (time.perf_counter() - started) / 20 < 0.25  # generous: bench has the figure
        text = guarded.get("/metrics", auth=("ops", "s3cret")).text
        found = samples(text)
        assert (
            value(
                found, "headwater_http_requests_total", route=UNMATCHED, method="GET", status="401"
            )
            == 1.0
        )
    open_paths = Authentication("headwater", users, skip_paths=("/metrics",))
    with TestClient(create_app(services, authentication=open_paths)) as scraper:
        assert scraper.get("/metrics").status_code == 200
        assert scraper.get("/info").status_code == 401


# -- a server with Spark -----------------------------------------------------------------------


def _ok(response: Any) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.kafka
@pytest.mark.slow
def test_a_csas_and_a_ctas_under_load_move_their_metrics(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6].upper()
    rides, fast, counts = f"RIDES_{suffix}", f"FAST_{suffix}", f"COUNTS_{suffix}"
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(tmp_path / "node"),
        "--service-id",
        f"metrics_{suffix}",
    )
    _ok(
        server.ksql(
            f"CREATE STREAM {rides} (id VARCHAR KEY, km INT) WITH "
            f"(kafka_topic='{rides}', partitions=2, value_format='JSON');"
        )
    )
    _ok(server.ksql(f"CREATE STREAM {fast} AS SELECT id, km FROM {rides} WHERE km > 2;"))
    _ok(server.ksql(f"CREATE TABLE {counts} AS SELECT id, COUNT(*) AS n FROM {rides} GROUP BY id;"))

    stop = threading.Event()
    written = [0]

    def load() -> None:
        out = producer(memory_broker.settings(), "metrics-load")
        while not stop.is_set():
            for _ in range(50):
                i = written[0]
                out.produce(rides, key=f"k{i % 20}".encode(), value=f'{{"KM": {i % 5}}}'.encode())
                written[0] += 1
            out.flush(5)
            time.sleep(0.05)
        out.flush(5)

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    try:

        def scrape() -> Samples:
            answer = httpx.get(f"{server.url}/metrics", timeout=10)
            assert answer.status_code == 200, answer.text
            return samples(answer.text)

        def queries(found: Samples) -> dict[str, str]:
            running = named(found, "headwater_query_state")
            return {
                dict(labels)["query_id"]: dict(labels)["state"]
                for labels, v in running.items()
                if v == 1.0
            }

        deadline = time.monotonic() + 180
        while True:
            first = scrape()
            states = queries(first)
            written_now = named(first, "headwater_query_records_written_total")
            if (
                len(states) == 2
                and set(states.values()) == {"RUNNING"}
                and len(written_now) == 2
                and all(v > 0 for v in written_now.values())
            ):
                break
            assert time.monotonic() < deadline, f"queries not running with output: {states}"
            time.sleep(1)

        def read(found: Samples, query_id: str) -> tuple[float, float]:
            written = value(found, "headwater_query_records_written_total", query_id=query_id)
            offsets = [
                v
                for labels, v in named(found, "headwater_query_source_offset").items()
                if dict(labels)["query_id"] == query_id
            ]
            return written or 0.0, sum(offsets)

        # Under load both counters move (a micro-batch may take seconds on a busy machine: the
        # offsets move when it ends, the records written while it writes).
        deadline = time.monotonic() + 60
        while True:
            time.sleep(2)
            second = scrape()
            moved = {
                q: all(b > a for a, b in zip(read(first, q), read(second, q), strict=True))
                for q in states
            }
            if all(moved.values()):
                break
            assert time.monotonic() < deadline, f"written and read did not both move: {moved}"
        for query_id in states:
            label = {"query_id": query_id}
            partitions = {
                dict(labels)["partition"]
                for labels in named(second, "headwater_query_source_offset")
                if dict(labels)["query_id"] == query_id
            }
            assert partitions == {"0", "1"}
            lags = [
                v
                for labels, v in named(second, "headwater_query_source_lag_records").items()
                if dict(labels)["query_id"] == query_id
            ]
            assert len(lags) == 2 and all(v >= 0 for v in lags)
            behind = [
                v
                for labels, v in named(second, "headwater_query_source_lag_seconds").items()
                if dict(labels)["query_id"] == query_id
            ]
            assert behind and all(0 <= v < 120 for v in behind), behind
            assert (value(second, "headwater_query_last_batch_duration_seconds", **label) or 0) > 0
        assert value(second, "headwater_spark_up") == 1.0
        memory = named(second, "headwater_spark_memory_bytes")
        assert memory.get(frozenset({("process", "jvm")}), 0) > 100 << 20
    finally:
        stop.set()
        loader.join(10)

    # Quiet: the figures must equal what SHOW QUERIES EXTENDED and /clusterStatus say.
    deadline = time.monotonic() + 60
    while True:
        found = scrape()
        lag = named(found, "headwater_query_source_lag_records")
        if lag and all(v == 0 for v in lag.values()):
            time.sleep(1.5)  # the sinks' counters after their last batch
            found = scrape()
            shown = _ok(server.ksql("SHOW QUERIES EXTENDED;"))[0]["queryDescriptions"]
            again = scrape()
            if named(found, "headwater_query_records_written_total") == named(
                again, "headwater_query_records_written_total"
            ):
                break
        assert time.monotonic() < deadline, f"the queries never caught up: {lag}"
        time.sleep(1)
    # caught up: no lag in event time either
    assert named(again, "headwater_query_source_lag_seconds")
    assert set(named(again, "headwater_query_source_lag_seconds").values()) == {0.0}
    for query in shown:
        statistics = query["statistics"]
        match = re.search(r"messages-written: (\d+)", statistics)
        assert match, statistics
        label = {"query_id": query["id"]}
        assert value(again, "headwater_query_records_written_total", **label) == int(match[1])
        assert value(again, "headwater_query_state", state=query["state"], **label) == 1.0
    status = _ok(httpx.get(f"{server.url}/clusterStatus", timeout=10))["clusterStatus"]
    (host,) = status.values()
    table_lags = host["hostStoreLags"]["stateStoreLags"][counts]["lagByPartition"]
    for partition, lag_info in table_lags.items():
        offset = value(
            again,
            "headwater_table_partition_offset",
            table=counts,
            partition=partition,
            role="active",
        )
        assert offset == lag_info["currentOffsetPosition"]
    assert value(again, "headwater_cluster_is_controller") == 1.0
    assert server.stop() == 0
