"""Key access of a pull query: which keys or key range its WHERE clause needs. Pure (no I/O).

Owns the extraction of a key access path from a WHERE tree: exact keys (``k = 1``,
``k IN (1, 2)``, every column of a multi-column key bound by ``=``/``IN`` combined as their
cartesian product, and ORs of such), a key range (``k > a AND k <= b``, ``BETWEEN``) on a
single-column key or on the column after a prefix of ``=``-bound leading columns, else a scan. The
extraction is conservative: the planner re-applies the whole WHERE to every row read, so a wider
access is never wrong. Whether a query may be answered at all is ksqlDB's rules' business
(``where_rules``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from headwater.engine.errors import PullQueryError
from headwater.engine.expressions import Scope, compile_expression, format_expression
from headwater.engine.functions.types import BIGINT, DOUBLE, INTEGER, INTEGRAL, STRING, wrap_int
from headwater.engine.pull.where_rules import KeyOperand
from headwater.sqlparse_ext.sqltypes import DecimalType, SqlType, identifier_name

MAX_KEYS = 10_000
"""Most exact keys a WHERE may expand to (cartesian products of IN lists) before it scans."""


@dataclass(frozen=True, slots=True)
class KeyLookup:
    """Read these keys (value tuples in key-column order), in this order; none may hold NULL."""

    keys: tuple[tuple[Any, ...], ...]


@dataclass(frozen=True, slots=True)
class KeyRange:
    """Read the keys between two bounds, in key order.

    A bound is a tuple of values for the leading key columns (a prefix of the key, or the whole
    key); a key is compared with a bound on the bound's columns only, so ``high=("a",)`` inclusive
    takes every key whose first column is ``"a"``. None means unbounded.
    """

    low: tuple[Any, ...] | None
    high: tuple[Any, ...] | None
    low_inclusive: bool = True
    high_inclusive: bool = True


@dataclass(frozen=True, slots=True)
class TableScan:
    """Read every row of every partition."""


KeyAccess = KeyLookup | KeyRange | TableScan


@dataclass(slots=True)
class _Bounds:
    """What one conjunction says about one key column."""

    values: list[Any] | None = None
    low: tuple[Any, bool] | None = None
    high: tuple[Any, bool] | None = None

    def merged(self, other: _Bounds) -> _Bounds:
        values = (
            self.values
            if other.values is None
            else other.values
            if self.values is None
            else [v for v in self.values if v in other.values]
        )
        return _Bounds(
            values, _tighter(self.low, other.low, max), _tighter(self.high, other.high, min)
        )

    def admits(self, value: Any) -> bool:
        low_ok = self.low is None or value > self.low[0] or value == self.low[0] and self.low[1]
        return low_ok and (
            self.high is None or value < self.high[0] or value == self.high[0] and self.high[1]
        )


def _tighter(
    a: tuple[Any, bool] | None, b: tuple[Any, bool] | None, pick: Any
) -> tuple[Any, bool] | None:
    if a is None or b is None:
        return a or b
    if a[0] == b[0]:
        return (a[0], a[1] and b[1])
    return a if pick(a[0], b[0]) == a[0] else b


Conjunction = dict[str, _Bounds]
_FLIP = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ}


def _unique(items: Iterable[Any]) -> list[Any]:
    """``items`` without repeats, in order; ARRAY and STRUCT keys (lists, dicts) included."""
    seen: set[Any] = set()
    out = []
    for item in items:
        try:
            mark: Any = ("value", item, hash(item))
        except TypeError:  # a list or dict inside
            mark = ("repr", repr(item))
        if mark not in seen:
            seen.add(mark)
            out.append(item)
    return out


def key_value(value: Any, t: SqlType) -> Any:
    """A literal's value as a value of the key column type, or None when it can never be equal."""
    if value is None:
        return None
    if t in INTEGRAL:
        if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
            return None
        if isinstance(value, float) and not math.isfinite(value) or value != int(value):
            return None
        number = int(value)
        return number if wrap_int(number, t) == number else None
    if t == DOUBLE and isinstance(value, (int, Decimal)) and not isinstance(value, bool):
        return float(value)
    if (
        isinstance(t, DecimalType)
        and isinstance(value, (int, float))
        and not isinstance(value, bool)
    ):
        return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    return value


def strictly_converts(value: Any, value_type: SqlType, key_type: SqlType) -> bool:
    """Whether ``value`` (of ``value_type``) converts to ``key_type`` without loss, as ksqlDB's
    strict coercer allows: a number only to a wider number (INTEGER to BIGINT, DECIMAL or DOUBLE;
    a DECIMAL to DOUBLE, or to a DECIMAL that holds it exactly; never to INTEGER or BIGINT), no
    number to STRING. Other values are left to the comparison. Judged on the value as much as on
    the type (a cached plan's bound value may be of another kind than the type it was planned
    with)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return True
    if key_type == STRING:
        return False
    if key_type == DOUBLE:
        return True
    if key_type in INTEGRAL:
        if not isinstance(value, int):
            return False
        if key_type == INTEGER and value_type == BIGINT:
            return False
        return wrap_int(value, key_type) == value
    if isinstance(key_type, DecimalType):
        if isinstance(value, float):
            return False
        number = Decimal(value)
        try:
            scaled = number.quantize(Decimal(1).scaleb(-key_type.scale))
        except InvalidOperation:
            return False
        return scaled == number and abs(scaled) < Decimal(10) ** (
            key_type.precision - key_type.scale
        )
    return True


class TemplateMiss(Exception):
    """A cached plan met a WHERE node it did not prepare for (the caller plans afresh)."""


class KeyExtractor:
    """Finds the key access of WHERE trees for one table's key columns.

    A cached plan prepares its extractor once (:meth:`prepare`): it compiles the constants the access
    reads (bound values among them) ahead, and then reads only those, per execution.
    """

    def __init__(self, keys: Sequence[str], types: Sequence[SqlType], scope: Scope) -> None:
        self.keys = tuple(keys)
        self.types = dict(zip(keys, types, strict=True))
        self.scope = scope
        self._prepared: dict[int, Any] | None = None  # id(node) -> Compiled (or the error)

    def prepare(self, where: exp.Expr | None) -> None:
        """Compile every operand :meth:`access` may read as a constant, ahead (in a cached plan's
        building block: bound values get their slots now)."""
        prepared: dict[int, Any] = {}
        for node in () if where is None else where.walk():
            if type(node) in _FLIP:
                operands = [node.this, node.expression]
            elif isinstance(node, exp.In):
                operands = list(node.expressions)
            elif isinstance(node, exp.Between):
                operands = [node.args["low"], node.args["high"]]
            else:
                continue
            for operand in operands:
                try:
                    prepared[id(operand)] = compile_expression(operand, self.scope)
                except Exception as error:  # noqa: BLE001 - met again (and raised) by access()
                    prepared[id(operand)] = error
        self._prepared = prepared

    def access(self, where: exp.Expr | None) -> KeyAccess:
        """The narrowest access this extraction can prove covers every row the WHERE admits."""
        disjuncts = None if where is None or not self.keys else self._disjuncts(where)
        if disjuncts is None:
            return TableScan()
        accesses = [self._conjunction_access(c) for c in disjuncts]
        if all(isinstance(a, KeyLookup) for a in accesses):
            return KeyLookup(
                tuple(_unique(k for a in accesses if isinstance(a, KeyLookup) for k in a.keys))
            )
        return accesses[0] if len(accesses) == 1 else TableScan()

    def check_operands(self, operands: Iterable[KeyOperand]) -> None:
        """Refuses, as ksqlDB does, a value compared with a key column that is NULL or does not
        convert to the column's type without loss (``KeyValueExtractor.resolveKey``).

        Raises:
            PullQueryError: "Primary key columns can not be NULL: ..." or "'1.5' can not be
                converted to the type of the key column: ID BIGINT KEY".
        """
        for operand in operands:
            known, value, value_type = self._constant(operand.value)
            if not known:
                continue
            if value is None:
                raise PullQueryError(f"Primary key columns can not be NULL: {operand.text}")
            key_type = self.types[operand.column]
            if not strictly_converts(value, value_type, key_type):
                shown = "true" if value is True else "false" if value is False else value
                raise PullQueryError(
                    f"'{shown}' can not be converted to the type of the key column: "
                    f"{operand.column} {key_type} KEY"
                )

    def quick_access(self, where: exp.Expr | None) -> Callable[[], KeyAccess] | None:
        """For a prepared extractor and the commonest WHERE of a single-column key, ``K = x`` or
        ``K IN (x, y, ...)``: a function giving what :meth:`access` gives, without walking the
        tree (None for any other WHERE)."""
        if self._prepared is None or len(self.keys) != 1 or where is None:
            return None
        key = self.keys[0]
        key_type = self.types[key]
        if isinstance(where, exp.EQ):
            operand = (
                where.expression
                if self._key_of(where.this) == key
                else where.this
                if self._key_of(where.expression) == key
                else None
            )
            operands = None if operand is None else [operand]
        elif (
            isinstance(where, exp.In)
            and self._key_of(where.this) == key
            and not where.args.get("query")
            and where.expressions
        ):
            operands = list(where.expressions)
        else:
            return None
        found = [self._prepared.get(id(node)) for node in operands or ()]
        compiled = [
            c
            for c in found
            if c is not None and not isinstance(c, Exception) and (c.constant or c.bound)
        ]
        if not compiled or len(compiled) != len(found):
            return None
        if (
            isinstance(where, exp.In)
            and any(c.type == STRING for c in compiled)
            and key_type != STRING
        ):
            return None  # access() refuses it, with ksqlDB's message
        evaluators = [(c.evaluate, c.type) for c in compiled]
        if len(evaluators) > MAX_KEYS:
            return None

        def quick() -> KeyAccess:
            converted = []
            for evaluate, value_type in evaluators:
                value = evaluate({})
                if value is None or not strictly_converts(value, value_type, key_type):
                    raise TemplateMiss("a key value the planner refuses")
                converted.append(key_value(value, key_type))
            return KeyLookup(tuple((v,) for v in _unique(converted)))

        return quick

    def _key_of(self, node: exp.Expr) -> str | None:
        while isinstance(node, exp.Paren):
            node = node.this
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            name = identifier_name(node.this)
            if name in self.types:
                return name
        return None

    def _constant(self, node: exp.Expr) -> tuple[bool, Any, SqlType]:
        compiled: Any
        if self._prepared is None:
            compiled = compile_expression(node, self.scope)
        else:
            compiled = self._prepared.get(id(node))
            if compiled is None or isinstance(compiled, Exception):
                raise TemplateMiss(format_expression(node))
        known = compiled.constant or compiled.bound
        return known, compiled.evaluate({}) if known else None, compiled.type

    def _disjuncts(self, node: exp.Expr) -> list[Conjunction] | None:
        """The WHERE as an OR of per-key-column conjunctions; None: no key restriction."""
        if isinstance(node, exp.Paren):
            return self._disjuncts(node.this)
        if isinstance(node, exp.Or):
            left, right = self._disjuncts(node.this), self._disjuncts(node.expression)
            return None if left is None or right is None else left + right
        if isinstance(node, exp.And):
            left, right = self._disjuncts(node.this), self._disjuncts(node.expression)
            if left is None or right is None:
                return left or right
            if len(left) * len(right) > MAX_KEYS:
                return None
            return [_merge(a, b) for a in left for b in right]
        leaf = self._leaf(node)
        return None if leaf is None else [leaf]

    def _leaf(self, node: exp.Expr) -> Conjunction | None:
        kind = type(node)
        if kind in _FLIP:
            key, other, op = self._key_of(node.this), node.expression, kind
            if key is None:
                key, other, op = self._key_of(node.expression), node.this, _FLIP[kind]
            if key is None:
                return None
            const, value, _ = self._constant(other)
            if not const:
                return None
            return {key: self._bound(key, op, value)}
        if isinstance(node, exp.In):
            key = self._key_of(node.this)
            if key is None:
                return None
            values = []
            for item in node.expressions:
                const, value, item_type = self._constant(item)
                if not const:
                    return None
                if item_type == STRING and self.types[key] != STRING:
                    raise PullQueryError(
                        f"{format_expression(item)} can not be converted to the "
                        f"type of the key column: {key} {self.types[key]} KEY"
                    )
                values.append(key_value(value, self.types[key]))
            return {key: _Bounds(values=_unique(v for v in values if v is not None))}
        if isinstance(node, exp.Between):
            key = self._key_of(node.this)
            if key is None:
                return None
            low, high = self._constant(node.args["low"]), self._constant(node.args["high"])
            if not (low[0] and high[0]):
                return None
            return {
                key: self._bound(key, exp.GTE, low[1]).merged(self._bound(key, exp.LTE, high[1]))
            }
        return None

    def _bound(self, key: str, op: type[exp.Expr], value: Any) -> _Bounds:
        converted = key_value(value, self.types[key])
        if op is exp.EQ:
            return _Bounds(values=[] if converted is None else [converted])
        if converted is None or converted != value and self.types[key] in INTEGRAL:
            return _Bounds()  # an inexact bound: leave it to the residual filter
        inclusive = op in (exp.GTE, exp.LTE)
        if op in (exp.GT, exp.GTE):
            return _Bounds(low=(converted, inclusive))
        return _Bounds(high=(converted, inclusive))

    def _conjunction_access(self, conjunction: Conjunction) -> KeyAccess:
        bounds = [conjunction.get(k, _Bounds()) for k in self.keys]
        if all(b.values is not None for b in bounds):
            columns = [[v for v in b.values or () if b.admits(v)] for b in bounds]
            if math.prod(len(c) for c in columns) > MAX_KEYS:
                return TableScan()
            return KeyLookup(tuple(itertools.product(*columns)))
        prefix: list[Any] = []
        for b in bounds:
            if b.values is None:
                break
            if len(b.values) != 1:
                return TableScan()
            if not b.admits(b.values[0]):
                return KeyLookup(())
            prefix.append(b.values[0])
        column = bounds[len(prefix)]
        if not prefix and column.low is None and column.high is None:
            return TableScan()
        low = (
            (tuple(prefix) + (column.low[0],), column.low[1])
            if column.low
            else (tuple(prefix), True)
        )
        high = (
            (tuple(prefix) + (column.high[0],), column.high[1])
            if column.high
            else (tuple(prefix), True)
        )
        return KeyRange(low[0] or None, high[0] or None, low[1], high[1])


def _merge(a: Conjunction, b: Conjunction) -> Conjunction:
    merged = dict(a)
    for key, bounds in b.items():
        merged[key] = merged[key].merged(bounds) if key in merged else bounds
    return merged
