"""engine.pull.tables: reading stored rows back (keys in SQL order, prefixes, envelopes), and freshness rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headwater.engine.pull.tables import (
    PartitionLag,
    StoredTable,
    UnsupportedKey,
    key_type_of,
    materialized,
)
from headwater.metastore.catalog import Catalog, Column, Source, SourceKind
from headwater.sqlparse_ext import parse_type
from headwater.store.api import WriteBatch
from headwater.store.keys import KeyType, encode_key
from headwater.store.local import LocalStores
from headwater.store.memory import MemoryEngine
from headwater.store.records import PartitionState, pack_value


def _table(name: str = "T", key: tuple[tuple[str, str], ...] = (("K", "INTEGER"),)) -> Source:
    columns = tuple(Column(n, t, key=True) for n, t in key) + (Column("V", "STRING"),)
    return Source(SourceKind.TABLE, name, columns, name.lower(), 2, "JSON", "JSON")


def _stored(
    tmp_path: Path, source: Source, rows: dict[int, list[tuple[tuple[object, ...], str]]]
) -> StoredTable:
    stores = LocalStores(tmp_path, MemoryEngine())
    table = StoredTable(source, Catalog(), stores)
    for partition, items in rows.items():
        store = stores.open(source.name, partition)
        changes = [
            (encode_key(key, table.key_types), pack_value(1000 + i, i, f'{{"V": "{v}"}}'.encode()))
            for i, (key, v) in enumerate(items)
        ]
        store.apply(WriteBatch.of(changes, len(items)))
    return table


def test_get_range_scan_read_rows_in_key_order(tmp_path: Path) -> None:
    table = _stored(
        tmp_path,
        _table(),
        {0: [((5,), "five"), ((-3,), "minus"), ((12,), "twelve")], 1: [((7,), "seven")]},
    )
    row = table.get(0, (5,))
    assert row is not None and (row.key, row.value, row.rowtime, row.offset, row.partition) == (
        (5,),
        {"V": "five"},
        1000,
        0,
        0,
    )
    assert table.get(0, (6,)) is None and table.get(0, (None,)) is None
    assert [r.key for r in table.scan(0)] == [(-3,), (5,), (12,)]
    assert [r.key for r in table.range(0, (-3,), (5,), False, True)] == [(5,)]
    assert [r.key for r in table.range(0, None, (5,), True, False)] == [(-3,)]


def test_prefix_bounds_on_a_two_column_key(tmp_path: Path) -> None:
    source = _table(key=(("A", "STRING"), ("B", "INTEGER")))
    table = _stored(
        tmp_path,
        source,
        {0: [(("x", 1), "x1"), (("x", 2), "x2"), (("y", 1), "y1"), (("w", 9), "w9")]},
    )
    assert [r.key for r in table.range(0, ("x",), ("x",), True, True)] == [("x", 1), ("x", 2)]
    assert [r.key for r in table.range(0, ("x",), None, False, True)] == [("y", 1)]
    assert [r.key for r in table.range(0, None, ("x",), True, False)] == [("w", 9)]


def test_partition_of_is_kafkas(tmp_path: Path) -> None:
    from headwater.engine.partitioner import partition_for

    table = _stored(tmp_path, _table(), {})
    assert table.partition_of((5,)) == partition_for(b"5", 2)  # JSON key format: the bare number


def test_key_types_and_unsupported_keys() -> None:
    assert key_type_of(parse_type("DECIMAL(4, 2)")) is KeyType.DECIMAL
    assert key_type_of(parse_type("TIMESTAMP")) is KeyType.TIMESTAMP
    assert key_type_of(parse_type("ARRAY<INT>")) is KeyType.CONTAINER
    assert key_type_of(parse_type("STRUCT<A INT, B ARRAY<STRING>>")) is KeyType.CONTAINER
    with pytest.raises(UnsupportedKey, match="MAP<STRING, INTEGER>"):
        key_type_of(parse_type("MAP<STRING, INT>"))
    with pytest.raises(UnsupportedKey, match="ARRAY<MAP<STRING, INTEGER>>"):
        key_type_of(parse_type("ARRAY<MAP<STRING, INT>>"))


def test_materialized_tables_are_the_tables_windowed_or_not() -> None:
    stream = Source(SourceKind.STREAM, "S", (Column("V", "STRING"),), "s", 1)
    windowed = Source(
        SourceKind.TABLE, "W", (Column("K", "STRING", key=True),), "w", 1, windowed="TUMBLING"
    )
    catalog = Catalog().with_source(stream, 0).with_source(windowed, 1).with_source(_table(), 2)
    assert sorted(materialized(catalog)) == ["T", "W"]


@pytest.mark.parametrize(
    ("lag", "bound", "bounded", "servable"),
    [
        (PartitionLag(10, 10, PartitionState.READY.value), 0, True, True),
        (PartitionLag(8, 10, PartitionState.READY.value), 1, True, False),
        (PartitionLag(8, 10, PartitionState.READY.value), 2**63 - 1, False, True),
        # Still restoring: only under a stated bound it meets.
        (PartitionLag(8, 10, PartitionState.RESTORING.value), 2**63 - 1, False, False),
        (PartitionLag(8, 10, PartitionState.RESTORING.value), 5, True, True),
        (PartitionLag(0, None, PartitionState.RESTORING.value), 2**63 - 1, True, False),
        (PartitionLag(10, 10, PartitionState.FAILED.value), 100, True, False),
    ],
)
def test_servable(lag: PartitionLag, bound: int, bounded: bool, servable: bool) -> None:
    assert lag.servable(bound, bounded) is servable
    assert "position" in lag.describe()


def test_serde_of_reuses_a_serde_until_the_types_change() -> None:
    from types import MappingProxyType

    from headwater.engine.formats.serde import serde_of

    source = _table("CACHED")
    types = MappingProxyType({})
    first = serde_of(source, types)
    assert serde_of(source, types) is first
    assert serde_of(source, MappingProxyType({})) is not first  # a new types mapping: rebuilt
    assert serde_of(_table("OTHER"), types) is not first


def test_key_partition_matches_the_stored_tables(tmp_path: Path) -> None:
    from headwater.engine.pull.tables import key_partition

    table = _stored(tmp_path, _table(), {})
    assert all(
        key_partition(table.source, Catalog().types, (k,)) == table.partition_of((k,))
        for k in range(50)
    )


def test_windowed_tables_store_each_window_under_key_start_end(tmp_path: Path) -> None:
    from headwater.engine.formats.windows import windowed_key
    from headwater.engine.pull.tables import _key_of

    source = Source(
        SourceKind.TABLE,
        "W",
        (Column("K", "STRING", key=True), Column("V", "STRING")),
        "w",
        2,
        "KAFKA",
        "JSON",
        properties=(("WINDOW_SIZE", "60000 MILLISECONDS"),),
        windowed="TUMBLING",
    )
    table = _stored(tmp_path, source, {})
    key_of = _key_of(table)
    stored = {key_of(windowed_key(b"a", (w, w + 60_000), False)): w for w in (120_000, 60_000)}
    store = table._stores.open("W", 0)
    store.apply(WriteBatch.of([(k, pack_value(1, 1, b'{"V": "x"}')) for k in stored], 2))
    assert [r.key for r in table.range(0, ("a",), ("a",), True, True)] == [
        ("a", 60_000, 120_000),
        ("a", 120_000, 180_000),
    ]
    assert table.partition_of(("a", 60_000, 120_000)) == table.partition_of(("a",))


@given(
    data=st.one_of(
        st.none(),
        st.binary(max_size=40),
        st.text(max_size=20).map(lambda t: t.encode("utf-8", "surrogatepass")),
        st.sampled_from([b"", b"a\x00b", b"\x00", b"\xff\xfe", "ß€𝄞".encode()]),
    )
)
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_kafka_string_key_is_stored_as_its_decoded_value_would_be(
    tmp_path: Path, data: bytes | None
) -> None:
    """The restorer writes a KAFKA STRING key's bytes as they are where they are UTF-8: the same
    store key as decoding them (as Java replaces what is not UTF-8) and encoding the value."""
    from headwater.engine.pull.tables import _key_of

    source = Source(
        SourceKind.TABLE,
        "S",
        (Column("K", "STRING", key=True), Column("V", "STRING")),
        "s",
        2,
        "KAFKA",
        "JSON",
    )
    table = _stored(tmp_path, source, {})
    general = encode_key(table.serde.deserialize_key(data), table.key_types)
    assert _key_of(table)(data) == general
