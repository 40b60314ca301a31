"""PRINT: the pure formatter against ksqlDB's own expectations (RecordFormatterTest,
TopicStreamWriterTest), then ``POST /query`` with PRINT on a real runner (embedded broker)."""

from __future__ import annotations

import io
import json
import struct
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator

import pytest

from headwater.engine.formats.schema_registry import MemorySchemaRegistry, RegisteredSchema
from headwater.gateway.app import create_app
from headwater.gateway.printtopic import (
    NO_DATA,
    Deserializers,
    RecordFormatter,
    TopicPrint,
    TopicRecord,
    formats,
    raw_bytes,
    rowtime_text,
)
from headwater.gateway.services import Limits, Services

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette wants httpx2 for its TestClient
    from starlette.testclient import TestClient


def keys() -> Deserializers:
    return Deserializers(formats(None, key=True))


def values(registry: MemorySchemaRegistry | None = None) -> Deserializers:
    return Deserializers(formats(registry, key=False))


def test_rowtime_and_line_shape() -> None:
    assert rowtime_text(1588344313111) == "2020/05/01 14:45:13.111 Z"
    assert rowtime_text(None) == rowtime_text(-1) == "N/A"
    line = RecordFormatter().format([TopicRecord(1588344313111, b"k", None, 1)])[0]
    assert line == "rowtime: 2020/05/01 14:45:13.111 Z, key: k, value: <null>, partition: 1"


@pytest.mark.parametrize(
    "text", ['{"a":1}', "[10,22,44]", '"Yes this is valid json"', "24.987", "true", "null"]
)
def test_json_is_printed_as_written(text: str) -> None:
    side = values()
    assert side.format(text.encode()) == text
    assert "JSON" in side.possible_formats()


def test_kafka_primitives_and_strings() -> None:
    side = values()
    assert side.format(struct.pack(">i", 10)) == "10"
    assert side.possible_formats() == ["KAFKA_INT", "KAFKA_STRING"]  # 00 00 00 0A is UTF-8 too
    side = values()
    assert side.format(struct.pack(">q", -(2**40))) == str(-(2**40))
    assert side.possible_formats() == ["KAFKA_BIGINT", "KAFKA_DOUBLE"]
    side = values()
    side.format(struct.pack(">d", -1.5))
    assert side.possible_formats() == ["KAFKA_BIGINT", "KAFKA_DOUBLE"]  # both decode 8 bytes
    assert values().format(struct.pack(">d", 1.5)) == str(
        struct.unpack(">q", struct.pack(">d", 1.5))[0]
    )
    assert dict(formats(None, key=False))["KAFKA_DOUBLE"](struct.pack(">d", 1.5)) == "1.5"
    side = values()
    assert side.format("κόσμε".encode()) == "κόσμε"
    assert side.possible_formats() == ["KAFKA_STRING"]


def test_windowed_keys() -> None:
    side = keys()
    data = "κόσμε".encode() + struct.pack(">q", 1234567890123)
    assert side.format(data) == "[κόσμε@1234567890123/-]"
    assert {"HOPPING(KAFKA_STRING)", "TUMBLING(KAFKA_STRING)"} <= set(side.possible_formats())
    side = keys()
    data = "κόσμε".encode() + struct.pack(">qq", 1534567899999, 1534567890123)
    assert side.format(data) == "[κόσμε@1534567890123/1534567899999]"
    assert "SESSION(KAFKA_STRING)" in side.possible_formats()


def test_unrecognised_bytes_and_nulls() -> None:
    side = keys()
    data = bytes([0xFF, 0xFF]) + b"is invalid" + bytes([0xFF, 0xFF])
    assert side.format(data) == "\\xFF\\xFFis invalid\\xFF\\xFF" == raw_bytes(data)
    assert side.possible_formats() == []
    fresh = keys()
    assert fresh.format(None) == "<null>" and fresh.possible_formats() == [NO_DATA]


def test_a_format_ruled_out_later_stays_out() -> None:
    side = values()
    side.format(b"abcd")  # KAFKA_INT and KAFKA_STRING both fit 4 bytes
    assert side.possible_formats() == ["KAFKA_INT", "KAFKA_STRING"]
    assert side.format(b"abcdef") == "abcdef"
    assert side.possible_formats() == ["KAFKA_STRING"]
    assert side.format(b"abcd") == "abcd"


def test_poison_records_are_printed_as_what_they_can_be_and_print_goes_on() -> None:
    """Issue 28: a JSON value nested 5,000 deep rules JSON out (as Jackson's depth limit does in
    ksqlDB), it is printed as text, and the records after it are printed too."""
    deep = b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}"
    printed = TopicPrint(None).lines(
        [
            TopicRecord(1, b"k", b'{"a": 1}', 0),
            TopicRecord(2, b"k", deep, 0),
            TopicRecord(3, b"k", b"\x00\xff" * 3, 0),
            TopicRecord(4, b"k", b'{"a": 2}', 0),
        ]
    )
    rows = [line for line in printed if line.startswith("rowtime")]
    assert len(rows) == 4 and rows[1].startswith(
        'rowtime: 1970/01/01 00:00:00.002 Z, key: k, value: {"a":[[['
    )
    assert rows[3].endswith('value: {"a": 2}, partition: 0')


def test_a_batch_is_formatted_again_when_it_rules_out_the_format_in_use() -> None:
    formatter = RecordFormatter()
    lines = formatter.format(
        [TopicRecord(None, b"k", b"abcd", 0), TopicRecord(None, b"k", b"abcdef", 0)]
    )
    assert lines[0].endswith("value: abcd, partition: 0")  # not 1633837924 (as KAFKA_INT)


def test_registered_formats() -> None:
    import fastavro

    registry = MemorySchemaRegistry()
    avro = {"type": "record", "name": "R", "fields": [{"name": "str1", "type": "string"}]}
    avro_id = registry.register("a", RegisteredSchema("AVRO", json.dumps(avro)))
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(avro), {"str1": "My first string"})
    side = values(registry)
    assert (
        side.format(b"\0" + avro_id.to_bytes(4, "big") + out.getvalue())
        == '{"str1": "My first string"}'
    )
    assert side.possible_formats()[0] == "AVRO"

    json_id = registry.register("j", RegisteredSchema("JSON", '{"type": "object"}'))
    side = values(registry)
    data = b"\0" + json_id.to_bytes(4, "big") + b'{"str1": "My first string", "str2": "x"}'
    assert side.format(data) == '{"str1":"My first string","str2":"x"}'
    assert side.possible_formats()[0] == "JSON_SR"

    proto = 'syntax = "proto3";\nmessage M { string str1 = 1; string str2 = 2; }\n'
    proto_id = registry.register("p", RegisteredSchema("PROTOBUF", proto))
    payload = b"\x0a\x0fMy first string\x12\x10My second string"
    side = values(registry)
    assert (
        side.format(b"\0" + proto_id.to_bytes(4, "big") + b"\0" + payload)
        == 'str1: "My first string" str2: "My second string"'
    )
    assert side.possible_formats()[0] == "PROTOBUF"
    # without a registry, none of the three is possible
    side = values()
    side.format(b"\0" + proto_id.to_bytes(4, "big") + b"\0" + payload)
    assert not {"AVRO", "PROTOBUF", "JSON_SR"} & set(side.possible_formats())


def _records(count: int) -> list[TopicRecord]:
    return [TopicRecord(None, f"key-{i}".encode(), f"value-{i}".encode(), 0) for i in range(count)]


def test_interval_and_limit_as_ksqldb_applies_them() -> None:
    printer = TopicPrint(None, interval=1, limit=2)
    assert printer.lines(_records(3)) == [
        "Key format: KAFKA_STRING",
        "Value format: KAFKA_STRING",
        "rowtime: N/A, key: key-0, value: value-0, partition: 0",
        "rowtime: N/A, key: key-1, value: value-1, partition: 0",
    ]
    assert printer.done and printer.lines(_records(1)) == []
    printer = TopicPrint(None, interval=2, limit=2)
    lines = printer.lines(_records(2)) + printer.lines(_records(5)[2:])
    assert [line.split(",")[1] for line in lines if line.startswith("rowtime")] == [
        " key: key-0",
        " key: key-2",
    ]
    with pytest.raises(ValueError, match="INTERVAL must be greater than one, but was: 0"):
        TopicPrint(None, interval=0)


def test_format_lines_only_when_the_formats_change() -> None:
    printer = TopicPrint(None)
    first = printer.lines([TopicRecord(None, None, b"abcd", 0)])
    assert first[:2] == [f"Key format: {NO_DATA}", "Value format: KAFKA_INT or KAFKA_STRING"]
    again = printer.lines([TopicRecord(None, None, b"abce", 0)])
    assert len(again) == 1 and again[0].startswith("rowtime")
    changed = printer.lines([TopicRecord(None, None, b"abcdef", 0)])
    assert changed[0] == "Value format: KAFKA_STRING"
    gone = printer.lines([TopicRecord(None, None, bytes([0xFF] * 5), 0)])
    assert gone[0] == (
        "Value format:  does not match any supported format. It may be a STRING "
        "with encoding other than UTF8, or some other format."
    )


# -- PRINT over /query ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def services(memory_services: Callable[..., Services]) -> Services:
    return memory_services("print", limits=Limits())


@pytest.fixture(scope="module")
def client(services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(services)) as test_client:
        yield test_client


def _stream_with_rows(client: TestClient, count: int) -> str:
    name = f"P_{uuid.uuid4().hex[:6].upper()}"
    created = client.post(
        "/ksql",
        json={
            "ksql": (
                f"CREATE STREAM {name} (ID STRING KEY, N INT) WITH (kafka_topic='{name.lower()}', "
                "partitions=1, value_format='JSON');"
            )
        },
    )
    assert created.status_code == 200, created.text
    for i in range(count):
        inserted = client.post(
            "/ksql", json={"ksql": f"INSERT INTO {name} (ID, N) VALUES ('k{i}', {i});"}
        )
        assert inserted.status_code == 200, inserted.text
    return name.lower()


@pytest.mark.kafka
def test_print_from_beginning_with_limit(client: TestClient) -> None:
    topic = _stream_with_rows(client, 3)
    answer = client.post("/query", json={"ksql": f"PRINT '{topic}' FROM BEGINNING LIMIT 2;"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    lines = [line for line in answer.text.splitlines() if line]
    assert lines[:2] == ["Key format: KAFKA_STRING", "Value format: JSON or KAFKA_STRING"]
    assert len(lines) == 4
    assert lines[2].startswith("rowtime: ") and lines[2].endswith(
        ', key: k0, value: {"N":0}, partition: 0'
    )
    assert lines[3].endswith(', key: k1, value: {"N":1}, partition: 0')


@pytest.mark.kafka
def test_print_shows_rows_as_they_arrive(client: TestClient) -> None:
    topic = _stream_with_rows(client, 1)
    answers: list[str] = []

    def run() -> None:
        answers.append(client.post("/query", json={"ksql": f"PRINT {topic} LIMIT 1;"}).text)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 20
    while thread.is_alive() and time.monotonic() < deadline:  # from the end: insert until seen
        client.post("/ksql", json={"ksql": f"INSERT INTO {topic} (ID, N) VALUES ('new', 7);"})
        thread.join(1.0)
    assert not thread.is_alive(), "PRINT did not see a row inserted after it started"
    printed = [line for line in answers[0].splitlines() if line.startswith("rowtime")]
    assert len(printed) == 1 and 'key: new, value: {"N":7}' in printed[0]


@pytest.mark.kafka
def test_print_starts_at_the_end_behind_batched_records(
    client: TestClient, services: Services
) -> None:
    """Without FROM BEGINNING PRINT starts at the end read from fetches before its answer starts:
    the one record written after the answer's headers came is the first printed, also behind 2,000
    records written in batches (where the embedded broker's ListOffsets 'latest' answers an offset
    inside the last batch)."""
    import httpx
    from confluent_kafka import Producer

    from headwater.http_server import HttpServer, HttpServerSettings
    from headwater.kafka._ports import free_port

    topic = _stream_with_rows(client, 0)
    producer = Producer({"bootstrap.servers": services.settings.bootstrap_servers, "linger.ms": 20})
    for i in range(2000):
        producer.produce(topic, json.dumps({"N": i}).encode(), f"old{i}".encode())
    producer.flush(30)
    server = HttpServer(
        create_app(services), HttpServerSettings(port=free_port(), graceful_timeout_s=1.0)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        assert server.started.wait(10)
        url = f"http://127.0.0.1:{server.port}/query"
        with (
            httpx.Client(timeout=20) as http,
            http.stream("POST", url, json={"ksql": f"PRINT '{topic}' LIMIT 1;"}) as answer,
        ):
            assert answer.status_code == 200
            producer.produce(topic, b'{"N":7}', b"new")
            producer.flush(10)
            printed = [line for line in answer.iter_lines() if line.startswith("rowtime")]
    finally:
        server.stop()
        thread.join(10)
    assert len(printed) == 1 and 'key: new, value: {"N":7}' in printed[0], printed


@pytest.mark.kafka
@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            "PRINT 'no-such-topic';",
            (
                "Could not find topic 'no-such-topic', or the KSQL user does not "
                "have permissions to list the topic. Topic names are case-sensitive."
            ),
        ),
        ("PRINT 'x' INTERVAL 0;", "INTERVAL must be greater than one"),
    ],
)
def test_print_errors(client: TestClient, text: str, fragment: str) -> None:
    answer = client.post("/query", json={"ksql": text})
    assert answer.status_code == 400 and fragment in answer.json()["message"], answer.text


@pytest.mark.kafka
def test_print_suggests_the_topic_in_another_case(client: TestClient) -> None:
    topic = _stream_with_rows(client, 0)
    answer = client.post("/query", json={"ksql": f"PRINT {topic.upper()};"})
    assert answer.status_code == 400
    assert answer.json()["message"].endswith(f"Did you mean:\n\tprint {topic};")


def test_each_schema_id_is_asked_of_the_registry_once() -> None:
    class Unreachable(MemorySchemaRegistry):
        calls = 0

        def schema(self, schema_id: int) -> RegisteredSchema:
            Unreachable.calls += 1
            raise OSError("connection refused")

    formatter = RecordFormatter(Unreachable())
    data = b"\0\0\0\0\x07" + b"payload"
    formatter.format([TopicRecord(None, data, data, 0) for _ in range(5)])
    assert Unreachable.calls == 1
    assert "KAFKA_STRING" in formatter.values.possible_formats()


@pytest.mark.kafka
@pytest.mark.parametrize("kind", ["granian", "hypercorn", "uvicorn"])
def test_a_client_that_goes_ends_its_print(
    client: TestClient, services: Services, kind: str
) -> None:
    import httpx

    from headwater.http_server import HttpServer, HttpServerKind, HttpServerSettings
    from headwater.kafka._ports import free_port

    topic = _stream_with_rows(client, 2)
    app = create_app(services)
    server = HttpServer(
        app, HttpServerSettings(port=free_port(), kind=HttpServerKind(kind), graceful_timeout_s=1.0)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        assert server.started.wait(10)
        url = f"http://127.0.0.1:{server.port}/query"
        with (
            httpx.Client(timeout=30) as http,
            http.stream("POST", url, json={"ksql": f"PRINT '{topic}' FROM BEGINNING;"}) as answer,
        ):
            assert answer.status_code == 200
            lines = answer.iter_lines()
            assert next(lines) == "Key format: KAFKA_STRING"
            assert app.state.push_queries.running() == [answer.headers["x-query-id"]]
        deadline = time.monotonic() + 10  # the client went: the PRINT ends
        while app.state.push_queries.running():
            assert time.monotonic() < deadline, "the PRINT outlived its client"
            time.sleep(0.05)
    finally:
        server.stop()
        thread.join(10)
