"""Every REST answer parses with a strict client's models of ksqlDB's documented shapes (issue 21,
item 5): pydantic models as a validating ksqlDB client writes them (required fields typed, each
/query item exactly one of ksqlDB's kinds); headwater's staleness extension must travel where such
a client ignores it (extra fields of the header object), never as an item of its own."""

from __future__ import annotations

import json
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from headwater.gateway.app import create_app
from headwater.gateway.services import Services

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette wants httpx2 for its TestClient
    from starlette.testclient import TestClient

pytestmark = pytest.mark.kafka


class Model(BaseModel):
    """Unknown fields are ignored (pydantic's default), as a client written against ksqlDB's docs
    would; known fields must be present and of their documented type."""

    model_config = ConfigDict(extra="ignore", strict=True)


class Header(Model):
    queryId: str
    schema_: str = Field(alias="schema")


class RowItem(Model):
    columns: list[Any]


class ErrorBody(Model):
    type_: str = Field(alias="@type")
    error_code: int
    message: str


class QueryItem(BaseModel):
    """One item of a /query array: exactly one of ksqlDB's kinds."""

    model_config = ConfigDict(extra="forbid", strict=True)
    header: Header | None = None
    row: RowItem | None = None
    finalMessage: str | None = None
    errorMessage: ErrorBody | None = None

    @model_validator(mode="after")
    def one_kind(self) -> QueryItem:
        kinds = [k for k in ("header", "row", "finalMessage", "errorMessage") if getattr(self, k)]
        if len(kinds) != 1:
            raise ValueError(f"an item must be exactly one of ksqlDB's kinds, found {kinds}")
        return self


class StreamHeader(Model):
    queryId: str
    columnNames: list[str]
    columnTypes: list[str]


class CommandStatus(Model):
    status: str
    message: str


class CurrentStatus(Model):
    type_: Literal["currentStatus"] = Field(alias="@type")
    statementText: str
    commandId: str
    commandStatus: CommandStatus
    commandSequenceNumber: int


class SourceInfo(Model):
    type: str
    name: str
    topic: str
    keyFormat: str
    valueFormat: str
    isWindowed: bool


class StreamsList(Model):
    type_: Literal["streams"] = Field(alias="@type")
    statementText: str
    streams: list[SourceInfo]


class TablesList(Model):
    type_: Literal["tables"] = Field(alias="@type")
    statementText: str
    tables: list[SourceInfo]


class FieldInfo(Model):
    name: str
    schema_: dict[str, Any] = Field(alias="schema")


class SourceDescription(Model):
    name: str
    type: str
    topic: str
    keyFormat: str
    valueFormat: str
    fields: list[FieldInfo]
    readQueries: list[Any]
    writeQueries: list[Any]


class SourceDescriptionEntity(Model):
    type_: Literal["sourceDescription"] = Field(alias="@type")
    statementText: str
    sourceDescription: SourceDescription


class Properties(Model):
    type_: Literal["properties"] = Field(alias="@type")
    statementText: str
    properties: list[dict[str, Any]]


class KafkaTopic(Model):
    name: str
    replicaInfo: list[int]


class KafkaTopics(Model):
    type_: Literal["kafka_topics"] = Field(alias="@type")
    statementText: str
    topics: list[KafkaTopic]


class Queries(Model):
    type_: Literal["queries"] = Field(alias="@type")
    statementText: str
    queries: list[dict[str, Any]]


class Variables(Model):
    type_: Literal["variables"] = Field(alias="@type")
    statementText: str
    variables: list[dict[str, Any]]


Entity = (
    CurrentStatus
    | StreamsList
    | TablesList
    | SourceDescriptionEntity
    | Properties
    | KafkaTopics
    | Queries
    | Variables
)


class ServerInfo(Model):
    version: str
    kafkaClusterId: str
    ksqlServiceId: str
    serverStatus: str


class Info(Model):
    KsqlServerInfo: ServerInfo


class Health(Model):
    isHealthy: bool


class HealthDetails(Model):
    metastore: Health
    kafka: Health


class HealthCheck(Model):
    isHealthy: bool
    details: HealthDetails


class Status(Model):
    commandStatuses: dict[str, str]


class ErrorAnswer(Model):
    type_: Literal["statement_error", "generic_error"] = Field(alias="@type")
    error_code: int
    message: str


@pytest.fixture(scope="module")
def services(memory_services: Callable[..., Services]) -> Services:
    return memory_services("shapes")


@pytest.fixture(scope="module")
def client(services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(services)) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def table(client: TestClient) -> str:
    name = f"S_{uuid.uuid4().hex[:6].upper()}"
    created = client.post(
        "/ksql",
        json={
            "ksql": (
                f"CREATE TABLE {name} (ID STRING PRIMARY KEY, V INT) WITH (kafka_topic='{name.lower()}', "
                "partitions=2, value_format='JSON');"
            )
        },
    )
    CurrentStatus.model_validate(created.json()[0])
    for i in range(3):
        client.post("/ksql", json={"ksql": f"INSERT INTO {name} (ID, V) VALUES ('k{i}', {i});"})
    deadline = time.monotonic() + 15
    while len(client.post("/query", json={"ksql": f"SELECT * FROM {name};"}).json()) < 4:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return name


def test_pull_answers_are_items_of_ksqldbs_kinds(client: TestClient, table: str) -> None:
    items = TypeAdapter(list[QueryItem])
    for text in [
        f"SELECT * FROM {table} WHERE ID = 'k1';",
        f"SELECT * FROM {table};",
        f"SELECT V FROM {table} WHERE ID IN ('k0', 'k2');",
        f"SELECT * FROM {table} LIMIT 1;",
    ]:
        answer = client.post("/query", json={"ksql": text})
        parsed = items.validate_python(answer.json())
        assert parsed[0].header is not None and all(i.row for i in parsed[1:]), text
        # the staleness extension rides in the header, where such a client ignores it
        assert "servedBy" in answer.json()[0]["header"]
    over = client.post(
        "/query",
        json={
            "ksql": f"SELECT * FROM {table};",
            "streamsProperties": {"ksql.query.pull.table.scan.max.rows": 1},
        },
    )
    parsed = items.validate_python(over.json())
    assert parsed[-1].errorMessage is not None  # an error mid-answer is ksqlDB's errorMessage item


def test_query_stream_answers_a_header_then_arrays(client: TestClient, table: str) -> None:
    answer = client.post("/query-stream", json={"sql": f"SELECT * FROM {table};"})
    lines = [json.loads(line) for line in answer.text.splitlines()]
    StreamHeader.model_validate(lines[0])
    assert all(isinstance(line, list) for line in lines[1:]) and len(lines) == 4


def test_ksql_entities_parse(client: TestClient, table: str) -> None:
    entity = TypeAdapter(Entity)
    for text in [
        "SHOW STREAMS;",
        "SHOW TABLES;",
        f"DESCRIBE {table};",
        "SHOW PROPERTIES;",
        "SHOW TOPICS;",
        "SHOW QUERIES;",
        "SHOW VARIABLES;",
        (
            "CREATE STREAM SHAPE_S (ID STRING KEY, V INT) WITH (kafka_topic='shape-s', "
            "partitions=1, value_format='JSON');"
        ),
    ]:
        answer = client.post("/ksql", json={"ksql": text})
        assert answer.status_code == 200, answer.text
        for item in answer.json():
            entity.validate_python(item)


def test_errors_and_server_endpoints_parse(client: TestClient) -> None:
    for path, body in [
        ("/ksql", {"ksql": "SELEC 1;"}),
        ("/query", {"ksql": "SELECT * FROM NOPE;"}),
        ("/ksql", {"ksql": 1}),
        ("/query-stream", {"sql": []}),
    ]:
        ErrorAnswer.model_validate(client.post(path, json=body).json())
    Info.model_validate(client.get("/info").json())
    HealthCheck.model_validate(client.get("/healthcheck").json())
    Status.model_validate(client.get("/status").json())
