"""ksqlDB's test cases as data, shared by the QTT and RQTT runners (``conformance.qtt``, ``.rqtt``).

Loading a corpus file's cases (each ``format``/``config`` variant a case of its own, numbers kept as
written), the two verdicts a case can raise (``Skip``: needs what headwater lacks; ``Mismatch``:
computed something else), and records as the corpus writes them: ``encode`` a key or value in a
source's format (registry formats behind Confluent's wire header), ``decode`` one back, and ``same``,
JSON equality as ksqlDB's runner judges it. Pure but for reading the case files.
"""

from __future__ import annotations

import copy
import json
import math
import re
import struct
from collections.abc import Collection, Iterator, Mapping
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any, Self

from conformance.corpus import strip_comments
from headwater.engine.formats._proto_text import (
    from_plain,
    index_bytes,
    message_class,
    message_index,
)
from headwater.engine.formats.schema_registry import SchemaRegistry
from headwater.engine.formats.serde import serde_of
from headwater.engine.formats.windows import windowed_key
from headwater.metastore.catalog import Source

#: Formats whose records carry a schema id of the (mock) schema registry.
REGISTRY_FORMATS = ("AVRO", "JSON_SR", "PROTOBUF", "PROTOBUF_NOSR")
#: Key formats whose keys are always a message of the key columns, even a single one.
MESSAGE_KEYS = ("PROTOBUF", "PROTOBUF_NOSR")


class Skip(Exception):
    """The case needs something this engine does not do yet; ``cause`` groups the report."""

    def __init__(self, cause: str, detail: str = "") -> None:
        super().__init__(cause)
        self.cause = cause
        self.detail = detail


class Mismatch(Exception):
    """The case ran and computed something else; ``cause`` groups the report."""

    def __init__(self, cause: str, detail: str) -> None:
        super().__init__(cause)
        self.cause = cause
        self.detail = detail


# -- the corpus's cases ----------------------------------------------------------------------------


def load_cases(files: list[Path], name_filter: str | None = None) -> Iterator[tuple[str, dict]]:
    """(file stem, case) for every case, each ``format``/``config`` variant a case of its own."""
    for path in files:
        body = json.loads(strip_comments(path.read_text(encoding="utf-8")), parse_float=_Number)
        for case in body.get("tests", []):
            for variant in _variants(case):
                if name_filter and name_filter not in variant["name"]:
                    continue
                yield path.stem, variant


class _Number(float):
    """A JSON number with a fraction, remembering its text (the scale a DECIMAL must match)."""

    text: str

    def __new__(cls, text: str) -> Self:
        number = super().__new__(cls, text)
        number.text = text
        return number

    def __deepcopy__(self, memo: dict) -> _Number:
        return self  # immutable


def _variants(case: dict) -> Iterator[dict]:
    formats = case.get("format") or [None]
    configs = case.get("config") or [None]
    for fmt in formats:
        for config in configs:
            variant = copy.deepcopy(case)
            suffix = []
            if fmt is not None:
                variant["statements"] = [s.replace("{FORMAT}", fmt) for s in case["statements"]]
                suffix.append(fmt)
            if config is not None:
                variant["properties"] = {
                    k: (config if v == "{CONFIG}" else v)
                    for k, v in case.get("properties", {}).items()
                }
                suffix.append(str(config))
            if suffix:
                variant["name"] = f"{case['name']} - {' - '.join(suffix)}"
            yield variant


def case_files(names: list[str] | None, corpus: Path) -> list[Path]:
    """The case files ``names`` (file names or stems) of folder ``corpus``; all of them without names."""
    if not names:
        return sorted(corpus.glob("*.json"))
    found = []
    for name in names:
        path = corpus / (name if name.endswith(".json") else f"{name}.json")
        if not path.exists():
            raise SystemExit(f"no case file {path}")
        found.append(path)
    return found


#: Refusals of what a later issue brings (joins, table functions, windowed sources): skips.
LATER = re.compile(
    r"not supported (yet|in persistent queries yet)|arrive with issue|"
    r"Table function|Windowed sources"
)


# -- records as the corpus writes them -------------------------------------------------------------


def encode(
    value: Any,
    source: Source,
    part: str,
    registry: SchemaRegistry | None = None,
    given: Collection[str] = (),
) -> bytes | None:
    """``value`` (JSON, as the corpus writes it) as a record key or value of ``source``'s format;
    ``given``: the subjects whose schemas the case gives (records are written with those)."""
    fmt = source.key_format if part == "key" else source.value_format
    if value is None or fmt == "NONE":
        return None
    if fmt in REGISTRY_FORMATS:
        if registry is None:
            raise Skip(f"format {fmt} without a schema registry")
        return _encode_registered(value, source, part, registry, given)
    if fmt == "JSON":
        return _dumps(value).encode()
    if fmt == "DELIMITED":
        return str(value).encode()
    if fmt == "KAFKA":
        columns = source.key_columns if part == "key" else source.value_columns
        kind = columns[0].type if columns else "STRING"
        return _kafka_bytes(value, kind)
    raise Skip(f"format {fmt}")


def windowed_input(key: bytes | None, record: Mapping[str, Any]) -> bytes | None:
    """An input record's key with the record's ``window`` (``start``, ``end``, ``type``) after
    it, as Kafka Streams writes a windowed key; the key alone without a window."""
    window = record.get("window")
    if window is None or key is None:
        return key
    session = str(window.get("type", "")).lower() == "session"
    return windowed_key(key, (int(window["start"]), int(window["end"])), session)


def _as_json(source: Source) -> Source:
    return replace(
        source, key_format="JSON" if source.key_format != "NONE" else "NONE", value_format="JSON"
    )


def _encode_registered(
    value: Any, source: Source, part: str, registry: SchemaRegistry, given: Collection[str]
) -> bytes | None:
    """A record in a registry format, as ksqlDB's runner writes one: with the schema the case
    gives for the topic, else with the source's own."""
    subject = f"{source.topic}-{part}"
    latest = registry.latest(subject) if subject in given else None
    if latest is not None:
        schema_id, schema = latest
        if schema.kind == "JSON":
            return struct.pack(">bI", 0, schema_id) + _dumps(value).encode()
        if schema.kind == "AVRO":
            return avro_record(value, json.loads(schema.text), schema_id)
        if isinstance(value, dict):  # PROTOBUF: the given message, behind the header
            # the message the source names (``*_SCHEMA_FULL_NAME``), else the first, as
            # ksqlDB's runner writes with the source's ProtobufProperties
            full_name = dict(source.properties).get(f"{part.upper()}_SCHEMA_FULL_NAME")
            kind = message_class(schema.text, str(full_name) if full_name else None)
            message = from_plain(kind(), value)
            header = struct.pack(">bI", 0, schema_id) + index_bytes(message_index(kind.DESCRIPTOR))
            return header + message.SerializeToString()
    as_json, serde = serde_of(_as_json(source)), serde_of(source)
    if part == "key" and source.key_format in MESSAGE_KEYS and isinstance(value, dict):
        folded = {str(k).upper(): v for k, v in value.items()}  # a message of the key columns
        value = {n: value.get(n, folded.get(n.upper())) for n in serde.key_names}
        if len(serde.key_names) == 1:
            value = next(iter(value.values()))
    data = _dumps(value).encode()
    if part == "key":
        return serde.serialize_key(as_json.deserialize_key(data))
    return serde.serialize_value(as_json.deserialize_value(data))


def avro_record(value: Any, schema: Any, schema_id: int) -> bytes:
    """``value`` (JSON, as the corpus writes it) in Avro of ``schema`` behind the wire header."""
    import io

    import fastavro

    buffer = io.BytesIO()
    buffer.write(struct.pack(">bI", 0, schema_id))
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(schema), _datum(value, schema))
    return buffer.getvalue()


def _datum(value: Any, schema: Any) -> Any:
    """A JSON value as the Avro datum of ``schema`` (Connect's JSON-to-Avro conversion)."""
    if isinstance(schema, list):
        if value is None:
            return None
        branches = [b for b in schema if b != "null"]
        return _datum(value, branches[0]) if len(branches) == 1 else value
    kind = schema.get("type") if isinstance(schema, dict) else schema
    if isinstance(kind, (dict, list)):
        return _datum(value, kind)
    if value is None:
        return None
    logical = schema.get("logicalType") if isinstance(schema, dict) else None
    if logical == "decimal":
        from decimal import Decimal

        return Decimal(str(value)).quantize(Decimal(1).scaleb(-int(schema.get("scale", 0))))
    if kind == "record":
        folded = {str(k).upper(): v for k, v in value.items()}
        return {
            f["name"]: _datum(value.get(f["name"], folded.get(f["name"].upper())), f["type"])
            for f in schema["fields"]
        }
    if kind == "array":
        return [_datum(v, schema["items"]) for v in value]
    if kind == "map":
        return {k: _datum(v, schema["values"]) for k, v in value.items()}
    if kind in ("float", "double"):
        return float(value)
    if kind in ("int", "long"):
        return int(value)
    if kind == "string" and isinstance(value, int):  # SpecToConnectConverter's coercion
        return ("true" if value else "false") if isinstance(value, bool) else str(value)
    if kind == "bytes" and isinstance(value, str):
        return __import__("base64").b64decode(value)
    return value


def _dumps(value: Any) -> str:
    """JSON text of a corpus value, numbers with fractions written as the corpus wrote them."""
    if isinstance(value, _Number):
        return value.text
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_dumps(v) for v in value) + "]"
    return json.dumps(value)


def _kafka_bytes(value: Any, kind: str) -> bytes:
    if kind == "INTEGER":
        return struct.pack(">i", int(value))
    if kind == "BIGINT":
        return struct.pack(">q", int(value))
    if kind == "DOUBLE":
        return struct.pack(">d", float(value))
    if kind == "BYTES":
        return __import__("base64").b64decode(value)
    return str(value).encode() if not isinstance(value, str) else value.encode()


def _floats(value: Any) -> Any:
    """``value`` with its Decimals (fractions as read) as floats, inside lists and objects."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, list):
        return [_floats(v) for v in value]
    if isinstance(value, dict):
        return {k: _floats(v) for k, v in value.items()}
    return value


def _json_value(data: bytes, source: Source | None, part: str) -> Any:
    """A JSON record as ksqlDB's runner reads it: fractions as exact decimals (its Jackson reads
    BigDecimals, whose scale counts), for the columns that are DECIMALs; elsewhere as doubles,
    compared within 1e-6 (see :func:`same`)."""
    value = json.loads(data, parse_float=Decimal)
    if source is None:
        return _floats(value)
    columns = source.key_columns if part == "key" else source.value_columns
    decimal = {c.name for c in columns if "DECIMAL" in c.type.upper()}
    if isinstance(value, dict):
        return {
            k: v if k.upper() in decimal or k in decimal else _floats(v) for k, v in value.items()
        }
    return value if len(columns) == 1 and columns[0].name in decimal else _floats(value)


_writers: dict[str, Any] = {}


def _written_fields(data: bytes) -> dict[str, Any]:
    """The fields of an AVRO record as its writer schema has them (a sink written with a schema
    its statement names has fields its columns lack, which ksqlDB's runner shows)."""
    import io

    import fastavro

    from headwater.engine.formats import schema_registry

    registry = schema_registry.current()
    if registry is None or len(data) < 5:
        return {}
    text = registry.schema(struct.unpack(">I", data[1:5])[0]).text
    writer = _writers.get(text)
    if writer is None:  # parsed once per schema, not per record
        writer = _writers[text] = fastavro.parse_schema(json.loads(text))
    datum = fastavro.schemaless_reader(io.BytesIO(data[5:]), writer, None)
    return datum if isinstance(datum, dict) else {}


def decode(data: bytes | None, source: Source | None, part: str) -> Any:
    if data is None:
        return None
    fmt = (
        "JSON" if source is None else (source.key_format if part == "key" else source.value_format)
    )
    if fmt in REGISTRY_FORMATS and source is not None:  # the values, as ksqlDB's runner has them
        serde = serde_of(source)
        if part == "key":
            key = serde.deserialize_key(data)
            if len(key) == 1 and source.key_format not in MESSAGE_KEYS:
                return key[0]
            return dict(zip(serde.key_names, key))
        row = serde.deserialize_value(data)
        if row is not None and fmt == "AVRO" and source.property("VALUE_SCHEMA_ID") is not None:
            row = {**_written_fields(data), **row}  # ksqlDB's runner reads the whole record
        wrap = source.property("WRAP_SINGLE_VALUE")
        if row is not None and len(row) == 1 and wrap is not None and str(wrap).lower() == "false":
            return next(iter(row.values()))
        return row
    if fmt == "JSON":
        return _json_value(data, source, part)
    if fmt == "DELIMITED":
        return data.decode()
    if fmt == "KAFKA" and source is not None:
        columns = source.key_columns if part == "key" else source.value_columns
        kind = columns[0].type if columns else "STRING"
        if kind == "INTEGER":
            return struct.unpack(">i", data)[0]
        if kind == "BIGINT":
            return struct.unpack(">q", data)[0]
        if kind == "DOUBLE":
            return struct.unpack(">d", data)[0]
        if kind == "BYTES":
            return __import__("base64").b64encode(data).decode()
        return data.decode()
    return data.decode(errors="replace")


def same(actual: Any, expected: Any) -> bool:
    """JSON equality as ksqlDB's runner (ExpectedRecordComparator) sees it: an expected field is
    looked up by its name, then by its name upper-cased (ksqlDB's names are); doubles match within
    1e-6; an INTEGER or BIGINT matches an expected number whose integer part it is (3 matches 3.0:
    ksqlDB compares ``expected.intValue()``); 1 and true differ."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        if len(actual) != len(expected):
            return False
        for name, want in expected.items():
            got = actual.get(name, actual.get(name.upper()) if isinstance(name, str) else None)
            if not same(got, want):
                return False
        return True
    if isinstance(expected, list) and isinstance(actual, list):
        return len(actual) == len(expected) and all(
            same(a, e) for a, e in zip(actual, expected, strict=True)
        )
    if isinstance(actual, Decimal):  # Java's BigDecimal.equals: the scale counts
        if isinstance(expected, bool) or not isinstance(expected, (int, float, str)):
            return False
        if isinstance(expected, int):
            return actual.as_tuple().exponent >= 0 and actual == expected  # type: ignore[operator]
        try:
            wanted = Decimal(
                expected if isinstance(expected, str) else getattr(expected, "text", repr(expected))
            )
        except ArithmeticError:
            return False
        if isinstance(expected, str):  # new BigDecimal(text).equals(actual)
            return wanted == actual and wanted.as_tuple().exponent == actual.as_tuple().exponent
        return wanted == actual  # ksqlDB's runner reads the expected number at the column's scale
    if isinstance(actual, bytes) and isinstance(expected, str):
        return __import__("base64").b64encode(actual).decode() == expected
    if (
        isinstance(actual, float)
        and isinstance(expected, (int, float))
        and not isinstance(expected, bool)
    ):
        return abs(actual - expected) < 0.000_001 or actual == expected
    if (
        isinstance(actual, int)
        and not isinstance(actual, bool)
        and isinstance(expected, float)
        and math.isfinite(expected)
    ):  # compareNumber: expected.intValue() / longValue() == actual (Java truncates)
        return int(expected) == actual
    return type(actual) is type(expected) and bool(actual == expected)
