"""The types of the expression evaluator's values, and ksqlDB's rules over them. Pure (no I/O).

The SQL types a value of the value model (`engine/values.py`: INTEGER/BIGINT int, DOUBLE float,
DECIMAL `Decimal`, DATE days, TIME ms of the day, TIMESTAMP ms since the epoch, STRUCT dict) may
have, as constants (``BOOLEAN``, ``BIGINT``, the bare literal's ``NULL``, the ``INTERVAL UNIT`` of
a function argument), and the rules the compiler and the functions type with: numeric widening
(INTEGER < BIGINT < DECIMAL < DOUBLE), common types, decimal result types and Java-compatible
integer overflow. Operations that fail on a value raise `EvalFailure`; the compiler turns that into
NULL at run time, or into an `ExpressionError` when the arguments are constants.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from headwater.sqlparse_ext.sqltypes import DecimalType, PrimitiveType, SqlType


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
    for unit, ms in (
        ("DAY", 86_400_000),
        ("HOUR", 3_600_000),
        ("MINUTE", 60_000),
        ("SECOND", 1000),
        ("MILLISECOND", 1),
    )
    for plural in ("", "S")
}
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


def numeric_rank(t: SqlType) -> int:
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
    return a if numeric_rank(a) >= numeric_rank(b) else b


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
