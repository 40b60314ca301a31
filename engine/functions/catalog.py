"""What SHOW FUNCTIONS and DESCRIBE FUNCTION tell: every function the engine computes, its kind
(SCALAR, AGGREGATE, TABLE), its category (the family it belongs to, as ksqlDB groups them) and,
where the function table declares them, its parameter and result types. The Python functions of
the extension folder are listed with their module (``path``), their metadata and every overload.
Pure (no I/O)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from headwater.engine.functions import (
    arrays,
    conditional,
    json_text,
    lambdas,
    numeric,
    overloaded,
    registry,
    strings,
    temporal,
    user_index,
)
from headwater.engine.functions.aggregates import AGGREGATE_NAMES

_CATEGORIES = (
    (arrays.FUNCTIONS, "ARRAY"),
    (json_text.FUNCTIONS, "JSON"),
    (numeric.FUNCTIONS, "MATHEMATICAL"),
    (overloaded.FUNCTIONS, "MATHEMATICAL"),
    (strings.FUNCTIONS, "STRING"),
    (temporal.FUNCTIONS, "DATE / TIME"),
    (conditional.FUNCTIONS, "CONDITIONAL"),
)
_OTHER = frozenset({"AS_VALUE"})  # a conditional module's function that ksqlDB files under OTHER


@dataclass(frozen=True, slots=True)
class Variant:
    """One overload of a Python function: its parameters (name, type text, variadic), result
    type text and description."""

    params: tuple[tuple[str, str, bool], ...]
    returns: str
    description: str = ""


@dataclass(frozen=True, slots=True)
class FunctionInfo:
    """One function: ``signatures`` are (parameter types, result type) texts, empty when the
    function's types depend on its arguments (generic). A Python function also has ``variants``
    (its overloads, named parameters), its metadata and ``path``, the module that declares it
    (``internal`` for the engine's own)."""

    name: str
    kind: str
    category: str
    signatures: tuple[tuple[tuple[str, ...], str], ...] = ()
    variants: tuple[Variant, ...] = ()
    description: str = ""
    author: str = ""
    version: str = ""
    path: str = "internal"


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
        for name in (
            *registry.FUNCTIONS,
            *lambdas.LAMBDA_FUNCTIONS,
            *AGGREGATE_NAMES,
            *user_index.installed(),
        )
    }
    return [found[name] for name in sorted(found) if found[name] is not None]  # type: ignore[misc]


def describe_function(name: str) -> FunctionInfo | None:
    """The function called ``name`` (any case), or None."""
    upper = name.upper()
    user = user_index.lookup(upper)
    if user is not None:
        return _user_info(user)
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


def _user_info(function: user_index.UserFunction) -> FunctionInfo:
    first = function.declarations[0]
    variants = tuple(
        Variant(
            tuple((p.name, p.type.sql(), p.variadic) for p in d.overload.all_params),
            d.overload.returns_text(),
            d.overload.description,
        )
        for d in function.declarations
    )
    return FunctionInfo(
        function.name,
        function.kind,
        next((d.category for d in function.declarations if d.category), "OTHER"),
        tuple((tuple(p[1] for p in v.params), v.returns) for v in variants),
        variants,
        function.description,
        first.author,
        first.version,
        ", ".join(dict.fromkeys(d.module for d in function.declarations)),
    )


def called_functions(node: Any) -> Iterator[str]:
    """The names (upper case) of the function-table calls in a parsed statement or any part of
    it (its dataclasses, lists and sqlglot expressions)."""
    if isinstance(node, exp.Expr):
        for call in node.find_all(exp.Anonymous):
            yield call.name.upper()
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for field in dataclasses.fields(node):
            yield from called_functions(getattr(node, field.name))
    elif isinstance(node, (list, tuple)):
        for item in node:
            yield from called_functions(item)


def unknown_names(names: Iterable[str]) -> list[str]:
    """Of function names (upper case, as `called_functions` gives them), those this process has
    neither built in nor loaded from its extension folder (a query planned on a server that had
    them)."""

    def known(name: str) -> bool:
        return (
            name in registry.FUNCTIONS
            or name in lambdas.LAMBDA_FUNCTIONS
            or name in AGGREGATE_NAMES
            or name in ("EXPLODE", "CUBE_EXPLODE")
            or user_index.lookup(name) is not None
        )

    return sorted({name for name in names if not known(name)})
