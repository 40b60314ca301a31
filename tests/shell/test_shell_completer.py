"""The completer over fake metadata, and refresh.py's metadata building and background thread."""

from __future__ import annotations

import threading
from types import MappingProxyType

from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from shell_fakes import FakeKsql

from headwater import dbapi
from headwater.shell.completer import Metadata, ShellCompleter, complete, quote_name
from headwater.shell.refresh import Refresher, fetch_metadata, metadata_from

META = Metadata(
    streams=("ORDERS", "PAGEVIEWS", "lower_case"),
    tables=("ORDER_TOTALS", "USERS"),
    columns=MappingProxyType({"ORDERS": ("ID", "AMOUNT", "ORDER_TIME"), "USERS": ("ID", "NAME")}),
    topics=("orders", "page-views"),
    queries=("CTAS_ORDER_TOTALS_1",),
    variables=("tbl",),
)


def texts(before: str, after: str = "") -> list[str]:
    return [c.text for c in complete(before, after, META)[1]]


def test_sources_after_from_prefix_matches_first() -> None:
    assert texts("SELECT * FROM ord")[:2] == ["ORDERS", "ORDER_TOTALS"]


def test_fuzzy_matches_come_after_prefix_and_substring() -> None:
    found = texts("SELECT * FROM ot")
    assert found[0] == "ORDER_TOTALS"  # o...t in order, no prefix/substring match elsewhere


def test_names_that_need_quoting_are_quoted() -> None:
    assert "`lower_case`" in texts("DROP STREAM ")
    assert quote_name("ORDERS") == "ORDERS"
    assert quote_name("a`b") == "`a``b`"


def test_columns_of_the_statements_source_and_pseudo_columns() -> None:
    found = texts("SELECT ", " FROM orders;")
    assert found[:3] == ["ID", "AMOUNT", "ORDER_TIME"]
    assert "ROWTIME" in found and "NAME" not in found
    assert "COUNT" in found  # functions follow


def test_keywords_follow_the_users_case() -> None:
    assert texts("sel") == ["select"]
    assert texts("SEL") == ["SELECT"]


def test_properties_are_quoted_unless_a_quote_is_open() -> None:
    assert "'auto.offset.reset'" in texts("SET ")
    assert texts("SET 'auto.off") == ["auto.offset.reset"]


def test_variables_topics_queries() -> None:
    assert texts("SELECT * FROM ${t") == ["tbl"]
    assert texts("PRINT ") == ["orders", "'page-views'"]
    assert texts("TERMINATE ")[0] == "CTAS_ORDER_TOTALS_1"


def test_prompt_toolkit_completions_replace_the_typed_word() -> None:
    completer = ShellCompleter(META)
    document = Document("SELECT * FROM pag")
    found = list(completer.get_completions(document, CompleteEvent(completion_requested=True)))
    assert [(c.text, c.start_position, c.display_meta_text) for c in found] == [
        ("PAGEVIEWS", -3, "source")
    ]


def test_metadata_from_entities() -> None:
    meta = metadata_from(
        [
            {"@type": "streams", "streams": [{"name": "B"}, {"name": "A"}]},
            {"@type": "tables", "tables": [{"name": "T"}]},
            {"@type": "queries", "queries": [{"id": "Q1"}]},
            {"@type": "type_list", "types": {"ADDRESS": {"type": "STRUCT"}}},
            {"@type": "kafka_topics", "topics": [{"name": "t1", "replicaInfo": [1]}]},
        ],
        [
            {
                "@type": "sourceDescription",
                "sourceDescription": {"name": "A", "fields": [{"name": "X"}, {"name": "Y"}]},
            }
        ],
        properties=["p"],
        variables=["v"],
    )
    assert (meta.streams, meta.tables, meta.queries, meta.types, meta.topics) == (
        ("A", "B"),
        ("T",),
        ("Q1",),
        ("ADDRESS",),
        ("t1",),
    )
    assert dict(meta.columns) == {"A": ("X", "Y")}
    assert (meta.properties, meta.variables) == (("p",), ("v",))


def test_the_servers_python_functions_are_completed() -> None:
    """SHOW FUNCTIONS (refresh.py asks it) brings the server's Python functions to completion."""
    meta = metadata_from(
        [
            {
                "@type": "function_names",
                "functions": [
                    {"name": "SHIPPING_COST", "type": "SCALAR", "source": "/ext/shipping.py"},
                    {"name": "ABS", "type": "SCALAR"},
                ],
            }
        ]
    )
    assert meta.functions == ("ABS", "SHIPPING_COST")
    found = [c.text for c in complete("SELECT shipping_c", "", meta)[1]]
    assert "shipping_cost" in found  # in the case the user types


def test_fetch_metadata_through_the_driver() -> None:
    fake = FakeKsql()
    with dbapi.connect("http://ksql:8088", transport=fake.transport()) as conn:
        conn.cursor().execute(
            "CREATE STREAM orders (id STRING KEY, amount INT) WITH (kafka_topic='orders');"
        )
        meta = fetch_metadata(conn)
    assert meta.streams == ("ORDERS",)
    assert dict(meta.columns) == {"ORDERS": ("ID", "AMOUNT")}
    assert meta.topics == ("orders",)
    assert any(b["ksql"] == "DESCRIBE `ORDERS`;" for b in fake.bodies)


def test_refresher_runs_again_when_asked_while_running() -> None:
    started, release = threading.Event(), threading.Event()
    calls: list[int] = []
    published: list[Metadata] = []

    def fetch() -> Metadata:
        calls.append(1)
        started.set()
        release.wait(5)
        return Metadata(streams=(f"S{len(calls)}",))

    refresher = Refresher(fetch, published.append)
    refresher.refresh()
    assert started.wait(5)
    refresher.refresh()
    refresher.refresh()  # coalesced with the one before
    release.set()
    refresher.wait(5)
    assert len(calls) == 2
    assert published[-1].streams == ("S2",)


def test_refresher_keeps_old_names_when_the_server_fails() -> None:
    published: list[Metadata] = []

    def fetch() -> Metadata:
        raise dbapi.OperationalError("no server")

    refresher = Refresher(fetch, published.append)
    refresher.refresh()
    refresher.wait(5)
    assert published == []
