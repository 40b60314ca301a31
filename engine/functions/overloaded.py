"""Built-in functions that ksqlDB declares as overloads, resolved as its ``UdfIndex`` resolves
them (GREATEST, LEAST). Pure (no I/O).

A call picks the overload that takes its argument types exactly, else the one that takes them
through implicit casts (numbers widen; a STRING is read as the TIME, DATE, TIMESTAMP or BYTES the
overload wants); two overloads that fit equally well make the call ambiguous, an error in
ksqlDB's words. The function's name in messages is the one ksqlDB registers (``greatest``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from headwater.engine.functions.casts import cast_value
from headwater.engine.functions.signatures import Impl, Resolver
from headwater.engine.functions.types import (
    BIGINT,
    BYTES,
    DATE,
    DOUBLE,
    INTEGER,
    NULL,
    STRING,
    TIME,
    TIMESTAMP,
    common_type,
)
from headwater.engine.functions.user import ANY_DECIMAL, Declaration, Overload, Param
from headwater.engine.functions.user_index import IMPLICIT_CASTS, UserFunction, resolve
from headwater.sqlparse_ext.sqltypes import DecimalType, SqlType

#: The types GREATEST and LEAST are declared for, in ksqlDB's declaration order.
_COMPARABLE: tuple[SqlType, ...] = (
    INTEGER,
    BIGINT,
    DOUBLE,
    STRING,
    BYTES,
    DATE,
    TIME,
    TIMESTAMP,
    ANY_DECIMAL,
)


def _order_key(t: SqlType) -> Callable[[Any], Any]:
    """How Java's ``compareTo`` of the type orders values."""
    if t == DOUBLE:  # Double.compareTo: NaN above every number
        return lambda x: (math.isnan(x), x)
    if t == BYTES:  # ByteBuffer.compareTo: signed bytes
        return lambda b: tuple(v - 256 if v > 127 else v for v in b)
    return lambda x: x


def _decimal_result(args: Sequence[SqlType]) -> SqlType:
    """ksqlDB's ``greatestDecimalProvider``: the arguments' decimal types widened together."""
    found = common_type([a for a in args if a != NULL])
    return found if isinstance(found, DecimalType) else DecimalType(10, 0)


def _extreme(name: str, pick: Callable[..., Any]) -> Resolver:
    function = UserFunction(
        "SCALAR",
        name,
        tuple(
            Declaration(
                "SCALAR",
                name,
                Overload(
                    None,
                    (Param("val", t), Param("vals", t, variadic=True)),
                    _decimal_result if t == ANY_DECIMAL else t,
                ),
            )
            for t in _COMPARABLE
        ),
    )

    def resolver(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
        overload, result = resolve(function, args, IMPLICIT_CASTS)
        param = overload.params[0].type
        converters = [
            None
            if a == NULL or a == param or (param == ANY_DECIMAL and isinstance(a, DecimalType))
            else (lambda value, a=a: cast_value(value, a, result))
            for a in args
        ]
        key = _order_key(result)

        def impl(*values: Any) -> Any:
            present = [
                v if convert is None else convert(v)
                for v, convert in zip(values, converters, strict=True)
                if v is not None
            ]
            return pick(present, key=key) if present else None

        return result, impl

    return resolver


FUNCTIONS: dict[str, Resolver] = {
    # NULLs are ignored; all NULL gives NULL
    "GREATEST": _extreme("greatest", max),
    "LEAST": _extreme("least", min),
}
NULL_TOLERANT = frozenset(FUNCTIONS)
