"""What SHOW FUNCTIONS and DESCRIBE FUNCTION tell: every function the engine computes, its kind
(SCALAR, AGGREGATE), its category (the family it belongs to, as ksqlDB groups them) and, where the
function table declares them, its parameter and result types. Pure (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass

from headwater.engine.functions import (
    arrays,
    conditional,
    json_text,
    lambdas,
    numeric,
    registry,
    strings,
    temporal,
)
from headwater.engine.functions.aggregates import AGGREGATE_NAMES

_CATEGORIES = (
    (arrays.FUNCTIONS, "ARRAY"),
    (json_text.FUNCTIONS, "JSON"),
    (numeric.FUNCTIONS, "MATHEMATICAL"),
    (strings.FUNCTIONS, "STRING"),
    (temporal.FUNCTIONS, "DATE / TIME"),
    (conditional.FUNCTIONS, "CONDITIONAL"),
)
_OTHER = frozenset({"AS_VALUE"})  # a conditional module's function that ksqlDB files under OTHER


@dataclass(frozen=True, slots=True)
class FunctionInfo:
    """One function: ``signatures`` are (parameter types, result type) texts, empty when the
    function's types depend on its arguments (generic)."""

    name: str
    kind: str
    category: str
    signatures: tuple[tuple[tuple[str, ...], str], ...] = ()


def _category(name: str) -> str:
    if name in _OTHER:
        return "OTHER"
    for table, category in _CATEGORIES:
        if name in table:
            return category
    return "OTHER"


def all_functions() -> list[FunctionInfo]:
    """Every function, by name."""
    found = {
        name: describe_function(name)
        for name in (*registry.FUNCTIONS, *lambdas.LAMBDA_FUNCTIONS, *AGGREGATE_NAMES)
    }
    return [found[name] for name in sorted(found) if found[name] is not None]  # type: ignore[misc]


def describe_function(name: str) -> FunctionInfo | None:
    """The function called ``name`` (any case), or None."""
    upper = name.upper()
    if upper in AGGREGATE_NAMES:
        return FunctionInfo(upper, "AGGREGATE", "AGGREGATE")
    if upper in lambdas.LAMBDA_FUNCTIONS:
        return FunctionInfo(upper, "SCALAR", "LAMBDA")
    resolver = registry.FUNCTIONS.get(upper)
    if resolver is None:
        return None
    signatures = tuple(
        (tuple(str(p) for p in params), str(result))
        for params, result in getattr(resolver, "signatures", ())
    )
    return FunctionInfo(upper, "SCALAR", _category(upper), signatures)
