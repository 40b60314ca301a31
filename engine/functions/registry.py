"""Type rules, value casts and the scalar function table of the expression evaluator. Pure (no I/O).

Owns what `expressions.py` needs to type and run ksqlDB's built-in operations on Python values (the
value model of `engine/values.py`: INTEGER/BIGINT int, DOUBLE float, DECIMAL `Decimal`, DATE days,
TIME ms of the day, TIMESTAMP ms since the epoch, STRUCT dict): numeric widening
(INTEGER < BIGINT < DECIMAL < DOUBLE), decimal result types, Java-compatible integer overflow,
CAST between types, the functions (`FUNCTIONS`: name -> resolver of argument types), and
ksqlDB's rendering of expressions in messages (`format_expression`: ``(ID = 11)``).
Functions that fail on a value raise `EvalFailure`; the compiler turns that into NULL at run time,
or into an `ExpressionError` when the arguments are constants.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import re
import zoneinfo
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import (
    ROUND_CEILING,
    ROUND_FLOOR,
    ROUND_HALF_DOWN,
    ROUND_HALF_UP,
    Decimal,
    InvalidOperation,
    localcontext,
)
from typing import Any

from sqlglot import exp

from headwater.engine._bound import BoundValue
from headwater.sqlparse_ext import expressions as hx
from headwater.sqlparse_ext.sqltypes import (
    ArrayType,
    DecimalType,
    MapType,
    PrimitiveType,
    SqlType,
    StructType,
    format_double,
    from_datatype,
    identifier_name,
)


@dataclass(frozen=True, slots=True)
class NullType(SqlType):
    """The type of a bare NULL literal (ksqlDB prints it as ``null``)."""

    def sql(self) -> str:
        """``null``."""
        return "null"


@dataclass(frozen=True, slots=True)
class IntervalUnitType(SqlType):
    """The type of a time unit given to a function (``DATEADD(DAYS, 1, D)``); values are ms."""

    def sql(self) -> str:
        """``INTERVAL UNIT``."""
        return "INTERVAL UNIT"


class EvalFailure(Exception):
    """A value an operation cannot handle (bad string to parse, decimal overflow)."""


NULL = NullType()
BOOLEAN = PrimitiveType("BOOLEAN")
INTEGER = PrimitiveType("INTEGER")
BIGINT = PrimitiveType("BIGINT")
DOUBLE = PrimitiveType("DOUBLE")
STRING = PrimitiveType("STRING")
BYTES = PrimitiveType("BYTES")
DATE = PrimitiveType("DATE")
TIME = PrimitiveType("TIME")
TIMESTAMP = PrimitiveType("TIMESTAMP")
INTERVAL_UNIT = IntervalUnitType()
INTERVAL_UNITS = {
    unit + plural: ms
    for unit, ms in (("DAY", 86_400_000), ("HOUR", 3_600_000), ("MINUTE", 60_000),
                     ("SECOND", 1000), ("MILLISECOND", 1))
    for plural in ("", "S")
}  # fmt: skip
"""The time units a function argument may name, with their length in milliseconds."""
INTEGRAL = (INTEGER, BIGINT)
TEMPORAL = (DATE, TIME, TIMESTAMP)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_DAY_MS = 86_400_000


def is_numeric(t: SqlType) -> bool:
    """INTEGER, BIGINT, DECIMAL or DOUBLE."""
    return t in (INTEGER, BIGINT, DOUBLE) or isinstance(t, DecimalType)


def as_decimal_type(t: SqlType) -> DecimalType:
    """The DECIMAL that holds every value of a numeric type (ksqlDB: INTEGER is DECIMAL(10, 0))."""
    if isinstance(t, DecimalType):
        return t
    return DecimalType(10, 0) if t == INTEGER else DecimalType(19, 0)


def _rank(t: SqlType) -> int:
    return 3 if t == DOUBLE else 2 if isinstance(t, DecimalType) else 1 if t == BIGINT else 0


def wider(a: SqlType, b: SqlType) -> SqlType:
    """The common numeric type of two numeric types (DECIMALs widen to hold both)."""
    if isinstance(a, DecimalType) and isinstance(b, DecimalType):
        scale = max(a.scale, b.scale)
        return DecimalType(max(a.precision - a.scale, b.precision - b.scale) + scale, scale)
    if isinstance(a, DecimalType) or isinstance(b, DecimalType):
        if DOUBLE in (a, b):
            return DOUBLE
        return wider(as_decimal_type(a), as_decimal_type(b))
    return a if _rank(a) >= _rank(b) else b


def common_type(types: Sequence[SqlType]) -> SqlType | None:
    """One type for several values (CASE branches, ARRAY elements): equal, or numerics widened.

    Returns NULL when every type is NULL, None when no common type exists.
    """
    result: SqlType = NULL
    for t in types:
        if t == NULL or t == result:
            continue
        if result == NULL:
            result = t
        elif is_numeric(t) and is_numeric(result):
            result = wider(result, t)
        else:
            return None
    return result


def decimal_result(op: str, a: DecimalType, b: DecimalType) -> DecimalType:
    """ksqlDB's (SQL Server's) result type of DECIMAL arithmetic."""
    p1, s1, p2, s2 = a.precision, a.scale, b.precision, b.scale
    if op in "+-":
        scale = max(s1, s2)
        return DecimalType(max(p1 - s1, p2 - s2) + scale + 1, scale)
    if op == "*":
        return DecimalType(p1 + p2 + 1, s1 + s2)
    if op == "/":
        scale = max(6, s1 + p2 + 1)
        return DecimalType(p1 - s1 + s2 + scale, scale)
    scale = max(s1, s2)
    return DecimalType(min(p1 - s1, p2 - s2) + scale, scale)


def wrap_int(value: int, t: SqlType) -> int:
    """Java's two's-complement overflow for INTEGER (32 bits) and BIGINT (64 bits)."""
    bits = 32 if t == INTEGER else 64
    half = 1 << (bits - 1)
    return ((value + half) % (1 << bits)) - half


def fit_decimal(value: Decimal, t: DecimalType) -> Decimal:
    """``value`` rounded HALF_UP to the scale of ``t``.

    Raises:
        EvalFailure: If it needs more digits than the precision allows.
    """
    try:
        result = value.quantize(Decimal(1).scaleb(-t.scale), rounding=ROUND_HALF_UP)
    except InvalidOperation as error:
        raise EvalFailure(f"Numeric field overflow: cannot fit {value} into {t}") from error
    if result.adjusted() >= t.precision - t.scale and result != 0:
        raise EvalFailure(
            f"Numeric field overflow: A field with precision {t.precision} and scale {t.scale} "
            f"must round to an absolute value less than 10^{t.precision - t.scale}. Got {value}"
        )
    return result


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
        return "{" + ", ".join(f"{_java_text(k, t.key)}={_java_text(value[k], t.value)}"
                               for k in keys) + "}"  # fmt: skip
    if isinstance(t, StructType):  # Kafka Connect's Struct.toString: NULL fields left out
        return "Struct{" + ",".join(f"{f.name}={_java_text(value.get(f.name), f.type)}"
                                    for f in t.fields if value.get(f.name) is not None) + "}"
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
        if t == DATE:
            return (dt.date.fromisoformat(raw[:10]) - dt.date(1970, 1, 1)).days
        if t == TIME:
            moment = dt.time.fromisoformat(raw)
            return ((moment.hour * 60 + moment.minute) * 60 + moment.second) * 1000 + (
                moment.microsecond // 1000
            )
        if t == TIMESTAMP:
            stamp = dt.datetime.fromisoformat(raw)
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=dt.UTC)
            return (stamp - _EPOCH) // dt.timedelta(milliseconds=1)
    except (ValueError, InvalidOperation) as error:
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
        return target in (BOOLEAN, DATE, TIME, TIMESTAMP) or is_numeric(target)
    if source in TEMPORAL and target in TEMPORAL:
        return source == TIMESTAMP or target == TIMESTAMP and source == DATE
    if isinstance(source, ArrayType) and isinstance(target, ArrayType):
        return castable(source.element, target.element)
    if isinstance(source, MapType) and isinstance(target, MapType):
        return castable(source.key, target.key) and castable(source.value, target.value)
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
    raise EvalFailure(f"Cast of {source} to {target} is not supported")


# -- the function table -------------------------------------------------------------------------

Impl = Callable[..., Any]
Resolver = Callable[[Sequence[SqlType]], "tuple[SqlType, Impl] | None"]
"""Argument types -> (result type, implementation), or None when the types are not accepted."""


def _java_round(x: float) -> int:
    return math.floor(x + 0.5)


def _round_decimal(value: Decimal, places: int) -> Decimal:
    """``BigDecimal.setScale(places)``, ties away from zero when positive, toward it otherwise."""
    with localcontext() as context:
        context.prec = 1000
        rounding = ROUND_HALF_UP if value > 0 else ROUND_HALF_DOWN
        return value.quantize(Decimal(1).scaleb(-places), rounding=rounding)


def _round_double(x: float, places: int) -> float:
    if not math.isfinite(x):
        raise EvalFailure(f"Cannot round {format_double(x)}")
    return float(_round_decimal(Decimal(repr(x)), places))


def _round(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    if len(args) == 2 and args[1] not in INTEGRAL or len(args) not in (1, 2):
        return None
    t = args[0]
    if t in INTEGRAL:
        return t, lambda x, *_: x
    if t == DOUBLE and len(args) == 1:
        return BIGINT, _java_round
    if t == DOUBLE:
        return DOUBLE, _round_double
    # ksqlDB's result types: DECIMAL(p - s, 0), and the argument's type when places are given.
    if isinstance(t, DecimalType) and len(args) == 1:
        return DecimalType(max(t.precision - t.scale, 1), 0), lambda x: _round_decimal(x, 0)
    if isinstance(t, DecimalType):
        return t, lambda x, n: _round_decimal(_round_decimal(x, n), t.scale) if n < t.scale else x
    return None


def _floor_ceil(mode: str) -> Resolver:
    def resolve(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
        if len(args) != 1 or not is_numeric(args[0]):
            return None
        t = args[0]
        if t in INTEGRAL:
            return t, lambda x: x
        if t == DOUBLE:
            return DOUBLE, (lambda x: float(math.floor(x))) if mode == "floor" else (
                lambda x: float(math.ceil(x))
            )
        assert isinstance(t, DecimalType)
        rounding = ROUND_FLOOR if mode == "floor" else ROUND_CEILING
        return DecimalType(t.precision - t.scale + 1, 0), lambda x: x.quantize(
            Decimal(1), rounding=rounding
        )

    return resolve


def _fixed(params: Sequence[SqlType], result: SqlType, impl: Impl) -> Resolver:
    """A function with fixed parameter types; INTEGER arguments widen to BIGINT/DOUBLE params."""

    def resolve(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
        if len(args) != len(params):
            return None
        for arg, param in zip(args, params, strict=True):
            if arg not in (param, NULL) and not (
                is_numeric(arg) and param in (BIGINT, DOUBLE) and _rank(arg) <= _rank(param)
            ):
                return None
        return result, impl

    resolve.signatures = ((tuple(params), result),)  # type: ignore[attr-defined]  # DESCRIBE FUNCTION
    return resolve


def _overloads(*resolvers: Resolver) -> Resolver:
    def resolve(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
        return next((r for r in (f(args) for f in resolvers) if r is not None), None)

    resolve.signatures = tuple(s for r in resolvers  # type: ignore[attr-defined]
                               for s in getattr(r, "signatures", ()))  # fmt: skip
    return resolve


def _substring(s: str, pos: int, length: int | None = None) -> str:
    size = len(s)
    start = max(size + pos, 0) if pos < 0 else max(min(pos - 1, size), 0)
    if length is None:
        return s[start:]
    return s[start : max(min(start + length, size), start)]


def _same_type_variadic(minimum: int, impl: Impl, maximum: int | None = None) -> Resolver:
    def resolve(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
        if len(args) < minimum or maximum is not None and len(args) > maximum:
            return None
        t = common_type(args)
        return None if t is None or t == NULL else (t, impl)

    return resolve


def _abs(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    if len(args) != 1 or not is_numeric(args[0]):
        return None
    t = args[0]
    return t, (lambda x: wrap_int(abs(x), t)) if t in INTEGRAL else abs


def _concat(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    for t in (STRING, BYTES):
        if args and all(a in (t, NULL) for a in args):
            empty: Any = "" if t == STRING else b""
            return t, lambda *xs, joiner=empty: joiner.join(x for x in xs if x is not None)
    return None


def _utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def _java_trim(s: str) -> str:
    return s.strip("".join(chr(c) for c in range(33)))


_JAVA_PATTERN = re.compile(r"'(?:[^']|'')*'|([a-zA-Z])\1*")
_STRF = {"yyyy": "%Y", "yy": "%y", "MM": "%m", "MMM": "%b", "MMMM": "%B", "dd": "%d", "d": "%d",
         "HH": "%H", "H": "%H", "hh": "%I", "h": "%I", "mm": "%M", "m": "%M", "ss": "%S", "s": "%S",
         "SSS": "%f", "a": "%p", "EEE": "%a", "EEEE": "%A", "Z": "%z", "X": "%z", "XX": "%z",
         "XXX": "%z", "D": "%j", "M": "%m", "z": "%Z", "zz": "%Z", "zzz": "%Z"}  # fmt: skip


def _strftime_pattern(java: str) -> str:
    """A Java ``DateTimeFormatter`` pattern (the common letters) as a ``strftime`` pattern.

    Raises:
        EvalFailure: For a letter sequence with no equivalent.
    """

    def convert(match: re.Match[str]) -> str:
        token = match.group(0)
        if token.startswith("'"):
            return token[1:-1].replace("''", "'").replace("%", "%%") or "'"
        if token not in _STRF:
            raise EvalFailure(f"Unsupported date-time pattern letters: {token}")
        return _STRF[token]

    return _JAVA_PATTERN.sub(convert, java.replace("%", "%%"))


def _zone(name: str | None) -> dt.tzinfo:
    if name is None or name.upper() in ("UTC", "Z", "GMT"):
        return dt.UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as error:
        raise EvalFailure(f"Unknown time zone: {name}") from error


def _format_ts(ms: int, pattern: str, zone: str | None = None) -> str:
    stamp = (_EPOCH + dt.timedelta(milliseconds=ms)).astimezone(_zone(zone))
    return stamp.strftime(_strftime_pattern(pattern).replace("%f", f"{ms % 1000:03d}"))


def _parse_ts(text: str, pattern: str, zone: str | None = None) -> int:
    try:
        stamp = dt.datetime.strptime(text, _strftime_pattern(pattern))
    except ValueError as error:
        raise EvalFailure(
            f"Failed to parse timestamp '{text}' with formatter '{pattern}'"
        ) from error
    if stamp.tzinfo is None:
        tz = _zone(zone)
        stamp = (
            stamp.replace(tzinfo=tz)
            if isinstance(tz, dt.timezone)
            else stamp.replace(tzinfo=tz, fold=0)
        )
    return (stamp - _EPOCH) // dt.timedelta(milliseconds=1)


def _instr(s: str, sub: str, position: int = 1, occurrence: int = 1) -> int:
    """1-based index of the ``occurrence``-th ``sub`` from ``position`` (backwards when negative),
    0 when there is none (ksqlDB's INSTR, Oracle's rules)."""
    if position == 0 or occurrence <= 0:
        return 0
    if position > 0:
        index = position - 2
        for _ in range(occurrence):
            index = s.find(sub, index + 1)
            if index < 0:
                return 0
        return index + 1
    end = len(s) + position + len(sub)
    index = len(s)
    for _ in range(occurrence):
        index = s.rfind(sub, 0, min(end, index - 1 + len(sub)))
        if index < 0:
            return 0
    return index + 1


def _pad(left: bool) -> Impl:
    def pad(s: str, length: int, padding: str) -> str | None:
        if length < 0 or not padding:
            return None
        if length <= len(s):
            return s[:length]
        fill = (padding * (length // len(padding) + 1))[: length - len(s)]
        return fill + s if left else s + fill

    return pad


def _split(s: str, delimiter: str) -> list[str]:
    return list(s) if delimiter == "" else s.split(delimiter)


def _nullif(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    if len(args) != 2 or args[0] == NULL or args[1] not in (args[0], NULL):
        return None
    return args[0], lambda a, b: None if a == b else a


FUNCTIONS: dict[str, Resolver] = {
    "ABS": _abs,
    "ROUND": _round,
    "FLOOR": _floor_ceil("floor"),
    "CEIL": _floor_ceil("ceil"),
    "SQRT": _fixed((DOUBLE,), DOUBLE, lambda x: math.sqrt(x) if x >= 0 else math.nan),
    "SIGN": _fixed((DOUBLE,), INTEGER, lambda x: (x > 0) - (x < 0)),
    "UCASE": _fixed((STRING,), STRING, str.upper),
    "LCASE": _fixed((STRING,), STRING, str.lower),
    "LEN": _overloads(_fixed((STRING,), INTEGER, _utf16_len), _fixed((BYTES,), INTEGER, len)),
    "CONCAT": _concat,
    "SUBSTRING": _overloads(
        _fixed((STRING, INTEGER), STRING, _substring),
        _fixed((STRING, INTEGER, INTEGER), STRING, _substring),
    ),
    "TRIM": _fixed((STRING,), STRING, _java_trim),
    "LTRIM": _fixed((STRING,), STRING, lambda s: s.lstrip("".join(chr(c) for c in range(33)))),
    "RTRIM": _fixed((STRING,), STRING, lambda s: s.rstrip("".join(chr(c) for c in range(33)))),
    "REPLACE": _fixed((STRING, STRING, STRING), STRING, lambda s, a, b: s.replace(a, b)),
    "COALESCE": _same_type_variadic(1, lambda *xs: next((x for x in xs if x is not None), None)),
    # NULLs are ignored; all NULL gives NULL (ksqlDB's GREATEST/LEAST).
    "GREATEST": _same_type_variadic(1, lambda *xs: max((x for x in xs if x is not None),
                                                       default=None)),
    "LEAST": _same_type_variadic(1, lambda *xs: min((x for x in xs if x is not None),
                                                    default=None)),
    "IFNULL": _same_type_variadic(2, lambda a, b: b if a is None else a, maximum=2),
    "TIMESTAMPTOSTRING": _overloads(
        _fixed((BIGINT, STRING), STRING, _format_ts),
        _fixed((BIGINT, STRING, STRING), STRING, _format_ts),
    ),
    "STRINGTOTIMESTAMP": _overloads(
        _fixed((STRING, STRING), BIGINT, _parse_ts),
        _fixed((STRING, STRING, STRING), BIGINT, _parse_ts),
    ),
    "FORMAT_TIMESTAMP": _overloads(
        _fixed((TIMESTAMP, STRING), STRING, _format_ts),
        _fixed((TIMESTAMP, STRING, STRING), STRING, _format_ts),
    ),
    "PARSE_TIMESTAMP": _overloads(
        _fixed((STRING, STRING), TIMESTAMP, _parse_ts),
        _fixed((STRING, STRING, STRING), TIMESTAMP, _parse_ts),
    ),
    "ARRAY_LENGTH": lambda args: (
        (INTEGER, len) if len(args) == 1 and isinstance(args[0], ArrayType) else None
    ),
    "INSTR": _overloads(
        _fixed((STRING, STRING), INTEGER, _instr),
        _fixed((STRING, STRING, INTEGER), INTEGER, _instr),
        _fixed((STRING, STRING, INTEGER, INTEGER), INTEGER, _instr),
    ),
    "LPAD": _fixed((STRING, INTEGER, STRING), STRING, _pad(left=True)),
    "RPAD": _fixed((STRING, INTEGER, STRING), STRING, _pad(left=False)),
    "SPLIT": _fixed((STRING, STRING), ArrayType(STRING), _split),
    "AS_VALUE": lambda args: (args[0], lambda x: x) if len(args) == 1 and args[0] != NULL else None,
    "NULLIF": _nullif,
}


def _add_groups() -> frozenset[str]:
    """Adds the function groups of the sibling modules (which build on the helpers above) to
    `FUNCTIONS`, and returns the names among them that see NULL arguments."""
    from headwater.engine.functions import (
        arrays,
        json_text,
        numeric,
        strings,
        temporal,
    )

    tolerant: set[str] = set()
    for group in (arrays, json_text, numeric, strings, temporal):
        FUNCTIONS.update(group.FUNCTIONS)
        tolerant |= group.NULL_TOLERANT
    return frozenset(tolerant)


NULL_TOLERANT = frozenset({"COALESCE", "IFNULL", "CONCAT", "GREATEST", "LEAST", "NULLIF"}) | (
    _add_groups()
)
"""Functions that see NULL arguments; every other function is NULL when an argument is NULL."""
VOLATILE = frozenset({"UNIX_DATE", "UNIX_TIMESTAMP"})
"""Functions whose call without arguments reads the clock, so is never folded into a constant."""


# -- rendering, as ksqlDB's ExpressionFormatter prints expressions in messages -----------------

_BINARY = {
    exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%", exp.EQ: "=",
    exp.NEQ: "<>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=", exp.And: "AND",
    exp.Or: "OR", exp.DPipe: "||", exp.NullSafeEQ: "IS NOT DISTINCT FROM",
    exp.NullSafeNEQ: "IS DISTINCT FROM",
}  # fmt: skip


def _name(identifier: exp.Expr) -> str:
    name = identifier_name(identifier)
    return name if re.fullmatch(r"[A-Z_][A-Z0-9_@$]*", name) else f"`{name}`"


def format_expression(node: exp.Expr) -> str:
    """ksqlDB's rendering of an expression: ``(ID = 11)``, ``'10'``, ``SUBSTRING(S, 1, 2)``."""
    f = format_expression
    kind = type(node)
    if kind in _BINARY:
        return f"({f(node.this)} {_BINARY[kind]} {f(node.expression)})"
    if isinstance(node, exp.Paren):
        return f(node.this)
    if isinstance(node, exp.Alias):
        return f"{f(node.this)} AS {_name(node.args['alias'])}"
    if isinstance(node, exp.Column):
        column = "*" if isinstance(node.this, exp.Star) else _name(node.this)
        table = node.args.get("table")
        return f"{_name(table)}.{column}" if table is not None else column
    if isinstance(node, exp.Literal):
        text = str(node.this)
        return "'" + text.replace("'", "''") + "'" if node.is_string else text
    if isinstance(node, exp.Null):
        return "null"
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, exp.Neg):
        return f"-{f(node.this)}"
    if isinstance(node, exp.Not):
        inner = node.this
        if isinstance(inner, exp.Is):
            return f"({f(inner.this)} IS NOT NULL)"
        for wrapped, word in ((exp.Between, "BETWEEN"), (exp.In, "IN")):
            if isinstance(inner, wrapped):
                return f(inner).replace(f" {word} ", f" NOT {word} ", 1)
        return f"(NOT {f(inner)})"
    if isinstance(node, exp.Is):
        return f"({f(node.this)} IS NULL)"
    if isinstance(node, exp.Between):
        return f"({f(node.this)} BETWEEN {f(node.args['low'])} AND {f(node.args['high'])})"
    if isinstance(node, exp.In):
        return f"({f(node.this)} IN ({', '.join(f(e) for e in node.expressions)}))"
    if isinstance(node, exp.Like):
        word = "NOT LIKE" if node.args.get("negate") else "LIKE"
        return f"({f(node.this)} {word} {f(node.expression)})"
    if isinstance(node, exp.Escape):
        return f"{f(node.this)[:-1]} ESCAPE {f(node.expression)})"
    if isinstance(node, exp.Cast):
        return f"CAST({f(node.this)} AS {from_datatype(node.args['to']).sql()})"
    if isinstance(node, hx.StructDeref):
        field = "*" if isinstance(node.expression, exp.Star) else _name(node.expression)
        return f"{f(node.this)}->{field}"
    if isinstance(node, exp.Bracket):
        return f"{f(node.this)}[{f(node.expressions[0])}]"
    if isinstance(node, hx.ArrayConstructor):
        return f"ARRAY[{', '.join(f(e) for e in node.expressions)}]"
    if isinstance(node, hx.MapConstructor):
        return "MAP(" + ", ".join(f"{f(e.this)}:={f(e.expression)}" for e in node.expressions) + ")"
    if isinstance(node, hx.StructConstructor):
        return (
            "STRUCT("
            + ", ".join(f"{_name(e.this)}:={f(e.expression)}" for e in node.expressions)
            + ")"
        )
    if isinstance(node, exp.Case):
        parts = ["(CASE"] + ([f(node.this)] if node.this else [])
        for branch in node.args.get("ifs") or ():
            parts.append(f"WHEN {f(branch.this)} THEN {f(branch.args['true'])}")
        if node.args.get("default") is not None:
            parts.append(f"ELSE {f(node.args['default'])}")
        return " ".join(parts) + " END)"
    if isinstance(node, exp.Anonymous):
        return f"{str(node.this).upper()}({', '.join(f(e) for e in node.expressions)})"
    if isinstance(node, exp.Lambda):
        return f"({', '.join(identifier_name(p) for p in node.expressions)}) => {f(node.this)}"
    if isinstance(node, exp.Star):
        return "*"
    if isinstance(node, BoundValue):  # a cached plan's literal
        return "?"
    return node.sql()
