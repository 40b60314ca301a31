"""ARRAY and MAP functions of the function table (ARRAY_SORT, SLICE, MAP_UNION, ...). Pure (no I/O).

Registered into `registry.FUNCTIONS`. Generic functions take the element type from their
arguments, as ksqlDB binds a Java type variable; NULL elements count as values (ARRAY_DISTINCT keeps
one NULL, ARRAY_REMOVE can remove them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from headwater.engine.functions.casts import to_string
from headwater.engine.functions.signatures import Impl, Resolver, fixed, overloads
from headwater.engine.functions.types import (
    BIGINT,
    BOOLEAN,
    DOUBLE,
    INTEGER,
    NULL,
    STRING,
    EvalFailure,
    common_type,
    is_numeric,
)
from headwater.sqlparse_ext.sqltypes import ArrayType, MapType, SqlType, StructField, StructType

_COMPOSITE = (ArrayType, MapType, StructType)


def _distinct(items: Sequence[Any]) -> list[Any]:
    """The items without repeats, in first-seen order (lists and dicts do not hash)."""
    seen: list[Any] = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


def _one_array_type(args: Sequence[SqlType]) -> ArrayType | None:
    """The common ARRAY type of arguments that are all ARRAYs or NULL (not all NULL)."""
    elements = []
    for t in args:
        if isinstance(t, ArrayType):
            elements.append(t.element)
        elif t != NULL:
            return None
    element = common_type(elements) if elements else None
    return None if element is None else ArrayType(element)


def _set_op(impl: Impl) -> Resolver:
    def resolve(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
        t = _one_array_type(args) if len(args) == 2 else None
        return None if t is None else (t, impl)

    return resolve


def _concat(left: list[Any] | None, right: list[Any] | None) -> list[Any] | None:
    if left is None and right is None:
        return None
    return [*(left or ()), *(right or ())]


def _element_and_value(impl: Impl, result: SqlType | None = None) -> Resolver:
    """An ARRAY and a value of its element type (ARRAY_CONTAINS, ARRAY_REMOVE)."""

    def resolve(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
        if len(args) != 2 or not isinstance(args[0], ArrayType):
            return None
        element, value = args[0].element, args[1]
        if value not in (element, NULL) and not (is_numeric(element) and is_numeric(value)):
            return None
        return (args[0] if result is None else result), impl

    return resolve


def _comparable_array(impl: Impl, result: str = "element") -> Resolver:
    """One ARRAY of comparable (not composite) elements, plus optional STRING arguments."""

    def resolve(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
        if not args or not isinstance(args[0], ArrayType):
            return None
        if isinstance(args[0].element, _COMPOSITE):
            return None
        if any(a not in (STRING, NULL) for a in args[1:]):
            return None
        return (args[0].element if result == "element" else args[0]), impl

    return resolve


def _array_max(items: list[Any]) -> Any:
    return max((x for x in items if x is not None), default=None)


def _array_min(items: list[Any]) -> Any:
    return min((x for x in items if x is not None), default=None)


def _array_sort(items: list[Any], direction: str = "ASC") -> list[Any] | None:
    order = direction.upper()
    if order not in ("ASC", "ASCENDING", "DESC", "DESCENDING"):
        return None
    values = sorted((x for x in items if x is not None), reverse=order.startswith("DESC"))
    return values + [None] * (len(items) - len(values))


def _array_join(element: SqlType) -> Impl:
    def join(items: list[Any] | None, delimiter: str | None = ",") -> str | None:
        if items is None:
            return None
        return (delimiter or "").join("null" if x is None else to_string(x, element) for x in items)

    return join


def _join_resolver(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    if len(args) not in (1, 2) or not isinstance(args[0], ArrayType):
        return None
    if isinstance(args[0].element, _COMPOSITE) or any(a not in (STRING, NULL) for a in args[1:]):
        return None
    return STRING, _array_join(args[0].element)


def _slice(items: list[Any] | None, start: int | None, end: int | None) -> list[Any] | None:
    """Elements ``start`` to ``end`` (1-based, inclusive); NULL when out of range (Java's
    ``subList``)."""
    if items is None:
        return None
    first = 0 if start is None else start - 1
    last = len(items) if end is None else end
    if first < 0 or last > len(items) or first > last:
        return None
    return items[first:last]


def _slice_resolver(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    if len(args) != 3 or not isinstance(args[0], ArrayType):
        return None
    if any(a not in (INTEGER, NULL) for a in args[1:]):
        return None
    return args[0], _slice


def _entries(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    if len(args) != 2 or not isinstance(args[0], MapType) or args[1] not in (BOOLEAN, NULL):
        return None
    key, value = args[0].key, args[0].value
    if key != STRING or value not in (INTEGER, BIGINT, DOUBLE, BOOLEAN, STRING):
        return None

    def entries(mapping: dict[str, Any], sort: bool) -> list[dict[str, Any]]:
        pairs = sorted(mapping.items(), key=lambda kv: kv[0]) if sort else mapping.items()
        return [{"K": k, "V": v} for k, v in pairs]

    fields = (StructField("K", STRING), StructField("V", value))
    return ArrayType(StructType(fields)), entries


def _as_map(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    if len(args) != 2 or args[0] != ArrayType(STRING) or not isinstance(args[1], ArrayType):
        return None

    def as_map(keys: list[str], values: list[Any]) -> dict[str, Any]:
        return {k: values[i] if i < len(values) else None for i, k in enumerate(keys)}

    return MapType(STRING, args[1].element), as_map


def _string_keyed_map(arg: SqlType) -> MapType | None:
    return arg if isinstance(arg, MapType) and arg.key == STRING else None


def _map_union(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    if len(args) != 2:
        return None
    types = {a for a in args if a != NULL}
    t = _string_keyed_map(types.pop()) if len(types) == 1 else None
    if t is None:
        return None

    def union(first: dict[str, Any] | None, second: dict[str, Any] | None) -> Any:
        if first is None and second is None:
            return None
        return {**(first or {}), **(second or {})}

    return t, union


def _map_part(part: str) -> Resolver:
    def resolve(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
        t = _string_keyed_map(args[0]) if len(args) == 1 else None
        if t is None:
            return None
        if part == "keys":
            return ArrayType(STRING), lambda m: list(m)
        return ArrayType(t.value), lambda m: list(m.values())

    return resolve


MAX_SERIES = 1_000_000
"""The most values GENERATE_SERIES gives (a record may not make a query hold gigabytes)."""


def _series(start: int, end: int, step: int | None = None) -> list[int]:
    """ksqlDB's GENERATE_SERIES: ``start`` to ``end`` inclusive by ``step`` (default 1 or -1)."""
    diff = end - start
    if step is None:
        step = 1 if diff > 0 else -1
    if step == 0:
        raise EvalFailure("GENERATE_SERIES step cannot be zero")
    if diff > 0 and step < 0 or diff < 0 and step > 0:
        raise EvalFailure("GENERATE_SERIES step has wrong sign")
    size = 1 + abs(diff) // abs(step)  # Java's division truncates toward zero
    if size > MAX_SERIES:
        raise EvalFailure(f"GENERATE_SERIES would give {size} values (at most {MAX_SERIES})")
    return [start + i * step for i in range(size)]


FUNCTIONS: dict[str, Resolver] = {
    "GENERATE_SERIES": overloads(
        fixed((INTEGER, INTEGER), ArrayType(INTEGER), _series),
        fixed((INTEGER, INTEGER, INTEGER), ArrayType(INTEGER), _series),
        fixed((BIGINT, BIGINT), ArrayType(BIGINT), _series),
        fixed((BIGINT, BIGINT, INTEGER), ArrayType(BIGINT), _series),
    ),
    "ARRAY_LENGTH": lambda args: (
        (INTEGER, len) if len(args) == 1 and isinstance(args[0], ArrayType) else None
    ),
    "ARRAY_CONCAT": _set_op(_concat),
    "ARRAY_DISTINCT": lambda args: (
        (args[0], _distinct) if len(args) == 1 and isinstance(args[0], ArrayType) else None
    ),
    "ARRAY_EXCEPT": _set_op(lambda a, b: [x for x in _distinct(a) if x not in b]),
    "ARRAY_INTERSECT": _set_op(lambda a, b: [x for x in _distinct(a) if x in b]),
    "ARRAY_UNION": _set_op(lambda a, b: _distinct([*a, *b])),
    "ARRAY_CONTAINS": _element_and_value(
        lambda items, value: items is not None and value in items, BOOLEAN
    ),
    "ARRAY_REMOVE": _element_and_value(
        lambda items, value: None if items is None else [x for x in items if x != value]
    ),
    "ARRAY_MAX": _comparable_array(_array_max),
    "ARRAY_MIN": _comparable_array(_array_min),
    "ARRAY_SORT": _comparable_array(_array_sort, result="array"),
    "ARRAY_JOIN": _join_resolver,
    "SLICE": _slice_resolver,
    "ENTRIES": _entries,
    "AS_MAP": _as_map,
    "MAP_KEYS": _map_part("keys"),
    "MAP_VALUES": _map_part("values"),
    "MAP_UNION": _map_union,
}

NULL_TOLERANT = frozenset(
    {
        "ARRAY_CONCAT",
        "ARRAY_CONTAINS",
        "ARRAY_REMOVE",
        "ARRAY_JOIN",
        "SLICE",
        "MAP_UNION",
    }
)
