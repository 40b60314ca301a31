"""ksqlDB's REST API as its documentation shows it, driven against a real ``headwater server`` over
HTTP/1.1 and over HTTP/2 cleartext (prior knowledge, as ksqlDB's Java client speaks it).

Each request below is one of the documented shapes (docs.ksqldb.io, "REST API": /info, /healthcheck,
/ksql with streamsProperties and commandSequenceNumber, /query, /query-stream with the JSON and the
delimited answers, /inserts-stream, /close-query); each answer is checked for the fields a ksqlDB
client library reads. One server serves both protocols on one port.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from headwater.kafka.broker import EmbeddedBroker

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

KSQL_V1 = "application/vnd.ksql.v1+json"


@pytest.fixture(scope="module")
def compat_server(
    memory_broker: EmbeddedBroker,
    module_server_factory: Any,
    tmp_path_factory: pytest.TempPathFactory,
) -> Any:
    """One server for the module: the REST shapes need no Spark."""
    folder = tmp_path_factory.mktemp("compat")
    return module_server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(folder / "node"),
        "--service-id",
        f"compat_{uuid.uuid4().hex[:6]}",
    )


def _client(protocol: str, timeout: float = 30) -> httpx.Client:
    """A client speaking only HTTP/1.1, or only HTTP/2 (h2c with prior knowledge)."""
    return httpx.Client(http1=protocol == "HTTP/1.1", http2=protocol == "HTTP/2", timeout=timeout)


@pytest.fixture(params=["HTTP/1.1", "HTTP/2"])
def protocol(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def client(protocol: str) -> Iterator[httpx.Client]:
    with _client(protocol) as made:
        yield made


def test_info_and_healthcheck(compat_server: Any, client: httpx.Client, protocol: str) -> None:
    info = client.get(f"{compat_server.url}/info", headers={"Accept": KSQL_V1})
    assert info.status_code == 200
    assert info.http_version == protocol
    server_info = info.json()["KsqlServerInfo"]
    assert {"version", "kafkaClusterId", "ksqlServiceId"} <= set(server_info)
    health = client.get(f"{compat_server.url}/healthcheck").json()
    assert health["isHealthy"] is True and "details" in health


def test_ksql_statements_and_their_entities(compat_server: Any, client: httpx.Client) -> None:
    name = f"S_{uuid.uuid4().hex[:6].upper()}"
    created = client.post(
        f"{compat_server.url}/ksql",
        headers={"Accept": KSQL_V1},
        json={
            "ksql": f"CREATE STREAM {name} (ID STRING KEY, N INT) WITH (kafka_topic='{name.lower()}', "
            "partitions=1, value_format='JSON');",
            "streamsProperties": {"ksql.streams.auto.offset.reset": "earliest"},
        },
    )
    assert created.status_code == 200, created.text
    (status,) = created.json()
    assert status["@type"] == "currentStatus"
    assert status["commandStatus"]["status"] == "SUCCESS"
    sequence = status["commandSequenceNumber"]
    listed = client.post(
        f"{compat_server.url}/ksql",
        json={
            "ksql": f"SHOW STREAMS; DESCRIBE {name}; SHOW PROPERTIES;",
            "commandSequenceNumber": sequence,
        },
    ).json()
    assert [e["@type"] for e in listed] == ["streams", "sourceDescription", "properties"]
    assert name in [s["name"] for s in listed[0]["streams"]]
    assert [f["name"] for f in listed[1]["sourceDescription"]["fields"]] == ["ID", "N"]
    assert {"name", "scope", "value"} <= set(listed[2]["properties"][0])
    refused = client.post(f"{compat_server.url}/ksql", json={"ksql": "CREATE STREAM;"})
    assert refused.status_code == 400
    assert {"@type", "error_code", "message"} <= set(refused.json())


def _stream(compat_server: Any, client: httpx.Client) -> str:
    name = f"P_{uuid.uuid4().hex[:6].upper()}"
    answer = client.post(
        f"{compat_server.url}/ksql",
        json={
            "ksql": f"CREATE STREAM {name} (ID STRING KEY, N INT) WITH (kafka_topic='{name.lower()}', "
            "partitions=1, value_format='JSON');"
        },
    )
    assert answer.status_code == 200, answer.text
    return name


def test_inserts_stream_then_push_query_stream(compat_server: Any, client: httpx.Client) -> None:
    name = _stream(compat_server, client)
    body = (
        "\n".join(
            json.dumps(item)
            for item in (
                {"target": name},
                {"ID": "a", "N": 1},
                {"ID": "b", "N": "not a number"},
                {"ID": "c", "N": 3},
            )
        )
        + "\n"
    )
    acks = client.post(f"{compat_server.url}/inserts-stream", content=body.encode())
    assert acks.status_code == 200, acks.text
    items = [json.loads(line) for line in acks.text.splitlines() if line.strip()]
    assert items[0] == {"status": "ok", "seq": 0} and items[2] == {"status": "ok", "seq": 2}
    assert items[1]["status"] == "error" and items[1]["seq"] == 1 and "error_code" in items[1]

    with client.stream(
        "POST",
        f"{compat_server.url}/query-stream",
        json={
            "sql": f"SELECT * FROM {name} EMIT CHANGES LIMIT 2;",
            "properties": {"auto.offset.reset": "earliest"},
        },
    ) as streamed:
        lines = [json.loads(line) for line in streamed.iter_lines() if line.strip()]
    header, rows = lines[0], lines[1:]
    assert {"queryId", "columnNames", "columnTypes"} <= set(header)
    assert header["columnNames"] == ["ID", "N"] and header["columnTypes"] == ["STRING", "INTEGER"]
    assert rows == [["a", 1], ["c", 3]]


def test_query_stream_delimited_answer(compat_server: Any, client: httpx.Client) -> None:
    name = _stream(compat_server, client)
    client.post(
        f"{compat_server.url}/ksql", json={"ksql": f"INSERT INTO {name} (ID, N) VALUES ('x', 7);"}
    ).raise_for_status()
    with client.stream(
        "POST",
        f"{compat_server.url}/query-stream",
        headers={"Accept": "application/vnd.ksqlapi.delimited.v1"},
        json={
            "sql": f"SELECT * FROM {name} EMIT CHANGES LIMIT 1;",
            "properties": {"auto.offset.reset": "earliest"},
        },
    ) as streamed:
        assert streamed.status_code == 200
        lines = [json.loads(line) for line in streamed.iter_lines() if line.strip()]
    assert "queryId" in lines[0] and lines[1] == ["x", 7]


def test_close_query_ends_a_push_query_of_another_connection(
    compat_server: Any, client: httpx.Client, protocol: str
) -> None:
    name = _stream(compat_server, client)
    seen: list[str] = []

    def follow() -> None:
        with (
            _client(protocol, timeout=60) as other,
            other.stream(
                "POST",
                f"{compat_server.url}/query-stream",
                json={"sql": f"SELECT * FROM {name} EMIT CHANGES;"},
            ) as streamed,
        ):
            for line in streamed.iter_lines():
                if line.strip():
                    seen.append(line)

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
    assert seen, "no header from the push query"
    query_id = json.loads(seen[0])["queryId"]
    closed = client.post(f"{compat_server.url}/close-query", json={"queryId": query_id})
    assert closed.status_code == 200
    thread.join(15)
    assert not thread.is_alive(), "the push query went on after /close-query"


def test_query_endpoint_pull_and_push_arrays(compat_server: Any, client: httpx.Client) -> None:
    name = _stream(compat_server, client)
    client.post(
        f"{compat_server.url}/ksql", json={"ksql": f"INSERT INTO {name} (ID, N) VALUES ('p', 5);"}
    ).raise_for_status()
    answer = client.post(
        f"{compat_server.url}/query",
        headers={"Accept": KSQL_V1},
        json={
            "ksql": f"SELECT * FROM {name} EMIT CHANGES LIMIT 1;",
            "streamsProperties": {"auto.offset.reset": "earliest"},
        },
    )
    assert answer.status_code == 200, answer.text
    items = json.loads(answer.text)
    assert "header" in items[0] and "schema" in items[0]["header"]
    assert items[1] == {"row": {"columns": ["p", 5]}}
    assert items[-1] == {"finalMessage": "Limit Reached"}
    deadline = time.monotonic() + 10
    while True:  # a pull query over a stream scans its topic
        pulled = client.post(
            f"{compat_server.url}/query", json={"ksql": f"SELECT * FROM {name} WHERE ID = 'p';"}
        )
        rows = [i["row"]["columns"] for i in pulled.json() if "row" in i]
        if rows or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert rows == [["p", 5]]
