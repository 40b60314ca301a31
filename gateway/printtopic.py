"""PRINT's text: each record of a topic as one line, its key and value formats guessed as ksqlDB's
``RecordFormatter`` guesses them. Pure: no I/O (a schema registry, when given, is only asked for
schemas by id; the consumer lives in ``push.py``).

A line reads ``rowtime: 2020/05/01 14:45:13.111 Z, key: ..., value: ..., partition: 1``. Keys and
values are tried, in ksqlDB's order, as AVRO, PROTOBUF, JSON, JSON_SR, KAFKA_INT, KAFKA_BIGINT,
KAFKA_DOUBLE, KAFKA_STRING (keys also as SESSION, HOPPING and TUMBLING windowed keys of each); a
format that fails on any record seen is dropped for good, and each record is shown in the first
format left (raw bytes, ``\\xHH`` escaped, when none is). Whenever the formats left change, a line
``Key format: A or B`` / ``Value format: ...`` comes before the records, as ksqlDB prints it.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from headwater.engine.formats.schema_registry import RegisteredSchema, SchemaRegistry
from headwater.sqlparse_ext.sqltypes import format_double

NO_DATA = "¯\\_(ツ)_/¯ - no data processed"
UNRECOGNISED = "UNRECOGNISED_BYTES"
NO_FORMAT = (
    " does not match any supported format. "
    "It may be a STRING with encoding other than UTF8, or some other format."
)


class NotThisFormat(Exception):
    """The bytes do not decode in the format tried (any other exception a decoder raises means
    the same)."""


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """A record as PRINT sees it (``timestamp_ms`` None or negative: none)."""

    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None
    partition: int


Decoder = Callable[[bytes], str]


# -- the formats -----------------------------------------------------------------------------------


def _text(data: bytes) -> str:
    """UTF-8 text, refused when empty or not valid (Java would put U+FFFD in it)."""
    if not data:
        raise NotThisFormat("Empty data")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NotThisFormat("not UTF-8") from None
    if "\ufffd" in text:
        raise NotThisFormat("String contains replacement char")
    return text


def _no_constants(name: str) -> Any:
    raise ValueError(name)  # Jackson refuses NaN and Infinity


_JSON = json.JSONDecoder(parse_constant=_no_constants)


def kafka_string(data: bytes) -> str:
    return _text(data)


def json_text(data: bytes) -> str:
    """The text as it is, when it starts with a JSON value (Jackson's ``readTree``)."""
    text = _text(data)
    try:
        _JSON.raw_decode(text.lstrip(" \t\r\n"))
    except ValueError:
        raise NotThisFormat("Failed to deserialize as JSON") from None
    return text


def _fixed(size: int, fmt: str) -> Callable[[bytes], Any]:
    unpack = struct.Struct(fmt).unpack

    def read(data: bytes) -> Any:
        if len(data) != size:
            raise NotThisFormat(f"Size of data received is not {size}")
        return unpack(data)[0]

    return read


_INT, _LONG, _DOUBLE = _fixed(4, ">i"), _fixed(8, ">q"), _fixed(8, ">d")


def kafka_int(data: bytes) -> str:
    return str(_INT(data))


def kafka_bigint(data: bytes) -> str:
    return str(_LONG(data))


def kafka_double(data: bytes) -> str:
    return format_double(_DOUBLE(data))


def raw_bytes(data: bytes) -> str:
    """Kafka's ``Bytes.toString``: printable ASCII as is, anything else (and ``\\``) as ``\\xHH``."""
    return "".join(chr(b) if 0x20 <= b <= 0x7E and b != 0x5C else f"\\x{b:02X}" for b in data)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise NotThisFormat("truncated message indexes")
        byte = data[pos]
        result |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos  # zig-zag
        shift += 7


class Registered:
    """The formats whose records carry a schema id (Confluent's wire header). Each id is asked of
    the registry once (a failure too: an unreachable registry costs one timeout per id, not one
    per record and format)."""

    def __init__(self, registry: SchemaRegistry | None) -> None:
        self._registry = registry
        self._ids: dict[int, RegisteredSchema | Exception] = {}
        self._cache: dict[tuple[str, int, tuple[int, ...]], Any] = {}

    def _schema(self, data: bytes, kind: str) -> tuple[int, str]:
        if self._registry is None:
            raise NotThisFormat("no schema registry")
        if len(data) < 5 or data[0] != 0:
            raise NotThisFormat("Unknown magic byte!")
        schema_id = int.from_bytes(data[1:5], "big")
        registered = self._ids.get(schema_id)
        if registered is None:
            try:
                registered = self._registry.schema(schema_id)
            except Exception as exc:  # noqa: BLE001 - not found, unreachable: not this format
                registered = exc
            self._ids[schema_id] = registered
        if isinstance(registered, Exception):
            raise NotThisFormat(str(registered))
        if registered.kind.upper() != kind:
            raise NotThisFormat(f"schema {schema_id} is {registered.kind}")
        return schema_id, registered.text

    def avro(self, data: bytes) -> str:
        import fastavro

        schema_id, text = self._schema(data, "AVRO")
        key = ("AVRO", schema_id, ())
        parsed = self._cache.get(key)
        if parsed is None:
            parsed = self._cache[key] = fastavro.parse_schema(json.loads(text))
        stream = io.BytesIO(data[5:])
        value = fastavro.schemaless_reader(stream, parsed, None)
        if stream.read(1):
            raise NotThisFormat("bytes left after the record")
        return avro_text(value)

    def protobuf(self, data: bytes) -> str:
        from google.protobuf import text_format

        from headwater.engine.formats._proto_text import message_class

        schema_id, text = self._schema(data, "PROTOBUF")
        count, pos = _varint(data, 5)
        path = []
        for _ in range(count):
            index, pos = _varint(data, pos)
            path.append(index)
        key = ("PROTOBUF", schema_id, tuple(path) or (0,))
        cls = self._cache.get(key)
        if cls is None:
            cls = self._cache[key] = message_class(text, None, key[2])
        message = cls()
        message.ParseFromString(data[pos:])
        return str(text_format.MessageToString(message, as_one_line=True))

    def json_sr(self, data: bytes) -> str:
        self._schema(data, "JSON")
        try:
            value = _JSON.decode(_text(data[5:]))
        except ValueError:
            raise NotThisFormat("Failed to deserialize as JSON") from None
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def avro_text(value: Any) -> str:
    """An Avro value as Java's ``GenericData.toString`` prints it (logical types as their
    underlying numbers, as Confluent's deserializer leaves them)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float):
        return format_double(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        stamp = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return str((stamp - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(milliseconds=1))
    if isinstance(value, dt.date):
        return str((value - dt.date(1970, 1, 1)).days)
    if isinstance(value, dt.time):
        return str(
            ((value.hour * 60 + value.minute) * 60 + value.second) * 1000
            + value.microsecond // 1000
        )
    if isinstance(value, bytes):
        return '{"bytes": ' + json.dumps(value.decode("latin-1")) + "}"
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{json.dumps(str(k))}: {avro_text(v)}" for k, v in value.items()) + "}"
        )
    if isinstance(value, list):
        return "[" + ", ".join(avro_text(v) for v in value) + "]"
    return str(value)


def _time_windowed(inner: Decoder) -> Decoder:
    """Kafka Streams' time-windowed key: the key then the window start (8 bytes)."""

    def read(data: bytes) -> str:
        if len(data) < 8:
            raise NotThisFormat("too short for a windowed key")
        start = struct.unpack_from(">q", data, len(data) - 8)[0]
        if start < 0:
            raise NotThisFormat("Window startMs time cannot be negative.")
        return f"[{inner(data[:-8])}@{start}/-]"

    return read


def _session_windowed(inner: Decoder) -> Decoder:
    """Kafka Streams' session-windowed key: the key, the window end, then its start."""

    def read(data: bytes) -> str:
        if len(data) < 16:
            raise NotThisFormat("too short for a session-windowed key")
        end, start = struct.unpack_from(">qq", data, len(data) - 16)
        if start < 0 or end < start:  # Kafka's SessionWindow refuses these
            raise NotThisFormat("not a session window")
        return f"[{inner(data[:-16])}@{start}/{end}]"

    return read


def formats(
    registry: SchemaRegistry | Registered | None, *, key: bool
) -> list[tuple[str, Decoder]]:
    """ksqlDB's formats in its order; for keys each also windowed (SESSION, HOPPING, TUMBLING)."""
    registered = registry if isinstance(registry, Registered) else Registered(registry)
    plain: list[tuple[str, Decoder]] = [
        ("AVRO", registered.avro),
        ("PROTOBUF", registered.protobuf),
        ("JSON", json_text),
        ("JSON_SR", registered.json_sr),
        ("KAFKA_INT", kafka_int),
        ("KAFKA_BIGINT", kafka_bigint),
        ("KAFKA_DOUBLE", kafka_double),
        ("KAFKA_STRING", kafka_string),
    ]
    out: list[tuple[str, Decoder]] = []
    for name, decode in plain:
        if key:
            out += [
                (f"SESSION({name})", _session_windowed(decode)),
                (f"HOPPING({name})", _time_windowed(decode)),
                (f"TUMBLING({name})", _time_windowed(decode)),
            ]
        out.append((name, decode))
    out.append((UNRECOGNISED, raw_bytes))
    return out


# -- guessing --------------------------------------------------------------------------------------


class Deserializers:
    """The formats still possible for one side (keys or values) of a topic."""

    def __init__(self, decoders: Sequence[tuple[str, Decoder]]) -> None:
        self._decoders = list(decoders)
        self._seen_data = False

    def possible_formats(self) -> list[str]:
        """The formats that decoded every non-null record seen so far (a shrug before any)."""
        if not self._seen_data:
            return [NO_DATA]
        return [name for name, _ in self._decoders if name != UNRECOGNISED]

    def format(self, data: bytes | None) -> str:
        """``data`` in the first format that decodes it; every format that fails is dropped."""
        if data is None:
            return "<null>"
        self._seen_data = True
        first: str | None = None
        kept = []
        for name, decode in self._decoders:
            try:
                text = decode(data)
            except Exception:  # noqa: BLE001, S112 - any failure (a registry's too) rules it out
                continue
            kept.append((name, decode))
            if first is None:
                first = text
        self._decoders = kept
        return first if first is not None else "<Failed to deserialize>"


def rowtime_text(timestamp_ms: int | None) -> str:
    """``yyyy/MM/dd HH:mm:ss.SSS z`` in UTC, or ``N/A``."""
    if timestamp_ms is None or timestamp_ms < 0:
        return "N/A"
    moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=timestamp_ms)
    return moment.strftime("%Y/%m/%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d} Z"


class RecordFormatter:
    """Formats records, narrowing the possible key and value formats as it sees them."""

    def __init__(self, registry: SchemaRegistry | None = None) -> None:
        registered = Registered(registry)  # one lookup per schema id for keys and values
        self.keys = Deserializers(formats(registered, key=True))
        self.values = Deserializers(formats(registered, key=False))

    def _line(self, record: TopicRecord) -> str:
        return (
            f"rowtime: {rowtime_text(record.timestamp_ms)}, "
            f"key: {self.keys.format(record.key)}, "
            f"value: {self.values.format(record.value)}, "
            f"partition: {record.partition}"
        )

    def format(self, records: Iterable[TopicRecord]) -> list[str]:
        """One line per record; formatted again when the batch ruled out the format in use."""
        records = list(records)
        key_format = self.keys.possible_formats()[0] if self.keys.possible_formats() else None
        value_format = self.values.possible_formats()[0] if self.values.possible_formats() else None
        lines = [self._line(r) for r in records]
        if (
            key_format in self.keys.possible_formats()
            and value_format in self.values.possible_formats()
        ):
            return lines
        return [self._line(r) for r in records]


class FormatsTracker:
    """The ``Key format:`` / ``Value format:`` lines, each printed when its formats change."""

    def __init__(self) -> None:
        self._keys: list[str] | None = None
        self._values: list[str] | None = None

    def update(self, formatter: RecordFormatter) -> list[str]:
        lines = []
        keys, values = formatter.keys.possible_formats(), formatter.values.possible_formats()
        if keys != self._keys:
            self._keys = keys
            lines.append("Key format: " + (" or ".join(keys) if keys else NO_FORMAT))
        if values != self._values:
            self._values = values
            lines.append("Value format: " + (" or ".join(values) if values else NO_FORMAT))
        return lines


class TopicPrint:
    """What PRINT writes for each batch polled: INTERVAL and LIMIT applied, the format lines first.

    Args:
        registry: the schema registry (AVRO, PROTOBUF and JSON_SR need one).
        interval: print every ``interval``-th record (1: each).
        limit: stop after this many printed records (None: never).
    """

    def __init__(
        self, registry: SchemaRegistry | None, interval: int = 1, limit: int | None = None
    ) -> None:
        if interval < 1:
            raise ValueError(f"INTERVAL must be greater than one, but was: {interval}")
        self.formatter = RecordFormatter(registry)
        self._tracker = FormatsTracker()
        self.interval = interval
        self.limit = limit
        self.polled = 0
        self.written = 0

    @property
    def done(self) -> bool:
        """Whether the LIMIT is reached."""
        return self.limit is not None and self.written >= self.limit

    def lines(self, records: Sequence[TopicRecord]) -> list[str]:
        """The lines for ``records`` (the next records polled, in order)."""
        if not records or self.done:
            return []
        out = []
        for line in self.formatter.format(records):
            if self.polled % self.interval == 0:
                self.written += 1
                out.append(line)
            self.polled += 1
            if self.done:
                break
        return self._tracker.update(self.formatter) + out
