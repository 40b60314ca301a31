"""The engine's value model: which Python value stands for which SQL value. Pure (no I/O).

Every package that holds row values (serde, expression evaluator, store, pull queries, gateway)
uses this one mapping from ksqlDB's SQL types (:class:`headwater.sqlparse_ext.SqlType`) to Python:

============  ==================================================================================
SQL type      Python value
============  ==================================================================================
BOOLEAN       ``bool``
INTEGER       ``int`` in the signed 32-bit range
BIGINT        ``int`` in the signed 64-bit range
DOUBLE        ``float``
DECIMAL(p,s)  ``decimal.Decimal`` with exactly ``s`` digits after the point, at most ``p`` digits
STRING        ``str``
BYTES         ``bytes``
DATE          ``int``: days since 1970-01-01
TIME          ``int``: milliseconds since midnight (0 <= t < 86 400 000)
TIMESTAMP     ``int``: milliseconds since the epoch, UTC
ARRAY<T>      ``list`` of T values
MAP<K, V>     ``dict`` of K values (``str`` for STRING keys, the only key type JSON allows) to V
STRUCT<...>   ``dict``: every field name as declared (case kept) -> value, in declared order
NULL          ``None`` (any type)
============  ==================================================================================

This module owns that mapping: :func:`check_value` coerces and validates a value for a type,
:func:`to_json_output` renders it the way ksqlDB's REST API prints it in query rows,
:func:`resolve_type` expands CREATE TYPE names (``sqlparse_ext.sqltypes.format_double`` prints a
DOUBLE the way Java, and so ksqlDB's JSON and DELIMITED formats, does). Types given to :func:`check_value` and
:func:`to_json_output` must be resolved (no :class:`CustomType` left).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Mapping
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from headwater.engine.errors import SerdeError
from headwater.sqlparse_ext import (
    ArrayType,
    CustomType,
    DecimalType,
    MapType,
    ParseError,
    PrimitiveType,
    SqlType,
    StructField,
    StructType,
    parse_type,
)
from headwater.sqlparse_ext.sqltypes import format_double

Checker = Callable[[Any, str], Any]

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
BIGINT_MIN, BIGINT_MAX = -(2**63), 2**63 - 1
MS_PER_DAY = 86_400_000
_WIDE = Context(prec=1000)  # DECIMAL precision goes past the default context's 28 digits


def describe(value: Any) -> str:
    """A short description of a value for error messages: its kind and (truncated) repr."""
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    kind = {
        bool: "boolean",
        int: "integer",
        float: "double",
        str: "string",
        bytes: "bytes",
        list: "array",
        dict: "object",
        Decimal: "decimal",
    }.get(type(value), type(value).__name__)
    return f"{kind} {text}"


def mismatch(where: str, sql_type: SqlType | str, value: Any, detail: str = "") -> SerdeError:
    """The SerdeError for a value that does not fit ``sql_type`` at ``where``."""
    extra = f" ({detail})" if detail else ""
    return SerdeError(f"{where}: expected {sql_type}, got {describe(value)}{extra}")


def resolve_type(text_or_type: str | SqlType, custom_types: Mapping[str, Any]) -> SqlType:
    """The type with every CREATE TYPE name replaced by what it stands for, recursively.

    Args:
        text_or_type: canonical type text (as the catalog stores it) or a parsed type.
        custom_types: custom type name -> type text (a value with a ``type`` attribute, such as
            the catalog's ``CustomType``, is accepted too).

    Returns:
        The type with no :class:`CustomType` left.

    Raises:
        SerdeError: If the text is not a type, a name is unknown, or names refer to each other.
    """
    try:
        sql_type = parse_type(text_or_type) if isinstance(text_or_type, str) else text_or_type
    except ParseError as exc:
        raise SerdeError(f"not a type: {text_or_type!r} ({exc.message})") from None
    return _resolve(sql_type, custom_types, ())


def _resolve(t: SqlType, custom: Mapping[str, Any], seen: tuple[str, ...]) -> SqlType:
    if isinstance(t, CustomType):
        if t.name in seen:
            raise SerdeError(f"custom type {t.name} refers to itself: {' -> '.join(seen)}")
        if t.name not in custom:
            raise SerdeError(f"unknown type: {t.name}")
        entry = custom[t.name]
        text = entry if isinstance(entry, str) else entry.type
        try:
            inner = parse_type(text)
        except ParseError as exc:
            raise SerdeError(f"custom type {t.name} is not a type: {exc.message}") from None
        return _resolve(inner, custom, (*seen, t.name))
    if isinstance(t, ArrayType):
        return ArrayType(_resolve(t.element, custom, seen))
    if isinstance(t, MapType):
        return MapType(_resolve(t.key, custom, seen), _resolve(t.value, custom, seen))
    if isinstance(t, StructType):
        return StructType(
            tuple(StructField(f.name, _resolve(f.type, custom, seen)) for f in t.fields)
        )
    return t


def has_map(sql_type: SqlType) -> bool:
    """Whether ``sql_type`` is a MAP or holds one (in an ARRAY or a STRUCT field, at any depth)."""
    if isinstance(sql_type, MapType):
        return True
    if isinstance(sql_type, ArrayType):
        return has_map(sql_type.element)
    if isinstance(sql_type, StructType):
        return any(has_map(f.type) for f in sql_type.fields)
    return False


def map_key_refusal(name: str, sql_type: SqlType) -> str:
    """ksqlDB's refusal of a key column whose type holds a MAP (see `has_map`)."""
    return (
        "Map keys, including types that contain maps, are not supported as they may lead to "
        f"unexpected behavior due to inconsistent serialization. Key column name: `{name}`. "
        f"Column type: {sql_type.sql()}. See https://github.com/confluentinc/ksql/issues/6621 "
        "for more."
    )


def check_value(value: Any, sql_type: SqlType, where: str) -> Any:
    """``value`` coerced to the value model of ``sql_type``, or SerdeError.

    Coercions: an int for DOUBLE becomes a float; an int, float or Decimal for DECIMAL becomes a
    Decimal rounded (half up, as ksqlDB) to the scale, then checked against the precision; a
    tuple for ARRAY becomes a list, bytearray/memoryview for BYTES become bytes. A bool is never
    a number. Struct fields missing from the dict are NULL; unknown fields are an error.

    Args:
        value: the Python value (None is NULL and fits every type).
        sql_type: a resolved type.
        where: what the value is, for the message (a column name, ``V[2]``, ``K.F1``).

    Returns:
        The normalized value.

    Raises:
        SerdeError: Naming ``where``, the expected type and the value seen.
    """
    return checker(sql_type)(value, where)


@lru_cache(maxsize=4096)
def checker(sql_type: SqlType) -> Checker:
    """A function ``(value, where) -> value`` doing :func:`check_value` for one type, built once."""
    if isinstance(sql_type, PrimitiveType):
        return _PRIMITIVE_CHECKERS[sql_type.name](sql_type)
    if isinstance(sql_type, DecimalType):
        return _decimal_checker(sql_type)
    if isinstance(sql_type, ArrayType):
        element = checker(sql_type.element)

        def check_array(v: Any, where: str) -> Any:
            if v is None:
                return None
            if not isinstance(v, list | tuple):
                raise mismatch(where, sql_type, v)
            return [element(x, f"{where}[{i}]") for i, x in enumerate(v)]

        return check_array
    if isinstance(sql_type, MapType):
        key, val = checker(sql_type.key), checker(sql_type.value)

        def check_map(v: Any, where: str) -> Any:
            if v is None:
                return None
            if not isinstance(v, Mapping):
                raise mismatch(where, sql_type, v)
            return {key(k, f"{where} key"): val(x, f"{where}[{k!r}]") for k, x in v.items()}

        return check_map
    if isinstance(sql_type, StructType):
        return _struct_checker(sql_type)
    raise SerdeError(f"{sql_type} is not resolved (custom types must be resolved first)")


def _int_checker(low: int, high: int) -> Callable[[SqlType], Checker]:
    def make(sql_type: SqlType) -> Checker:
        def check_int(v: Any, where: str) -> Any:
            if v is None:
                return None
            if isinstance(v, bool) or not isinstance(v, int):
                raise mismatch(where, sql_type, v)
            if not low <= v <= high:
                raise mismatch(where, sql_type, v, f"out of range {low}..{high}")
            return int(v)

        return check_int

    return make


def _typed_checker(
    kinds: tuple[type, ...], convert: Callable[[Any], Any]
) -> Callable[[SqlType], Checker]:
    def make(sql_type: SqlType) -> Checker:
        def check(v: Any, where: str) -> Any:
            if v is None:
                return None
            if not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
                raise mismatch(where, sql_type, v)
            return convert(v)

        return check

    return make


_PRIMITIVE_CHECKERS: dict[str, Callable[[SqlType], Checker]] = {
    "BOOLEAN": _typed_checker((bool,), bool),
    "INTEGER": _int_checker(INT_MIN, INT_MAX),
    "BIGINT": _int_checker(BIGINT_MIN, BIGINT_MAX),
    "DOUBLE": _typed_checker((float, int), float),
    "STRING": _typed_checker((str,), str),
    "BYTES": _typed_checker((bytes, bytearray, memoryview), bytes),
    "DATE": _int_checker(INT_MIN, INT_MAX),
    "TIME": _int_checker(0, MS_PER_DAY - 1),
    "TIMESTAMP": _int_checker(BIGINT_MIN, BIGINT_MAX),
}


def fit_decimal(value: Decimal, sql_type: DecimalType, where: str, seen: Any = None) -> Decimal:
    """``value`` rounded half up to the type's scale; SerdeError if it needs more digits.

    ``seen`` is the value as given (before conversion to Decimal), for the message.
    """
    seen = value if seen is None else seen
    if not value.is_finite():
        raise mismatch(where, sql_type, seen, "not a finite number")
    try:
        fitted = value.quantize(
            Decimal(1).scaleb(-sql_type.scale), rounding=ROUND_HALF_UP, context=_WIDE
        )
    except InvalidOperation:
        fitted = None
    if fitted is None or len(fitted.as_tuple().digits) > sql_type.precision and fitted != 0:
        raise mismatch(
            where,
            sql_type,
            seen,
            f"must round to an absolute value less than 10^{sql_type.precision - sql_type.scale}",
        )
    return fitted


def _decimal_checker(sql_type: DecimalType) -> Checker:
    def check_decimal(v: Any, where: str) -> Any:
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, Decimal | int | float):
            raise mismatch(where, sql_type, v)
        original = v
        if isinstance(v, float):
            if not math.isfinite(v):
                raise mismatch(where, sql_type, v, "not a finite number")
            v = Decimal(repr(v))  # as Java's BigDecimal.valueOf(double): the shortest digits
        return fit_decimal(Decimal(v), sql_type, where, original)

    return check_decimal


def _struct_checker(sql_type: StructType) -> Checker:
    fields = tuple((f.name, checker(f.type)) for f in sql_type.fields)
    names = frozenset(f.name for f in sql_type.fields)

    def check_struct(v: Any, where: str) -> Any:
        if v is None:
            return None
        if not isinstance(v, Mapping):
            raise mismatch(where, sql_type, v)
        unknown = [k for k in v if k not in names]
        if unknown:
            raise mismatch(where, sql_type, v, f"unknown field {unknown[0]!r}")
        return {name: check(v.get(name), f"{where}.{name}") for name, check in fields}

    return check_struct


def format_decimal(value: Decimal) -> str:
    """A DECIMAL as plain text, never in exponent form (Java's ``BigDecimal.toPlainString``)."""
    return format(value, "f")


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of the proleptic Gregorian date ``days`` after 1970-01-01."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (1 if month <= 2 else 0), month, day


def _year(year: int) -> str:
    """A year as java.time prints it: 4 digits, '+' above 9999, '-' below 0."""
    if 0 <= year <= 9999:
        return f"{year:04d}"
    return f"+{year}" if year > 9999 else f"-{-year:04d}"


def format_date(days: int) -> str:
    """A DATE as ksqlDB prints it (``LocalDate.toString``): ``YYYY-MM-DD``."""
    year, month, day = _civil_from_days(days)
    return f"{_year(year)}-{month:02d}-{day:02d}"


def format_time(ms: int) -> str:
    """A TIME as ksqlDB prints it: ``LocalTime.ofSecondOfDay(ms / 1000).toString()``.

    That is ``HH:MM:SS``, or ``HH:MM`` when the seconds are zero (java.time omits them);
    milliseconds are dropped.
    """
    seconds = ms // 1000
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours:02d}:{minutes:02d}" + (f":{secs:02d}" if secs else "")


def format_timestamp(ms: int) -> str:
    """A TIMESTAMP as ksqlDB prints it: ``yyyy-MM-dd'T'HH:mm:ss.SSS`` in UTC."""
    days, rest = divmod(ms, MS_PER_DAY)
    seconds, millis = divmod(rest, 1000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{format_date(days)}T{hours:02d}:{minutes:02d}:{secs:02d}.{millis:03d}"


def to_json_output(value: Any, sql_type: SqlType) -> Any:
    """``value`` in the JSON-able form ksqlDB's REST API prints in query rows.

    DECIMAL stays a :class:`Decimal`: the gateway must write it as a JSON *number* in plain
    notation (``format(d, "f")``, never a float, never a string), as ksqlDB does with
    ``WRITE_BIGDECIMAL_AS_PLAIN``; e.g. ``json.dumps(rows, default=...)`` cannot do that, so use
    an encoder that emits ``format_decimal(d)`` raw. BYTES become base64 text, DATE ``YYYY-MM-DD``,
    TIME ``HH:MM[:SS]`` (see :func:`format_time`), TIMESTAMP ``YYYY-MM-DDTHH:MM:SS.sss``;
    ARRAY/MAP/STRUCT are converted element by element. DOUBLE stays a float.

    Args:
        value: a value of the value model (as :func:`check_value` returns).
        sql_type: its resolved type.

    Returns:
        None, bool, int, float, Decimal, str, list or dict.
    """
    return _output(sql_type)(value)


def _double_output(value: float) -> Any:
    """A DOUBLE as ksqlDB's REST API prints it: a number, or "NaN"/"Infinity"/"-Infinity"."""
    return value if math.isfinite(value) else format_double(value)


def output_converter(sql_type: SqlType) -> Callable[[Any], Any] | None:
    """:func:`to_json_output` for one type, as a function; None when values of the type are
    their own JSON-able form (STRING, INT, BIGINT, BOOLEAN, DECIMAL: no call needed)."""
    converter = _output(sql_type)
    return None if converter is _keep else converter


def _keep(v: Any) -> Any:
    return v


@lru_cache(maxsize=4096)
def _output(sql_type: SqlType) -> Callable[[Any], Any]:
    keep = _keep

    def nullable(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
        return lambda v: None if v is None else f(v)

    if isinstance(sql_type, PrimitiveType):
        simple: dict[str, Callable[[Any], Any]] = {
            "DOUBLE": _double_output,
            "BYTES": lambda v: base64.b64encode(v).decode("ascii"),
            "DATE": format_date,
            "TIME": format_time,
            "TIMESTAMP": format_timestamp,
        }
        return nullable(simple[sql_type.name]) if sql_type.name in simple else keep
    if isinstance(sql_type, DecimalType):
        return keep
    if isinstance(sql_type, ArrayType):
        element = _output(sql_type.element)
        return nullable(lambda v: [element(x) for x in v])
    if isinstance(sql_type, MapType):
        val = _output(sql_type.value)
        return nullable(lambda v: {k: val(x) for k, x in v.items()})
    if isinstance(sql_type, StructType):
        fields = tuple((f.name, _output(f.type)) for f in sql_type.fields)
        return nullable(lambda v: {name: out(v.get(name)) for name, out in fields})
    raise SerdeError(f"{sql_type} is not resolved (custom types must be resolved first)")
