"""How a function declares the argument types it takes: resolvers and their builders. Pure.

A function of the registry is a `Resolver`: argument types -> (result type, implementation), or
None when it does not take them. Most are built here: `fixed` parameter types (DESCRIBE FUNCTION
shows them), `overloads` tried in order, and `same_type_variadic` arguments of one common type.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from headwater.engine.functions.types import (
    BIGINT,
    DOUBLE,
    NULL,
    common_type,
    is_numeric,
    numeric_rank,
)
from headwater.sqlparse_ext.sqltypes import SqlType

Impl = Callable[..., Any]
Resolver = Callable[[Sequence[SqlType]], "tuple[SqlType, Impl] | None"]
"""Argument types -> (result type, implementation), or None when the types are not accepted."""


def fixed(params: Sequence[SqlType], result: SqlType, impl: Impl) -> Resolver:
    """A function with fixed parameter types; INTEGER arguments widen to BIGINT/DOUBLE params."""

    def resolve(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
        if len(args) != len(params):
            return None
        for arg, param in zip(args, params, strict=True):
            if arg not in (param, NULL) and not (
                is_numeric(arg)
                and param in (BIGINT, DOUBLE)
                and numeric_rank(arg) <= numeric_rank(param)
            ):
                return None
        return result, impl

    resolve.signatures = ((tuple(params), result),)  # type: ignore[attr-defined]  # DESCRIBE FUNCTION
    return resolve


def overloads(*resolvers: Resolver) -> Resolver:
    def resolve(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
        return next((r for r in (f(args) for f in resolvers) if r is not None), None)

    resolve.signatures = tuple(  # type: ignore[attr-defined]
        s for r in resolvers for s in getattr(r, "signatures", ())
    )
    return resolve


def same_type_variadic(minimum: int, impl: Impl, maximum: int | None = None) -> Resolver:
    def resolve(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
        if len(args) < minimum or maximum is not None and len(args) > maximum:
            return None
        t = common_type(args)
        return None if t is None or t == NULL else (t, impl)

    return resolve
