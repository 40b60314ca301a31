"""Math functions of the function table (ABS, ROUND, FLOOR, CEIL, TRUNC, EXP, LN, LOG, POWER,
trigonometry, GEO_DISTANCE, RANDOM; GREATEST and LEAST are in `overloaded`). Pure (no I/O).

Registered into `registry.FUNCTIONS`. Results follow Java's ``Math``: a value outside a function's
domain gives NaN and an overflow gives an infinity, where Python's ``math`` would raise.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from decimal import (
    ROUND_CEILING,
    ROUND_DOWN,
    ROUND_FLOOR,
    ROUND_HALF_DOWN,
    ROUND_HALF_UP,
    Decimal,
    localcontext,
)
from typing import Any

from headwater.engine.functions.signatures import (
    Impl,
    Resolver,
    fixed,
    overloads,
)
from headwater.engine.functions.types import (
    BIGINT,
    DOUBLE,
    INTEGER,
    INTEGRAL,
    NULL,
    STRING,
    EvalFailure,
    is_numeric,
    wrap_int,
)
from headwater.sqlparse_ext.sqltypes import DecimalType, SqlType, format_double


def _java(f: Callable[[float], float]) -> Impl:
    """``f`` on a DOUBLE, with Java's NaN for a domain error and infinity for an overflow."""

    def call(x: Any) -> float:
        value = float(x)
        try:
            return f(value)
        except ValueError:
            return math.nan
        except OverflowError:
            return math.inf

    return call


def _ln(x: float) -> float:
    if x == 0:
        return -math.inf
    return math.log(x) if x > 0 or math.isnan(x) else math.nan


def _log(base: Any, value: Any) -> float:
    b, v = float(base), float(value)
    if b <= 0 or b == 1:
        return math.nan
    return _ln(v) / _ln(b)


def _divide(a: float, b: float) -> float:
    """Java's ``a / b`` on doubles (a zero divisor gives an infinity or NaN)."""
    if b == 0:
        return (
            math.nan
            if a == 0 or math.isnan(a)
            else math.copysign(math.inf, a) * math.copysign(1, b)
        )
    return a / b


def _power(base: Any, exponent: Any) -> float:
    b, e = float(base), float(exponent)
    try:
        return math.pow(b, e)
    except OverflowError:
        negative = b < 0 and e.is_integer() and e % 2 == 1
        return -math.inf if negative else math.inf
    except ValueError:  # 0 to a negative power, or a negative base to a fraction
        if b == 0:
            odd = e.is_integer() and e % 2 == 1
            return math.copysign(math.inf, b) if odd else math.inf
        return math.nan


def _sinh(x: float) -> float:
    try:
        return math.sinh(x)
    except OverflowError:
        return math.copysign(math.inf, x)


_UNARY: dict[str, Callable[[float], float]] = {
    "EXP": math.exp,
    "LN": _ln,
    "CBRT": math.cbrt,
    "ACOS": math.acos,
    "ASIN": math.asin,
    "ATAN": math.atan,
    "COS": math.cos,
    "COSH": math.cosh,
    "SIN": math.sin,
    "SINH": _sinh,
    "TAN": math.tan,
    "TANH": math.tanh,
    "COT": lambda x: _divide(1.0, math.tan(x)),
    "DEGREES": math.degrees,
    "RADIANS": math.radians,
}


# -- TRUNC --------------------------------------------------------------------------------------


def _double_to_long(x: float) -> int:
    """Java's ``(long) x``: toward zero, NaN is 0, saturating at the BIGINT range."""
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return 2**63 - 1 if x > 0 else -(2**63)
    return max(-(2**63), min(2**63 - 1, int(x)))


def _truncate(value: Decimal, places: int) -> Decimal:
    with localcontext() as context:
        context.prec = 1000
        return value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_DOWN)


def _trunc_double(x: float, places: int) -> float:
    if not math.isfinite(x):
        raise EvalFailure(f"Cannot truncate {x}")
    return float(_truncate(Decimal(repr(x)), places))


def _trunc(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    if len(args) not in (1, 2) or len(args) == 2 and args[1] not in (INTEGER, NULL):
        return None
    t = args[0]
    if t in (INTEGER, BIGINT) and len(args) == 1:
        return BIGINT, lambda x: x
    if isinstance(t, DecimalType) and len(args) == 1:
        return DecimalType(max(t.precision - t.scale, 1), 0), lambda x: _truncate(x, 0)
    if isinstance(t, DecimalType):
        return t, lambda x, n: _truncate(_truncate(x, n), t.scale)
    if t in (INTEGER, BIGINT, DOUBLE) and len(args) == 1:
        return BIGINT, lambda x: _double_to_long(float(x))
    if t in (INTEGER, BIGINT, DOUBLE):
        return DOUBLE, lambda x, n: _trunc_double(float(x), n)
    return None


# -- GEO_DISTANCE -------------------------------------------------------------------------------

_EARTH_RADIUS = {
    **dict.fromkeys(("mi", "mile", "miles"), 3959.0),
    **dict.fromkeys(("km", "kilometer", "kilometers", "kilometre", "kilometres"), 6371.0),
}


def _geo_distance(
    lat1: Any, lon1: Any, lat2: Any, lon2: Any, units: str | None = None
) -> float | None:
    """The great-circle (haversine) distance between two points, in km or miles."""
    if None in (lat1, lon1, lat2, lon2):
        return None
    lat1, lon1, lat2, lon2 = float(lat1), float(lon1), float(lat2), float(lon2)
    if not all(-90 <= lat <= 90 for lat in (lat1, lat2)):
        raise EvalFailure(
            "valid latitude values for GeoDistance function are in the range of -90 to 90"
        )
    if not all(-180 <= lon <= 180 for lon in (lon1, lon2)):
        raise EvalFailure(
            "valid longitude values for GeoDistance function are in the range of -180 to +180"
        )
    unit = (units or "").strip().lower()
    radius = _EARTH_RADIUS.get(unit or "km")
    if radius is None:
        raise EvalFailure(
            "GeoDistance function units parameter must be one of mi, mile, miles, km, "
            "kilometer, kilometers, kilometre, or kilometres"
        )

    def haversin(angle: float) -> float:
        return math.sin(angle / 2) ** 2

    def radians(degrees: float) -> float:  # as ksqlDB's expected values were computed (Java 8)
        return degrees / 180.0 * math.pi

    a = haversin(radians(lat2 - lat1)) + haversin(radians(lon2 - lon1)) * math.cos(
        radians(lat1)
    ) * math.cos(radians(lat2))
    return 2 * math.asin(math.sqrt(a)) * radius


def _geo_resolver(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    coordinates = fixed((DOUBLE,) * 4, DOUBLE, _geo_distance)(args[:4])
    if coordinates is None or len(args) not in (4, 5):
        return None
    if len(args) == 5 and args[4] not in (STRING, NULL):
        return None
    return DOUBLE, _geo_distance


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


def _abs(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    if len(args) != 1 or not is_numeric(args[0]):
        return None
    t = args[0]
    return t, (lambda x: wrap_int(abs(x), t)) if t in INTEGRAL else abs


FUNCTIONS: dict[str, Resolver] = {
    "ABS": _abs,
    "ROUND": _round,
    "FLOOR": _floor_ceil("floor"),
    "CEIL": _floor_ceil("ceil"),
    "SQRT": fixed((DOUBLE,), DOUBLE, lambda x: math.sqrt(x) if x >= 0 else math.nan),
    "SIGN": fixed((DOUBLE,), INTEGER, lambda x: (x > 0) - (x < 0)),
    **{name: fixed((DOUBLE,), DOUBLE, _java(f)) for name, f in _UNARY.items()},
    "LOG": overloads(fixed((DOUBLE,), DOUBLE, _java(_ln)), fixed((DOUBLE, DOUBLE), DOUBLE, _log)),
    "POWER": fixed((DOUBLE, DOUBLE), DOUBLE, _power),
    "ATAN2": fixed((DOUBLE, DOUBLE), DOUBLE, lambda y, x: math.atan2(float(y), float(x))),
    "PI": fixed((), DOUBLE, lambda: math.pi),
    "RANDOM": fixed((), DOUBLE, lambda: random.random()),  # volatile: never folded
    "TRUNC": _trunc,
    "GEO_DISTANCE": _geo_resolver,
}

NULL_TOLERANT = frozenset({"GEO_DISTANCE"})
