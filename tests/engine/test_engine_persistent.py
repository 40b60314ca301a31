"""Persistent queries, the pure side: planning CSAS / INSERT INTO ... SELECT / TERMINATE through the
metastore with the engine's analysis, and the record pipeline a live query runs. No broker, no JVM."""

from __future__ import annotations

import json

import pytest

from headwater.engine.partitioner import partition_for
from headwater.engine.persistent import QUERY_ANALYZER, InputRecord, RecordPipeline
from headwater.engine.persistent.query_plan import QueryCompileError, compile_query, describe_shape
from headwater.metastore.catalog import Catalog
from headwater.metastore.errors import SourceInUse, ValidationError
from headwater.metastore.plan import TopicFacts, plan
from headwater.sqlparse_ext import parse_one
from headwater.sqlparse_ext import statements as ast
from tests.support.catalogs import catalog_of

FACTS = TopicFacts({"orders": 2})
ORDERS = (
    "CREATE STREAM orders (id STRING KEY, item STRING, qty INT, price DOUBLE) "
    "WITH (kafka_topic='orders', value_format='JSON');"
)


def _compile(select_text: str, sink: str = "OUT") -> object:
    statement = parse_one(f"CREATE STREAM {sink} AS {select_text};")
    assert isinstance(statement, ast.CreateAsSelect)
    return compile_query(statement.query, catalog_of(FACTS, ORDERS), sink)


def _pipeline(catalog: Catalog, query_id: str) -> RecordPipeline:
    return RecordPipeline.for_query(catalog.queries[query_id], catalog)


def test_csas_creates_the_sink_and_a_query_named_after_its_offset() -> None:
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE STREAM big AS SELECT id, item, qty * price AS total FROM orders WHERE qty > 10;",
    )
    sink = catalog.source("BIG")
    assert sink is not None and sink.query_id == "CSAS_BIG_1"
    assert [(c.name, c.type, c.key) for c in sink.columns] == [
        ("ID", "STRING", True),
        ("ITEM", "STRING", False),
        ("TOTAL", "DOUBLE", False),
    ]
    assert (sink.topic, sink.partitions, sink.key_format, sink.value_format) == (
        "BIG",
        2,
        "KAFKA",
        "JSON",
    )
    query = catalog.queries["CSAS_BIG_1"]
    assert (query.sink, query.sources) == ("BIG", ("ORDERS",))


def test_csas_plan_creates_its_topic_with_the_sources_partitions_unless_told() -> None:
    catalog = catalog_of(FACTS, ORDERS)
    planned = plan(
        parse_one("CREATE STREAM b AS SELECT * FROM orders;"), catalog, FACTS, QUERY_ANALYZER
    )
    assert planned.create_topic == ("B", 2)
    planned = plan(
        parse_one(
            "CREATE STREAM b WITH (kafka_topic='bt', partitions=5, "
            "value_format='DELIMITED') AS SELECT * FROM orders;"
        ),
        catalog,
        FACTS,
        QUERY_ANALYZER,
    )
    assert planned.create_topic == ("bt", 5)
    assert planned.command is not None
    assert planned.command["sink"]["source"]["valueFormat"] == "DELIMITED"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SELECT item FROM orders", "must include the key column ID in its projection"),
        ("SELECT * FROM orders PARTITION BY UCASE(item)", None),
        (
            "SELECT id, item FROM orders PARTITION BY UCASE(item)",
            "must include the partitioning expression UCASE(ORDERS.ITEM)",
        ),
        (
            "SELECT id, qty FROM orders WINDOW TUMBLING (SIZE 1 MINUTE)",
            "WINDOW clause requires a GROUP BY clause.",
        ),
        (
            "SELECT id, qty AS ROWTIME FROM orders",
            "`ROWTIME` is a reserved column name. You cannot use it as an alias for a column.",
        ),
        ("SELECT id, ROWTIME FROM orders", "Reserved column name in select: `ROWTIME`"),
        ("SELECT id, WINDOWSTART FROM orders", "Reserved column name in select: `WINDOWSTART`"),
        ("SELECT id FROM orders", "The projection contains no value columns."),
        ("SELECT id, nope FROM orders", "SELECT column 'NOPE' cannot be resolved."),
        ("SELECT id, qty FROM orders WHERE qty", "Should evaluate to boolean"),
        (
            "SELECT id, id AS id2, qty FROM orders",
            "The projection contains a key column (`ID`) more than once, aliased as: ID and ID2.",
        ),
        (
            "SELECT id, qty FROM orders PARTITION BY nope",
            "PARTITION BY column 'NOPE' cannot be resolved.",
        ),
        ("SELECT id, qty FROM orders LIMIT 3", "LIMIT is not supported"),
        (  # found where ksqlDB generates the code, which names the clause
            "SELECT id, CAST(item AS ARRAY<INT>) FROM orders",
            "Invalid Select: Cast of STRING to ARRAY<INTEGER> is not supported",
        ),
    ],
)
def test_ksqldb_refusals(text: str, message: str | None) -> None:
    if message is None:
        _compile(text)
        return
    with pytest.raises(QueryCompileError) as error:
        _compile(text)
    assert message in error.value.message


def test_later_constructs_are_refused_before_the_command_log_naming_the_construct() -> None:
    catalog = catalog_of(FACTS, ORDERS)
    with pytest.raises(
        ValidationError,
        match="Your SELECT query produces a TABLE. Please use CREATE TABLE AS SELECT",
    ):
        plan(
            parse_one("CREATE STREAM x AS SELECT id, COUNT(*) FROM orders GROUP BY id;"),
            catalog,
            FACTS,
            QUERY_ANALYZER,
        )
    with pytest.raises(ValidationError, match="Your SELECT query produces a STREAM"):
        plan(
            parse_one("CREATE TABLE x AS SELECT id, qty FROM orders;"),
            catalog,
            FACTS,
            QUERY_ANALYZER,
        )
    with pytest.raises(ValidationError, match="self joins are not yet supported"):
        plan(
            parse_one(
                "CREATE STREAM x AS SELECT a.id, a.qty FROM orders a JOIN orders b "
                "WITHIN 1 SECOND ON a.id = b.id;"
            ),
            catalog,
            FACTS,
            QUERY_ANALYZER,
        )


def test_partition_by_rekeys_and_star_puts_the_old_key_last() -> None:
    compiled = _compile("SELECT * FROM orders PARTITION BY item")
    assert [(c.name, c.key) for c in compiled.columns] == [  # type: ignore[attr-defined]
        ("ITEM", True),
        ("QTY", False),
        ("PRICE", False),
        ("ID", False),
    ]


def test_pipeline_filters_projects_and_keys_records_like_kafka() -> None:
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE STREAM big AS SELECT id, UCASE(item) AS item, qty * 2 AS q "
        "FROM orders WHERE qty > 10;",
    )
    pipeline = _pipeline(catalog, "CSAS_BIG_1")
    records = [
        InputRecord(b"a", b'{"ITEM": "pen", "QTY": 11, "PRICE": 1.5}', 100, 0, 0),
        InputRecord(b"b", b'{"ITEM": "ink", "QTY": 3, "PRICE": 1.5}', 101, 0, 1),
        InputRecord(b"c", b"not json", 102, 1, 0),
        InputRecord(b"d", None, 103, 1, 1),
        InputRecord(b"e", b'{"item": "cap", "qty": 2147483647}', 104, 1, 2),
    ]
    out, errors = pipeline.process(records)
    assert [(o.key, json.loads(o.value or b"null"), o.timestamp) for o in out] == [
        (b"a", {"ITEM": "PEN", "Q": 22}, 100),
        (b"e", {"ITEM": "CAP", "Q": -2}, 104),  # INTEGER arithmetic wraps as in Java
    ]
    assert [o.partition for o in out] == [partition_for(b"a", 2), partition_for(b"e", 2)]
    assert [(e.kind, e.partition, e.offset) for e in errors] == [("deserialization", 1, 0)]
    assert "Failed to deserialize value from topic: orders" in errors[0].message


def test_pipeline_pseudo_columns_and_sink_timestamp() -> None:
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE STREAM t WITH (timestamp='TS') AS SELECT id, ROWPARTITION AS p, ROWOFFSET AS o, "
        "ROWTIME + 1000 AS ts FROM orders;",
    )
    out, errors = _pipeline(catalog, "CSAS_T_1").process(
        [InputRecord(b"a", b'{"QTY": 1}', 5000, 1, 7)]
    )
    assert errors == []
    assert json.loads(out[0].value or b"") == {"P": 1, "O": 7, "TS": 6000}
    assert out[0].timestamp == 6000


def test_insert_into_select_checks_the_schema_and_shares_the_sink() -> None:
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE STREAM big AS SELECT id, qty FROM orders;",
        "CREATE STREAM more (id STRING KEY, qty INT) "
        "WITH (kafka_topic='orders', value_format='JSON');",
        "INSERT INTO big SELECT id, qty FROM more;",
    )
    assert set(catalog.queries) == {"CSAS_BIG_1", "INSERTQUERY_3"}
    assert catalog.queries["INSERTQUERY_3"].sink == "BIG"
    with pytest.raises(ValidationError, match="Incompatible schema between results and sink"):
        plan(
            parse_one("INSERT INTO big SELECT id, qty * 1.5 AS qty FROM more;"),
            catalog,
            FACTS,
            QUERY_ANALYZER,
        )


def test_drop_refuses_while_queries_use_a_source_and_terminate_frees_it() -> None:
    catalog = catalog_of(FACTS, ORDERS, "CREATE STREAM big AS SELECT id, qty FROM orders;")
    with pytest.raises(SourceInUse, match=r"streams and/or tables read from this source: \[BIG\]"):
        plan(parse_one("DROP STREAM orders;"), catalog, FACTS)
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE STREAM big AS SELECT id, qty FROM orders;",
        "TERMINATE csas_big_1;",
        "DROP STREAM big;",
        "DROP STREAM orders;",
    )
    assert catalog.queries == {} and catalog.sources == {}
    with pytest.raises(ValidationError, match="Unknown queryId: NOPE"):
        plan(parse_one("TERMINATE nope;"), catalog, FACTS)


def test_drop_follows_ksqldb_rule_insert_queries_refuse_and_the_create_as_query_ends() -> None:
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE STREAM big AS SELECT id, qty FROM orders;",
        "CREATE STREAM more (id STRING KEY, qty INT) "
        "WITH (kafka_topic='orders', value_format='JSON');",
        "INSERT INTO big SELECT id, qty FROM more;",
    )
    with pytest.raises(SourceInUse) as refused:
        plan(parse_one("DROP STREAM big;"), catalog, FACTS)
    assert str(refused.value) == (
        "Cannot drop BIG.\nThe following queries read from this source: [].\n"
        "The following queries write into this source: [INSERTQUERY_3].\n"
        "You need to terminate them before dropping BIG."
    )
    with pytest.raises(
        SourceInUse,
        match=r"read from this source: \[INSERTQUERY_3\]\.\n"
        r"The following queries write into this source: \[\]",
    ):
        plan(parse_one("DROP STREAM more;"), catalog, FACTS)
    with pytest.raises(SourceInUse) as refused:
        plan(parse_one("DROP STREAM orders;"), catalog, FACTS)
    assert str(refused.value) == (
        "Cannot drop ORDERS.\nThe following streams and/or tables read from this source: [BIG].\n"
        "You need to drop them before dropping ORDERS."
    )
    # the query that only writes BIG (its CREATE ... AS SELECT) does not refuse: the drop ends it
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE STREAM big AS SELECT id, qty FROM orders;",
        "DROP STREAM big;",
        "DROP STREAM orders;",
    )
    assert catalog.queries == {} and catalog.sources == {}


def test_explain_lists_the_steps() -> None:
    compiled = _compile("SELECT id, qty FROM orders WHERE qty > 1 PARTITION BY qty")
    text = "\n".join(describe_shape(compiled, "OUT"))  # type: ignore[arg-type]
    assert "[ FILTER ] | Condition: (QTY > 1)" in text
    assert "[ REKEY ] | PARTITION BY QTY" in text
    assert "Topic: orders" in text


def test_a_record_without_value_goes_on_without_one_unless_where_drops_it() -> None:
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE STREAM copy AS SELECT * FROM orders;",
        "CREATE STREAM byitem AS SELECT * FROM orders PARTITION BY item;",
    )
    out, errors = _pipeline(catalog, "CSAS_COPY_1").process([InputRecord(b"a", None, 9, 0, 0)])
    assert [(o.key, o.value, o.timestamp) for o in out] == [(b"a", None, 9)] and errors == []
    out, _ = _pipeline(catalog, "CSAS_BYITEM_2").process([InputRecord(b"a", None, 9, 0, 0)])
    assert [(o.key, o.value) for o in out] == [(None, None)]  # the new key: ITEM of no value


def test_a_null_key_stays_null_unless_the_query_rekeys() -> None:
    two = (
        "CREATE STREAM pairs (a INT KEY, b INT KEY, v INT) WITH (kafka_topic='orders', "
        "format='JSON');"
    )
    catalog = catalog_of(
        FACTS,
        two,
        "CREATE STREAM copy AS SELECT * FROM pairs;",
        "CREATE STREAM byv AS SELECT * FROM pairs PARTITION BY v, a;",
    )
    record = InputRecord(None, b'{"V": 1}', 0, 0, 0)
    out, _ = _pipeline(catalog, "CSAS_COPY_1").process([record])
    assert out[0].key is None
    out, _ = _pipeline(catalog, "CSAS_BYV_2").process([record])
    assert json.loads(out[0].key or b"") == {"V": 1, "A": None}


def test_partition_by_a_pseudo_column_names_the_key_after_it() -> None:
    compiled = _compile("SELECT * FROM orders PARTITION BY ROWTIME")
    assert [(c.name, c.key) for c in compiled.columns][:2] == [  # type: ignore[attr-defined]
        ("ROWTIME", True),
        ("ITEM", False),
    ]


@pytest.mark.parametrize(
    ("columns", "with_", "message"),
    [
        (
            "v ARRAY<INT>",
            "value_format='DELIMITED'",
            "The 'DELIMITED' format does not support type 'ARRAY'",
        ),
        (
            "k STRING KEY, a STRING, b STRING",
            "value_format='JSON', wrap_single_value=true",
            "'WRAP_SINGLE_VALUE' is only valid for single-field value schemas",
        ),
    ],
)
def test_new_sources_are_checked_by_the_engines_serde(
    columns: str, with_: str, message: str
) -> None:
    text = f"CREATE STREAM s ({columns}) WITH (kafka_topic='orders', {with_});"
    plan(parse_one(text), Catalog(), FACTS)  # without the engine: not checked here
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan(parse_one(text), Catalog(), FACTS, QUERY_ANALYZER)


def test_table_functions_give_one_row_per_element_zipped_and_padded() -> None:
    catalog = catalog_of(
        FACTS,
        "CREATE STREAM arrs (id STRING KEY, a ARRAY<INT>, b ARRAY<STRING>) "
        "WITH (kafka_topic='orders', value_format='JSON');",
        "CREATE STREAM flat AS SELECT id, EXPLODE(a) AS x, EXPLODE(b) AS y FROM arrs;",
        "CREATE STREAM cubed AS SELECT id, CUBE_EXPLODE(a) AS c FROM arrs;",
    )
    pipeline = _pipeline(catalog, "CSAS_FLAT_1")
    out, errors = pipeline.process(
        [
            InputRecord(b"k", b'{"A": [1, 2, 3], "B": ["x"]}', 10, 0, 0),
            InputRecord(b"e", b'{"A": [], "B": null}', 11, 0, 1),
        ]
    )
    assert not errors
    assert [json.loads(o.value or b"") for o in out] == [
        {"X": 1, "Y": "x"},
        {"X": 2, "Y": None},
        {"X": 3, "Y": None},
    ]
    assert [o.source_seq for o in out] == [0, 1, 2]  # one input record, its rows in order
    cubed, _ = _pipeline(catalog, "CSAS_CUBED_2").process(
        [InputRecord(b"k", b'{"A": [1, null]}', 10, 0, 0)]
    )
    assert [json.loads(o.value or b"")["C"] for o in cubed] == [[None, None], [1, None]]


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        (
            "CREATE TABLE t2 AS SELECT id, EXPLODE(a) AS x FROM tab;",
            "Table source is not supported with table functions",
        ),
        (
            "CREATE STREAM s2 AS SELECT id, EXPLODE(m) AS x FROM arrs;",
            "Function 'explode' does not accept parameters (MAP<STRING, INTEGER>)",
        ),
        (
            "CREATE TABLE s3 AS SELECT id, EXPLODE(a), COUNT(*) FROM arrs GROUP BY id;",
            "Table functions cannot be used with aggregations.",
        ),
    ],
)
def test_table_function_refusals(statement: str, message: str) -> None:
    catalog = catalog_of(
        FACTS,
        "CREATE STREAM arrs (id STRING KEY, a ARRAY<INT>, m MAP<STRING, INT>) "
        "WITH (kafka_topic='orders', value_format='JSON');",
        "CREATE TABLE tab (id STRING PRIMARY KEY, a ARRAY<INT>) "
        "WITH (kafka_topic='orders', value_format='JSON');",
    )
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan(parse_one(statement), catalog, FACTS, QUERY_ANALYZER)


def test_a_sink_schema_id_must_start_with_the_query_columns_in_ksqldb_words() -> None:
    from headwater.metastore.errors import ValidationError
    from headwater.metastore.plan import TopicFacts, plan
    from headwater.metastore.records import CommandRecord, encode
    from headwater.metastore.replay import Fold

    fold = Fold()
    source = (
        "CREATE STREAM input (`id` INT KEY, `c1` INT) "
        "WITH (kafka_topic='input', value_format='AVRO', partitions=1);"
    )
    planned = plan(parse_one(source), fold.catalog, TopicFacts({}, {}), QUERY_ANALYZER)
    assert planned.command is not None
    fold.feed(0, encode(CommandRecord("c0", 0, source, planned.command)))
    csas = "CREATE STREAM out WITH (value_schema_id=7, partitions=1) AS SELECT * FROM input;"

    def planned_with(columns: tuple[tuple[str, str], ...] | str) -> object:
        return plan(
            parse_one(csas), fold.catalog, TopicFacts({}, {"id:7": columns}), QUERY_ANALYZER
        )

    # the registered schema may add columns after the query's: they are written with defaults
    assert planned_with((("c1", "INTEGER"), ("c2", "DOUBLE"))) is not None
    for columns, shown in (
        ((("c1", "STRING"), ("c2", "DOUBLE")), "[`c1` STRING, `c2` DOUBLE]"),
        ((("c2", "DOUBLE"), ("c1", "INTEGER")), "[`c2` DOUBLE, `c1` INTEGER]"),
    ):
        with pytest.raises(ValidationError) as caught:
            planned_with(columns)
        assert caught.value.message == (
            "The following value columns are changed, missing or reordered: [`c1` INTEGER]. "
            f"Schema from schema registry is {shown}"
        )
    with pytest.raises(ValidationError, match="Unable to use the value schema of id:7"):
        planned_with("Schema 7 not found")
    json_sink = csas.replace("value_schema_id=7", "value_schema_id=7, value_format='JSON'")
    with pytest.raises(ValidationError, match="VALUE_FORMAT should support schema inference"):
        plan(parse_one(json_sink), fold.catalog, TopicFacts({}, {}), QUERY_ANALYZER)


def test_insert_into_a_stream_with_header_columns_is_refused_in_ksqldb_words() -> None:
    from headwater.metastore.errors import ValidationError
    from headwater.metastore.plan import TopicFacts, plan
    from headwater.metastore.records import CommandRecord, encode
    from headwater.metastore.replay import Fold

    fold = Fold()
    for offset, text in enumerate(
        (
            (
                "CREATE STREAM s1 (k STRING KEY, h1 BYTES HEADER('h1'), v BIGINT) "
                "WITH (kafka_topic='s1', format='JSON', partitions=1);"
            ),
            (
                "CREATE STREAM s2 (k STRING KEY, v BIGINT) "
                "WITH (kafka_topic='s2', format='JSON', partitions=1);"
            ),
        )
    ):
        planned = plan(parse_one(text), fold.catalog, TopicFacts({}), QUERY_ANALYZER)
        assert planned.command is not None
        fold.feed(offset, encode(CommandRecord(f"c{offset}", offset, text, planned.command)))
    with pytest.raises(ValidationError) as caught:
        plan(
            parse_one("INSERT INTO s1 SELECT * FROM s2;"),
            fold.catalog,
            TopicFacts({}),
            QUERY_ANALYZER,
        )
    assert caught.value.message == "Cannot insert into S1 because it has header columns"


WINDOWED = (
    "CREATE STREAM sessions (id STRING KEY, n INT) WITH (kafka_topic='sessions', "
    "value_format='JSON', window_type='Session');"
)


def test_a_windowed_stream_query_keeps_each_records_window_and_reads_its_bounds() -> None:
    from headwater.engine.formats.windows import split_windowed_key, windowed_key

    catalog = catalog_of(
        TopicFacts({"sessions": 2}),
        WINDOWED,
        "CREATE STREAM starts AS SELECT id, n, WINDOWSTART AS ws FROM sessions "
        "WHERE WINDOWEND - WINDOWSTART >= 10;",
    )
    sink = catalog.source("STARTS")
    assert sink is not None and sink.windowed == "SESSION"
    assert [c.name for c in sink.value_columns] == ["N", "WS"]
    pipeline = _pipeline(catalog, sink.query_id or "")
    out, errors = pipeline.process(
        [
            InputRecord(windowed_key(b"a", (100, 120), True), b'{"N": 1}', 120, 0, 0),
            InputRecord(windowed_key(b"b", (100, 105), True), b'{"N": 2}', 105, 0, 1),
            InputRecord(b"short", b'{"N": 3}', 106, 0, 2),  # no window: skipped, reported
        ]
    )
    assert len(out) == 1 and len(errors) == 1 and errors[0].offset == 2
    (record,) = out
    assert split_windowed_key(record.key or b"", True, None) == (b"a", 100, 120)
    assert json.loads(record.value or b"") == {"N": 1, "WS": 100}
    assert record.partition == partition_for(b"a", 2)  # placed by the key alone


def test_a_windowed_stream_query_refuses_what_ksqldb_refuses() -> None:
    catalog = catalog_of(TopicFacts({"sessions": 1}), WINDOWED)
    with pytest.raises(ValidationError, match="Reserved column name in select: `WINDOWSTART`"):
        plan(
            parse_one("CREATE STREAM o AS SELECT id, WINDOWSTART FROM sessions;"),
            catalog,
            FACTS,
            QUERY_ANALYZER,
        )
    with pytest.raises(ValidationError, match="PARTITION BY over a windowed source"):
        plan(
            parse_one("CREATE STREAM o AS SELECT * FROM sessions PARTITION BY n;"),
            catalog,
            FACTS,
            QUERY_ANALYZER,
        )


@pytest.mark.parametrize(
    ("select", "joined", "message"),
    [
        ("SELECT ROWTIME FROM S", False, "Reserved column name in select: `ROWTIME`"),
        ("SELECT S.ROWTIME AS ROWTIME FROM S", False, "Reserved column name in select"),
        ("SELECT V + 1 AS ROWOFFSET FROM S", False, "`ROWOFFSET` is a reserved column name"),
        ("SELECT L.ROWTIME AS ROWTIME FROM S L", True, "Reserved column name in select"),
        ("SELECT L.ROWTIME FROM S L", True, None),  # named L_ROWTIME in a join
        ("SELECT ROWTIME AS RT, WINDOWSTART AS WS FROM S", False, None),
    ],
)
def test_system_column_names_are_refused_before_anything_is_resolved(
    select: str, joined: bool, message: str | None
) -> None:
    from headwater.engine.persistent.query_plan import refuse_reserved_names

    statement = parse_one(f"{select};")
    assert isinstance(statement, ast.Select)
    if message is None:
        refuse_reserved_names(statement.query.select, joined=joined)
    else:
        with pytest.raises(QueryCompileError, match=message):
            refuse_reserved_names(statement.query.select, joined=joined)


def test_a_record_without_a_value_gets_null_for_keys_read_from_more_than_its_key() -> None:
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE STREAM by_time WITH (key_format='JSON') AS SELECT * FROM orders "
        "PARTITION BY id, ROWTIME;",
    )
    pipeline = _pipeline(catalog, next(iter(catalog.queries)))
    out, errors = pipeline.process([InputRecord(b"a", None, 12, 0, 0)])
    assert not errors and len(out) == 1 and out[0].value is None
    # ID is read from the key; ROWTIME, as ksqlDB holds it in the value row, is NULL
    assert json.loads(out[0].key or b"") == {"ID": "a", "ROWTIME": None}


def test_a_key_the_source_lacks_takes_the_default_key_format() -> None:
    from headwater.metastore.format_defaults import FormatDefaults

    keyless = (
        "CREATE STREAM clicks (page STRING, n INT) WITH (kafka_topic='clicks', "
        "key_format='NONE', value_format='JSON');"
    )
    catalog = catalog_of(TopicFacts({"clicks": 1}), keyless)
    text = "CREATE STREAM by_page AS SELECT * FROM clicks PARTITION BY page;"
    for defaults, expected in ((FormatDefaults(key="JSON"), "JSON"), (FormatDefaults(), "KAFKA")):
        planned = plan(parse_one(text), catalog, FACTS, QUERY_ANALYZER, defaults=defaults)
        assert planned.command is not None
        assert planned.command["sink"]["source"]["keyFormat"] == expected


def test_generated_names_skip_the_sources_column_names() -> None:
    catalog = catalog_of(
        TopicFacts({"gen": 1}),
        "CREATE STREAM gen (KSQL_COL_3 INT KEY, KSQL_COL_2 INT, KSQL_COL_4 INT, ITEM "
        "STRUCT<ITEM INT>) WITH (kafka_topic='gen', value_format='JSON');",
        "CREATE STREAM out AS SELECT KSQL_COL_3, ABS(KSQL_COL_2), ABS(KSQL_COL_2), "
        "ABS(KSQL_COL_2), ITEM->ITEM FROM gen;",
    )
    sink = catalog.source("OUT")
    assert sink is not None
    # KSQL_COL_2 and _4 are the source's: skipped, as ksqlDB's alias generator skips them; a
    # struct field named as a source column is suffixed
    assert [c.name for c in sink.value_columns] == [
        "KSQL_COL_0",
        "KSQL_COL_1",
        "KSQL_COL_5",
        "ITEM_1",
    ]
