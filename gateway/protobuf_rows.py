"""Pull-query answers as ksqlDB's protobuf rows (``Accept: application/vnd.ksql.v1+protobuf``).
Pure: renders items, does no I/O.

ksqlDB answers a pull query on ``/query`` or ``/query-stream`` with that media type as a JSON array
of its ``StreamedRow`` items, where the header carries the ``.proto`` text of the result's columns
(``protoSchema``: the message ``ConnectDefault1`` that Kafka Connect's ProtobufData builds, key and
value columns in the answer's order) and each row is one message of it, serialized without
Confluent's wire header, as base64 (``{"row": {"protobufBytes": "..."}}``). A NULL is written as
its type's proto3 default, as ksqlDB's PROTOBUF_NOSR writer does by default. A stream's answer ends
with its ``finalMessage``, as the JSON one does; an error midway with an ``errorMessage`` item.

The rows reach this module in the JSON form the other renderers share (``engine.values``'s
``to_json_output``, the form peers forward too), so each value is read back into the value model
first; a TIME keeps the seconds that form keeps.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Any

from headwater.engine.errors import SerdeError
from headwater.engine.formats._protobuf import ProtobufSide
from headwater.engine.functions.casts import parse_string
from headwater.engine.functions.types import EvalFailure
from headwater.gateway.errors import KsqlError
from headwater.sqlparse_ext import (
    ArrayType,
    DecimalType,
    MapType,
    PrimitiveType,
    SqlType,
    StructType,
    parse_type,
)

MEDIA_TYPE = "application/vnd.ksql.v1+protobuf"

_Reader = Callable[[Any], Any]
_TEXT_TYPES = frozenset({"BYTES", "DATE", "TIME", "TIMESTAMP"})


def value_reader(sql_type: SqlType) -> _Reader:
    """Reads a value of ``sql_type`` back from its JSON output form into the value model (BYTES
    from base64, DATE/TIME/TIMESTAMP from their text, a DOUBLE's "NaN"/"Infinity" text)."""
    if isinstance(sql_type, PrimitiveType):
        if sql_type.name in _TEXT_TYPES:
            return lambda v: None if v is None else parse_string(v, sql_type)
        if sql_type.name == "DOUBLE":
            return lambda v: float(v) if isinstance(v, str) else v
        return _same
    if isinstance(sql_type, DecimalType):
        return lambda v: None if v is None else Decimal(str(v))
    if isinstance(sql_type, ArrayType):
        element = value_reader(sql_type.element)
        return lambda v: None if v is None else [element(x) for x in v]
    if isinstance(sql_type, MapType):
        value = value_reader(sql_type.value)
        return lambda v: None if v is None else {k: value(x) for k, x in v.items()}
    if isinstance(sql_type, StructType):
        fields = tuple((f.name, value_reader(f.type)) for f in sql_type.fields)
        return lambda v: None if v is None else {n: read(v.get(n)) for n, read in fields}
    return _same


def _same(value: Any) -> Any:
    return value


class ProtobufRows:
    """The ``.proto`` text of an answer's columns (name, type text) and the writer of its rows."""

    def __init__(self, columns: Sequence[tuple[str, str]]) -> None:
        try:
            pairs = tuple((name, parse_type(text)) for name, text in columns)
            self._side = ProtobufSide(pairs, "", None, with_registry=False)
        except SerdeError as exc:
            raise KsqlError(
                f"the answer cannot be written as protobuf rows: {exc.message}", 40000
            ) from None
        self._readers = tuple(value_reader(t) for _, t in pairs)

    @property
    def schema(self) -> str:
        """The ``.proto`` text ksqlDB's header carries."""
        return self._side.text

    def row(self, values: list[Any]) -> str:
        """One row (in its JSON output form) as base64 of its protobuf message."""
        plain = [read(v) for read, v in zip(self._readers, values, strict=True)]
        payload = self._side.write(plain) or b""
        return base64.b64encode(payload).decode("ascii")


def protobuf_items(
    query_id: str,
    columns: Sequence[tuple[str, str]],
    schema_text: str,
    rows: Iterator[list[Any]],
    final_message: str | None,
) -> Iterator[dict[str, Any]]:
    """ksqlDB's items of a pull answer in protobuf rows: header, rows, then the final message
    (or the ``errorMessage`` that ended a streamed answer)."""
    writer = ProtobufRows(columns)
    yield {"header": {"queryId": query_id, "schema": schema_text, "protoSchema": writer.schema}}
    try:
        for values in rows:
            yield {"row": {"protobufBytes": writer.row(values)}}
    except KsqlError as exc:
        yield {"errorMessage": exc.body()}
        return
    except (SerdeError, EvalFailure) as exc:  # a value our own rendering would never give
        failed = KsqlError(
            f"a row cannot be written as protobuf: {exc}", 50000, kind="generic_error"
        )
        yield {"errorMessage": failed.body()}
        return
    if final_message is not None:
        yield {"finalMessage": final_message}
