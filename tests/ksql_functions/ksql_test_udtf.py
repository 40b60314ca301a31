"""ksqlDB's test table function TEST_UDTF (io.confluent.ksql.function.udf.TestUdtf), ported for
the QTT runner (`conformance.qtt`): it is one of the functions ksqlDB's test runner loads from its
test jar. Not part of the product.

The seven-parameter overloads return their arguments (or their collections' first values) as
text, written as Java writes them (``true``, ``Struct{A=bar}``); the one-parameter overloads return
their argument, to test each result type.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from headwater.functions import udtf


def _java_text(value: Any) -> str:
    """``value`` as Java's ``String.valueOf`` writes it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, dict):  # a STRUCT: Connect's Struct.toString() leaves NULL fields out
        fields = ",".join(f"{k}={_java_text(v)}" for k, v in value.items() if v is not None)
        return f"Struct{{{fields}}}"
    return str(value)


def _java_double(value: float) -> str:
    """``Double.toString``: plain between 10^-3 and 10^7, else ``1.5E10``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits))
    mantissa = f"{text[0]}.{text[1:] or '0'}"
    return f"{'-' if sign else ''}{mantissa}E{exponent + len(text) - 1}"


def _texts(
    integer: Any,
    bigint: Any,
    double: Any,
    boolean: Any,
    string: str,
    decimal: Decimal,
    struct: dict[str, Any],
) -> list[str]:
    """The seven values as text; as in Java, a NULL string, decimal or struct fails the call
    (which gives no rows), the others read ``null``."""
    if string is None or decimal is None or struct is None:
        raise TypeError("a NULL string, decimal or struct argument")
    texts = [_java_text(v) for v in (integer, bigint, double, boolean)]
    return [*texts, string, str(decimal), _java_text(struct)]


def _first(values: dict[Any, Any]) -> Any:
    return next(iter(values.values()))


@udtf(
    "test_udtf",
    params=["INTEGER", None, None, None, None, None, "STRUCT<A VARCHAR>"],
    description="test",
)
def standard_params(
    integer: int,
    bigint: int,
    double: float,
    boolean: bool,
    string: str | None,
    decimal: Decimal | None,
    struct: dict | None,
) -> list[str]:
    return _texts(integer, bigint, double, boolean, string, decimal, struct)


@udtf(
    "test_udtf",
    params=["ARRAY<INTEGER>", None, None, None, None, None, "ARRAY<STRUCT<A VARCHAR>>"],
)
def parameterized_list_params(
    integers: list[int] | None,
    bigints: list[int] | None,
    doubles: list[float] | None,
    booleans: list[bool] | None,
    strings: list[str] | None,
    decimals: list[Decimal] | None,
    structs: list | None,
) -> list[str]:
    return _texts(
        integers[0], bigints[0], doubles[0], booleans[0], strings[0], decimals[0], structs[0]
    )


@udtf(
    "test_udtf",
    params=["MAP<STRING, INTEGER>", None, None, None, None, None, "MAP<STRING, STRUCT<A VARCHAR>>"],
)
def parameterized_map_params(
    integers: dict[str, int] | None,
    bigints: dict[str, int] | None,
    doubles: dict[str, float] | None,
    booleans: dict[str, bool] | None,
    strings: dict[str, str] | None,
    decimals: dict[str, Decimal] | None,
    structs: dict | None,
) -> list[str]:
    maps = (integers, bigints, doubles, booleans, strings, decimals, structs)
    return _texts(*(_first(m) for m in maps))


@udtf(
    "test_udtf",
    params=["MAP<BIGINT, INTEGER>", None, None, None, None, None, "MAP<STRING, STRUCT<A VARCHAR>>"],
)
def parameterized_map_params2(
    integers: dict[int, int] | None,
    bigints: dict[str, int] | None,
    doubles: dict[str, float] | None,
    booleans: dict[str, bool] | None,
    strings: dict[str, str] | None,
    decimals: dict[str, Decimal] | None,
    structs: dict | None,
) -> list[str]:
    maps = (integers, bigints, doubles, booleans, strings, decimals, structs)
    return _texts(*(_first(m) for m in maps))


@udtf("test_udtf", params=["INTEGER"], returns="INTEGER")
def list_integer_return(integer: int) -> list[int]:
    return [integer]


@udtf("test_udtf")
def list_long_return(bigint: int) -> list[int]:
    return [bigint]


@udtf("test_udtf")
def list_double_return(double: float) -> list[float]:
    return [double]


@udtf("test_udtf")
def list_boolean_return(boolean: bool) -> list[bool]:
    return [boolean]


@udtf("test_udtf")
def list_string_return(string: str | None) -> list[str | None]:
    return [string]


@udtf("test_udtf", returns="DECIMAL(30, 10)")
def list_big_decimal_return_with_schema_provider(decimal: Decimal | None) -> list[Decimal | None]:
    return [decimal]


@udtf("test_udtf", params=["STRUCT<A VARCHAR>"], returns="STRUCT<A VARCHAR>")
def list_struct_return(struct: dict | None) -> list[dict | None]:
    return [struct]
