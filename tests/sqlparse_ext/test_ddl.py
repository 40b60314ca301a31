"""CREATE STREAM/TABLE/TYPE, CREATE ... AS SELECT, INSERT, DROP and ALTER."""

from __future__ import annotations

import pytest

from headwater.sqlparse_ext import (
    AlterSource,
    ArrayType,
    Column,
    CreateAsSelect,
    CreateSource,
    CreateType,
    CustomType,
    DecimalType,
    Drop,
    DropType,
    InsertInto,
    InsertValues,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
)

STRING = PrimitiveType("STRING")
INTEGER = PrimitiveType("INTEGER")


def test_create_stream_columns_and_properties(v):
    s = v.validate_identity(
        "CREATE STREAM pageviews (id STRING KEY, viewtime BIGINT, `Page` STRING, "
        "tags ARRAY<STRING>) WITH (kafka_topic='pv', value_format='JSON', partitions=4, "
        "acceptable.offset.lag=1000, wrap_single_value=false, ratio=0.5);"
    )
    assert isinstance(s, CreateSource)
    assert (s.kind, s.name, s.source, s.or_replace, s.if_not_exists) == (
        "STREAM",
        "PAGEVIEWS",
        False,
        False,
        False,
    )
    assert s.columns == (
        Column("ID", STRING, key=True),
        Column("VIEWTIME", PrimitiveType("BIGINT")),
        Column("Page", STRING),
        Column("TAGS", ArrayType(STRING)),
    )
    props = s.properties
    assert list(props) == [
        "KAFKA_TOPIC",
        "VALUE_FORMAT",
        "PARTITIONS",
        "acceptable.offset.lag",
        "WRAP_SINGLE_VALUE",
        "RATIO",
    ]
    assert props["kafka_topic"] == "pv" and props["Value_Format"] == "JSON"
    assert props["partitions"] == 4 and isinstance(props["partitions"], int)
    assert props["ACCEPTABLE.OFFSET.LAG"] == 1000
    assert props["wrap_single_value"] is False
    assert props["ratio"] == 0.5
    assert "kafka_topic" in props and "nope" not in props


def test_create_table_primary_key_or_replace_source(v):
    s = v.validate_identity(
        "CREATE OR REPLACE SOURCE TABLE IF NOT EXISTS users (id INT PRIMARY KEY, "
        "d DECIMAL(4, 2), m MAP<STRING, ARRAY<INT>>, st STRUCT<a INT, `b` ADDRESS>) "
        "WITH (kafka_topic='u', format='AVRO')"
    )
    assert (s.kind, s.name, s.source, s.or_replace, s.if_not_exists) == (
        "TABLE",
        "USERS",
        True,
        True,
        True,
    )
    assert s.columns[0] == Column("ID", INTEGER, primary_key=True)
    assert s.columns[1].type == DecimalType(4, 2)
    assert s.columns[2].type == MapType(STRING, ArrayType(INTEGER))
    assert s.columns[3].type == StructType(
        (StructField("A", INTEGER), StructField("b", CustomType("ADDRESS")))
    )


def test_headers_columns(v):
    s = v.validate_identity(
        "CREATE STREAM s (k STRING KEY, h ARRAY<STRUCT<key STRING, value BYTES>> HEADERS, "
        "one BYTES HEADER('abc')) WITH (kafka_topic='t', format='JSON')"
    )
    assert s.columns[1].headers and s.columns[1].header_key is None
    assert s.columns[2] == Column("ONE", PrimitiveType("BYTES"), header_key="abc")


def test_quoted_names_keep_case(v):
    s = v.validate_identity("CREATE STREAM \"input\" (`Id` INT KEY) WITH (kafka_topic='x')")
    assert s.name == "input" and s.columns[0].name == "Id"


@pytest.mark.parametrize(
    ("sql", "kind", "name"),
    [
        ("CREATE STREAM out AS SELECT * FROM input", "STREAM", "OUT"),
        (
            (
                "CREATE TABLE IF NOT EXISTS agg WITH (kafka_topic='agg') AS "
                "SELECT id, COUNT(*) FROM s GROUP BY id EMIT CHANGES"
            ),
            "TABLE",
            "AGG",
        ),
        ("CREATE OR REPLACE STREAM `o` AS SELECT a FROM s PARTITION BY a", "STREAM", "o"),
    ],
)
def test_create_as_select(v, sql, kind, name):
    s = v.validate_identity(sql)
    assert isinstance(s, CreateAsSelect)
    assert (s.kind, s.name) == (kind, name)
    assert s.query.expression.key == "ksqlselect"


def test_create_as_select_properties(v):
    s = v.validate_identity(
        "CREATE TABLE t WITH (partitions=2) AS SELECT a, SUM(b) FROM s GROUP BY a"
    )
    assert s.properties["PARTITIONS"] == 2 and s.if_not_exists is False
    assert [g.sql() for g in s.query.group_by] == ["a"]


def test_insert_into_select(v):
    s = v.validate_identity("INSERT INTO out WITH (query_id='Q1') SELECT * FROM input WHERE x > 1")
    assert isinstance(s, InsertInto)
    assert s.target == "OUT" and s.properties["QUERY_ID"] == "Q1"
    assert s.query.where is not None and s.query.source.name == "INPUT"


def test_insert_values(v):
    s = v.validate_identity(
        "INSERT INTO \"input\" (id, `Val`, ts) VALUES (1, 'it''s', -2.5)",
        expected="INSERT INTO `input` (id, `Val`, ts) VALUES (1, 'it''s', -2.5)",
    )
    assert isinstance(s, InsertValues)
    assert s.target == "input" and s.columns == ("ID", "Val", "TS")
    assert [value.sql() for value in s.values] == ["1", "'it''s'", "-2.5"]
    assert v.validate_identity("INSERT INTO t VALUES ()").values == ()


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            "DROP STREAM s",
            Drop(kind="STREAM", name="S", text="", line=0, column=0, offset=0, expression=None),
        ),
        (
            "DROP TABLE IF EXISTS t DELETE TOPIC",
            Drop(
                kind="TABLE",
                name="T",
                if_exists=True,
                delete_topic=True,
                text="",
                line=0,
                column=0,
                offset=0,
                expression=None,
            ),
        ),
        (
            "DROP TYPE IF EXISTS address",
            DropType(
                name="ADDRESS", if_exists=True, text="", line=0, column=0, offset=0, expression=None
            ),
        ),
    ],
)
def test_drop(v, sql, expected):
    assert v.validate_identity(sql) == expected


def test_alter_and_create_type(v):
    s = v.validate_identity("ALTER STREAM input ADD COLUMN newCol INT, ADD other ARRAY<STRING>")
    assert isinstance(s, AlterSource)
    assert s.columns == (Column("NEWCOL", INTEGER), Column("OTHER", ArrayType(STRING)))
    t = v.validate_identity(
        "CREATE TYPE IF NOT EXISTS address AS STRUCT<number INTEGER, city VARCHAR>"
    )
    assert isinstance(t, CreateType) and t.if_not_exists
    assert t.type.sql() == "STRUCT<`NUMBER` INTEGER, `CITY` STRING>"


@pytest.mark.parametrize(
    ("sql", "line", "column", "fragment"),
    [
        (
            "CREATE STRAEM s (a INT)",
            1,
            8,
            "expected STREAM, TABLE or TYPE after CREATE, found 'STRAEM'",
        ),
        (
            "CREATE TABLE t (id INT KEY) WITH (kafka_topic='t')",
            1,
            17,
            "please use 'PRIMARY KEY' for tables",
        ),
        ("CREATE STREAM s (id INT PRIMARY KEY)", 1, 18, "please use 'KEY' for streams"),
        ("CREATE STREAM s (k STRING (KEY))", 1, 28, "Expecting {'STRING', INTEGER_VALUE}"),
        ("CREATE STREAM s (c NULL)", 1, 20, "expected a type, found 'NULL'"),
        ("CREATE STREAM s (c MAP<STRING>)", 1, 30, "expected ',' between the key and value types"),
        ("CREATE STREAM s (a INT) WITH (x=1, X=2)", 1, 36, "Duplicate property X"),
        ("CREATE STREAM s (a INT) WITH (x=)", 1, 33, "expected a literal value"),
        (
            "CREATE TABLE t (k STRING PRIMARY KEY) WITH (WINDOW_TYPE='Session', WINDOW_SIZE='1 s')",
            1,
            68,
            "'WINDOW_SIZE' should not be set for SESSION windows",
        ),
        ("CREATE STREAM s (a INT) AS SELECT * FROM x", 1, 25, "no column list with AS SELECT"),
        (
            "CREATE SOURCE STREAM s AS SELECT * FROM x",
            1,
            8,
            "CREATE SOURCE STREAM cannot be AS SELECT",
        ),
        ("INSERT INTO t (a) SELECT * FROM x", 1, 19, "expected VALUES, found 'SELECT'"),
        ("DROP VIEW v", 1, 6, "expected STREAM, TABLE or TYPE after DROP"),
        ("DROP STREAM s DELETE", 1, 21, "expected TOPIC after DELETE, found end of statement"),
        ("ALTER STREAM s DROP COLUMN c", 1, 16, "expected ADD, found 'DROP'"),
    ],
)
def test_ddl_errors(v, sql, line, column, fragment):
    v.validate_error(sql, line, column, fragment)
