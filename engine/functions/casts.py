"""CAST: which casts ksqlDB allows, and one value cast to another type. Pure (no I/O).

Includes the text of a value as ``CAST(... AS STRING)`` gives it (Java's ``toString`` for ARRAY,
MAP and STRUCT, in a ``java.util.HashMap``'s iteration order) and a STRING parsed as a value.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import math
from decimal import Decimal, InvalidOperation
from typing import Any

from headwater.engine.functions.temporal import (
    date_of_text,
    parse_partial_timestamp,
    time_of_text,
)
from headwater.engine.functions.types import (
    _DAY_MS,
    _EPOCH,
    BOOLEAN,
    BYTES,
    DATE,
    DOUBLE,
    INTEGER,
    INTEGRAL,
    NULL,
    STRING,
    TEMPORAL,
    TIME,
    TIMESTAMP,
    EvalFailure,
    fit_decimal,
    is_numeric,
    wrap_int,
)
from headwater.sqlparse_ext.sqltypes import (
    ArrayType,
    DecimalType,
    MapType,
    SqlType,
    StructType,
    format_double,
)


def to_string(value: Any, t: SqlType) -> str:
    """The text ksqlDB's CAST(... AS STRING) gives for a value of type ``t``."""
    if t == BOOLEAN:
        return "true" if value else "false"
    if t == DOUBLE:
        return format_double(value)
    if isinstance(t, DecimalType):
        return format(value, "f")
    if t == DATE:
        return (dt.date(1970, 1, 1) + dt.timedelta(days=value)).isoformat()
    if t == TIME:
        seconds, millis = divmod(value, 1000)
        text = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        return text + f".{millis:03d}" if millis else text
    if t == TIMESTAMP:
        stamp = _EPOCH + dt.timedelta(milliseconds=value)
        return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value % 1000:03d}"
    if t == BYTES:
        return base64.b64encode(value).decode("ascii")
    if isinstance(t, ArrayType):  # Java's List.toString
        return "[" + ", ".join(_java_text(v, t.element) for v in value) + "]"
    if isinstance(t, MapType):  # Java's HashMap.toString, in its iteration order
        keys = _java_hash_order(list(value))
        return (
            "{"
            + ", ".join(f"{_java_text(k, t.key)}={_java_text(value[k], t.value)}" for k in keys)
            + "}"
        )
    if isinstance(t, StructType):  # Kafka Connect's Struct.toString: NULL fields left out
        return (
            "Struct{"
            + ",".join(
                f"{f.name}={_java_text(value.get(f.name), f.type)}"
                for f in t.fields
                if value.get(f.name) is not None
            )
            + "}"
        )
    return str(value)


def _java_text(value: Any, t: SqlType) -> str:
    return "null" if value is None else to_string(value, t)


def _java_string_hash(text: str) -> int:
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h


def _java_hash_order(keys: list[Any]) -> list[Any]:
    """``keys`` in the order a java.util.HashMap built from them iterates (STRING keys; others
    keep their order)."""
    if not all(isinstance(k, str) for k in keys):
        return keys
    capacity = 16
    while len(keys) > capacity * 0.75:
        capacity *= 2

    def bucket(key: str) -> int:
        h = _java_string_hash(key)
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(keys, key=bucket)  # stable: a bucket's keys keep their insertion order


_TRUE = frozenset({"true", "t", "yes", "y"})
_FALSE = frozenset({"false", "f", "no", "n"})


def parse_string(text: str, t: SqlType) -> Any:
    """A STRING parsed as a value of type ``t``.

    Raises:
        EvalFailure: ``invalid input syntax for type T: "text"``.
    """
    raw = text.strip()
    try:
        if t in INTEGRAL:
            value = int(raw)
            if wrap_int(value, t) != value:
                raise ValueError(raw)
            return value
        if t == DOUBLE:
            return float(raw)
        if isinstance(t, DecimalType):
            return fit_decimal(Decimal(raw), t)
        if t == BOOLEAN:
            if raw.lower() in _TRUE:
                return True
            if raw.lower() in _FALSE:
                return False
            raise ValueError(raw)
        if t == DATE:  # ksqlDB's SqlTimeTypes.parseDate: a partial date completed
            return date_of_text(raw)
        if t == TIME:  # SqlTimeTypes.parseTime: Java's LocalTime.parse
            return time_of_text(raw)
        if t == BYTES:
            return base64.b64decode(raw, validate=True)
        if t == TIMESTAMP:  # SqlTimeTypes.parseTimestamp: PartialStringToTimestampParser
            return parse_partial_timestamp(raw)
    except (ValueError, InvalidOperation, binascii.Error) as error:
        name = "DECIMAL" if isinstance(t, DecimalType) else str(t)
        raise EvalFailure(f'invalid input syntax for type {name}: "{text}".') from error
    raise EvalFailure(f"Cast of STRING to {t} is not supported")


def castable(source: SqlType, target: SqlType) -> bool:
    """Whether ksqlDB allows ``CAST(x AS target)`` for ``x`` of type ``source``."""
    if source == target or source == NULL or target == STRING and source != BYTES:
        return True
    if is_numeric(source) and is_numeric(target):
        return True
    if source == STRING:
        return target in (BOOLEAN, DATE, TIME, TIMESTAMP, BYTES) or is_numeric(target)
    if source in TEMPORAL and target in TEMPORAL:
        return source == TIMESTAMP or target == TIMESTAMP and source == DATE
    if isinstance(source, ArrayType) and isinstance(target, ArrayType):
        return castable(source.element, target.element)
    if isinstance(source, MapType) and isinstance(target, MapType):
        return castable(source.key, target.key) and castable(source.value, target.value)
    if isinstance(source, StructType) and isinstance(target, StructType):
        # ksqlDB's castStructToStruct: fields by name; the target's others are NULL
        ours = {f.name: f.type for f in source.fields}
        return all(castable(ours[f.name], f.type) for f in target.fields if f.name in ours)
    return False


def cast_value(value: Any, source: SqlType, target: SqlType) -> Any:
    """CAST of one non-NULL value (the types were checked with `castable`).

    Raises:
        EvalFailure: If a string does not parse or a number does not fit.
    """
    if value is None or source == target:
        return value
    if target == STRING:
        return to_string(value, source)
    if source == STRING:
        return parse_string(value, target)
    if target in INTEGRAL:
        if source == DOUBLE:
            if math.isnan(value):
                return 0
            limit = 2**31 if target == INTEGER else 2**63
            return max(-limit, min(limit - 1, int(value)))
        return wrap_int(int(value), target)
    if target == DOUBLE:
        return float(value)
    if isinstance(target, DecimalType):
        if source == DOUBLE and not math.isfinite(value):
            raise EvalFailure(f"Cannot cast {format_double(value)} to {target}")
        return fit_decimal(Decimal(repr(value)) if source == DOUBLE else Decimal(value), target)
    if target == DATE:
        return value // _DAY_MS
    if target == TIME:
        return value % _DAY_MS
    if target == TIMESTAMP:
        return value * _DAY_MS
    if isinstance(target, ArrayType):
        assert isinstance(source, ArrayType)
        return [cast_value(v, source.element, target.element) for v in value]
    if isinstance(target, MapType):
        assert isinstance(source, MapType)
        return {
            cast_value(k, source.key, target.key): cast_value(v, source.value, target.value)
            for k, v in value.items()
        }
    if isinstance(target, StructType):
        assert isinstance(source, StructType)
        ours = {f.name: f.type for f in source.fields}
        return {
            f.name: cast_value(value.get(f.name), ours[f.name], f.type) if f.name in ours else None
            for f in target.fields
        }
    raise EvalFailure(f"Cast of {source} to {target} is not supported")
