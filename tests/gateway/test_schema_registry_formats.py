"""AVRO, JSON_SR and PROTOBUF through a real server and a schema registry speaking Confluent's REST API:
columns inferred from the registry, INSERT registers the schema, the table's replica reads the
records back by schema id, and pull queries answer from them."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from headwater.kafka.broker import EmbeddedBroker
from tests.support.registry import LocalRegistry

pytestmark = [pytest.mark.kafka]


@pytest.fixture
def registry_url() -> Iterator[str]:
    registry = LocalRegistry()
    try:
        yield registry.url
    finally:
        registry.close()


def _rows(response: object) -> list[list]:
    assert response.status_code == 200, response.text  # type: ignore[attr-defined]
    return [
        item["row"]["columns"]
        for item in response.json()  # type: ignore[attr-defined]
        if "row" in item
    ]


def test_avro_and_json_sr_tables_through_a_registry(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, registry_url: str, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    topic = f"users_{suffix}"
    writer = {
        "type": "record",
        "name": "User",
        "fields": [
            {"name": "name", "type": ["null", "string"]},
            {"name": "age", "type": ["null", "int"]},
        ],
    }
    httpx.post(
        f"{registry_url}/subjects/{topic}-value/versions", json={"schema": json.dumps(writer)}
    ).raise_for_status()
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(tmp_path / "node"),
        "--service-id",
        f"sr_{suffix}",
        "--set",
        f"ksql.schema.registry.url={registry_url}",
    )

    created = server.ksql(
        f"CREATE TABLE users (ID STRING PRIMARY KEY) WITH (kafka_topic='{topic}', "
        "partitions=1, key_format='KAFKA', value_format='AVRO');"
    )
    assert created.status_code == 200, created.text
    described = server.ksql("DESCRIBE users;").json()[0]["sourceDescription"]
    assert [(f["name"], f["schema"]["type"]) for f in described["fields"]] == [
        ("ID", "STRING"),
        ("NAME", "STRING"),
        ("AGE", "INTEGER"),
    ]
    inserted = server.ksql("INSERT INTO users (ID, NAME, AGE) VALUES ('u1', 'Ann', 33);")
    assert inserted.status_code == 200, inserted.text

    json_topic = f"scores_{suffix}"
    created = server.ksql(
        f"CREATE TABLE scores (ID STRING PRIMARY KEY, POINTS DECIMAL(5, 2)) WITH "
        f"(kafka_topic='{json_topic}', partitions=1, key_format='KAFKA', "
        "value_format='JSON_SR');"
    )
    assert created.status_code == 200, created.text
    assert server.ksql("INSERT INTO scores (ID, POINTS) VALUES ('u1', 12.5);").status_code == 200
    for fmt in ("PROTOBUF", "PROTOBUF_NOSR"):
        created = server.ksql(
            f"CREATE TABLE {fmt}_t (ID STRING PRIMARY KEY, N INT, AT TIMESTAMP) "
            f"WITH (kafka_topic='{fmt.lower()}_{suffix}', partitions=1, "
            f"key_format='KAFKA', value_format='{fmt}');"
        )
        assert created.status_code == 200, created.text
        inserted = server.ksql(
            f"INSERT INTO {fmt}_t (ID, N, AT) VALUES ('u1', 7, '1970-01-01T00:00:01.000');"
        )
        assert inserted.status_code == 200, inserted.text

    deadline = time.monotonic() + 30
    while True:
        users = _rows(server.query("SELECT * FROM users WHERE ID = 'u1';"))
        scores = _rows(server.query("SELECT * FROM scores WHERE ID = 'u1';"))
        if users and scores or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert users == [["u1", "Ann", 33]]
    assert scores == [["u1", 12.5]]
    for fmt in ("PROTOBUF", "PROTOBUF_NOSR"):
        while not (rows := _rows(server.query(f"SELECT * FROM {fmt}_t WHERE ID = 'u1';"))):
            assert time.monotonic() < deadline + 10, f"no row in {fmt}_t"
            time.sleep(0.2)
        assert rows == [["u1", 7, "1970-01-01T00:00:01.000"]]
    subjects = httpx.get(f"{registry_url}/subjects/{json_topic}-value/versions/latest").json()
    assert subjects["schemaType"] == "JSON"


def test_registry_formats_need_a_registry(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, tmp_path: Path
) -> None:
    """Without its own registry (turned off) and without another one, a server refuses them."""
    suffix = uuid.uuid4().hex[:6]
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(tmp_path / "node"),
        "--service-id",
        f"nosr_{suffix}",
        "--set",
        "headwater.schema.registry.enabled=false",
    )
    refused = server.ksql(
        f"CREATE STREAM s (ID INT) WITH (kafka_topic='s_{suffix}', partitions=1, "
        "value_format='AVRO');"
    )
    assert refused.status_code == 400
    assert (
        f"Cannot create topic 's_{suffix}' with format AVRO without configuring "
        "'ksql.schema.registry.url'"
    ) in refused.json()["message"]
