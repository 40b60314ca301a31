"""TRANSFORM, REDUCE and FILTER: the functions that take lambdas (``x => x + 1``). Pure (no I/O).

Typed as ksqlDB binds their generic Java signatures (``REDUCE(ARRAY<T>, S, LAMBDA (S, T) => S)``):
the collection and the initial state bind the generics, which give the lambda parameters their
types; each lambda's body type then binds (or must equal) its result. Run as ksqlDB's UDFs run on
Java collections: a NULL collection gives NULL (REDUCE: the initial state), a NULL predicate result,
a NULL map value or a repeated map key fails the whole call (Java's NullPointerException and
``Collectors.toMap``), and REDUCE walks a map in `java_map_order`. The compiler (`_compiler.py`)
compiles the lambda bodies and turns `LambdaAbort` into NULL.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from headwater.engine.errors import ExpressionError
from headwater.engine.functions.signatures import Impl
from headwater.engine.functions.types import BIGINT, BOOLEAN, INTEGER, NULL, STRING
from headwater.sqlparse_ext.sqltypes import ArrayType, MapType, SqlType


class LambdaAbort(Exception):
    """A Java exception inside a lambda call (NULL unboxed, division by zero): the call is NULL."""


@dataclass(frozen=True, slots=True)
class Generic(SqlType):
    """A type variable of a signature (``T``)."""

    name: str

    def sql(self) -> str:
        """The variable's name."""
        return self.name


@dataclass(frozen=True, slots=True)
class LambdaParam:
    """A lambda parameter of a signature: ``LAMBDA (S, T) => S``."""

    inputs: tuple[Generic, ...]
    result: SqlType

    def __str__(self) -> str:
        return f"LAMBDA ({', '.join(str(i) for i in self.inputs)}) => {self.result}"


@dataclass(frozen=True, slots=True)
class Signature:
    """One overload: its parameters, its result type (with generics) and its implementation for
    the bound generics, which takes the argument values with each lambda as a Python function."""

    params: tuple[SqlType | LambdaParam, ...]
    result: SqlType
    impl: Callable[[Mapping[Generic, SqlType]], Impl]


LambdaTyper = Callable[[int, tuple[SqlType, ...]], SqlType]
"""(argument position, parameter types) -> the type of that lambda's body (compiling it)."""


def _match(param: SqlType, arg: SqlType, bound: dict[Generic, SqlType]) -> bool:
    """Whether ``arg`` fits ``param``, binding its generics into ``bound``."""
    if isinstance(param, Generic):
        return arg != NULL and bound.setdefault(param, arg) == arg
    if isinstance(param, ArrayType):
        return isinstance(arg, ArrayType) and _match(param.element, arg.element, bound)
    if isinstance(param, MapType):
        return (
            isinstance(arg, MapType)
            and _match(param.key, arg.key, bound)
            and _match(param.value, arg.value, bound)
        )
    return param == arg


def _substitute(t: SqlType, bound: Mapping[Generic, SqlType]) -> SqlType:
    if isinstance(t, Generic):
        return bound[t]
    if isinstance(t, ArrayType):
        return ArrayType(_substitute(t.element, bound))
    if isinstance(t, MapType):
        return MapType(_substitute(t.key, bound), _substitute(t.value, bound))
    return t


def _shown(bound: Mapping[Generic, SqlType]) -> str:
    return "{" + ", ".join(f"{g}={t}" for g, t in bound.items()) + "}"


def bind(
    name: str, shown_name: str, args: Sequence[SqlType | int], lambda_type: LambdaTyper
) -> tuple[SqlType, Impl]:
    """The result type and implementation of a call of a lambda function.

    Args:
        name: the function's name, upper-cased (a key of `LAMBDA_FUNCTIONS`).
        shown_name: the name as written, for messages.
        args: the argument types, with a lambda given as its number of parameters.
        lambda_type: compiles the lambda at a position, given its parameter types.

    Raises:
        ExpressionError: In ksqlDB's words, when no overload takes the arguments or a lambda's
            body has the wrong type.
    """
    for signature in LAMBDA_FUNCTIONS[name]:
        bound: dict[Generic, SqlType] = {}
        if len(signature.params) == len(args) and all(
            isinstance(a, int)
            and isinstance(p, LambdaParam)
            and len(p.inputs) == a
            or isinstance(a, SqlType)
            and not isinstance(p, LambdaParam)
            and _match(p, a, bound)
            for p, a in zip(signature.params, args, strict=True)
        ):
            break
    else:
        shown = ", ".join("LAMBDA" if isinstance(a, int) else str(a) for a in args)
        raise ExpressionError(f"Function '{shown_name}' does not accept parameters ({shown}).")
    for position, param in enumerate(signature.params):
        if not isinstance(param, LambdaParam):
            continue
        missing = next((g for g in param.inputs if g not in bound), None)
        if missing is not None:
            raise ExpressionError(
                f"Could not resolve type for generic {missing}. "
                f"The generic mapping so far: {_shown(bound)}"
            )
        inputs = tuple(bound[g] for g in param.inputs)
        body = lambda_type(position, inputs)
        instance = f"LAMBDA ({', '.join(str(t) for t in inputs)}) => {body}"
        result = param.result
        if body == NULL or not isinstance(result, Generic) and body != result:
            raise ExpressionError(
                f"Cannot infer generics for {param} from {instance} because "
                "they do not have the same schema structure."
            )
        if isinstance(result, Generic) and bound.setdefault(result, body) != body:
            raise ExpressionError(
                f"Found invalid instance of generic schema when mapping {param} to {instance}. "
                f"Cannot map {result} to both {bound[result]} and {body}"
            )
    return _substitute(signature.result, bound), signature.impl(bound)


_T, _R, _S, _K, _V = (Generic(n) for n in "TRSKV")


# -- the implementations (lambdas arrive as Python functions) ------------------------------------


def _java_hash(value: Any, t: SqlType) -> int | None:
    """Java's ``hashCode`` of a map key (None for key types not modelled)."""
    if t == STRING:
        h = 0
        data = value.encode("utf-16-le")
        for i in range(0, len(data), 2):
            h = (31 * h + int.from_bytes(data[i : i + 2], "little")) & 0xFFFFFFFF
        return h
    if t == INTEGER:
        masked: int = value & 0xFFFFFFFF
        return masked
    if t == BIGINT:
        bits: int = value & 0xFFFFFFFFFFFFFFFF
        return (bits ^ (bits >> 32)) & 0xFFFFFFFF
    if t == BOOLEAN:
        return 1231 if value else 1237
    return None


def java_map_order(entries: Mapping[Any, Any], key_type: SqlType) -> list[tuple[Any, Any]]:
    """The entries in the order Java iterates a ``HashMap`` sized for them and filled in this order
    (as ksqlDB's deserializers build maps): by bucket, then insertion order within a bucket."""
    size = len(entries)
    capacity = 1
    while capacity < size or size > capacity * 3 // 4:
        capacity *= 2
    items = list(entries.items())
    hashes = [_java_hash(k, key_type) if k is not None else 0 for k, _ in items]
    if any(h is None for h in hashes):
        return items
    buckets = [(h ^ (h >> 16)) & (capacity - 1) for h in hashes if h is not None]
    order = sorted(range(size), key=buckets.__getitem__)
    return [items[i] for i in order]


def _to_map(pairs: Sequence[tuple[Any, Any]]) -> dict[Any, Any]:
    """``Collectors.toMap``: NULL values and repeated keys fail."""
    result: dict[Any, Any] = {}
    for key, value in pairs:
        if value is None:
            raise LambdaAbort("NULL value in a map built by a lambda")
        if key in result:
            raise LambdaAbort(f"Duplicate key {key}")
        result[key] = value
    return result


def _kept(verdict: Any) -> bool:
    if verdict is None:
        raise LambdaAbort("NULL result of a FILTER lambda")
    return bool(verdict)


def _transform_array(items: list[Any] | None, f: Callable[[Any], Any]) -> list[Any] | None:
    return None if items is None else [f(x) for x in items]


def _transform_map(
    entries: dict[Any, Any] | None, key: Callable[[Any, Any], Any], value: Callable[[Any, Any], Any]
) -> dict[Any, Any] | None:
    if entries is None:
        return None
    return _to_map([(key(k, v), value(k, v)) for k, v in entries.items()])


def _filter_array(items: list[Any] | None, f: Callable[[Any], Any]) -> list[Any] | None:
    return None if items is None else [x for x in items if _kept(f(x))]


def _filter_map(
    entries: dict[Any, Any] | None, f: Callable[[Any, Any], Any]
) -> dict[Any, Any] | None:
    if entries is None:
        return None
    return _to_map([(k, v) for k, v in entries.items() if _kept(f(k, v))])


def _reduce_array(items: list[Any] | None, state: Any, f: Callable[[Any, Any], Any]) -> Any:
    if state is None or items is None:
        return state
    for x in items:
        state = f(state, x)
    return state


def _reduce_map(bound: Mapping[Generic, SqlType]) -> Impl:
    key_type = bound[_K]

    def reduce(
        entries: dict[Any, Any] | None, state: Any, f: Callable[[Any, Any, Any], Any]
    ) -> Any:
        if state is None or entries is None:
            return state
        for k, v in java_map_order(entries, key_type):
            state = f(state, k, v)
        return state

    return reduce


def _always(impl: Impl) -> Callable[[Mapping[Generic, SqlType]], Impl]:
    return lambda bound: impl


LAMBDA_FUNCTIONS: dict[str, tuple[Signature, ...]] = {
    "TRANSFORM": (
        Signature(
            (ArrayType(_T), LambdaParam((_T,), _R)), ArrayType(_R), _always(_transform_array)
        ),
        Signature(
            (MapType(_K, _V), LambdaParam((_K, _V), _R), LambdaParam((_K, _V), _T)),
            MapType(_R, _T),
            _always(_transform_map),
        ),
    ),
    "REDUCE": (
        Signature((ArrayType(_T), _S, LambdaParam((_S, _T), _S)), _S, _always(_reduce_array)),
        Signature((MapType(_K, _V), _S, LambdaParam((_S, _K, _V), _S)), _S, _reduce_map),
    ),
    "FILTER": (
        Signature(
            (ArrayType(_T), LambdaParam((_T,), BOOLEAN)), ArrayType(_T), _always(_filter_array)
        ),
        Signature(
            (MapType(_K, _V), LambdaParam((_K, _V), BOOLEAN)), MapType(_K, _V), _always(_filter_map)
        ),
    ),
}
"""Name -> overloads, tried in order."""
