"""Validation and planning of catalog statements against a snapshot: ksqlDB's checks, no broker."""

from __future__ import annotations

import pytest

from headwater.metastore.catalog import Catalog, Query, SourceKind
from headwater.metastore.codec import source_from_dict
from headwater.metastore.errors import ValidationError
from headwater.metastore.format_defaults import FormatDefaults, format_defaults
from headwater.metastore.plan import TopicFacts, plan
from headwater.metastore.records import CommandRecord, encode
from headwater.metastore.replay import Fold
from headwater.sqlparse_ext import ParseError, parse_one

FACTS = TopicFacts({"pageviews": 3, "users": 2})


def _apply_all(*statements: str) -> Catalog:
    """A catalog built by planning and folding statements in order."""
    fold = Fold()
    for offset, text in enumerate(statements):
        planned = plan(parse_one(text), fold.catalog, FACTS)
        assert planned.command is not None, text
        fold.feed(offset, encode(CommandRecord(f"c{offset}", offset, text, planned.command)))
    return fold.catalog


STREAM = "CREATE STREAM pv (uid STRING KEY, page STRING, ts BIGINT) WITH (kafka_topic='pageviews', value_format='JSON');"
TABLE = "CREATE TABLE users (id STRING PRIMARY KEY, name STRING) WITH (kafka_topic='users', value_format='JSON');"


def test_create_stream_plans_a_source_with_key_columns_first() -> None:
    text = (
        "CREATE STREAM pv (page STRING, uid STRING KEY) "
        "WITH (kafka_topic='pageviews', value_format='json', timestamp='ts2', key_format='kafka')"
    )
    with pytest.raises(ValidationError, match="TIMESTAMP column .* does not exist"):
        plan(parse_one(text), Catalog(), FACTS)
    planned = plan(parse_one(text.replace(", timestamp='ts2'", "")), Catalog(), FACTS)
    source = source_from_dict(planned.command["source"])
    assert [c.name for c in source.columns] == ["UID", "PAGE"]
    assert source.key_columns[0].name == "UID"
    assert (source.topic, source.partitions, source.value_format) == ("pageviews", 3, "JSON")
    assert planned.create_topic is None


def test_missing_topic_is_created_only_when_partitions_are_given() -> None:
    text = "CREATE STREAM s (v INT) WITH (kafka_topic='fresh', value_format='JSON', partitions=4);"
    planned = plan(parse_one(text), Catalog(), FACTS)
    assert planned.create_topic == ("fresh", 4)
    with pytest.raises(ValidationError, match="Kafka topic does not exist: fresh"):
        plan(parse_one(text.replace(", partitions=4", "")), Catalog(), FACTS)
    with pytest.raises(ValidationError, match="already exists, with different partition"):
        plan(parse_one(text.replace("fresh", "users")), Catalog(), FACTS)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "CREATE TABLE t (id STRING, v INT) WITH (kafka_topic='users', value_format='JSON');",
            "Tables require a PRIMARY KEY",
        ),
        (
            "CREATE STREAM s (v INT) WITH (value_format='JSON');",
            'Missing required property "KAFKA_TOPIC"',
        ),
        (  # the delimiter is checked first, as ksqlDB prepares the statement
            (
                "CREATE STREAM s WITH (kafka_topic='users', value_format='DELIMITED', "
                "value_delimiter='<~>');"
            ),
            (
                "Failed to prepare statement: Configuration VALUE_DELIMITER is invalid: Invalid "
                "delimiter value: '<~>'. Delimiter must be a single character or TAB,SPACE\n"
                "Example valid value: ';'"
            ),
        ),
        (  # then whether the format takes one, before the columns
            "CREATE STREAM s WITH (kafka_topic='users', value_format='JSON', value_delimiter='|');",
            "JSON does not support the following configs: [delimiter]",
        ),
        (  # a schema's full name is a schema format's config (and the legacy AVRO one too)
            (
                "CREATE STREAM s (v INT) WITH (kafka_topic='users', value_format='JSON', "
                "VALUE_AVRO_SCHEMA_FULL_NAME='com.custom.schema');"
            ),
            "JSON does not support the following configs: [fullSchemaName]",
        ),
        (
            (
                "CREATE STREAM s (k STRING KEY, v INT) WITH (kafka_topic='users', "
                "key_format='KAFKA', value_format='JSON', KEY_SCHEMA_FULL_NAME='K');"
            ),
            "KAFKA does not support the following configs: [fullSchemaName]",
        ),
        (
            (
                "CREATE STREAM s (v INT) WITH (kafka_topic='users', value_format='AVRO', "
                "VALUE_SCHEMA_FULL_NAME=' ');"
            ),
            "fullSchemaName cannot be empty. Format configuration: {fullSchemaName=}",
        ),
        (
            "CREATE STREAM s (v INT) WITH (kafka_topic='users');",
            "missing the 'VALUE_FORMAT' property",
        ),
        (
            "CREATE STREAM s (v INT) WITH (kafka_topic='users', value_format='XML');",
            "Unknown format: XML",
        ),
        (
            "CREATE STREAM s (v INT) WITH (kafka_topic='users', value_format='AVRO');",
            "Cannot create topic 'users' with format AVRO without configuring 'ksql.schema.registry.url'",
        ),
        (
            "CREATE STREAM s (v INT) WITH (kafka_topic='users', value_format='PROTOBUF');",
            "Cannot create topic 'users' with format PROTOBUF without configuring 'ksql.schema.registry.url'",
        ),
        (
            "CREATE STREAM s (v INT) WITH (kafka_topic='users', value_format='JSON', colour='red');",
            "Invalid config variable(s) in the WITH clause: COLOUR",
        ),
        (
            "CREATE STREAM s (v INT, v STRING) WITH (kafka_topic='users', value_format='JSON');",
            "Duplicate column names: V",
        ),
        (
            "CREATE STREAM s (a INT, b INT) WITH (kafka_topic='users', value_format='KAFKA');",
            "'KAFKA' format only supports a single field",
        ),
        (
            "CREATE STREAM s (a ARRAY<INT>) WITH (kafka_topic='users', value_format='KAFKA');",
            "'KAFKA' format does not support type 'ARRAY'",
        ),  # ksqlDB names the base type
        (
            "CREATE STREAM s (a ADDRESS) WITH (kafka_topic='users', value_format='JSON');",
            "Unknown type: ADDRESS",
        ),
        ("DROP STREAM nope;", "Stream NOPE does not exist"),
        (
            "CREATE STREAM s WITH (kafka_topic='users', value_format='JSON', value_schema_id=1);",
            (
                "VALUE_FORMAT should support schema inference when VALUE_SCHEMA_ID is provided. "
                "Current format is JSON."
            ),
        ),
        ("DROP TYPE nope;", "Type NOPE does not exist"),
        ("SELECT * FROM users;", "do not change the catalog"),
        # PAUSE is a query control like TERMINATE, but TERMINATE's planner is not its own
        ("PAUSE SOME_QUERY;", "PauseQuery statements do not change the catalog"),
    ],
)
def test_invalid_statements_are_refused_with_ksqldb_messages(text: str, message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        plan(parse_one(text), Catalog(), FACTS)
    assert message in raised.value.message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "CREATE STREAM s (id STRING PRIMARY KEY, v INT) WITH (kafka_topic='users', value_format='JSON');",
            "is a 'PRIMARY KEY' column: please use 'KEY' for streams",
        ),
        (
            "CREATE TABLE t (id STRING KEY, v INT) WITH (kafka_topic='users', value_format='JSON');",
            "is a 'KEY' column: please use 'PRIMARY KEY' for tables",
        ),
    ],
)
def test_key_kind_rules_are_enforced_by_the_parser(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_one(text)


def test_names_already_taken() -> None:
    catalog = _apply_all(STREAM)
    with pytest.raises(ValidationError, match="A stream with the same name already exists"):
        plan(parse_one(STREAM), catalog, FACTS)
    assert (
        plan(
            parse_one(STREAM.replace("STREAM pv", "STREAM IF NOT EXISTS pv")), catalog, FACTS
        ).command
        is None
    )
    replaced = plan(
        parse_one(STREAM.replace("CREATE STREAM", "CREATE OR REPLACE STREAM")), catalog, FACTS
    )
    assert replaced.command is not None and replaced.command["replace"] is True
    with pytest.raises(ValidationError, match="already exists"):
        plan(parse_one(TABLE.replace("TABLE users", "OR REPLACE TABLE pv")), catalog, FACTS)


def test_source_streams_refuse_replacing_and_altering_in_ksqldb_words() -> None:
    source = STREAM.replace("CREATE STREAM", "CREATE OR REPLACE SOURCE STREAM")
    with pytest.raises(ValidationError) as caught:  # whether or not it exists yet
        plan(parse_one(source), Catalog(), FACTS)
    assert caught.value.message == (
        "Cannot add stream 'PV': CREATE OR REPLACE is not supported on source streams."
    )
    catalog = _apply_all(STREAM.replace("CREATE STREAM", "CREATE SOURCE STREAM"))
    replace = STREAM.replace("CREATE STREAM", "CREATE OR REPLACE STREAM")
    with pytest.raises(ValidationError, match="CREATE OR REPLACE is not supported on source"):
        plan(parse_one(replace), catalog, FACTS)
    with pytest.raises(ValidationError) as caught:
        plan(parse_one("ALTER STREAM pv ADD COLUMN extra INT;"), catalog, FACTS)
    assert caught.value.message == (
        "Cannot alter stream 'PV': ALTER operations are not supported on source streams."
    )


def test_drop_refused_while_a_query_reads_the_source_and_delete_topic_planned() -> None:
    catalog = _apply_all(STREAM, TABLE)
    planned = plan(parse_one("DROP TABLE users DELETE TOPIC;"), catalog, FACTS)
    # the command names the topic: every server stops reading it when it applies the DROP
    assert planned.command == {"type": "drop_source", "name": "USERS", "delete_topic": "users"}
    assert planned.delete_topic == "users"
    kept = plan(parse_one("DROP TABLE users;"), catalog, FACTS)
    assert kept.command == {"type": "drop_source", "name": "USERS"} and kept.delete_topic is None
    with pytest.raises(ValidationError, match="Incompatible data source type is STREAM"):
        plan(parse_one("DROP TABLE pv;"), catalog, FACTS)
    busy = catalog.with_query(
        Query("CSAS_OUT_1", "CREATE STREAM out AS SELECT * FROM pv;", "OUT", ("PV",)), 9
    )
    with pytest.raises(ValidationError, match=r"queries read from this source: \[CSAS_OUT_1\]"):
        plan(parse_one("DROP STREAM pv;"), busy, FACTS)
    assert plan(parse_one("DROP STREAM IF EXISTS gone;"), catalog, FACTS).command is None


def test_custom_types_resolve_into_column_types() -> None:
    catalog = _apply_all(
        "CREATE TYPE address AS STRUCT<street STRING, zip INT>;",
        "CREATE TYPE addresses AS ARRAY<address>;",
    )
    assert catalog.types["ADDRESSES"].type == "ARRAY<STRUCT<`STREET` STRING, `ZIP` INTEGER>>"
    text = "CREATE STREAM s (id STRING KEY, home ADDRESS, others MAP<STRING, addresses>) WITH (kafka_topic='users', value_format='JSON');"
    source = source_from_dict(plan(parse_one(text), catalog, FACTS).command["source"])
    assert source.column("HOME").type == "STRUCT<`STREET` STRING, `ZIP` INTEGER>"
    assert (
        source.column("OTHERS").type == "MAP<STRING, ARRAY<STRUCT<`STREET` STRING, `ZIP` INTEGER>>>"
    )
    with pytest.raises(ValidationError, match="already registered"):
        plan(parse_one("CREATE TYPE address AS INT;"), catalog, FACTS)
    assert plan(parse_one("DROP TYPE address;"), catalog, FACTS).command == {
        "type": "drop_type",
        "name": "ADDRESS",
    }


def test_properties_are_kept_typed_with_upper_case_names() -> None:
    text = TABLE.replace("value_format='JSON'", "value_format='JSON', acceptable.offset.lag=100")
    source = source_from_dict(plan(parse_one(text), Catalog(), FACTS).command["source"])
    assert source.property("acceptable.offset.lag") == 100
    assert dict(source.properties)["ACCEPTABLE.OFFSET.LAG"] == 100


def test_avro_columns_left_out_are_inferred_from_the_registry() -> None:
    facts = TopicFacts(
        {"users": 2},
        {
            "users-key": (("ROWKEY", "STRING"),),
            "users-value": (("NAME", "STRING"), ("AGE", "INTEGER")),
        },
    )
    planned = plan(
        parse_one("CREATE TABLE u WITH (kafka_topic='users', format='AVRO');"), Catalog(), facts
    )
    source = source_from_dict(planned.command["source"])  # type: ignore[index]
    assert [(c.name, c.type, c.key) for c in source.columns] == [
        ("ROWKEY", "STRING", True),
        ("NAME", "STRING", False),
        ("AGE", "INTEGER", False),
    ]
    declared = plan(
        parse_one("CREATE STREAM s (ID INT KEY) WITH (kafka_topic='users', format='AVRO');"),
        Catalog(),
        facts,
    )
    source = source_from_dict(declared.command["source"])  # type: ignore[index]
    assert [c.name for c in source.columns] == ["ID", "NAME", "AGE"]
    with pytest.raises(
        ValidationError,
        match="Schema for message values on topic 'users' does not exist in the Schema Registry",
    ):
        plan(
            parse_one("CREATE STREAM s WITH (kafka_topic='users', format='AVRO');"),
            Catalog(),
            TopicFacts({"users": 2}, {}),
        )


@pytest.mark.parametrize(
    ("with_clause", "message"),
    [
        ("window_type='TUMBLING'", "TUMBLING windows require 'WINDOW_SIZE'"),
        (
            "window_type='SLIDING', window_size='1 MINUTE'",
            "Invalid value for 'WINDOW_TYPE': SLIDING",
        ),
        ("window_size='1 MINUTE'", "'WINDOW_SIZE' is only valid with 'WINDOW_TYPE'"),
    ],
)
def test_declared_windowed_sources_are_checked(with_clause: str, message: str) -> None:
    text = (
        f"CREATE TABLE w (K STRING PRIMARY KEY, C BIGINT) WITH (kafka_topic='users', "
        f"value_format='JSON', {with_clause});"
    )
    with pytest.raises(ValidationError, match=message):
        plan(parse_one(text), Catalog(), FACTS)


def test_declared_windowed_table_is_windowed() -> None:
    text = (
        "CREATE TABLE w (K STRING PRIMARY KEY, C BIGINT) WITH (kafka_topic='users', "
        "value_format='JSON', window_type='hopping', window_size='30 SECONDS');"
    )
    source = source_from_dict(plan(parse_one(text), Catalog(), FACTS).command["source"])  # type: ignore[index]
    assert source.windowed == "HOPPING"
    with pytest.raises(ValidationError, match="Windowed sources require a key column."):
        plan(
            parse_one(
                "CREATE STREAM s (C BIGINT) WITH (kafka_topic='users', value_format='JSON',"
                " window_type='SESSION');"
            ),
            Catalog(),
            FACTS,
        )


def test_an_unknown_name_is_answered_with_the_names_that_differ_only_in_case() -> None:
    """ksqlDB's checkAlternatives: a quoted name found unquoted, or the other way round."""
    catalog = _apply_all(
        STREAM.replace("CREATE STREAM pv", 'CREATE STREAM "pv"'),
        TABLE,
    )
    with pytest.raises(ValidationError) as raised:
        plan(parse_one("DROP STREAM pv;"), catalog, FACTS)
    assert raised.value.message == (
        'Stream PV does not exist.\nDid you mean "pv"? Hint: wrap the source name in double '
        "quotes to make it case-sensitive."
    )
    with pytest.raises(ValidationError) as raised:
        plan(parse_one('DROP TABLE "users";'), catalog, FACTS)
    assert raised.value.message == (
        "Table users does not exist.\nDid you mean USERS? Hint: try removing double quotes from "
        "the source name."
    )
    assert catalog.alternatives("nothing") == ""
    assert catalog.alternatives("PV", SourceKind.TABLE) == ""


def test_a_source_without_formats_takes_the_default_formats() -> None:
    text = "CREATE STREAM s (k STRING KEY, v INT) WITH (kafka_topic='users');"
    with pytest.raises(ValidationError, match="missing the 'VALUE_FORMAT' property"):
        plan(parse_one(text), Catalog(), FACTS)
    planned = plan(parse_one(text), Catalog(), FACTS, defaults=FormatDefaults("JSON", "DELIMITED"))
    source = source_from_dict(planned.command["source"])
    assert (source.key_format, source.value_format) == ("JSON", "DELIMITED")
    given = text.replace("kafka_topic='users'", "kafka_topic='users', value_format='JSON'")
    planned = plan(parse_one(given), Catalog(), FACTS, defaults=FormatDefaults(value="DELIMITED"))
    assert source_from_dict(planned.command["source"]).value_format == "JSON"
    assert format_defaults(
        {"ksql.persistence.default.format.value": "json"},
        {
            "ksql.persistence.default.format.value": "AVRO",
            "ksql.persistence.default.format.key": "JSON",
        },
    ) == FormatDefaults("JSON", "JSON")
    assert format_defaults({}, {}) == FormatDefaults("KAFKA", None)


def test_a_schema_id_excludes_declared_columns() -> None:
    text = "CREATE STREAM s (v INT) WITH (kafka_topic='users', value_format='AVRO', value_schema_id=1);"
    with pytest.raises(ValidationError) as raised:
        plan(parse_one(text), Catalog(), TopicFacts({"users": 2}, {}))
    assert raised.value.message == (
        "Table elements and VALUE_SCHEMA_ID cannot both exist for create statement."
    )


def test_create_as_select_refuses_limit_in_ksqldb_words() -> None:
    from headwater.engine.persistent import QUERY_ANALYZER

    catalog = _apply_all(TABLE)
    for kind in ("STREAM", "TABLE"):
        text = f"CREATE {kind} t AS SELECT * FROM users LIMIT 5;"
        with pytest.raises(ValidationError) as raised:
            plan(parse_one(text), catalog, FACTS, QUERY_ANALYZER)
        assert raised.value.message == (
            f"CREATE {kind} AS SELECT statements don't support LIMIT clause."
        )
