"""The schema registry inside the node (issue 33), used as its users use one: confluent-kafka's
SchemaRegistryClient and serializers, unchanged, against ``<server>/registry``; records they
produce read by headwater; Confluent's status and error codes; a kill -9 that loses no
acknowledged schema and reuses no id. Real broker, real server processes; no Spark here
(tests/gateway/test_schema_registry_spark.py has the CSAS)."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from headwater.kafka.broker import EmbeddedBroker

pytestmark = [pytest.mark.kafka]

AVRO_V1 = (
    '{"type":"record","name":"Order","namespace":"shop","fields":'
    '[{"name":"ID","type":"int"},{"name":"ITEM","type":"string"}]}'
)
# a field without a default: a v2 reader cannot read v1's records (BACKWARD refuses it)
AVRO_NO_DEFAULT = (
    '{"type":"record","name":"Order","namespace":"shop","fields":'
    '[{"name":"ID","type":"int"},{"name":"ITEM","type":"string"},{"name":"QTY","type":"int"}]}'
)
# the same field with a default: compatible
AVRO_WITH_DEFAULT = (
    '{"type":"record","name":"Order","namespace":"shop","fields":'
    '[{"name":"ID","type":"int"},{"name":"ITEM","type":"string"},'
    '{"name":"QTY","type":"int","default":1}]}'
)


@pytest.fixture(scope="module")
def node(memory_broker: EmbeddedBroker, module_server_factory, tmp_path_factory):  # type: ignore[no-untyped-def]
    suffix = uuid.uuid4().hex[:6]
    return module_server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(tmp_path_factory.mktemp("node")),
        "--service-id",
        f"sr_{suffix}_",
        "--set",
        f"headwater.schema.registry.topic=_schemas_{suffix}",
        "--set",
        "ksql.query.persistent.enabled=false",
    )


_CLIENTS: list[SchemaRegistryClient] = []


def client(url: str) -> SchemaRegistryClient:
    made = SchemaRegistryClient({"url": f"{url}/registry"})
    _CLIENTS.append(made)
    return made


@pytest.fixture(autouse=True)
def _close_clients() -> Any:
    yield
    while _CLIENTS:
        _CLIENTS.pop().close()


def subject() -> str:
    return f"t{uuid.uuid4().hex[:8]}-value"


def test_confluents_client_registers_reads_and_looks_up(node) -> None:  # type: ignore[no-untyped-def]
    sr = client(node.url)
    name = subject()
    schema_id = sr.register_schema(name, Schema(AVRO_V1, "AVRO"))
    # the same schema, written another way, is the same schema (a fresh client: no cache)
    again = client(node.url).register_schema(name, Schema(AVRO_V1.replace(",", ", "), "AVRO"))
    assert again == schema_id
    fetched = client(node.url).get_schema(schema_id)
    assert fetched.schema_type == "AVRO"
    assert '"name":"Order"' in fetched.schema_str.replace(" ", "")
    latest = sr.get_latest_version(name)
    assert (latest.schema_id, latest.version, latest.subject) == (schema_id, 1, name)
    found = client(node.url).lookup_schema(name, Schema(AVRO_V1, "AVRO"))
    assert (found.schema_id, found.version) == (schema_id, 1)
    assert name in sr.get_subjects()
    assert sr.get_versions(name) == [1]
    # another subject with the same schema shares its id
    other = subject()
    assert sr.register_schema(other, Schema(AVRO_V1, "AVRO")) == schema_id
    ids = httpx.get(f"{node.url}/registry/schemas/ids/{schema_id}/subjects").json()
    assert sorted(ids) == sorted([name, other])
    assert httpx.get(f"{node.url}/registry/schemas/types").json() == ["AVRO", "JSON", "PROTOBUF"]


def test_incompatible_evolutions_are_refused_with_409(node) -> None:  # type: ignore[no-untyped-def]
    sr = client(node.url)
    name = subject()
    sr.register_schema(name, Schema(AVRO_V1, "AVRO"))
    assert not sr.test_compatibility(name, Schema(AVRO_NO_DEFAULT, "AVRO"))
    with pytest.raises(SchemaRegistryError) as refused:
        sr.register_schema(name, Schema(AVRO_NO_DEFAULT, "AVRO"))
    assert refused.value.http_status_code == 409
    assert "incompatible with an earlier schema" in refused.value.error_message
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in refused.value.error_message
    assert sr.test_compatibility(name, Schema(AVRO_WITH_DEFAULT, "AVRO"))
    assert sr.register_schema(name, Schema(AVRO_WITH_DEFAULT, "AVRO")) > 0
    assert sr.get_versions(name) == [1, 2]
    # per subject, NONE lets anything through; the global level is untouched
    sr.set_compatibility(name, "NONE")
    assert sr.get_compatibility(name) == "NONE"
    assert sr.get_compatibility() == "BACKWARD"
    sr.register_schema(name, Schema('"string"', "AVRO"))
    assert sr.get_versions(name) == [1, 2, 3]


def test_soft_then_hard_deletes_as_confluent_does(node) -> None:  # type: ignore[no-untyped-def]
    sr = client(node.url)
    base = f"{node.url}/registry"
    name = subject()
    sr.set_compatibility(name, "NONE")
    sr.register_schema(name, Schema('"string"', "AVRO"))
    sr.register_schema(name, Schema('"int"', "AVRO"))
    hard = httpx.delete(f"{base}/subjects/{name}/versions/1?permanent=true")
    assert (hard.status_code, hard.json()["error_code"]) == (404, 40407)
    assert sr.delete_version(name, 1) == 1
    assert sr.get_versions(name) == [2]
    assert httpx.get(f"{base}/subjects/{name}/versions?deleted=true").json() == [1, 2]
    again = httpx.delete(f"{base}/subjects/{name}/versions/1")
    assert (again.status_code, again.json()["error_code"]) == (404, 40406)
    assert sr.delete_subject(name) == [2]
    assert name not in sr.get_subjects()
    gone = httpx.get(f"{base}/subjects/{name}/versions")
    assert (gone.status_code, gone.json()["error_code"]) == (404, 40401)
    assert sorted(sr.delete_subject(name, permanent=True)) == [1, 2]
    assert httpx.get(f"{base}/subjects?deleted=true").json().count(name) == 0
    # a new registration after a hard delete starts the subject anew
    sr.register_schema(name, Schema('"string"', "AVRO"))
    assert sr.get_versions(name) == [1]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("GET", "/schemas/ids/987654", None, 404, 40403),
        ("GET", "/subjects/nope-value/versions/1", None, 404, 40401),
        ("POST", "/subjects/bad-value/versions", {"schema": "{not avro"}, 422, 42201),
        (
            "POST",
            "/subjects/bad-value/versions",
            {"schema": '"x"', "schemaType": "XML"},
            422,
            42201,
        ),
        ("PUT", "/config", {"compatibility": "SIDEWAYS"}, 422, 42203),
        ("PUT", "/mode", {"mode": "SOMETIMES"}, 422, 42204),
        ("GET", "/subjects/x/versions/zero", None, 422, 42202),
        ("GET", "/config/never-configured", None, 404, 40408),
    ],
)
def test_bad_requests_get_confluents_status_and_error_code(  # type: ignore[no-untyped-def]
    node, method: str, path: str, body: Any, status: int, code: int
) -> None:
    answer = httpx.request(method, f"{node.url}/registry{path}", json=body)
    assert answer.status_code == status, answer.text
    assert answer.json()["error_code"] == code, answer.text
    assert answer.headers["content-type"] == "application/vnd.schemaregistry.v1+json"
    assert answer.json()["message"]


def test_a_schema_over_the_size_limit_is_refused(node) -> None:  # type: ignore[no-untyped-def]
    fields = ",".join(f'{{"name":"F{i}","type":"string"}}' for i in range(40_000))
    huge = f'{{"type":"record","name":"Huge","fields":[{fields}]}}'
    answer = httpx.post(
        f"{node.url}/registry/subjects/{subject()}/versions", json={"schema": huge}, timeout=30
    )
    assert (answer.status_code, answer.json()["error_code"]) == (422, 42209), answer.text


def _produce(broker: EmbeddedBroker, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(10) == 0


def _rows(node, sql: str, want: int, timeout_s: float = 30.0) -> list[list[Any]]:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while True:
        answer = node.query(sql)
        assert answer.status_code == 200, answer.text
        rows = [item["row"]["columns"] for item in answer.json() if "row" in item]
        if len(rows) >= want or time.monotonic() > deadline:
            return rows
        time.sleep(0.3)


def test_records_of_confluents_serializers_are_read_by_headwater(  # type: ignore[no-untyped-def]
    node, memory_broker: EmbeddedBroker
) -> None:
    """AVRO and JSON_SR records written by confluent-kafka's serializers through the node's
    registry: headwater infers the stream's columns from the subject and reads every record."""
    sr = client(node.url)
    suffix = uuid.uuid4().hex[:6]
    avro_topic, json_topic = f"avro_{suffix}", f"json_{suffix}"
    for topic in (avro_topic, json_topic):
        httpx.post(
            f"{node.url}/ksql",
            json={
                "ksql": f"CREATE STREAM PRE_{topic} (X INT) WITH (kafka_topic='{topic}', "
                "partitions=1, value_format='JSON');"
            },
        ).raise_for_status()
    avro = AvroSerializer(sr, AVRO_V1)
    _produce(
        memory_broker,
        avro_topic,
        [
            (
                b"k",
                avro(
                    {"ID": i, "ITEM": f"item-{i}"},
                    SerializationContext(avro_topic, MessageField.VALUE),
                ),
            )
            for i in range(3)
        ],
    )
    json_schema = (
        '{"type":"object","properties":{"ID":{"type":"integer"},"NAME":{"type":"string"}}}'
    )
    as_json = JSONSerializer(json_schema, sr)
    _produce(
        memory_broker,
        json_topic,
        [
            (
                b"k",
                as_json(
                    {"ID": i, "NAME": f"n{i}"}, SerializationContext(json_topic, MessageField.VALUE)
                ),
            )
            for i in range(2)
        ],
    )
    created = node.ksql(
        f"CREATE STREAM A_{suffix} WITH (kafka_topic='{avro_topic}', value_format='AVRO');"
        f"CREATE STREAM J_{suffix} WITH (kafka_topic='{json_topic}', value_format='JSON_SR');"
    )
    assert created.status_code == 200, created.text
    rows = _rows(node, f"SELECT ID, ITEM FROM A_{suffix};", 3)
    assert sorted(rows) == [[0, "item-0"], [1, "item-1"], [2, "item-2"]]
    rows = _rows(node, f"SELECT ID, NAME FROM J_{suffix};", 2)
    assert sorted(rows) == [[0, "n0"], [1, "n1"]]
    # INSERT VALUES writes with the subject's compatible evolution, readable by the same stream
    inserted = node.ksql(f"INSERT INTO A_{suffix} (ID, ITEM) VALUES (9, 'nine');")
    assert inserted.status_code == 200, inserted.text
    assert [9, "nine"] in _rows(node, f"SELECT ID, ITEM FROM A_{suffix};", 4)


class Registrations:
    """Clients registering a new schema after another on each server, recording every
    registration the registry acknowledged (schema text -> id), until stopped."""

    def __init__(self, servers: list[Any]) -> None:
        self.acknowledged: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._register, args=(server, f"s{i}"), daemon=True)
            for i, server in enumerate(servers)
        ]
        for thread in self._threads:
            thread.start()

    def _register(self, server: Any, tag: str) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            text = f'{{"type":"enum","name":"E{tag}n{n}","symbols":["A{n}"]}}'
            try:
                answer = httpx.post(
                    f"{server.url}/registry/subjects/{tag}-{n}-value/versions",
                    json={"schema": text},
                    timeout=10,
                )
            except httpx.HTTPError:
                time.sleep(0.2)
                continue
            if answer.status_code == 200:
                with self._lock:
                    self.acknowledged[text] = answer.json()["id"]
            else:
                time.sleep(0.1)

    def stop(self) -> dict[str, int]:
        self._stop.set()
        for thread in self._threads:
            thread.join(15)
        return dict(self.acknowledged)


def _all_there(servers: list[Any], acknowledged: dict[str, int], timeout_s: float = 30) -> None:
    """Every acknowledged registration is served, with its id, by every server; no id names two
    schemas."""
    assert len(set(acknowledged.values())) == len(acknowledged)
    for server in servers:
        for text, schema_id in acknowledged.items():
            deadline = time.monotonic() + timeout_s
            while True:
                got = httpx.get(f"{server.url}/registry/schemas/ids/{schema_id}", timeout=10)
                if got.status_code == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert got.status_code == 200, (server.url, schema_id, got.text)
            assert got.json()["schema"].replace(" ", "") == text.replace(" ", "")


def _registry_args(broker: str, suffix: str) -> list[str]:
    return [
        "-b",
        broker,
        "--service-id",
        f"srk_{suffix}_",
        "--set",
        f"headwater.schema.registry.topic=_schemas_{suffix}",
        "--set",
        "ksql.query.persistent.enabled=false",
    ]


@pytest.mark.durable
@pytest.mark.slow
def test_kill_9_of_a_server_loses_no_acknowledged_schema_and_reuses_no_id(  # type: ignore[no-untyped-def]
    durable_broker: EmbeddedBroker, server_factory, tmp_path: Path
) -> None:
    """Two servers of one service register schemas at once while one of them is killed -9 and
    started again: every registration a client saw acknowledged is there afterwards, on both
    servers, with the id it was given, and no id names two schemas."""
    args = _registry_args(durable_broker.bootstrap_servers, uuid.uuid4().hex[:6])
    first = server_factory(*args, "--state-dir", str(tmp_path / "a"))
    second = server_factory(*args, "--state-dir", str(tmp_path / "b"))
    clients = Registrations([first, second])
    time.sleep(4)
    first.kill()
    time.sleep(1)
    first.start()
    time.sleep(3)
    acknowledged = clients.stop()
    assert len(acknowledged) > 10, acknowledged
    _all_there([first, second], acknowledged)


@pytest.mark.durable
@pytest.mark.slow
def test_kill_9_of_the_broker_loses_no_acknowledged_schema(  # type: ignore[no-untyped-def]
    server_factory, tmp_path: Path
) -> None:
    """The durable broker killed -9 under registrations and started again on its folder and
    port: every registration acknowledged before, during or after is there afterwards."""
    from tests.conftest import free_port

    port = free_port()
    broker = EmbeddedBroker(tmp_path / "broker", port=port)
    broker.start()
    try:
        args = _registry_args(broker.bootstrap_servers, uuid.uuid4().hex[:6])
        server = server_factory(*args, "--state-dir", str(tmp_path / "a"))
        clients = Registrations([server])
        time.sleep(3)
        before = len(clients.acknowledged)
        broker.kill()
        time.sleep(1)
        broker = EmbeddedBroker(tmp_path / "broker", port=port)
        broker.start()
        time.sleep(6)
        acknowledged = clients.stop()
        assert before > 3 and len(acknowledged) > before, (before, acknowledged)  # and it goes on
        _all_there([server], acknowledged)
    finally:
        broker.stop()


def _order_message() -> Any:
    """A generated-like protobuf message class (as protoc's _pb2 modules give), built here."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name="shop/order.proto", package="shop", syntax="proto3"
    )
    order = file.message_type.add(name="Order")
    order.field.add(name="ID", number=1, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL)
    order.field.add(name="ITEM", number=2, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    order.field.add(name="TAGS", number=3, type=field.TYPE_STRING, label=field.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_records_of_confluents_protobuf_serializer_are_read_by_headwater(  # type: ignore[no-untyped-def]
    node, memory_broker: EmbeddedBroker
) -> None:
    """confluent-kafka's ProtobufSerializer registers its schema as a base64 FileDescriptorProto
    and reads it back with format=serialized: the registry takes and gives both forms, and
    headwater reads the records with the columns it infers from the subject."""
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    sr = client(node.url)
    suffix = uuid.uuid4().hex[:6]
    topic = f"proto_{suffix}"
    made = node.ksql(
        f"CREATE STREAM PRE_{topic} (X INT) WITH (kafka_topic='{topic}', partitions=1, "
        "value_format='JSON');"
    )
    assert made.status_code == 200, made.text
    order = _order_message()
    to_proto = ProtobufSerializer(order, sr, {"use.deprecated.format": False})
    where = SerializationContext(topic, MessageField.VALUE)
    values = [
        to_proto(order(ID=i, ITEM=f"p{i}", TAGS=["a", "b"][: i + 1]), where) for i in range(2)
    ]
    _produce(memory_broker, topic, [(b"k", v) for v in values])
    registered = sr.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "PROTOBUF"
    assert "message Order" in registered.schema.schema_str  # stored as .proto text
    from_proto = ProtobufDeserializer(order, {"use.deprecated.format": False})
    assert from_proto(values[1], where).ITEM == "p1"
    served = httpx.get(
        f"{node.url}/registry/schemas/ids/{registered.schema_id}", params={"format": "serialized"}
    )
    assert served.status_code == 200 and "message" not in served.json()["schema"]
    created = node.ksql(
        f"CREATE STREAM P_{suffix} WITH (kafka_topic='{topic}', value_format='PROTOBUF');"
    )
    assert created.status_code == 200, created.text
    rows = _rows(node, f"SELECT ID, ITEM, TAGS FROM P_{suffix};", 2)
    assert sorted(rows) == [[0, "p0", ["a"]], [1, "p1", ["a", "b"]]]
