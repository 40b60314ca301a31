"""AVRO and JSON_SR through a real server and a schema registry speaking Confluent's REST API:
columns inferred from the registry, INSERT registers the schema, the table's replica reads the
records back by schema id, and pull queries answer from them."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from headwater.kafka.broker import EmbeddedBroker

pytestmark = [pytest.mark.kafka]


class _Registry(BaseHTTPRequestHandler):
    """The part of Confluent Schema Registry's API a client of it needs."""

    schemas: dict[int, dict] = {}
    subjects: dict[str, list[int]] = {}

    def _answer(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        parts = self.path.strip("/").split("/")
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if len(parts) != 3 or parts[0] != "subjects" or parts[2] != "versions":
            return self._answer(404, {"error_code": 404, "message": "no such path"})
        schema = {"schema": body["schema"], "schemaType": body.get("schemaType", "AVRO")}
        found = next((i for i, s in self.schemas.items() if s == schema), None)
        if found is None:
            found = len(self.schemas) + 1
            self.schemas[found] = schema
        versions = self.subjects.setdefault(parts[1], [])
        if found not in versions:
            versions.append(found)
        return self._answer(200, {"id": found})

    def do_GET(self) -> None:  # noqa: N802
        parts = self.path.strip("/").split("/")
        if parts[:2] == ["schemas", "ids"] and int(parts[2]) in self.schemas:
            return self._answer(200, self.schemas[int(parts[2])])
        if parts[0] == "subjects" and parts[2:] == ["versions", "latest"] and parts[1] in self.subjects:
            schema_id = self.subjects[parts[1]][-1]
            return self._answer(200, {"id": schema_id, "subject": parts[1],
                                      "version": len(self.subjects[parts[1]]),
                                      **self.schemas[schema_id]})  # fmt: skip
        return self._answer(404, {"error_code": 40401, "message": "Subject not found."})

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def registry_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _rows(response: object) -> list[list]:
    assert response.status_code == 200, response.text  # type: ignore[attr-defined]
    return [item["row"]["columns"] for item in response.json()  # type: ignore[attr-defined]
            if "row" in item]  # fmt: skip


def test_avro_and_json_sr_tables_through_a_registry(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, registry_url: str, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    topic = f"users_{suffix}"
    writer = {"type": "record", "name": "User", "fields": [
        {"name": "name", "type": ["null", "string"]}, {"name": "age", "type": ["null", "int"]}]}  # fmt: skip
    import httpx

    httpx.post(f"{registry_url}/subjects/{topic}-value/versions",
               json={"schema": json.dumps(writer)}).raise_for_status()  # fmt: skip
    server = server_factory("-b", memory_broker.bootstrap_servers, "--state-dir",
                            str(tmp_path / "node"), "--service-id", f"sr_{suffix}",
                            "--set", f"ksql.schema.registry.url={registry_url}")  # fmt: skip

    created = server.ksql(f"CREATE TABLE users (ID STRING PRIMARY KEY) WITH (kafka_topic='{topic}', "
                          "partitions=1, key_format='KAFKA', value_format='AVRO');")  # fmt: skip
    assert created.status_code == 200, created.text
    described = server.ksql("DESCRIBE users;").json()[0]["sourceDescription"]
    assert [(f["name"], f["schema"]["type"]) for f in described["fields"]] == [
        ("ID", "STRING"), ("NAME", "STRING"), ("AGE", "INTEGER")]
    inserted = server.ksql("INSERT INTO users (ID, NAME, AGE) VALUES ('u1', 'Ann', 33);")
    assert inserted.status_code == 200, inserted.text

    json_topic = f"scores_{suffix}"
    created = server.ksql(f"CREATE TABLE scores (ID STRING PRIMARY KEY, POINTS DECIMAL(5, 2)) WITH "
                          f"(kafka_topic='{json_topic}', partitions=1, key_format='KAFKA', "
                          "value_format='JSON_SR');")  # fmt: skip
    assert created.status_code == 200, created.text
    assert server.ksql("INSERT INTO scores (ID, POINTS) VALUES ('u1', 12.5);").status_code == 200

    deadline = time.monotonic() + 30
    while True:
        users = _rows(server.query("SELECT * FROM users WHERE ID = 'u1';"))
        scores = _rows(server.query("SELECT * FROM scores WHERE ID = 'u1';"))
        if users and scores or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert users == [["u1", "Ann", 33]]
    assert scores == [["u1", 12.5]]
    subjects = httpx.get(f"{registry_url}/subjects/{json_topic}-value/versions/latest").json()
    assert subjects["schemaType"] == "JSON"


def test_registry_formats_need_a_registry(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    server = server_factory("-b", memory_broker.bootstrap_servers, "--state-dir",
                            str(tmp_path / "node"), "--service-id", f"nosr_{suffix}")  # fmt: skip
    refused = server.ksql(f"CREATE STREAM s (ID INT) WITH (kafka_topic='s_{suffix}', partitions=1, "
                          "value_format='AVRO');")  # fmt: skip
    assert refused.status_code == 400
    assert (f"Cannot create topic 's_{suffix}' with format AVRO without configuring "
            "'ksql.schema.registry.url'") in refused.json()["message"]
