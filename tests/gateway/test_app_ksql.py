"""POST /ksql over Starlette's TestClient, on a real runner + submitter (embedded broker)."""

from __future__ import annotations

import dataclasses
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

with warnings.catch_warnings():
    # Starlette 1.10 wants httpx2 for its TestClient and warns when it falls back on httpx.
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from headwater.gateway.app import create_app
from headwater.gateway.services import Limits, Services
from headwater.gateway.startup import open_services
from headwater.kafka.broker import EmbeddedBroker

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def services(
    memory_broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Services]:
    settings = dataclasses.replace(
        memory_broker.settings(),
        init_transactions_timeout_ms=3000,
        commit_transaction_timeout_ms=1500,
    )
    service_id = f"app-ksql-{uuid.uuid4().hex[:8]}"
    data_dir: Path = tmp_path_factory.mktemp("app-ksql")
    limits = Limits(max_body_bytes=64 * 1024, catch_up_timeout_s=1.0)
    properties = {
        "ksql.service.id": service_id,
        "ksql.streams.cache.max.bytes.buffering": "10485760",
    }
    defaults = {"ksql.service.id": "default_", "ksql.streams.cache.max.bytes.buffering": "10485760"}
    with open_services(
        settings, service_id, data_dir, limits=limits, properties=properties, defaults=defaults
    ) as built:
        yield built


@pytest.fixture(scope="module")
def client(services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(services)) as test_client:
        yield test_client


def ksql(client: TestClient, text: str, **fields: Any) -> Any:
    return client.post("/ksql", json={"ksql": text, "streamsProperties": {}, **fields})


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:6]}".upper()


def test_create_show_describe_drop(client: TestClient) -> None:
    stream, table = _name("ORDERS"), _name("TOTALS")
    text = (
        f"CREATE STREAM {stream} (ID STRING KEY, AMOUNT DECIMAL(10, 2), TAGS ARRAY<STRING>) "
        f"WITH (kafka_topic='{stream.lower()}', value_format='JSON', partitions=2);\n"
        f"CREATE TABLE {table} (ID STRING PRIMARY KEY, N BIGINT) "
        f"WITH (kafka_topic='{table.lower()}', format='JSON', partitions=1);"
    )
    answer = ksql(client, text)
    assert answer.status_code == 200, answer.text
    created = answer.json()
    assert [e["@type"] for e in created] == ["currentStatus", "currentStatus"]
    assert created[0]["commandStatus"] == {"status": "SUCCESS", "message": "Stream created"}
    assert created[1]["commandStatus"]["message"] == "Table created"
    assert created[0]["statementText"].startswith(f"CREATE STREAM {stream}")
    assert created[1]["commandSequenceNumber"] > created[0]["commandSequenceNumber"] >= 0
    assert created[0]["commandId"] and created[0]["warnings"] == []

    listed = ksql(client, "SHOW STREAMS; LIST TABLES;").json()
    assert listed[0]["@type"] == "streams" and listed[1]["@type"] == "tables"
    assert {
        "type": "STREAM",
        "name": stream,
        "topic": stream.lower(),
        "keyFormat": "KAFKA",
        "valueFormat": "JSON",
        "isWindowed": False,
    } in listed[0]["streams"]
    assert table in [t["name"] for t in listed[1]["tables"]]
    assert stream not in [t["name"] for t in listed[1]["tables"]]

    (described,) = ksql(client, f"DESCRIBE {stream};").json()
    description = described["sourceDescription"]
    assert described["@type"] == "sourceDescription"
    assert description["name"] == stream and description["type"] == "STREAM"
    assert (description["topic"], description["partitions"]) == (stream.lower(), 2)
    string = {"type": "STRING", "fields": None, "memberSchema": None}
    decimal = {
        "type": "DECIMAL",
        "fields": None,
        "memberSchema": None,
        "parameters": {"precision": 10, "scale": 2},
    }
    assert description["fields"] == [
        {"name": "ID", "schema": string, "type": "KEY"},
        {"name": "AMOUNT", "schema": decimal},
        {"name": "TAGS", "schema": {"type": "ARRAY", "fields": None, "memberSchema": string}},
    ]

    extended = ksql(client, "SHOW STREAMS EXTENDED; DESCRIBE TABLES;").json()
    assert [e["@type"] for e in extended] == ["source_descriptions", "source_descriptions"]
    assert stream in [d["name"] for d in extended[0]["sourceDescriptions"]]
    assert table in [d["name"] for d in extended[1]["sourceDescriptions"]]
    assert stream not in [d["name"] for d in extended[1]["sourceDescriptions"]]
    (topics_extended,) = ksql(client, "SHOW TOPICS EXTENDED;").json()
    assert topics_extended["@type"] == "kafka_topics_extended"
    assert {
        "name": stream.lower(),
        "replicaInfo": [1, 1],
        "consumerCount": 0,
        "consumerGroupCount": 0,
    } in topics_extended["topics"]

    topics = ksql(client, "LIST TOPICS;").json()[0]
    assert topics["@type"] == "kafka_topics"
    by_name = {t["name"]: t for t in topics["topics"]}
    assert by_name[stream.lower()]["replicaInfo"] == [1, 1]
    assert not [name for name in by_name if name.startswith("_")]

    dropped = ksql(client, f"DROP STREAM {stream} DELETE TOPIC;").json()
    assert dropped[0]["commandStatus"]["status"] == "SUCCESS"
    assert stream not in [s["name"] for s in ksql(client, "SHOW STREAMS;").json()[0]["streams"]]


def test_types(client: TestClient) -> None:
    name = _name("ADDRESS")
    created = ksql(client, f"CREATE TYPE {name} AS STRUCT<CITY STRING, ZIP INT>;")
    assert created.status_code == 200, created.text
    types = ksql(client, "SHOW TYPES;").json()[0]
    assert types["@type"] == "type_list"
    assert types["types"][name]["type"] == "STRUCT"
    assert [f["name"] for f in types["types"][name]["fields"]] == ["CITY", "ZIP"]
    assert ksql(client, f"DROP TYPE {name};").status_code == 200
    assert name not in ksql(client, "SHOW TYPES;").json()[0]["types"]


def test_parse_error_carries_position_and_text(client: TestClient) -> None:
    answer = ksql(client, "SHOW STREAMS;\nCREATE STREM oops;")
    assert answer.status_code == 400
    body = answer.json()
    assert body["@type"] == "statement_error" and body["error_code"] == 40001
    assert body["line"] == 2 and body["column"] >= 1
    assert "STREM" in body["statementText"]
    assert body["entities"] == []


def test_validation_error_keeps_earlier_entities(client: TestClient) -> None:
    stream = _name("DUP")
    create = (
        f"CREATE STREAM {stream} (ID STRING KEY, V INT) "
        f"WITH (kafka_topic='{stream.lower()}', value_format='JSON', partitions=1);"
    )
    answer = ksql(client, f"SHOW STREAMS;\n{create}\n{create}")
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["error_code"] == 40001 and "already exists" in body["message"]
    assert body["statementText"] == create and body["line"] == 3
    assert [e["@type"] for e in body["entities"]] == ["streams", "currentStatus"]


@pytest.mark.parametrize(
    ("text", "code", "fragment"),
    [
        ("SELECT * FROM X EMIT CHANGES;", 40002, "/query"),
        ("TERMINATE NO_SUCH_QUERY;", 40001, "Unknown queryId: NO_SUCH_QUERY"),
        ("EXPLAIN NO_SUCH_QUERY;", 40001, "Query with id:NO_SUCH_QUERY does not exist"),
        (
            "INSERT INTO X (A) VALUES (1);",
            40001,
            "Cannot insert values into an unknown stream/table: `X`",
        ),
        ("DESCRIBE NO_SUCH_SOURCE;", 40001, "NO_SUCH_SOURCE"),
        ("SHOW CONNECTORS;", 40001, "not supported"),
        ("PAUSE SOME_QUERY;", 40001, "PAUSE SOME_QUERY statements are not supported"),
    ],
)
def test_statements_not_handled_here(
    client: TestClient, text: str, code: int, fragment: str
) -> None:
    answer = ksql(client, text)
    assert answer.status_code == code // 100
    body = answer.json()
    assert body["error_code"] == code and fragment in body["message"]
    assert body["statementText"] == text


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"streamsProperties": {}}', '"ksql"'),
        (b'{"ksql": "SHOW STREAMS;", "commandSequenceNumber": "x"}', "commandSequenceNumber"),
        (b'{"ksql": "  "}', "no statement"),
        # found by probing (issue 21): each was a 500 or held the request
        (b'{"ksql": "SHOW STREAMS;", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}", "not valid JSON"),
        (b'{"ksql": "SELECT \\ud800 FROM x;"}', "not valid JSON"),
        (
            b'{"ksql": "SHOW STREAMS;", "commandSequenceNumber": 1' + b"0" * 40 + b"}",
            "commandSequenceNumber",
        ),
    ],
)
def test_bad_bodies(client: TestClient, content: bytes, fragment: str) -> None:
    answer = client.post("/ksql", content=content, headers={"content-type": "application/json"})
    assert answer.status_code == 400
    body = answer.json()
    assert body["@type"] == "generic_error" and body["error_code"] == 40000
    assert fragment in body["message"] and body["entities"] == []


def test_body_too_large(client: TestClient) -> None:
    answer = ksql(client, "SHOW STREAMS; -- " + "x" * 70_000)
    assert answer.status_code == 413
    assert answer.json()["error_code"] == 41300


def test_command_sequence_number_waits_then_times_out(
    client: TestClient, services: Services
) -> None:
    done = ksql(client, "SHOW STREAMS;", commandSequenceNumber=services.runner.position - 1)
    assert done.status_code == 200
    late = ksql(client, "SHOW STREAMS;", commandSequenceNumber=services.runner.position + 100)
    assert late.status_code == 503
    assert late.json()["error_code"] == 50301 and late.headers["retry-after"] == "1"


def test_unknown_route_and_method(client: TestClient) -> None:
    assert client.get("/nope").json()["error_code"] == 40400
    assert client.get("/ksql").status_code == 405


def test_variables_and_no_op_statements(client: TestClient, services: Services) -> None:
    stream = _name("VARS")
    create = (
        f"CREATE STREAM IF NOT EXISTS ${{name}} (ID STRING KEY) "
        f"WITH (kafka_topic='{stream.lower()}', value_format='${{fmt}}', partitions=1);"
    )
    variables = {"name": stream, "fmt": "JSON"}
    first = ksql(client, create, sessionVariables=variables).json()[0]
    again = ksql(client, create, sessionVariables=variables).json()[0]
    assert first["commandStatus"]["message"] == "Stream created"
    assert again["commandId"] == "" and "already exists" in again["commandStatus"]["message"]
    # A no-op answers a sequence number already executed: waiting on it never blocks.
    assert again["commandSequenceNumber"] == services.runner.position - 1
    waited = ksql(client, "SHOW STREAMS;", commandSequenceNumber=again["commandSequenceNumber"])
    assert waited.status_code == 200
    undefined = ksql(client, "DESCRIBE ${missing};")
    assert undefined.status_code == 400 and "missing" in undefined.json()["message"]


def test_a_construct_not_supported_yet_is_refused_at_its_line_and_column(
    client: TestClient,
) -> None:
    created = ksql(
        client,
        "CREATE STREAM PQ_SRC (ID STRING KEY, V INT) WITH "
        "(kafka_topic='pq_src', partitions=1, value_format='JSON');",
    )
    assert created.status_code == 200, created.text
    text = (
        "SHOW STREAMS;\nCREATE STREAM PQ_J AS\n  SELECT A.ID, A.V\n  FROM PQ_SRC A\n"
        "  JOIN PQ_SRC B WITHIN 1 SECOND ON A.ID = B.ID;"
    )
    answer = ksql(client, text)
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert "self joins are not yet supported" in body["message"]
    assert (body["line"], body["column"]) == (5, 36)  # the join condition
    assert ksql(client, "SHOW QUERIES;").json()[0]["queries"] == []  # nothing reached the log


@pytest.mark.parametrize(
    "text",
    [
        "SHOW STREAMS;\nCREATE STREAM PQ_OUT AS\n  SELECT *\n  FROM PQ_NOPE;",
        "SHOW STREAMS;\nCREATE STREAM PQ_OUT AS\n  SELECT COUNT(*) AS N\n  FROM PQ_NOPE GROUP BY ID;",
        "SHOW STREAMS;\nCREATE STREAM PQ_OUT AS\n  SELECT *\n  FROM PQ_NOPE A JOIN PQ_NOPE2 B WITHIN 1 SECOND ON A.ID = B.ID;",
    ],
)
def test_a_query_from_a_missing_source_points_at_its_name(client: TestClient, text: str) -> None:
    answer = ksql(client, text)
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["message"] == "PQ_NOPE does not exist."
    assert (body["line"], body["column"]) == (4, 8)  # FROM PQ_NOPE, not the statement's start


def test_show_functions_and_describe_function(client: TestClient) -> None:
    listed = ksql(client, "SHOW FUNCTIONS;").json()[0]
    assert listed["@type"] == "function_names"
    by_name = {f["name"]: f for f in listed["functions"]}
    assert by_name["SUBSTRING"] == {"name": "SUBSTRING", "type": "SCALAR", "category": "STRING"}
    assert by_name["COUNT"]["type"] == "AGGREGATE"
    assert by_name["TRANSFORM"]["category"] == "LAMBDA"
    described = ksql(client, "DESCRIBE FUNCTION substring;").json()[0]
    assert (described["@type"], described["name"], described["type"]) == (
        "describe_function",
        "SUBSTRING",
        "SCALAR",
    )
    assert [v["argumentTypes"] for v in described["functions"]] == [
        ["STRING", "INTEGER"],
        ["STRING", "INTEGER", "INTEGER"],
        ["BYTES", "INTEGER"],
        ["BYTES", "INTEGER", "INTEGER"],
    ]
    assert described["functions"][0]["returnType"] == "STRING"
    missing = ksql(client, "DESCRIBE FUNCTION nope;")
    assert missing.status_code == 400
    assert "Can't find any functions with the name 'NOPE'" in missing.json()["message"]


def test_show_properties_lists_server_and_session_values(client: TestClient) -> None:
    answer = ksql(
        client, "SHOW PROPERTIES;", streamsProperties={"auto.offset.reset": "earliest"}
    ).json()[0]
    assert answer["@type"] == "properties"
    values = {p["name"]: (p["scope"], p["value"]) for p in answer["properties"]}
    assert values["auto.offset.reset"] == ("SERVER", "earliest")
    assert values["ksql.streams.cache.max.bytes.buffering"] == ("KSQL", "10485760")
    assert answer["overwrittenProperties"] == ["auto.offset.reset"]
    assert answer["defaultProperties"] == ["ksql.streams.cache.max.bytes.buffering"]


def test_assert_topic_and_schema_as_ksqldb_answers_them(client: TestClient) -> None:
    topic = _name("ASSERTED").lower()
    created = ksql(
        client,
        f"CREATE STREAM {topic.upper()} (ID STRING KEY, V INT) WITH "
        f"(kafka_topic='{topic}', partitions=2, value_format='JSON');",
    )
    assert created.status_code == 200, created.text
    (found,) = ksql(client, f"ASSERT TOPIC {topic} WITH (PARTITIONS=2, REPLICAS=1);").json()
    assert found == {
        "@type": "assert_topic",
        "statementText": found["statementText"],
        "topicName": topic,
        "exists": True,
        "warnings": [],
    }
    missing = ksql(client, "ASSERT TOPIC no_such_topic_here TIMEOUT 200 MILLISECONDS;")
    assert missing.status_code == 417
    assert missing.json()["error_code"] == 41700
    assert missing.json()["message"] == "Topic no_such_topic_here does not exist"
    mismatch = ksql(client, f"ASSERT TOPIC {topic} WITH (PARTITIONS=3) TIMEOUT 100 MILLISECONDS;")
    assert mismatch.status_code == 417
    assert mismatch.json()["message"] == (
        f"Mismatched configuration for topic {topic}: For config partitions, expected 3 got 2"
    )
    (absent,) = ksql(client, "ASSERT NOT EXISTS TOPIC no_such_topic_here;").json()
    assert absent["@type"] == "assert_topic" and absent["exists"] is False
    exists = ksql(client, f"ASSERT NOT EXISTS TOPIC {topic} TIMEOUT 100 MILLISECONDS;")
    assert exists.status_code == 417 and exists.json()["message"] == f"Topic {topic} exists"
    schema = ksql(client, "ASSERT SCHEMA SUBJECT 'nope-value' TIMEOUT 100 MILLISECONDS;")
    assert schema.status_code == 417  # (this server has no registry: it says so)
    assert "schema registry" in schema.json()["message"]


@pytest.mark.parametrize(
    ("with_clause", "fragment"),
    [
        (
            "kafka_topic='../../etc', value_format='JSON', partitions=1",
            'Topic name "../../etc" is illegal',
        ),
        ("kafka_topic='q'';--', value_format='JSON', partitions=1", "is illegal"),
        (
            "kafka_topic='ok_topic', value_format='JSON', partitions=-3",
            "Invalid number of partitions",
        ),
        (
            "kafka_topic='ok_topic', value_format='JSON', partitions=0",
            "Invalid number of partitions",
        ),
        ("kafka_topic='ok_topic', value_format='JSON', partitions=100000000", "at most 10,000"),
        (
            "kafka_topic='ok_topic', value_format='JSON', partitions=1, replicas=-5",
            "number of replicas",
        ),
    ],
)
def test_kafka_rules_are_checked_before_the_command_log(
    client: TestClient, with_clause: str, fragment: str
) -> None:
    answer = ksql(client, f"CREATE STREAM {_name('BAD')} (A INT) WITH ({with_clause});")
    assert answer.status_code == 400, answer.text
    assert fragment in answer.json()["message"]
    # and the next statement is not held up by anything the refused one did
    assert ksql(client, "SHOW STREAMS;").status_code == 200
