"""ksqlDB's auto.offset.reset rules for where queries start (pure; the offsets are read by the
submitter, tests/metastore/test_command_log.py)."""

from __future__ import annotations

import pytest

from headwater.metastore.catalog import Column, Query, Source, SourceKind
from headwater.metastore.codec import query_from_dict, query_to_dict
from headwater.metastore.errors import ValidationError
from headwater.metastore.offset_reset import offset_reset, source_resets


def _source(name: str, kind: SourceKind) -> Source:
    return Source(
        kind, name, (Column("K", "STRING", key=True), Column("V", "INT")), name.lower(), 2
    )


STREAM, OTHER = _source("S", SourceKind.STREAM), _source("O", SourceKind.STREAM)
TABLE = _source("T", SourceKind.TABLE)


@pytest.mark.parametrize(
    ("overrides", "server", "expected"),
    [
        ({}, {}, None),
        ({}, {"ksql.streams.auto.offset.reset": ""}, None),  # the server's setting left unset
        ({"auto.offset.reset": "earliest"}, {}, "earliest"),
        ({"ksql.streams.auto.offset.reset": " Latest "}, {}, "latest"),
        ({}, {"ksql.streams.auto.offset.reset": "earliest"}, "earliest"),
        ({"auto.offset.reset": "latest"}, {"ksql.streams.auto.offset.reset": "earliest"}, "latest"),
    ],
)
def test_the_request_wins_over_the_server(
    overrides: dict[str, str], server: dict[str, str], expected: str | None
) -> None:
    assert offset_reset(overrides, server) == expected


def test_values_other_than_earliest_and_latest_are_refused() -> None:
    with pytest.raises(ValidationError, match="'none' is not valid for this property within KSQL"):
        offset_reset({"auto.offset.reset": "none"}, {})
    with pytest.raises(
        ValidationError, match="Invalid value 'soon' for configuration auto.offset.reset"
    ):
        offset_reset({}, {"auto.offset.reset": "soon"})


@pytest.mark.parametrize(
    ("sources", "reset", "expected"),
    [
        ([STREAM], None, {"s": "latest"}),  # unset: a stream from its end,
        ([TABLE], None, {"t": "earliest"}),  # a table from its beginning
        ([STREAM], "earliest", {"s": "earliest"}),
        ([TABLE], "latest", {"t": "latest"}),  # a value set applies to tables too,
        ([STREAM, TABLE], "latest", {"s": "latest", "t": "earliest"}),  # but not to a joined table
        ([STREAM, TABLE], None, {"s": "latest", "t": "earliest"}),
        ([STREAM, OTHER], "earliest", {"s": "earliest", "o": "earliest"}),
        ([STREAM, STREAM], None, {"s": "latest"}),  # a self-join: one topic
    ],
)
def test_where_each_source_of_a_persistent_query_starts(
    sources: list[Source], reset: str | None, expected: dict[str, str]
) -> None:
    assert source_resets(sources, reset) == expected


def test_start_offsets_round_trip_and_are_absent_when_none() -> None:
    query = Query(
        "CSAS_X_1",
        "CREATE STREAM X AS SELECT * FROM S;",
        "X",
        ("S",),
        start_offsets=(("s", 0, 3), ("s", 1, 998)),
    )
    body = query_to_dict(query)
    assert body["startOffsets"] == {"s": {"0": 3, "1": 998}}
    assert query_from_dict(body) == query
    plain = Query("CSAS_Y_2", "CREATE STREAM Y AS SELECT * FROM S;", "Y", ("S",))
    assert "startOffsets" not in query_to_dict(plain)  # older catalogs keep their digest
    assert query_from_dict(query_to_dict(plain)) == plain
