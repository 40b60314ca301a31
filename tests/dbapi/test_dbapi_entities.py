"""`/ksql` entities as tables (headwater.dbapi.entities).

Recordings: no ksqlDB server runs here, so each entity below was written by hand from the shape
named in its comment (ksqlDB docs developer-guide/ksqldb-rest-api/ksql-endpoint.md, or the Jackson
entity classes in confluentinc/ksql ksqldb-rest-model/.../rest/entity/), with the column headers
of the ksqlDB CLI's table builders (ksqldb-cli/.../console/table/builder/*TableBuilder.java).
"""

from __future__ import annotations

from typing import Any

import pytest

from headwater.dbapi.entities import BUILDERS, EntityTable, entity_table, schema_type_text

# Shape: StreamsList / SourceInfo.Stream (ksql-endpoint.md "LIST STREAMS"; keyFormat/valueFormat
# since ksqlDB 0.13). Headers: StreamsListTableBuilder.
STREAMS = {
    "@type": "streams",
    "statementText": "SHOW STREAMS;",
    "streams": [
        {
            "type": "STREAM",
            "name": "ORDERS",
            "topic": "orders",
            "keyFormat": "KAFKA",
            "valueFormat": "JSON",
            "isWindowed": False,
        },
        {
            "type": "STREAM",
            "name": "CLICKS",
            "topic": "clicks",
            "keyFormat": "JSON",
            "valueFormat": "AVRO",
            "isWindowed": True,
        },
    ],
    "warnings": [],
}

# Shape: TablesList (ksql-endpoint.md "LIST TABLES"). Headers: TablesListTableBuilder.
TABLES = {
    "@type": "tables",
    "statementText": "SHOW TABLES;",
    "tables": [
        {
            "type": "TABLE",
            "name": "TOTALS",
            "topic": "totals",
            "keyFormat": "KAFKA",
            "valueFormat": "JSON",
            "isWindowed": False,
        },
    ],
    "warnings": [],
}

# Shape: Queries / RunningQuery.java (queryString, sinks, sinkKafkaTopics, id, statusCount,
# queryType, state). Headers: QueriesTableBuilder.
QUERIES = {
    "@type": "queries",
    "statementText": "SHOW QUERIES;",
    "queries": [
        {
            "queryString": "CREATE TABLE TOTALS AS\nSELECT ID, SUM(X) FROM ORDERS GROUP BY ID;",
            "sinks": ["TOTALS"],
            "sinkKafkaTopics": ["totals"],
            "id": "CTAS_TOTALS_1",
            "statusCount": {"RUNNING": 1},
            "queryType": "PERSISTENT",
            "state": "RUNNING",
        },
    ],
    "warnings": [],
}

# Shape: PropertiesList (properties [{name, scope, value}], overwrittenProperties,
# defaultProperties). Headers: PropertiesListTableBuilder.
PROPERTIES = {
    "@type": "properties",
    "statementText": "SHOW PROPERTIES;",
    "properties": [
        {"name": "ksql.streams.num.stream.threads", "scope": "KSQL", "value": "4"},
        {"name": "acceptable.offset.lag", "scope": "KSQL", "value": "100"},
        {"name": "ksql.service.id", "scope": "KSQL", "value": None},
    ],
    "overwrittenProperties": ["acceptable.offset.lag"],
    "defaultProperties": ["ksql.service.id"],
    "warnings": [],
}

# Shape: KafkaTopicsList (topics [{name, replicaInfo}]). Headers: KafkaTopicsListTableBuilder.
TOPICS = {
    "@type": "kafka_topics",
    "statementText": "LIST TOPICS;",
    "topics": [
        {"name": "orders", "replicaInfo": [1, 1, 1]},
        {"name": "odd", "replicaInfo": [1, 3]},
        {"name": "empty", "replicaInfo": []},
    ],
    "warnings": [],
}

# Shape: VariablesList (variables [{name, value}]). Headers: ListVariablesTableBuilder.
VARIABLES = {
    "@type": "variables",
    "statementText": "SHOW VARIABLES;",
    "variables": [{"name": "topic", "value": "orders"}, {"name": "env", "value": "prod"}],
    "warnings": [],
}

# Shape: SourceDescriptionEntity / FieldInfo / SchemaInfo (ksql-endpoint.md "DESCRIBE";
# FieldInfo.type is KEY or HEADER, SchemaInfo.parameters holds DECIMAL precision/scale).
DESCRIBE_TABLE = {
    "@type": "sourceDescription",
    "statementText": "DESCRIBE TOTALS;",
    "sourceDescription": {
        "name": "TOTALS",
        "type": "TABLE",
        "windowType": None,
        "fields": [
            {
                "name": "ID",
                "schema": {"type": "STRING", "fields": None, "memberSchema": None},
                "type": "KEY",
            },
            {
                "name": "TOTAL",
                "schema": {
                    "type": "DECIMAL",
                    "fields": None,
                    "memberSchema": None,
                    "parameters": {"precision": 10, "scale": 2},
                },
            },
            {
                "name": "TAGS",
                "schema": {"type": "ARRAY", "fields": None, "memberSchema": {"type": "STRING"}},
            },
            {"name": "ATTRS", "schema": {"type": "MAP", "memberSchema": {"type": "BIGINT"}}},
            {
                "name": "ADDR",
                "schema": {
                    "type": "STRUCT",
                    "fields": [
                        {"name": "CITY", "schema": {"type": "STRING"}},
                        {"name": "ZIP", "schema": {"type": "INTEGER"}},
                    ],
                },
            },
            {"name": "H", "schema": {"type": "BYTES"}, "type": "HEADER", "headerKey": "k"},
        ],
        "topic": "totals",
        "keyFormat": "KAFKA",
        "valueFormat": "JSON",
    },
    "warnings": [],
}

# Shape: CommandStatusEntity (ksql-endpoint.md "CREATE, DROP, TERMINATE").
CURRENT_STATUS = {
    "@type": "currentStatus",
    "statementText": "CREATE STREAM ORDERS (ID STRING KEY) WITH (kafka_topic='orders');",
    "commandId": "stream/`ORDERS`/create",
    "commandStatus": {"status": "SUCCESS", "message": "Stream created"},
    "commandSequenceNumber": 5,
    "warnings": [],
}


def _rows(entity: dict[str, Any]) -> list[tuple[Any, ...]]:
    table = entity_table(entity)
    assert table is not None
    return list(table.rows)


def test_current_status() -> None:
    table = entity_table(CURRENT_STATUS)
    assert table == EntityTable(
        ("Command ID", "Status", "Message"),
        ("STRING", "STRING", "STRING"),
        (("stream/`ORDERS`/create", "SUCCESS", "Stream created"),),
    )


def test_show_streams_uses_the_cli_headers_and_sorts_by_name() -> None:
    table = entity_table(STREAMS)
    assert table is not None
    assert table.columns == ("Stream Name", "Kafka Topic", "Key Format", "Value Format", "Windowed")
    assert table.types[-1] == "BOOLEAN"
    assert list(table.rows) == [
        ("CLICKS", "clicks", "JSON", "AVRO", True),
        ("ORDERS", "orders", "KAFKA", "JSON", False),
    ]


def test_show_tables() -> None:
    table = entity_table(TABLES)
    assert table is not None
    assert table.columns[0] == "Table Name"
    assert list(table.rows) == [("TOTALS", "totals", "KAFKA", "JSON", False)]


def test_show_queries_prints_the_query_on_one_line() -> None:
    table = entity_table(QUERIES)
    assert table is not None
    assert table.columns == (
        "Query ID",
        "Query Type",
        "Status",
        "Sink Name",
        "Sink Kafka Topic",
        "Query String",
    )
    assert list(table.rows) == [
        (
            "CTAS_TOTALS_1",
            "PERSISTENT",
            "RUNNING:1",
            "TOTALS",
            "totals",
            "CREATE TABLE TOTALS AS SELECT ID, SUM(X) FROM ORDERS GROUP BY ID;",
        ),
    ]


def test_show_properties_marks_session_and_default_overrides() -> None:
    table = entity_table(PROPERTIES)
    assert table is not None
    assert table.columns == ("Property", "Scope", "Default override", "Effective Value")
    assert list(table.rows) == [
        ("acceptable.offset.lag", "KSQL", "SESSION", "100"),
        ("ksql.service.id", "KSQL", "", "NULL"),
        ("ksql.streams.num.stream.threads", "KSQL", "SERVER", "4"),
    ]


def test_list_topics_summarises_replicas_like_the_cli() -> None:
    assert _rows(TOPICS) == [("orders", 3, "1"), ("odd", 2, "1, 3"), ("empty", 0, "0")]


def test_show_variables_sorted() -> None:
    table = entity_table(VARIABLES)
    assert table is not None
    assert table.columns == ("Variable Name", "Value")
    assert list(table.rows) == [("env", "prod"), ("topic", "orders")]


def test_describe_prints_field_types_like_the_cli() -> None:
    table = entity_table(DESCRIBE_TABLE)
    assert table is not None
    assert table.columns == ("Field", "Type")
    assert list(table.rows) == [
        ("ID", "VARCHAR(STRING)  (primary key)"),
        ("TOTAL", "DECIMAL(10, 2)"),
        ("TAGS", "ARRAY<VARCHAR(STRING)>"),
        ("ATTRS", "MAP<STRING, BIGINT>"),
        ("ADDR", "STRUCT<CITY VARCHAR(STRING), ZIP INTEGER>"),
        ("H", "BYTES            (header('k'))"),
    ]


def test_describe_stream_key_and_window() -> None:
    entity = {
        "@type": "sourceDescription",
        "sourceDescription": {
            "type": "STREAM",
            "windowType": "TUMBLING",
            "fields": [{"name": "K", "schema": {"type": "BIGINT"}, "type": "KEY"}],
        },
    }
    assert _rows(entity) == [("K", "BIGINT           (key) (Window type: TUMBLING)")]


def test_schema_type_text_without_decimal_parameters() -> None:
    assert schema_type_text({"type": "DECIMAL"}) == "DECIMAL"


@pytest.mark.parametrize(
    ("entity", "rows"),
    [
        ({"@type": "warning_entity", "message": "careful"}, [("careful",)]),
        ({"@type": "error_entity", "errorMessage": "broken"}, [("broken",)]),
        (
            {
                "@type": "function_names",
                "functions": [
                    {"name": "UCASE", "category": "STRING"},
                    {"name": "ABS", "category": "MATHEMATICAL"},
                ],
            },
            [("ABS", "MATHEMATICAL"), ("UCASE", "STRING")],
        ),
        (
            {
                "@type": "type_list",
                "types": {
                    "ADDR": {
                        "type": "STRUCT",
                        "fields": [{"name": "CITY", "schema": {"type": "STRING"}}],
                    }
                },
            },
            [("ADDR", "STRUCT<CITY VARCHAR(STRING)>")],
        ),
        (
            {
                "@type": "queryDescription",
                "queryDescription": {
                    "fields": [{"name": "ID", "schema": {"type": "STRING"}, "type": "KEY"}]
                },
            },
            [("ID", "VARCHAR(STRING)  (key)")],
        ),
    ],
)
def test_other_entities(entity: dict[str, Any], rows: list[tuple[Any, ...]]) -> None:
    assert _rows(entity) == rows


def test_unknown_entities_have_no_table_and_malformed_lists_are_empty() -> None:
    assert entity_table({"@type": "connector_list", "connectors": []}) is None
    assert entity_table({"statementText": "?"}) is None
    assert _rows({"@type": "streams", "streams": "oops"}) == []
    assert _rows({"@type": "streams", "streams": [1, None]}) == []


def test_dispatch_table_covers_the_entities_the_driver_promises() -> None:
    promised = {
        "currentStatus",
        "streams",
        "tables",
        "queries",
        "properties",
        "kafka_topics",
        "variables",
        "sourceDescription",
    }
    assert promised <= set(BUILDERS)
