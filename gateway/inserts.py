"""``POST /inserts-stream``: rows streamed in, one acknowledgement streamed out per row, as ksqlDB's
``InsertsStreamEndpoint`` does. Does I/O (the request body, Kafka through ``RowWriter``).

The request body is itself a stream: a first line ``{"target": "NAME", "properties": {...}}``, then
one JSON object per row, each ended by a newline. The answer, status 200 once the target is known,
has one line per row, in order: ``{"status":"ok","seq":N}`` when the broker has the record, or
``{"status":"error","seq":N,"error_code":40000,"message":...}`` when the row is refused (the stream
goes on with the next row). With ``Accept: application/json`` the same items form one JSON array.
An unknown, windowed or read-only target, or a bad first line, fails the whole request with
ksqlDB's error body instead.

A row is written as ``INSERT INTO ... VALUES`` writes one: the same serde (``serde_of``), the same
murmur2 partition of the serialized key, the same producer (``Services.writer``), the record's
timestamp the current time. Its JSON values are coerced to the column types by ksqlDB's
``ApiSqlValueCoercer`` rules (:func:`coerce_json`): column and struct field names are upper-cased
unless written in backquotes; every key column must be given.

Rows are read only as fast as their acknowledgements are sent: the body is read chunk by chunk
(``receive``), the rows of a chunk are written, their acks sent (a slow reader holds up ``send``),
and only then is the next chunk read. So the server holds at most one chunk and one partial row
(up to ``Limits.max_body_bytes``) per request, over HTTP/1.1 chunked bodies and HTTP/2 alike.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import AsyncIterator, Mapping
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from headwater.engine._scope import resolve_type
from headwater.engine.errors import EngineError
from headwater.engine.formats.serde import RowSerde, serde_of
from headwater.engine.functions.casts import parse_string
from headwater.engine.functions.types import (
    BOOLEAN,
    BYTES,
    DOUBLE,
    INTEGRAL,
    STRING,
    EvalFailure,
    fit_decimal,
    wrap_int,
)
from headwater.engine.partitioner import partition_for
from headwater.gateway.errors import KsqlError, bad_request
from headwater.gateway.jsonout import dumps
from headwater.gateway.services import Services, services_of
from headwater.gateway.writer import Written
from headwater.kafka.errors import KafkaEdgeError
from headwater.metastore.catalog import Source
from headwater.sqlparse_ext.sqltypes import ArrayType, DecimalType, MapType, SqlType, StructType

log = logging.getLogger(__name__)

DELIMITED = "application/vnd.ksqlapi.delimited.v1"
JSON = "application/json"
_BATCH_ROWS = 256
"""The most rows written in one worker-thread hop (their acks are then sent together)."""


class RowError(Exception):
    """A row the stream refuses: answered as ``{"status": "error", ...}`` for that row."""

    def __init__(self, message: str, error_code: int = 40000) -> None:
        super().__init__(message)
        self.message = message
        self.error_code = error_code


# -- rows: JSON to typed values (pure) -------------------------------------------------------------


def identifier_text(name: str) -> str:
    """ksqlDB's ``Identifiers.getIdentifierText``: `` `name` `` kept as written, else upper-cased."""
    if len(name) >= 2 and name.startswith("`") and name.endswith("`"):
        return name[1:-1].replace("``", "`")
    return name.upper()


def _fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """``JsonUtil.convertJsonFieldCase``: names as identifiers, duplicates refused."""
    out: dict[str, Any] = {}
    for name, value in obj.items():
        key = identifier_text(name)
        if key in out:
            raise RowError(f"Found duplicate column / struct field name: {key}")
        out[key] = value
    return out


def _java_class(value: Any) -> str:
    """The class of ``value`` as Vert.x decodes JSON, for ksqlDB's coercion message."""
    if isinstance(value, bool):
        return "class java.lang.Boolean"
    if isinstance(value, int):
        return "class java.lang." + ("Integer" if -(2**31) <= value < 2**31 else "Long")
    if isinstance(value, float):
        return "class java.lang.Double"
    if isinstance(value, str):
        return "class java.lang.String"
    if isinstance(value, list):
        return "class io.vertx.core.json.JsonArray"
    return "class io.vertx.core.json.JsonObject"


class _Mismatch(Exception):
    """A value that does not coerce (the caller names the column's whole type)."""


def _to_decimal(value: Any, target: DecimalType) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _Mismatch
    try:
        if isinstance(value, int):  # ksqlDB's default coercer: the value must fit exactly
            exact = Decimal(value)
            fitted = fit_decimal(exact, target)
            if fitted != exact:
                raise _Mismatch
            return fitted
        number = Decimal(repr(value) if isinstance(value, float) else value.strip())
        if not number.is_finite():
            raise _Mismatch
        # ApiSqlValueCoercer: doubles and strings are set to the scale, HALF_UP
        return fit_decimal(number.quantize(Decimal(1).scaleb(-target.scale), ROUND_HALF_UP), target)
    except (InvalidOperation, EvalFailure) as exc:
        raise _Mismatch from exc


def _coerce(value: Any, target: SqlType) -> Any:
    """``value`` (decoded JSON) as a value of ``target``; raises `_Mismatch`."""
    if value is None:
        return None
    if isinstance(target, DecimalType):
        return _to_decimal(value, target)
    if isinstance(target, ArrayType):
        if not isinstance(value, list):
            raise _Mismatch
        return [_coerce(v, target.element) for v in value]
    if isinstance(target, MapType):
        if not isinstance(value, dict):
            raise _Mismatch
        return {_coerce(k, target.key): _coerce(v, target.value) for k, v in value.items()}
    if isinstance(target, StructType):
        if not isinstance(value, dict):
            raise _Mismatch
        try:
            given = _fields(value)
        except RowError as exc:
            raise _Mismatch from exc
        types = {f.name: f.type for f in target.fields}
        if not set(given) <= set(types):
            raise _Mismatch
        return {name: _coerce(given.get(name), t) for name, t in types.items()}
    if isinstance(value, dict | list):
        raise _Mismatch
    if target == BOOLEAN:
        if not isinstance(value, bool):
            raise _Mismatch
        return value
    if isinstance(value, bool):
        raise _Mismatch
    if target in INTEGRAL:
        if not isinstance(value, int) or wrap_int(value, target) != value:
            raise _Mismatch
        return value
    if target == DOUBLE:
        if not isinstance(value, int | float):
            raise _Mismatch
        return float(value)
    if not isinstance(value, str):
        raise _Mismatch
    if target == STRING:
        return value
    if target == BYTES:  # JSON carries BYTES as base64
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise _Mismatch from exc
    try:
        return parse_string(value, target)  # DATE, TIME, TIMESTAMP from their ISO text
    except EvalFailure as exc:
        raise _Mismatch from exc


def coerce_json(value: Any, target: SqlType) -> Any:
    """A decoded JSON value as a value of the column type ``target`` (ksqlDB's
    ``ApiSqlValueCoercer``): numbers widen but never narrow, DECIMAL also takes a double or a
    string (rounded HALF_UP to its scale), BYTES a base64 string, DATE/TIME/TIMESTAMP their ISO
    text, ARRAY a list, MAP and STRUCT an object (struct fields not in the type are refused).

    Raises:
        RowError: ksqlDB's ``Can't coerce a field of type ... into type ...`` (40000).
    """
    try:
        return _coerce(value, target)
    except _Mismatch:
        raise RowError(
            f"Can't coerce a field of type {_java_class(value)} into type {target}"
        ) from None


def row_values(
    row: Mapping[str, Any], source: Source, custom_types: Mapping[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The key and value of the record one JSON row becomes (``KeyValueExtractor``).

    A name that is not a key or value column refuses the row, with the words ``INSERT ... VALUES``
    uses (ksqlDB 0.29's endpoint drops such a field silently: a misspelt column would be lost).

    Returns:
        The key columns' values in key order, and every value column by name.

    Raises:
        RowError: a key column missing or NULL, a duplicate name, an unknown or header column, a
            value that does not coerce.
    """
    fields = _fields(row)
    written = {c.name for c in source.key_columns} | {c.name for c in source.value_columns}
    unknown = [name for name in fields if name not in written]
    if unknown:
        headers = [name for name in unknown if source.column(name) is not None]
        if headers:
            raise RowError(f"Cannot insert into HEADER columns: {', '.join(headers)}")
        raise RowError(f"Column name `{unknown[0]}` does not exist.")
    key = []
    for column in source.key_columns:
        value = fields.get(column.name)
        if value is None:
            raise RowError(f"Key field must be specified: {column.name}")
        key.append(coerce_json(value, resolve_type(column.type, custom_types)))
    values = {
        c.name: coerce_json(fields.get(c.name), resolve_type(c.type, custom_types))
        for c in source.value_columns
    }
    return tuple(key), values


def parse_row(line: bytes) -> dict[str, Any]:
    """One line of the body as a JSON object.

    Raises:
        RowError: ksqlDB's ``Invalid JSON in inserts stream`` (40000).
    """
    try:
        row = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deeply
        raise RowError("Invalid JSON in inserts stream") from None
    if not isinstance(row, dict):
        raise RowError("Invalid JSON in inserts stream")
    return row


def ack(seq: int) -> dict[str, Any]:
    """ksqlDB's ``InsertAck``."""
    return {"status": "ok", "seq": seq}


def insert_error(seq: int, error_code: int, message: str) -> dict[str, Any]:
    """ksqlDB's ``InsertError``."""
    return {"status": "error", "seq": seq, "error_code": error_code, "message": message}


# -- the target and the writes ---------------------------------------------------------------------


def resolve_target(services: Services, target: str) -> Source:
    """The source a stream of inserts writes to.

    Raises:
        KsqlError: 40001 for an unknown, windowed or read-only target, or when this server takes no
            inserts.
    """
    name = identifier_text(target)
    source = services.runner.catalog.sources.get(name)
    if source is None:
        raise KsqlError(
            f"Cannot insert values into an unknown stream/table: `{name}`"
            + services.runner.catalog.alternatives(name),
            40001,
        )
    if source.windowed:
        raise KsqlError("Cannot insert values into windowed stream/table", 40001)
    if source.read_only:
        kind = source.kind.value.lower()
        raise KsqlError(f"Cannot insert values into read-only {kind}: {source.name}", 40001)
    if services.writer is None:
        raise KsqlError("this server does not accept INSERT statements", 40001)
    return source


def write_record(
    services: Services,
    source: Source,
    serde: RowSerde,
    key: tuple[Any, ...],
    value: Mapping[str, Any] | None,
    timestamp_ms: int | None = None,
) -> Written:
    """Serialize and write one record as INSERT VALUES does, and wait for the broker.

    Raises:
        EngineError: the values do not serialize in the source's formats.
        KafkaEdgeError: the broker refused the record or did not acknowledge it.
    """
    assert services.writer is not None  # resolve_target checked it
    key_bytes = serde.serialize_key(key)
    value_bytes = serde.serialize_value(value)
    partition = partition_for(key_bytes, source.partitions) if key_bytes is not None else None
    return services.writer.write(
        source.topic, key_bytes, value_bytes, partition=partition, timestamp_ms=timestamp_ms
    )


def _prepare(
    services: Services, source: Source, serde: RowSerde, line: bytes
) -> tuple[bytes | None, bytes | None, int | None]:
    """A line's record: serialized key and value and its partition. Raises RowError."""
    row = parse_row(line)
    key, value = row_values(row, source, services.runner.catalog.types)
    try:
        key_bytes = serde.serialize_key(key)
        value_bytes = serde.serialize_value(value)
    except EngineError as exc:
        raise RowError(
            f"Failed to insert values into '{source.name}'. {exc.message}", exc.error_code
        ) from exc
    partition = partition_for(key_bytes, source.partitions) if key_bytes is not None else None
    return key_bytes, value_bytes, partition


def insert_rows(
    services: Services, source: Source, serde: RowSerde, lines: list[bytes], first_seq: int
) -> list[dict[str, Any]]:
    """Write each line's row in order; one ack or error per line. Blocks (run in a thread).

    The batch's records are produced together and acknowledged by one wait for the broker (as
    ``INSERT ... VALUES`` writes one), each ack saying what became of its own record."""
    assert services.writer is not None  # resolve_target checked it
    answers: list[dict[str, Any] | None] = []
    records = []
    for seq, line in enumerate(lines, first_seq):
        try:
            key, value, partition = _prepare(services, source, serde, line)
        except RowError as exc:
            answers.append(insert_error(seq, exc.error_code, exc.message))
            continue
        except Exception as exc:  # never a broken stream for one row
            log.exception("inserts-stream row %d into %s failed", seq, source.name)
            answers.append(insert_error(seq, 50000, f"Error in processing inserts: {exc}"))
            continue
        answers.append(None)
        records.append((seq, (source.topic, key, value, partition, None, None)))
    written = services.writer.write_many([r for _, r in records]) if records else []
    for (seq, _record), outcome in zip(records, written, strict=True):
        index = seq - first_seq
        if isinstance(outcome, KafkaEdgeError):
            answers[index] = insert_error(seq, outcome.error_code, str(outcome))
        else:
            answers[index] = ack(seq)
    return [a for a in answers if a is not None]


# -- the request body as lines ---------------------------------------------------------------------


class LineTooLong(Exception):
    """A line of the body is longer than the limit."""


class BodyLines:
    """The lines of a request body read chunk by chunk: at most one chunk plus one partial line
    in memory.

    Args:
        chunks: the body's chunks (``request.stream()``).
        max_line_bytes: the longest line accepted.
    """

    def __init__(self, chunks: AsyncIterator[bytes], max_line_bytes: int) -> None:
        self._chunks = chunks
        self._max = max_line_bytes
        self._buffer = bytearray()
        self._scan_from = 0  # no newline before this offset of the buffer
        self._ended = False

    def _complete(self, limit: int | None) -> list[bytes]:
        lines: list[bytes] = []
        start = 0
        while limit is None or len(lines) < limit:
            end = self._buffer.find(b"\n", max(start, self._scan_from))
            if end < 0:
                if self._ended and start < len(self._buffer):
                    end = len(self._buffer)  # a last line without its newline
                else:  # a partial line: never scanned again (tiny chunks stay linear)
                    self._scan_from = len(self._buffer)
                    break
            if end - start > self._max:
                if lines:
                    break  # the rows before it first
                raise LineTooLong(f"a line of the request body is longer than {self._max} bytes")
            lines.append(bytes(self._buffer[start:end]))
            start = end + 1
        del self._buffer[:start]
        self._scan_from = max(self._scan_from - start, 0)
        return [line for line in lines if line.strip()]

    async def next_batch(self, limit: int = _BATCH_ROWS) -> list[bytes] | None:
        """The complete non-blank lines available next (reading chunks until there is one), at
        most ``limit``; None at the end of the body.

        Raises:
            LineTooLong: a line exceeds the limit.
            ClientDisconnect: the client went.
        """
        while True:
            lines = self._complete(limit)
            if lines:
                return lines
            if self._ended:
                return None
            if len(self._buffer) > self._max:
                raise LineTooLong(f"a line of the request body is longer than {self._max} bytes")
            try:
                chunk = await anext(self._chunks)
            except StopAsyncIteration:
                self._ended = True
                continue
            self._buffer += chunk
            if b"\n" not in chunk and len(self._buffer) > self._max:
                raise LineTooLong(f"a line of the request body is longer than {self._max} bytes")

    async def first_line(self) -> bytes | None:
        """The first non-blank line (the arguments), or None for an empty body."""
        lines = await self.next_batch(1)
        return lines[0] if lines else None


# -- the endpoint ----------------------------------------------------------------------------------


def parse_arguments(line: bytes | None) -> str:
    """The target named by the first line (``InsertsStreamArgs``).

    Raises:
        KsqlError: 40000 when the line is not a JSON object with a string ``target`` (and an
            object ``properties``, if any).
    """
    if line is None:
        raise bad_request('the request body must start with a line {"target": "STREAM_NAME"}')
    try:
        args = json.loads(line)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise bad_request(f"Invalid JSON in request args: {exc}") from exc
    if not isinstance(args, dict) or not isinstance(args.get("target"), str):
        raise bad_request('the first line must be a JSON object with a "target" string field')
    if not isinstance(args.get("properties") or {}, dict):
        raise bad_request('"properties" must be a JSON object')
    return str(args["target"])


class InsertsResponse(Response):
    """The acks of a stream of inserts, sent as the rows arrive (an ASGI app of its own: it reads
    the rest of the request body itself, so nothing else may ``receive`` meanwhile)."""

    def __init__(
        self,
        services: Services,
        source: Source,
        serde: RowSerde,
        lines: BodyLines,
        *,
        as_array: bool,
    ) -> None:
        self.status_code = 200
        self.media_type = JSON if as_array else DELIMITED
        self.background = None
        self.init_headers(None)  # no body attribute: no content-length, the answer is streamed
        self._services = services
        self._source = source
        self._serde = serde
        self._lines = lines
        self._as_array = as_array

    def _render(self, answers: list[dict[str, Any]], first: bool) -> bytes:
        if not self._as_array:
            return "".join(dumps(a) + "\n" for a in answers).encode()
        return (("[" if first else ",") + ",".join(dumps(a) for a in answers)).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        seq = 0
        try:
            while True:
                try:
                    lines = await self._lines.next_batch()
                except LineTooLong as exc:  # the stream cannot find its next row: it ends here
                    answers = [insert_error(seq, 41300, str(exc))]
                    await self._send(send, self._render(answers, seq == 0))
                    seq += 1
                    break
                if lines is None:
                    break
                answers = await run_in_threadpool(
                    insert_rows, self._services, self._source, self._serde, lines, seq
                )
                await self._send(send, self._render(answers, seq == 0))
                seq += len(answers)
            tail = (b"]" if seq else b"[]") if self._as_array else b""
            await send({"type": "http.response.body", "body": tail, "more_body": False})
        except (ClientDisconnect, OSError):
            log.debug(
                "inserts-stream into %s: the client went after %d rows", self._source.name, seq
            )

    @staticmethod
    async def _send(send: Send, body: bytes) -> None:
        await send({"type": "http.response.body", "body": body, "more_body": True})


async def inserts_stream_endpoint(request: Request) -> Response:
    """``POST /inserts-stream``: rows in, one ack per row out, as they arrive."""
    services = services_of(request)
    lines = BodyLines(request.stream(), services.limits.max_body_bytes)
    try:
        first = await lines.first_line()
    except LineTooLong as exc:
        raise bad_request(str(exc), 41300) from exc
    source = resolve_target(services, parse_arguments(first))
    try:
        serde = await run_in_threadpool(serde_of, source, services.runner.catalog.types)
    except EngineError as exc:
        raise KsqlError(
            f"Failed to insert values into '{source.name}'. {exc.message}", exc.error_code
        ) from exc
    accept = request.headers.get("accept", "")
    as_array = JSON in accept and DELIMITED not in accept
    return InsertsResponse(services, source, serde, lines, as_array=as_array)
