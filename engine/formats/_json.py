"""ksqlDB's JSON format: per-type encoders (value -> JSON text) and decoders (parsed JSON -> value).

Pure (no I/O). Writing matches Jackson as ksqlDB configures it: compact (no spaces), non-ASCII
kept as UTF-8, DOUBLE printed as Java prints it (``1.0E7``; NaN and infinities as the strings
``"NaN"``/``"Infinity"``), DECIMAL as a plain JSON number with all its scale digits (``10.0000``),
BYTES as base64 text, DATE/TIME/TIMESTAMP as integers (days, ms of day, ms since epoch).

Reading follows ksqlDB's ``KsqlJsonDeserializer``/``JsonSerdeUtils``: BOOLEAN only from
true/false; INTEGER/BIGINT (and DATE/TIME/TIMESTAMP) from any number (fractions truncated, as
Jackson's ``intValue``) or a string of digits; DOUBLE from a number or numeric string; DECIMAL
from a number or string, rounded half up to the scale; STRING from anything (objects and arrays
as their compact JSON text); BYTES from base64 text; STRUCT fields matched by exact name, then by
the upper-cased JSON name. Unlike Jackson, numbers out of range raise instead of wrapping.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable, Collection
from decimal import Decimal, InvalidOperation
from json.encoder import encode_basestring as _encode_basestring
from typing import Any

import orjson

from headwater.engine.errors import SerdeError
from headwater.engine.values import (
    BIGINT_MAX,
    BIGINT_MIN,
    INT_MAX,
    INT_MIN,
    fit_decimal,
    format_decimal,
    mismatch,
)
from headwater.sqlparse_ext import (
    ArrayType,
    DecimalType,
    MapType,
    PrimitiveType,
    SqlType,
    StructType,
)
from headwater.sqlparse_ext.sqltypes import format_double

Encoder = Callable[[Any], str]
Decoder = Callable[[Any, str], Any]

_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
_DOUBLE_TEXT = re.compile(
    r"\s*[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?\s*"
)
_DECIMAL_TEXT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def encode_string(text: str) -> str:
    """A JSON string literal, non-ASCII kept (Jackson's default)."""
    # What json.dumps(text, ensure_ascii=False) calls, without building a JSONEncoder per call
    # (a third of encoding a row: `bench.profile_queries`)
    return _encode_basestring(text)


def _double_json(x: float) -> str:
    text = format_double(x)
    return f'"{text}"' if text in ("NaN", "Infinity", "-Infinity") else text


def encoder(sql_type: SqlType) -> Encoder:
    """A function writing one (already checked) value of ``sql_type`` as compact JSON text."""
    if isinstance(sql_type, PrimitiveType):
        name = sql_type.name
        if name == "BOOLEAN":
            return lambda v: "null" if v is None else ("true" if v else "false")
        if name == "DOUBLE":
            return lambda v: "null" if v is None else _double_json(v)
        if name == "STRING":
            return lambda v: "null" if v is None else encode_string(v)
        if name == "BYTES":
            return lambda v: "null" if v is None else f'"{base64.b64encode(v).decode("ascii")}"'
        return lambda v: "null" if v is None else str(v)  # INTEGER, BIGINT, DATE, TIME, TIMESTAMP
    if isinstance(sql_type, DecimalType):
        return lambda v: "null" if v is None else format_decimal(v)
    if isinstance(sql_type, ArrayType):
        element = encoder(sql_type.element)
        return lambda v: "null" if v is None else "[" + ",".join(map(element, v)) + "]"
    if isinstance(sql_type, MapType):
        value = encoder(sql_type.value)
        return lambda v: (
            "null"
            if v is None
            else "{"
            + ",".join(
                f"{encode_string('null' if k is None else str(k))}:{value(x)}" for k, x in v.items()
            )
            + "}"
        )
    if isinstance(sql_type, StructType):
        return object_encoder(tuple((f.name, encoder(f.type)) for f in sql_type.fields))
    raise SerdeError(f"{sql_type} is not resolved (custom types must be resolved first)")


def object_encoder(fields: tuple[tuple[str, Encoder], ...]) -> Encoder:
    """An encoder of a dict as a JSON object with exactly ``fields``, in that order."""
    prefixes = tuple((name, encode_string(name) + ":", enc) for name, enc in fields)

    def encode_object(v: Any) -> str:
        if v is None:
            return "null"
        get = v.get
        return "{" + ",".join(prefix + enc(get(name)) for name, prefix, enc in prefixes) + "}"

    return encode_object


#: integers of 19 digits or more: orjson reads those beyond 64 bits as floats
LONG_NUMBER = re.compile(rb"\d{19}")

#: The deepest nesting of arrays and objects a record may have: deeper values are refused before
#: they are parsed. Parsing them, and reading them into columns, recurses once per level, and a
#: value nested some thousands deep (a few KB) would exhaust Python's stack. (Jackson, as ksqlDB
#: configures it, refuses values nested deeper than 1,000; Python's stack allows less than that.)
MAX_NESTING_DEPTH = 256
_ESCAPED = re.compile(rb"\\.", re.DOTALL)
_NOT_MARKS = bytes(b for b in range(256) if b not in b'[]{}"')
_TO_SQUARE = bytes.maketrans(b"{}", b"[]")
_TOO_DEEP = b"[" * (MAX_NESTING_DEPTH + 1)


def nesting_depth(data: bytes) -> int:
    """How deep arrays and objects nest in UTF-8 JSON text (brackets in strings do not count).

    Exact for well-formed JSON; for malformed text, at least the depth a parser would reach before
    it fails. Cheap where it matters: text with at most `MAX_NESTING_DEPTH` opening brackets in all
    returns their count at once (a bound), and counting stops past `MAX_NESTING_DEPTH` levels.
    """
    opening = data.count(b"[") + data.count(b"{")
    if opening <= MAX_NESTING_DEPTH:
        return opening
    if b"\\" in data:
        data = _ESCAPED.sub(b"", data)  # an escaped quote or bracket is part of its string
    # only brackets and quotes, then strings without brackets dropped, then the rest of the strings
    marks = data.translate(_TO_SQUARE, _NOT_MARKS).replace(b'""', b"")
    if b'"' in marks:
        marks = b"".join(marks.split(b'"')[::2])
    if _TOO_DEEP in marks:
        return MAX_NESTING_DEPTH + 1
    depth = 0  # innermost pairs removed, one level per pass
    while depth <= MAX_NESTING_DEPTH:
        shorter = marks.replace(b"[]", b"")
        if len(shorter) == len(marks):
            break
        marks, depth = shorter, depth + 1
    return depth + marks.count(b"[")  # plus the arrays and objects left open (malformed text)


def _check_depth(data: bytes) -> None:
    if nesting_depth(data) > MAX_NESTING_DEPTH:
        raise SerdeError(
            f"invalid JSON: arrays and objects nested deeper than {MAX_NESTING_DEPTH} levels"
        )


def loads(data: bytes, exact_floats: bool, exact_fields: Collection[str] | None = None) -> Any:
    """Parse JSON bytes; fractions become Decimal when ``exact_floats`` (DECIMAL/STRING present).

    ``exact_fields``: when the text is an object, only fractions in these fields (found as
    `object_reader` finds them: by exact name, else upper-cased) need to be exact; a fraction
    elsewhere (a DOUBLE column's, which reads a float and a Decimal alike, or a field no column
    reads) does not make the whole object parse again, the slow way.

    Raises:
        SerdeError: If the bytes are not UTF-8 JSON (NaN/Infinity literals are refused, as Jackson),
            or nest arrays and objects deeper than `MAX_NESTING_DEPTH`.
    """
    if not LONG_NUMBER.search(data):
        # the common case, ~3x faster; what orjson refuses (BOMs, lone surrogates, infinities,
        # other encodings, nesting deeper than 1,024) takes the careful path below, and so do
        # integers of 19 digits or more (orjson reads those beyond 64 bits as floats); with
        # exact_floats, so does a value that holds a fraction (only its text, as Decimal, is exact)
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
        else:
            if data.count(b"[") + data.count(b"{") > MAX_NESTING_DEPTH:
                _check_depth(data)  # nested up to 1,024 levels, all orjson refuses
            if not exact_floats:
                return value
            if exact_fields is not None and type(value) is dict:
                if not _fields_have_float(value, exact_fields):
                    return value
            elif not has_float(value):
                return value
    decoder = _EXACT if exact_floats else _PLAIN
    try:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:  # UTF-16/32 JSON, detected as json.loads detects it
            text = data.decode(json.detect_encoding(data), "surrogatepass")
            _check_depth(text.encode("utf-8", "surrogatepass"))
        else:
            _check_depth(data)  # before parsing: the parser recurses once per level
            text = text.removeprefix("\ufeff")  # a UTF-8 BOM
        return decoder.decode(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SerdeError(f"invalid JSON: {exc}") from None


def _fields_have_float(obj: dict[str, Any], names: Collection[str]) -> bool:
    """Whether what `object_reader` reads for any of ``names`` holds a float."""
    for name in names:
        if name in obj:
            x = obj[name]
        else:  # found upper-cased, the last of equal names winning, as `object_reader` finds it
            x = next((x for k, x in reversed(obj.items()) if k.upper() == name), None)
        t = type(x)
        if t is float or ((t is dict or t is list) and has_float(x)):
            return True
    return False


def has_float(value: Any) -> bool:
    """Whether a decoded JSON value holds a float anywhere."""
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(isinstance(v, (float, dict, list)) and has_float(v) for v in value.values())
    if isinstance(value, list):
        return any(isinstance(v, (float, dict, list)) and has_float(v) for v in value)
    return False


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON number {name}")


# One decoder each, built once: json.loads with hooks builds a new JSONDecoder per call (~15% of
# decoding a small record).
_EXACT = json.JSONDecoder(parse_float=Decimal, parse_constant=_refuse_constant)
_PLAIN = json.JSONDecoder(parse_constant=_refuse_constant)


def needs_exact_floats(sql_type: SqlType) -> bool:
    """Whether fractions must be read as Decimal to decode ``sql_type`` exactly."""
    if isinstance(sql_type, DecimalType):
        return True
    if isinstance(sql_type, PrimitiveType):
        return sql_type.name == "STRING"
    if isinstance(sql_type, ArrayType):
        return needs_exact_floats(sql_type.element)
    if isinstance(sql_type, MapType):
        return needs_exact_floats(sql_type.key) or needs_exact_floats(sql_type.value)
    if isinstance(sql_type, StructType):
        return any(needs_exact_floats(f.type) for f in sql_type.fields)
    return False


def _json_text(v: Any) -> str:
    """Compact JSON text of a parsed value (for a STRING column given an object or array)."""
    if isinstance(v, dict):
        return "{" + ",".join(f"{encode_string(k)}:{_json_text(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_json_text(x) for x in v) + "]"
    if isinstance(v, str):
        return encode_string(v)
    return _scalar_text(v)


def _scalar_text(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return format_double(v)
    return str(v)


def _int_decoder(sql_type: SqlType, low: int, high: int) -> Decoder:
    def decode_int(v: Any, where: str) -> Any:
        if v is None:
            return None
        t = type(v)
        if t is int:
            result = v
        elif t is float or t is Decimal:
            if not math.isfinite(v):
                raise mismatch(where, sql_type, v)
            result = int(v)
        elif t is str and _INTEGER_TEXT.fullmatch(v):
            result = int(v)
        else:
            raise mismatch(where, sql_type, v)
        if not low <= result <= high:
            raise mismatch(where, sql_type, v, f"out of range {low}..{high}")
        return result

    return decode_int


def _primitive_decoder(sql_type: PrimitiveType) -> Decoder:
    name = sql_type.name
    if name in ("INTEGER", "DATE"):
        return _int_decoder(sql_type, INT_MIN, INT_MAX)
    if name in ("BIGINT", "TIMESTAMP"):
        return _int_decoder(sql_type, BIGINT_MIN, BIGINT_MAX)
    if name == "TIME":
        return _int_decoder(sql_type, 0, 86_400_000 - 1)
    if name == "BOOLEAN":

        def decode_boolean(v: Any, where: str) -> Any:
            if v is None or type(v) is bool:
                return v
            raise mismatch(where, sql_type, v)

        return decode_boolean
    if name == "DOUBLE":

        def decode_double(v: Any, where: str) -> Any:
            t = type(v)
            if v is None or t is float:
                return v
            if t is int or t is Decimal:
                return float(v)
            if t is str and _DOUBLE_TEXT.fullmatch(v):
                return float(v.strip().rstrip("fFdD"))
            raise mismatch(where, sql_type, v)

        return decode_double
    if name == "STRING":

        def decode_string(v: Any, where: str) -> Any:
            if v is None or type(v) is str:
                return v
            return _scalar_text(v) if type(v) not in (dict, list) else _json_text(v)

        return decode_string
    if name == "BYTES":

        def decode_bytes(v: Any, where: str) -> Any:
            if v is None:
                return None
            if type(v) is str:
                try:
                    return base64.b64decode(v, validate=True)
                except (binascii.Error, ValueError):
                    raise mismatch(where, sql_type, v, "not base64") from None
            raise mismatch(where, sql_type, v)

        return decode_bytes
    raise SerdeError(f"unknown type {sql_type}")


def parse_decimal_text(v: str, sql_type: DecimalType, where: str) -> Decimal:
    """A DECIMAL from its text (Java's ``new BigDecimal(text)`` syntax), fitted to the type."""
    if not _DECIMAL_TEXT.fullmatch(v):
        raise mismatch(where, sql_type, v, "not a decimal number")
    try:
        return fit_decimal(Decimal(v), sql_type, where, v)
    except InvalidOperation:
        raise mismatch(where, sql_type, v) from None


def decoder(sql_type: SqlType) -> Decoder:
    """A function turning one parsed JSON value into a value of ``sql_type`` (or SerdeError)."""
    if isinstance(sql_type, PrimitiveType):
        return _primitive_decoder(sql_type)
    if isinstance(sql_type, DecimalType):

        def decode_decimal(v: Any, where: str) -> Any:
            if v is None:
                return None
            t = type(v)
            if t is Decimal or t is int:
                return fit_decimal(Decimal(v), sql_type, where, v)
            if t is float:
                return fit_decimal(Decimal(repr(v)), sql_type, where, v)
            if t is str:
                return parse_decimal_text(v, sql_type, where)
            raise mismatch(where, sql_type, v)

        return decode_decimal
    if isinstance(sql_type, ArrayType):
        element = decoder(sql_type.element)

        def decode_array(v: Any, where: str) -> Any:
            if v is None:
                return None
            if type(v) is not list:
                raise mismatch(where, sql_type, v)
            return [element(x, f"{where}[{i}]") for i, x in enumerate(v)]

        return decode_array
    if isinstance(sql_type, MapType):
        key, value = decoder(sql_type.key), decoder(sql_type.value)

        def decode_map(v: Any, where: str) -> Any:
            if v is None:
                return None
            if type(v) is not dict:
                raise mismatch(where, sql_type, v)
            return {key(k, f"{where} key"): value(x, f"{where}[{k!r}]") for k, x in v.items()}

        return decode_map
    if isinstance(sql_type, StructType):
        fields = tuple((f.name, decoder(f.type)) for f in sql_type.fields)
        read = object_reader(fields)

        def decode_struct(v: Any, where: str) -> Any:
            if v is None:
                return None
            if type(v) is not dict:
                raise mismatch(where, sql_type, v)
            return read(v, where)

        return decode_struct
    raise SerdeError(f"{sql_type} is not resolved (custom types must be resolved first)")


def object_reader(
    fields: tuple[tuple[str, Decoder], ...],
) -> Callable[[dict[str, Any], str], dict[str, Any]]:
    """A reader of a JSON object into ``{field: value}`` for exactly ``fields``.

    A field is found by its exact name, else by the JSON name upper-cased (ksqlDB's rule); a
    missing field is NULL; other JSON fields are ignored. Messages name ``<where>.<field>``, or
    just the field when ``where`` is empty (a row's columns).
    """

    def read(obj: dict[str, Any], where: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        upper: dict[str, Any] | None = None
        for name, decode in fields:
            if name in obj:
                raw = obj[name]
            else:
                if upper is None:
                    upper = {k.upper(): x for k, x in obj.items()}
                raw = upper.get(name)
            out[name] = decode(raw, f"{where}.{name}" if where else name)
        return out

    return read
