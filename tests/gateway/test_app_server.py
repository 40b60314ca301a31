"""GET /info and /healthcheck, and the DB-API driver against the server over a real uvicorn."""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from headwater import dbapi
from headwater.gateway.app import create_app
from headwater.gateway.services import Services
from headwater.gateway.startup import open_services
from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import KafkaSettings
from headwater.metastore.codec import catalog_digest

with warnings.catch_warnings():
    # Starlette 1.10 wants httpx2 for its TestClient and warns when it falls back on httpx.
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def settings(memory_broker: EmbeddedBroker) -> KafkaSettings:
    return dataclasses.replace(
        memory_broker.settings(),
        init_transactions_timeout_ms=3000,
        commit_transaction_timeout_ms=1500,
    )


@pytest.fixture(scope="module")
def services(
    settings: KafkaSettings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Services]:
    service_id = f"app-server-{uuid.uuid4().hex[:8]}"
    with open_services(settings, service_id, tmp_path_factory.mktemp("srv")) as built:
        yield built


@pytest.fixture(scope="module")
def server_url(services: Services) -> Iterator[str]:
    """The app served by uvicorn on a free loopback port, in a thread; stopped at teardown."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(services), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


def test_info_and_healthcheck(services: Services) -> None:
    with TestClient(create_app(services)) as client:
        info = client.get("/info").json()
        health = client.get("/healthcheck")
    assert info["KsqlServerInfo"] == {
        "version": "0.29.0",  # the ksqlDB release whose API this is: clients gate features on it
        "kafkaClusterId": services.info.kafka_cluster_id,
        "ksqlServiceId": services.info.service_id,
        "serverStatus": "RUNNING",
    }
    assert info["catalogDigest"] == catalog_digest(services.runner.catalog)
    assert info["headwaterVersion"] == services.info.version
    assert health.status_code == 200
    assert health.json() == {
        "isHealthy": True,
        "details": {
            "metastore": {"isHealthy": True},
            "kafka": {"isHealthy": True},
            "commandRunner": {"isHealthy": True, "state": "RUNNING", "reason": ""},
        },
    }


def test_stopped_runner_is_reported(settings: KafkaSettings) -> None:
    with open_services(settings, f"app-down-{uuid.uuid4().hex[:8]}", None) as services:
        services.runner.stop()
        with TestClient(create_app(services)) as client:
            info = client.get("/info").json()
            health = client.get("/healthcheck")
    assert info["KsqlServerInfo"]["serverStatus"] == "DEGRADED"
    assert health.status_code == 503
    body: dict[str, Any] = health.json()
    assert body["isHealthy"] is False
    assert body["details"]["commandRunner"]["state"] == "STOPPED"
    assert body["details"]["kafka"] == {"isHealthy": True}


def test_driver_and_server_agree(server_url: str) -> None:
    stream = f"DRV_{uuid.uuid4().hex[:6]}".upper()
    with dbapi.connect(server_url, retries=0) as connection:
        cursor = connection.cursor()
        cursor.execute(
            f"CREATE STREAM {stream} (ID STRING KEY, V DECIMAL(4, 2)) "
            f"WITH (kafka_topic='{stream.lower()}', value_format='JSON', partitions=1);"
        )
        assert cursor.fetchall()[0][1:] == ("SUCCESS", "Stream created")
        cursor.execute("SHOW STREAMS;")
        rows = [tuple(r) for r in cursor.fetchall()]
        assert (stream, stream.lower(), "KAFKA", "JSON", False) in rows
        cursor.execute(f"DESCRIBE {stream};")
        assert [tuple(r) for r in cursor.fetchall()] == [
            ("ID", "VARCHAR(STRING)  (key)"),
            ("V", "DECIMAL(4, 2)"),
        ]
        with pytest.raises(dbapi.ProgrammingError) as caught:
            cursor.execute("SHOW STREAMS;\nCREATE STREM x;")
        assert caught.value.error_code == 40001
        assert caught.value.line == 2
        cursor.execute(f"DROP STREAM {stream} DELETE TOPIC;")
        assert cursor.fetchall()[0][1] == "SUCCESS"


def test_answers_in_the_media_type_asked_for(services: Services) -> None:
    ksql_v1 = "application/vnd.ksql.v1+json"
    with TestClient(create_app(services)) as client:
        asked = client.get("/info", headers={"Accept": ksql_v1})
        plain = client.get("/info")
        statement = client.post(
            "/ksql",
            json={"ksql": "SHOW STREAMS;"},
            headers={"Accept": f"{ksql_v1}, application/json"},
        )
    assert asked.headers["content-type"] == ksql_v1 and asked.json()["KsqlServerInfo"]
    assert plain.headers["content-type"] == "application/json"
    assert statement.status_code == 200 and statement.headers["content-type"] == ksql_v1
