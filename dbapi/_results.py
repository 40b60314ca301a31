"""Result sets behind a cursor: a `/query` answer read item by item, PRINT's text read line by
line, or a `/ksql` entity table.
No I/O of its own: a `QueryResult` pulls from an iterator of decoded JSON items (which may read
the network lazily, see `_http.HttpTransport.stream_items`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from ._convert import convert, plain
from ._errors import DataError, Error, InterfaceError, error_from_body
from ._schema import Column, parse_schema
from .entities import EntityTable

__all__ = [
    "ColumnDescription",
    "LinesResult",
    "QueryResult",
    "ResultSet",
    "ServedBy",
    "TableResult",
]


class ColumnDescription(NamedTuple):
    """PEP 249 `description` item: "a sequence of 7 items"; type_code is the ksqlDB type string."""

    name: str
    type_code: str
    display_size: int | None
    internal_size: int | None
    precision: int | None
    scale: int | None
    null_ok: bool | None


@dataclass(frozen=True, slots=True)
class ServedBy:
    """Which server answered a pull query for one partition, at what changelog position and lag."""

    partition: int
    host: str
    position: int | None = None
    lag: int | None = None


@dataclass(frozen=True, slots=True)
class WrittenBy:
    """A persistent query writing the table a pull query read, and how current it is: the
    answer is only as fresh as it (a replica with no lag still waits for a query that is
    starting, failed, or is behind its sources).

    Attributes:
        query_id: the query.
        state: RUNNING, PENDING (starting, or waiting for a slot), ERROR or UNKNOWN.
        lag: the records of its sources it has not processed yet (None: unknown).
    """

    query_id: str
    state: str
    lag: int | None = None


class ResultSet(Protocol):
    """What a cursor reads rows from."""

    @property
    def description(self) -> tuple[ColumnDescription, ...] | None: ...

    @property
    def rowcount(self) -> int: ...

    def next_row(self) -> tuple[Any, ...] | None: ...

    def close(self) -> None: ...


def _describe(name: str, type_code: str, params: tuple[int, ...] = ()) -> ColumnDescription:
    precision = params[0] if type_code.startswith("DECIMAL") and len(params) == 2 else None
    scale = params[1] if precision is not None else None
    return ColumnDescription(name, type_code, None, None, precision, scale, None)


class TableResult:
    """The table view of one `/ksql` entity; every row is in memory."""

    def __init__(self, entity: Mapping[str, Any], table: EntityTable | None) -> None:
        self.entity = entity
        self._table = table
        self._next = 0

    @property
    def description(self) -> tuple[ColumnDescription, ...] | None:
        if self._table is None:
            return None
        return tuple(
            _describe(n, t) for n, t in zip(self._table.columns, self._table.types, strict=True)
        )

    @property
    def rowcount(self) -> int:
        return -1 if self._table is None else len(self._table.rows)

    def next_row(self) -> tuple[Any, ...] | None:
        if self._table is None or self._next >= len(self._table.rows):
            return None
        self._next += 1
        return self._table.rows[self._next - 1]

    def close(self) -> None:
        self._next = len(self._table.rows) if self._table is not None else 0


def _written_by(value: object) -> tuple[WrittenBy, ...]:
    if not isinstance(value, list):
        raise InterfaceError(f"writtenBy must be a list, got {value!r}")
    out = []
    for item in value:
        if not isinstance(item, Mapping) or not isinstance(item.get("queryId"), str):
            raise InterfaceError(f"malformed writtenBy entry {item!r}")
        lag = item.get("lag")
        out.append(
            WrittenBy(
                item["queryId"],
                str(item.get("state", "UNKNOWN")),
                lag if isinstance(lag, int) else None,
            )
        )
    return tuple(out)


def _served_by(value: object) -> tuple[ServedBy, ...]:
    if not isinstance(value, list):
        raise InterfaceError(f"servedBy must be a list, got {value!r}")
    out = []
    for item in value:
        if not isinstance(item, Mapping) or not isinstance(item.get("partition"), int):
            raise InterfaceError(f"malformed servedBy entry {item!r}")
        out.append(
            ServedBy(
                int(item["partition"]),
                str(item.get("host", "")),
                item.get("position"),
                item.get("lag"),
            )
        )
    return tuple(out)


class QueryResult:
    """A `/query` answer: header first, then rows read on demand, plus what came along.

    Attributes:
        query_id: the header's queryId.
        served_by: headwater's per-partition serving report (from the header; a server of an
            earlier version sent it as an item after the rows).
        written_by: the persistent queries writing the table read, with their state and lag
            (headwater's `writtenBy`, from the header; empty for other sources).
        extras: items of kinds this driver does not know, kept as they came.
        final_message: the server's finalMessage, once read.
    """

    def __init__(self, items: Iterator[Any]) -> None:
        self._items = items
        self._columns: tuple[Column, ...] | None = None
        self._rows_read = 0
        self._done = False
        self._broken: Error | None = None
        self.query_id: str | None = None
        self.served_by: tuple[ServedBy, ...] = ()
        self.written_by: tuple[WrittenBy, ...] = ()
        self.extras: list[Any] = []
        self.final_message: str | None = None
        self._handlers: dict[str, Callable[[Any], tuple[Any, ...] | None]] = {
            "header": self._on_header,
            "row": self._on_row,
            "servedBy": self._on_served_by,
            "finalMessage": self._on_final,
            "errorMessage": self._on_error,
        }
        try:
            while self._columns is None:
                self._step()
                if self._done and self._columns is None:
                    raise InterfaceError("the /query answer ended without a header")
        except Error:
            self.close()
            raise

    @property
    def description(self) -> tuple[ColumnDescription, ...] | None:
        return tuple(_describe(c.name, str(c.type), c.type.params) for c in self._columns or ())

    @property
    def rowcount(self) -> int:
        return self._rows_read if self._done else -1

    def next_row(self) -> tuple[Any, ...] | None:
        while not self._done:
            row = self._step()
            if row is not None:
                self._rows_read += 1
                return row
        if self._broken is not None:
            raise self._broken
        return None

    @property
    def running(self) -> bool:
        """Whether the answer may still send rows (it has not ended and was not closed)."""
        return not self._done

    def close(self) -> None:
        if not self._done:
            self._done = True
            close = getattr(self._items, "close", None)
            if close is not None:
                close()

    def _step(self) -> tuple[Any, ...] | None:
        """Read one item; return the row it carries, if any."""
        try:
            item = next(self._items)
        except StopIteration:
            self._done = True
            return None
        except Error as exc:
            self._done = True
            self._broken = exc
            raise
        if not isinstance(item, Mapping):
            self.extras.append(plain(item))
            return None
        for key, handler in self._handlers.items():
            if key in item:
                return handler(item[key])
        self.extras.append(plain(item))
        return None

    def _on_header(self, header: Any) -> None:
        if self._columns is not None or not isinstance(header, Mapping):
            raise InterfaceError(f"unexpected header in the /query answer: {header!r}")
        self.query_id = header.get("queryId")
        self._columns = parse_schema(str(header.get("schema", "")))
        if "servedBy" in header:  # headwater's staleness report, an extra field of the header
            self.served_by += _served_by(header["servedBy"])
        if "writtenBy" in header:  # how current the table's writing queries are
            self.written_by = _written_by(header["writtenBy"])

    def _on_row(self, row: Any) -> tuple[Any, ...] | None:
        if self._columns is None:
            raise InterfaceError("the /query answer sent a row before its header")
        if not isinstance(row, Mapping) or row.get("tombstone"):
            return None
        values = row.get("columns")
        if not isinstance(values, list) or len(values) != len(self._columns):
            raise DataError(
                f"row {values!r} does not match the {len(self._columns)} columns of the header"
            )
        return tuple(convert(v, c.type) for v, c in zip(values, self._columns, strict=True))

    def _on_served_by(self, value: Any) -> None:
        self.served_by += _served_by(value)

    def _on_final(self, message: Any) -> None:
        self.final_message = str(message)

    def _on_error(self, error: Any) -> None:
        body = error if isinstance(error, Mapping) else {"message": str(error)}
        self.close()
        self._broken = error_from_body(None, body)
        raise self._broken


class LinesResult:
    """PRINT's answer: one row, the text, per line (the empty lines a server sends to check that
    its client is still there are skipped), read as each arrives.

    Attributes:
        query_id: the id the server gave the PRINT (its `X-Query-Id` header), if any.
    """

    description = (ColumnDescription("PRINT", "STRING", None, None, None, None, None),)

    def __init__(self, lines: Iterator[str], query_id: str | None = None) -> None:
        self._lines = lines
        self._done = False
        self._read = 0
        self.query_id = query_id

    @property
    def rowcount(self) -> int:
        return self._read if self._done else -1

    @property
    def running(self) -> bool:
        """Whether more lines may come."""
        return not self._done

    def next_row(self) -> tuple[Any, ...] | None:
        while not self._done:
            try:
                line = next(self._lines)
            except StopIteration:
                self._done = True
                return None
            except Error:
                self._done = True
                raise
            if line:
                self._read += 1
                return (line,)
        return None

    def close(self) -> None:
        if not self._done:
            self._done = True
            close = getattr(self._lines, "close", None)
            if close is not None:
                close()
