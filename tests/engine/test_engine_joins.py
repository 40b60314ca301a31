"""Joins, the pure side: planning with ksqlDB's rules and messages, and the join stages run record by
record with Kafka Streams' semantics (stream-table, table-table, stream-stream with and without
GRACE PERIOD, foreign keys). No broker, no JVM."""

from __future__ import annotations

import json
from typing import Any

import pytest

from headwater.engine.persistent import QUERY_ANALYZER, InputRecord, RecordPipeline
from headwater.engine.persistent.join_run import JoinPipeline, LocalJoin
from headwater.metastore.errors import ValidationError
from headwater.metastore.plan import TopicFacts, plan
from headwater.sqlparse_ext import ParseError, parse_one
from tests.support.catalogs import catalog_of

FACTS = TopicFacts({"clicks": 1, "users": 1, "views": 1, "orders": 1, "items": 1})
CLICKS = (
    "CREATE STREAM clicks (user_id INT KEY, page STRING) "
    "WITH (kafka_topic='clicks', format='JSON');"
)
VIEWS = "CREATE STREAM views (user_id INT KEY, secs INT) WITH (kafka_topic='views', format='JSON');"
USERS = (
    "CREATE TABLE users (id INT PRIMARY KEY, name STRING) "
    "WITH (kafka_topic='users', format='JSON');"
)
ORDERS = (
    "CREATE TABLE orders (id INT PRIMARY KEY, item_id INT, qty INT) "
    "WITH (kafka_topic='orders', format='JSON');"
)
ITEMS = (
    "CREATE TABLE items (id INT PRIMARY KEY, label STRING) "
    "WITH (kafka_topic='items', format='JSON');"
)


class _Run:
    """One join query over in-memory topics: feed records, read the sink's records as JSON."""

    def __init__(self, *statements: str) -> None:
        self.catalog = catalog_of(FACTS, *statements)
        query = next(iter(q for q in self.catalog.queries.values()))
        after = RecordPipeline.for_query(query, self.catalog)
        assert after.compiled.join is not None
        self.local = LocalJoin(
            JoinPipeline(query.id, after.compiled.join, self.catalog.types), after
        )
        self.offsets: dict[str, int] = {}

    def feed(
        self, topic: str, key: int | None, value: dict[str, Any] | None, ts: int
    ) -> list[tuple[Any, Any, int]]:
        offset = self.offsets.get(topic, 0)
        self.offsets[topic] = offset + 1
        record = InputRecord(
            None if key is None else str(key).encode(),
            None if value is None else json.dumps(value).encode(),
            ts,
            0,
            offset,
        )
        out, errors = self.local.process_topic(topic, [record])
        assert not errors, errors
        return [
            (
                None if o.key is None else json.loads(o.key),
                None if o.value is None else json.loads(o.value),
                o.timestamp,
            )
            for o in out
        ]


def test_stream_table_left_join_enriches_each_stream_record_with_the_table_row_of_its_time() -> (
    None
):
    run = _Run(
        CLICKS,
        USERS,
        "CREATE STREAM enriched AS SELECT c.user_id, page, name FROM clicks c "
        "LEFT JOIN users u ON c.user_id = u.id;",
    )
    sink = run.catalog.source("ENRICHED")
    assert sink is not None
    assert [(c.name, c.key) for c in sink.columns] == [
        ("USER_ID", True),
        ("PAGE", False),
        ("NAME", False),
    ]
    assert run.feed("clicks", 1, {"PAGE": "/a"}, 10) == [(1, {"PAGE": "/a", "NAME": None}, 10)]
    assert run.feed("users", 1, {"NAME": "ann"}, 20) == []  # table updates do not emit
    assert run.feed("clicks", 1, {"PAGE": "/b"}, 30) == [(1, {"PAGE": "/b", "NAME": "ann"}, 30)]
    assert run.feed("users", 1, None, 40) == []
    assert run.feed("clicks", 1, {"PAGE": "/c"}, 50) == [(1, {"PAGE": "/c", "NAME": None}, 50)]
    assert run.feed("clicks", None, {"PAGE": "/d"}, 60) == []  # no join key: dropped


def test_stream_table_inner_join_drops_stream_records_without_a_table_row() -> None:
    run = _Run(
        CLICKS,
        USERS,
        "CREATE STREAM enriched AS SELECT c.user_id, page, name FROM clicks c "
        "JOIN users u ON c.user_id = u.id;",
    )
    assert run.feed("clicks", 1, {"PAGE": "/a"}, 10) == []
    run.feed("users", 1, {"NAME": "ann"}, 20)
    assert run.feed("clicks", 1, {"PAGE": "/b"}, 30) == [(1, {"PAGE": "/b", "NAME": "ann"}, 30)]


def test_table_table_outer_join_keeps_either_side_and_deletes_only_when_both_are_gone() -> None:
    run = _Run(
        USERS,
        ITEMS,
        "CREATE TABLE both_ AS SELECT ROWKEY AS id, name, label FROM users u "
        "FULL OUTER JOIN items i ON u.id = i.id;",
    )
    assert run.feed("users", 1, {"NAME": "ann"}, 10) == [(1, {"NAME": "ann", "LABEL": None}, 10)]
    assert run.feed("items", 1, {"LABEL": "pen"}, 5) == [(1, {"NAME": "ann", "LABEL": "pen"}, 10)]
    assert run.feed("users", 1, None, 20) == [(1, {"NAME": None, "LABEL": "pen"}, 20)]
    assert run.feed("items", 1, None, 30) == [(1, None, 30)]
    assert run.feed("items", 1, None, 40) == []  # nothing was there to delete


def test_table_table_inner_join_emits_a_tombstone_when_a_joined_row_goes() -> None:
    run = _Run(
        USERS,
        ITEMS,
        "CREATE TABLE both_ AS SELECT u.id, name, label FROM users u JOIN items i ON u.id = i.id;",
    )
    assert run.feed("users", 1, {"NAME": "ann"}, 10) == []
    assert run.feed("items", 1, {"LABEL": "pen"}, 20) == [(1, {"NAME": "ann", "LABEL": "pen"}, 20)]
    assert run.feed("items", 1, None, 30) == [(1, None, 30)]


def test_stream_stream_join_matches_within_the_window_on_both_sides() -> None:
    run = _Run(
        CLICKS,
        VIEWS,
        "CREATE STREAM both_ AS SELECT c.user_id, page, secs FROM clicks c "
        "JOIN views v WITHIN (1 SECOND, 2 SECONDS) ON c.user_id = v.user_id;",
    )
    assert run.feed("clicks", 1, {"PAGE": "/a"}, 10_000) == []
    assert run.feed("views", 1, {"SECS": 3}, 11_500) == [(1, {"PAGE": "/a", "SECS": 3}, 11_500)]
    assert run.feed("views", 1, {"SECS": 4}, 12_500) == []  # after the 2 s after the click
    assert run.feed("views", 1, {"SECS": 5}, 9_500) == [(1, {"PAGE": "/a", "SECS": 5}, 10_000)]
    assert run.feed("clicks", 1, {"PAGE": "/b"}, 13_000) == [
        (1, {"PAGE": "/b", "SECS": 4}, 13_000)
    ]  # the view 0.5 s before, within 1 s


def test_left_stream_stream_join_without_grace_emits_unmatched_records_at_once() -> None:
    run = _Run(
        CLICKS,
        VIEWS,
        "CREATE STREAM both_ AS SELECT c.user_id, page, secs FROM clicks c "
        "LEFT JOIN views v WITHIN 1 SECOND ON c.user_id = v.user_id;",
    )
    assert run.feed("clicks", 1, {"PAGE": "/a"}, 10_000) == [
        (1, {"PAGE": "/a", "SECS": None}, 10_000)
    ]
    assert run.feed("views", 1, {"SECS": 3}, 10_500) == [(1, {"PAGE": "/a", "SECS": 3}, 10_500)]


def test_left_stream_stream_join_with_grace_waits_for_the_window_to_close() -> None:
    run = _Run(
        CLICKS,
        VIEWS,
        "CREATE STREAM both_ AS SELECT c.user_id, page, secs FROM clicks c "
        "LEFT JOIN views v WITHIN 1 SECOND GRACE PERIOD 1 SECOND "
        "ON c.user_id = v.user_id;",
    )
    assert run.feed("clicks", 1, {"PAGE": "/a"}, 10_000) == []
    assert run.feed("clicks", 2, {"PAGE": "/b"}, 11_000) == []
    # stream time passes 10 s + 1 s window + 1 s grace: /a is emitted without a match
    assert run.feed("clicks", 3, {"PAGE": "/c"}, 12_001) == [
        (1, {"PAGE": "/a", "SECS": None}, 10_000)
    ]
    assert run.feed("views", 2, {"SECS": 9}, 11_500) == [(2, {"PAGE": "/b", "SECS": 9}, 11_500)]
    # /b was matched: it is never emitted alone
    assert run.feed("clicks", 4, {"PAGE": "/d"}, 20_000) == [
        (3, {"PAGE": "/c", "SECS": None}, 12_001)
    ]


def test_foreign_key_join_follows_the_left_rows_foreign_key() -> None:
    run = _Run(
        ORDERS,
        ITEMS,
        "CREATE TABLE detailed AS SELECT o.id, qty, label FROM orders o "
        "LEFT JOIN items i ON o.item_id = i.id;",
    )
    assert run.feed("orders", 1, {"ITEM_ID": 7, "QTY": 2}, 10) == [
        (1, {"QTY": 2, "LABEL": None}, 10)
    ]
    assert run.feed("items", 7, {"LABEL": "pen"}, 20) == [(1, {"QTY": 2, "LABEL": "pen"}, 20)]
    assert run.feed("orders", 1, {"ITEM_ID": 8, "QTY": 3}, 30) == [
        (1, {"QTY": 3, "LABEL": None}, 30)
    ]
    assert run.feed("items", 7, {"LABEL": "ink"}, 40) == []  # order 1 no longer points at 7
    assert run.feed("orders", 1, None, 50) == [(1, None, 50)]


@pytest.mark.parametrize(
    ("select", "message"),
    [
        (
            "SELECT page, name FROM clicks c JOIN users u ON c.user_id = u.id",
            "must include the join expressions C.USER_ID or U.ID in its projection",
        ),
        (
            "SELECT c.user_id, name FROM users u JOIN clicks c ON c.user_id = u.id",
            "Invalid join order: table-stream joins are not supported",
        ),
        (
            "SELECT c.user_id, name FROM clicks c FULL OUTER JOIN users u ON c.user_id = u.id",
            "full-outer join not supported for stream-table join",
        ),
        (
            "SELECT c.user_id, secs FROM clicks c JOIN views v ON c.user_id = v.user_id",
            "Stream-Stream joins must have a WITHIN clause",
        ),
        (
            "SELECT c.user_id, name FROM clicks c JOIN users u ON c.page = u.name",
            "stream-table joins require to join on the table's primary key",
        ),
        (
            "SELECT c.user_id, name FROM clicks c JOIN users u ON c.user_id = 1",
            "Each side of the join comparision must contain references from exactly one source",
        ),
        (
            "SELECT c.user_id, name FROM clicks c JOIN users u ON c.user_id = u.id AND c.page = u.name",
            "joins on multiple conditions are not yet supported",
        ),
        (
            "SELECT c.user_id, nope FROM clicks c JOIN users u ON c.user_id = u.id",
            "SELECT column 'NOPE' cannot be resolved",
        ),
        (  # parentheses around the condition change nothing
            "SELECT c.user_id, nope FROM clicks c JOIN users u ON (c.user_id = u.id)",
            "SELECT column 'NOPE' cannot be resolved",
        ),
        (  # found over every join before any is planned, as ksqlDB's analyzer does
            (
                "SELECT c.user_id, name FROM clicks c JOIN users u ON c.page = u.name "
                "JOIN views v WITHIN 1 SECOND ON c.page = c.page"
            ),
            (
                "Each side of the join must reference exactly one source and not the same source. "
                "Left side references `C` and right references `C`"
            ),
        ),
    ],
)
def test_refusals_carry_ksqldbs_messages(select: str, message: str) -> None:
    catalog = catalog_of(FACTS, CLICKS, USERS, VIEWS)
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan(parse_one(f"CREATE STREAM out AS {select};"), catalog, FACTS, QUERY_ANALYZER)


def test_an_unknown_qualifier_is_refused_while_the_statement_is_built() -> None:
    with pytest.raises(ParseError, match="'X' is not a valid stream/table name or alias"):
        parse_one(
            "CREATE STREAM out AS SELECT c.user_id, x.name FROM clicks c "
            "JOIN users u ON c.user_id = u.id;"
        )


def test_a_join_query_records_every_source_it_reads() -> None:
    catalog = catalog_of(
        FACTS,
        CLICKS,
        USERS,
        "CREATE STREAM enriched AS SELECT c.user_id, name FROM clicks c "
        "JOIN users u ON c.user_id = u.id;",
    )
    query = next(iter(catalog.queries.values()))
    assert query.sources == ("CLICKS", "USERS")


@pytest.mark.parametrize(
    ("on", "key_format"),
    [
        ("c.user_id = u.id", "KAFKA"),  # neither side moves: the left side's format
        ("c.user_id + 0 = u.id", "JSON"),  # the left side is repartitioned: the table's format
    ],
)
def test_the_join_key_format_is_that_of_a_side_that_keeps_its_partitions(
    on: str, key_format: str
) -> None:
    # ksqlDB's JoinNode.resolveKeyFormats. The repartitioned stream must be keyed as the table
    # is, or its records reach another partition than their table rows and never join.
    run = _Run(
        "CREATE STREAM clicks (user_id INT KEY, page STRING) "
        "WITH (kafka_topic='clicks', key_format='KAFKA', value_format='JSON');",
        USERS,
        f"CREATE STREAM enriched AS SELECT u.id, page, name FROM clicks c JOIN users u ON {on};",
    )
    sink = run.catalog.source("ENRICHED")
    assert sink is not None and sink.key_format == "KAFKA"  # the FROM source's, as ksqlDB's
    join = run.local.join
    (step,) = join.plan.steps
    json_key = key_format == "JSON"
    assert join._key_bytes(step, 1) == (b"1" if json_key else b"\x00\x00\x00\x01")


def test_the_join_key_is_the_first_viable_column_the_projection_holds_a_star_included() -> None:
    from headwater.engine.persistent.query_plan import plan_query_joins
    from headwater.metastore.plan import TopicFacts
    from headwater.sqlparse_ext import parse_one
    from tests.support.catalogs import catalog_of

    catalog = catalog_of(
        TopicFacts({"l": 1, "r": 1}),
        "CREATE STREAM L (A INT, B INT) WITH (kafka_topic='l', value_format='JSON');",
        "CREATE STREAM R (A INT, C INT) WITH (kafka_topic='r', value_format='JSON');",
    )
    statement = parse_one(
        "CREATE STREAM OUT AS SELECT L.B, R.* FROM L JOIN R WITHIN 10 SECONDS ON L.A = R.A;"
    )
    plan = plan_query_joins(statement.query, catalog, "OUT")  # type: ignore[attr-defined]
    assert plan.root.key_name == "R_A"
