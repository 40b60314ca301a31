"""A batch of a source's records as columns, as `RowReader` reads each record's row. Pure.

Shared by the stateless queries' vectorized path (`columnar_run`) and the aggregations' vectorized
stage 1 (`columnar_group`): the key and value columns (JSON objects with orjson and one Arrow
conversion per column, a KAFKA STRING key with one UTF-8 check, other formats through the source's
serde record by record), and ROWTIME, ROWPARTITION and ROWOFFSET. A record whose row the columns
cannot hold as `RowReader` would read it (it does not decode, a value Arrow would change, a
timestamp the per-record reader refuses) is reported (``bad``: index -> why) with NULLs in its
place; the caller runs it per record, which reports it with its own message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from headwater.engine.columnar.batch import Batch, Column, to_column
from headwater.engine.columnar.json_columns import JsonObjects
from headwater.engine.columnar.times import iso_millis
from headwater.engine.formats.serde import RowSerde, json_object_values
from headwater.engine.persistent.query_run import InputRecord, timestamp_reader
from headwater.metastore.catalog import Source
from headwater.sqlparse_ext.sqltypes import SqlType


def kafka_string_key(source: Source) -> bool:
    """Whether the source's key is one STRING in the KAFKA format (its bytes are its UTF-8)."""
    keys = source.key_columns
    return (
        source.key_format.upper() == "KAFKA"
        and len(keys) == 1
        and keys[0].type.upper() in ("STRING", "VARCHAR")
    )


def columns_refusal(source: Source) -> str | None:
    """Why a source's records cannot be read as columns (they run per record), or None."""
    if source.windowed:
        return "a windowed source (each key keeps its record's window)"
    if source.timestamp_column is not None:
        column = source.column(source.timestamp_column)
        if column is None or column.type not in ("BIGINT", "STRING"):
            return "a TIMESTAMP column of a type other than BIGINT or STRING"
    if any(c.headers or c.header_key is not None for c in source.columns):
        return "header columns"
    return None


class SourceColumns:
    """Decodes batches of one source's records into columns (``resolved``: each column's type,
    as the query's scope resolves it)."""

    def __init__(self, source: Source, serde: RowSerde, resolved: Mapping[str, SqlType]) -> None:
        self.source = source
        self._serde = serde
        self._resolved = resolved
        self._key_columns = tuple((c.name, c.type) for c in source.key_columns)
        self._value_columns = tuple((c.name, c.type) for c in source.value_columns)
        self._json_values = (
            JsonObjects([(n, resolved[n]) for n, _ in self._value_columns])
            if json_object_values(source)
            else None
        )
        self._kafka_string_key = kafka_string_key(source)
        self._time = timestamp_reader(source)  # the TIMESTAMP column's reader, if any
        time_column = source.column(source.timestamp_column or "")
        self._iso_pattern = (  # a STRING TIMESTAMP column's format, read a column at a time
            str(source.property("TIMESTAMP_FORMAT"))
            if time_column is not None and time_column.type == "STRING"
            else None
        )

    def decode(self, records: Sequence[InputRecord]) -> tuple[Batch, dict[int, str]]:
        """The records' rows as columns, and the records to run per record (index -> why)."""
        bad: dict[int, str] = {}
        size = len(records)
        columns: dict[str, Column] = {}
        if self._json_values is not None:
            values = [r.value if r.value is not None else b"{}" for r in records]
            decoded, wrong = self._json_values.read(values)
            columns.update(decoded)
            bad.update(wrong)
        else:
            rows: list[dict[str, Any]] = []
            for i, r in enumerate(records):
                try:
                    rows.append(self._serde.deserialize_value(r.value) or {})
                except Exception as exc:  # noqa: BLE001 - the per-record path reports it
                    bad[i] = str(exc)
                    rows.append({})
            for name, _t in self._value_columns:
                columns[name] = self._column([row.get(name) for row in rows], name, bad)
        columns.update(self._decode_keys(records, bad))
        columns["ROWTIME"] = pa.array(self._times(records, columns, bad), pa.int64())
        columns["ROWPARTITION"] = pa.array([r.partition for r in records], pa.int32())
        columns["ROWOFFSET"] = pa.array([r.offset for r in records], pa.int64())
        return Batch(size, columns), bad

    def rows(self, records: Sequence[InputRecord]) -> tuple[Batch, dict[int, str]]:
        """Records whose rows are decoded already (a join's output: `InputRecord.row` holds every
        column of the scope, ROWTIME, ROWPARTITION and ROWOFFSET included, as `RowReader.view`
        reads it) as columns, and the records to run per record (index -> why): those without a
        row, or with a value a column cannot hold."""
        bad = {i: "no row" for i, r in enumerate(records) if r.row is None}
        empty: dict[str, Any] = {}
        rows = [empty if r.row is None else r.row for r in records]
        columns = {
            name: self._column([row.get(name) for row in rows], name, bad)
            for name in self._resolved
        }
        return Batch(len(records), columns), bad

    def _times(
        self, records: Sequence[InputRecord], columns: dict[str, Column], bad: dict[int, str]
    ) -> list[int]:
        """Each record's ROWTIME: its TIMESTAMP column read as the per-record path reads it
        (a row it fails on, NULL or negative or not in the format, runs per record, which
        reports it), else the record's own timestamp."""
        if self._time is None:
            return [r.timestamp for r in records]
        name = self.source.timestamp_column
        assert name is not None
        column = columns[name]
        if self._iso_pattern is not None:
            fast = iso_millis(column, self._iso_pattern)
            if fast is not None:
                return fast
        values = column if isinstance(column, list) else column.to_pylist()
        read = self._time
        stamps: list[int] = []
        for i, value in enumerate(values):
            try:
                stamps.append(read({name: value}))
            except Exception:  # noqa: BLE001 - the per-record path reports it
                bad.setdefault(i, "timestamp")
                stamps.append(0)
        return stamps

    def _decode_keys(
        self, records: Sequence[InputRecord], bad: dict[int, str]
    ) -> dict[str, Column]:
        if not self._key_columns:
            return {}
        if self._kafka_string_key:
            try:  # UTF-8 checked in one step; invalid bytes decode as Java's, per record
                ((name, _t),) = self._key_columns
                return {name: pa.array([r.key for r in records], pa.binary()).cast(pa.string())}
            except pa.ArrowException:
                pass
        keys: list[tuple[Any, ...]] = []
        width = len(self._key_columns)
        for i, r in enumerate(records):
            try:
                keys.append(self._serde.deserialize_key(r.key))
            except Exception as exc:  # noqa: BLE001 - the per-record path reports it
                bad[i] = str(exc)
                keys.append((None,) * width)
        return {
            name: self._column([k[c] for k in keys], name, bad)
            for c, (name, _t) in enumerate(self._key_columns)
        }

    def _column(self, values: list[Any], name: str, bad: dict[int, str]) -> Column:
        column, wrong = to_column(values, self._resolved[name])
        for i, why in wrong.items():
            bad.setdefault(i, why)
        return column
