"""The expression compiler: one method per kind of node, closures per row, constants folded. Pure.

`engine.expressions.compile_expression` is the entry point; this module holds the node-by-node rules
(typing, NULL handling, numeric widening, comparisons, functions through `functions/registry.py`).

Lambda bodies (``x => x + 1``, for the functions of `functions/lambdas.py`) compile in a scope that
adds the lambda's parameters, and with the semantics of the Java that ksqlDB generates for them:
a comparison with NULL is false, while arithmetic on NULL, a logical operator on NULL or a failed
operation throws (`LambdaAbort`), which makes the whole lambda function's call NULL.
"""

from __future__ import annotations

import math
import re
from collections import ChainMap
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, localcontext
from typing import TYPE_CHECKING, Any, cast

from sqlglot import exp

from headwater.engine import coercion
from headwater.engine._bound import BoundValue, building_slots
from headwater.engine._format import format_expression
from headwater.engine._scope import Evaluator, Row, Scope, resolve_type
from headwater.engine.errors import CodegenError, ExpressionError
from headwater.engine.functions import lambdas as fl
from headwater.engine.functions import user_index
from headwater.engine.functions.casts import cast_value, castable
from headwater.engine.functions.registry import FUNCTIONS, NULL_TOLERANT, VOLATILE
from headwater.engine.functions.temporal import date_of_text, parse_partial_timestamp, time_of_text
from headwater.engine.functions.types import (
    BIGINT,
    BOOLEAN,
    BYTES,
    DATE,
    DOUBLE,
    INTEGER,
    INTEGRAL,
    INTERVAL_UNIT,
    INTERVAL_UNITS,
    NULL,
    STRING,
    TEMPORAL,
    TIME,
    TIMESTAMP,
    EvalFailure,
    as_decimal_type,
    common_type,
    decimal_result,
    fit_decimal,
    is_numeric,
    wider,
    wrap_int,
)
from headwater.sqlparse_ext import expressions as hx
from headwater.sqlparse_ext.sqltypes import (
    ArrayType,
    DecimalType,
    MapType,
    SqlType,
    StructField,
    StructType,
    format_double,
    from_datatype,
    identifier_name,
)

if TYPE_CHECKING:
    from headwater.engine.expressions import Compiled


@dataclass(frozen=True, slots=True)
class _Node:
    type: SqlType
    fn: Evaluator
    const: bool
    refs: frozenset[str]
    bound: bool = False  # constant but for a cached plan's bound values: folded per execution


def _constant(t: SqlType, value: Any) -> _Node:
    return _Node(t, lambda row: value, True, frozenset())


def _make(
    t: SqlType, evaluator: Evaluator, children: Sequence[_Node], fallible: bool = False
) -> _Node:
    """A node; folded into a constant when its children are, NULL-on-failure when fallible."""
    refs = frozenset().union(*(c.refs for c in children))
    if all(c.const for c in children):
        try:
            return _Node(t, _const_fn(evaluator({})), True, refs)
        except EvalFailure as error:
            raise ExpressionError(str(error)) from error
        except fl.LambdaAbort:  # throws when its lambda runs, which it may never do
            return _Node(t, evaluator, False, refs)
    if all(c.const or c.bound for c in children) and (slots := building_slots()) is not None:
        # what the line above folds now, a cached plan folds once per execution (unwrapped: a
        # failure makes the execution fall back to the uncached path, which reports it)
        return _Node(t, slots.subtree(evaluator), False, refs, True)
    if fallible:
        inner = evaluator

        def evaluator(row: Row) -> Any:
            try:
                return inner(row)
            except (EvalFailure, ArithmeticError, ValueError, OverflowError):
                return None

    return _Node(t, evaluator, False, refs)


def _members(values: list[Any]) -> tuple[Any, bool]:
    """An IN list's non-NULL members (a set when they hash) and whether it holds a NULL."""
    has_null = any(v is None for v in values)
    try:
        return frozenset(v for v in values if v is not None), has_null
    except TypeError:  # lists and dicts (ARRAY, MAP, STRUCT) do not hash
        return [v for v in values if v is not None], has_null


def _const_fn(value: Any) -> Evaluator:
    return lambda row: value


_COMPARE: dict[type[exp.Expr], tuple[str, str, Callable[[Any, Any], bool]]] = {
    exp.EQ: ("=", "EQUAL", lambda a, b: a == b),
    exp.NEQ: ("<>", "NOT_EQUAL", lambda a, b: a != b),
    exp.GT: (">", "GREATER_THAN", lambda a, b: a > b),
    exp.GTE: (">=", "GREATER_THAN_OR_EQUAL", lambda a, b: a >= b),
    exp.LT: ("<", "LESS_THAN", lambda a, b: a < b),
    exp.LTE: ("<=", "LESS_THAN_OR_EQUAL", lambda a, b: a <= b),
    exp.NullSafeEQ: ("IS NOT DISTINCT FROM", "IS_NOT_DISTINCT_FROM", lambda a, b: a == b),
    exp.NullSafeNEQ: ("IS DISTINCT FROM", "IS_DISTINCT_FROM", lambda a, b: a != b),
}
_ARITHMETIC = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%"}
_EQUALITY = ("EQUAL", "NOT_EQUAL", "IS_NOT_DISTINCT_FROM", "IS_DISTINCT_FROM")


def comparable(left: SqlType, right: SqlType, op: str) -> bool:
    """Whether ksqlDB compares values of these types with the operator (``EQUAL``, ...)."""
    if is_numeric(left) and is_numeric(right):
        return True
    if _temporal_pair(left, right) is not None:
        return True
    if left != right:
        return False
    if left in (STRING, BYTES) or left in TEMPORAL:
        return True
    return op in _EQUALITY


def _temporal_pair(left: SqlType, right: SqlType) -> SqlType | None:
    """The type two different types compare as, when ksqlDB compares them as times: a TIME, DATE
    or TIMESTAMP with a STRING (parsed), or a DATE with a TIMESTAMP (its midnight)."""
    pair = {left, right}
    if len(pair) != 2 or not pair & set(TEMPORAL):
        return None
    if STRING in pair:
        return next(iter(pair - {STRING}))
    if pair == {DATE, TIMESTAMP}:
        return TIMESTAMP
    return None


def _as_temporal(node: _Node, target: SqlType) -> Evaluator:
    """``node``'s values as ``target`` values (see :func:`_temporal_pair`)."""
    f = node.fn
    if node.type == target:
        return f
    if node.type == DATE:  # a DATE compared to a TIMESTAMP: its midnight
        return lambda r: None if (v := f(r)) is None else v * 86_400_000
    parsers: dict[SqlType, Callable[[str], int]] = {
        TIME: time_of_text,
        DATE: date_of_text,
        TIMESTAMP: parse_partial_timestamp,
    }
    parse = parsers[target]
    return lambda r: None if (v := f(r)) is None else parse(v)


def compare_error(
    left: _Node | Compiled, right: _Node | Compiled, op: str, texts: tuple[str, str]
) -> ExpressionError:
    """ksqlDB's message for a comparison of incompatible types."""
    return ExpressionError(
        f"Cannot compare {texts[0]} ({left.type}) to {texts[1]} ({right.type}) with {op}."
    )


class _Compiler:
    """Compiles nodes for one scope (a method per kind of node)."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.java = bool(scope.lambda_variables)
        """Inside a lambda's body: Java's NULL semantics (see the module docstring)."""

    def compile(self, node: exp.Expr) -> _Node:
        kind = type(node)
        if kind in _COMPARE:
            return self._comparison(node)
        if kind in _ARITHMETIC:
            return self._arithmetic(node, _ARITHMETIC[kind])
        method = getattr(self, "_" + kind.__name__.lower(), None)
        if method is None:
            raise ExpressionError(f"Unsupported expression: {format_expression(node)}")
        result: _Node = method(node)
        return result

    # -- leaves ----------------------------------------------------------------------------

    def _paren(self, node: exp.Paren) -> _Node:
        return self.compile(node.this)

    def _column(self, node: exp.Column) -> _Node:
        if isinstance(node.this, exp.Star):
            raise ExpressionError(f"'{format_expression(node)}' is only allowed in a SELECT list")
        name, t = self.scope.resolve(node)
        return _Node(t, lambda row: row.get(name), False, frozenset({name}))

    def _boundvalue(self, node: BoundValue) -> _Node:
        slots = building_slots()
        if slots is None:
            raise ExpressionError("a bound value outside a cached plan")
        reader = slots.leaf(int(node.this), bool(node.meta.get("negate")))
        return _Node(node.meta["type"], reader, False, frozenset(), True)

    def _null(self, node: exp.Null) -> _Node:
        return _constant(NULL, None)

    def _boolean(self, node: exp.Boolean) -> _Node:
        return _constant(BOOLEAN, bool(node.this))

    def _literal(self, node: exp.Literal, negative: bool = False) -> _Node:
        text = str(node.this)
        if node.is_string:
            return _constant(STRING, text)
        sign = "-" if negative else ""
        if text.isdigit():
            value = int(sign + text)
            return _constant(INTEGER if -(2**31) <= value < 2**31 else BIGINT, value)
        if "e" in text.lower():
            return _constant(DOUBLE, float(sign + text))
        number = Decimal(sign + text)
        return _constant(coercion.decimal_type_of(number), number)

    def _neg(self, node: exp.Neg) -> _Node:
        inner_node = node.this
        if isinstance(inner_node, exp.Literal) and not inner_node.is_string:
            return self._literal(inner_node, negative=True)
        inner = self.compile(inner_node)
        t = inner.type
        if not is_numeric(t):
            raise ExpressionError(
                f"Error processing expression: {format_expression(node)}. "
                f"Unsupported arithmetic type {t}"
            )
        f = inner.fn
        negate: Callable[[Any], Any] = (
            (lambda v: wrap_int(-v, t)) if t in INTEGRAL else (lambda v: -v)
        )
        if self.java:
            return _make(t, lambda r: negate(_unboxed(f(r))), [inner])
        return _make(t, lambda r: None if (v := f(r)) is None else negate(v), [inner])

    # -- operators -------------------------------------------------------------------------

    def _arithmetic(self, node: exp.Expr, op: str) -> _Node:
        left, right = self.compile(node.this), self.compile(node.expression)
        lt, rt = left.type, right.type
        text = format_expression(node)
        if NULL in (lt, rt):
            raise ExpressionError(
                f"Error processing expression: {text}. "
                f"Arithmetic on types {lt} and {rt} are not supported."
            )
        lf, rf = left.fn, right.fn
        if op == "+" and lt == rt == STRING:
            if self.java:  # Java's string concatenation spells NULL "null"
                return _make(STRING, lambda r: _java_str(lf(r)) + _java_str(rf(r)), [left, right])
            return _make(STRING, _strict2(lf, rf, lambda a, b: a + b), [left, right])
        if not (is_numeric(lt) and is_numeric(rt)):
            raise ExpressionError(
                f"Error processing expression: {text}. "
                f"Unsupported arithmetic types. {coercion.base_name(lt)} {coercion.base_name(rt)}"
            )
        t = wider(lt, rt)
        operate: Callable[[Any, Any], Any]
        if t in INTEGRAL:
            operate = _integer_op(op, t)
        elif t == DOUBLE:
            operate = _double_op(op)
        else:
            t = decimal_result(op, as_decimal_type(lt), as_decimal_type(rt))
            operate = _decimal_op(op, t)
        if self.java:
            return _make(t, _unboxed2(lf, rf, operate), [left, right])
        return _make(t, _strict2(lf, rf, operate), [left, right], fallible=True)

    def _dpipe(self, node: exp.DPipe) -> _Node:
        raise ExpressionError(
            f"Unsupported expression: {format_expression(node)} (use CONCAT or + to join strings)"
        )

    def _comparison(self, node: exp.Expr, prefix: str = "") -> _Node:
        symbol, op, python_op = _COMPARE[type(node)]
        left, right = self.compile(node.this), self.compile(node.expression)
        null_safe = op.startswith("IS_")
        if not null_safe and NULL in (left.type, right.type):
            names = ["NULL" if n.type == NULL else str(n.type) for n in (left, right)]
            raise ExpressionError(
                f"Comparison with NULL not supported: {names[0]} {symbol} "
                f"{names[1]}\nUse 'IS NULL' or 'IS NOT NULL' instead."
            )
        if NULL not in (left.type, right.type) and not comparable(left.type, right.type, op):
            texts = (format_expression(node.this), format_expression(node.expression))
            error = compare_error(left, right, op, texts)
            raise ExpressionError(prefix + error.message)
        lf, rf = left.fn, right.fn
        as_decimal = DOUBLE in (left.type, right.type) and any(
            isinstance(t, DecimalType) for t in (left.type, right.type)
        )
        if as_decimal:  # ksqlDB: BigDecimal.valueOf(double), the double's shortest text
            lf = _java_decimal(lf) if left.type == DOUBLE else lf
            rf = _java_decimal(rf) if right.type == DOUBLE else rf
        if null_safe:
            same = op == "IS_NOT_DISTINCT_FROM"

            def distinct(row: Row) -> bool:
                a, b = lf(row), rf(row)
                if a is None or b is None:
                    return (a is None and b is None) == same
                return python_op(a, b)

            return _make(BOOLEAN, distinct, [left, right], fallible=as_decimal)
        as_time = _temporal_pair(left.type, right.type)
        if as_time is not None:  # a STRING is parsed (a bad one fails the comparison)
            lf, rf = _as_temporal(left, as_time), _as_temporal(right, as_time)
        compare = _strict2(lf, rf, python_op)
        # ksqlDB's generated code (and its interpreter): false, not NULL, when a side is NULL
        return _make(
            BOOLEAN,
            lambda r: compare(r) is True,
            [left, right],
            fallible=as_time is not None or as_decimal,
        )

    def _logical(self, node: exp.Expr, word: str) -> _Node:
        left, right = self.compile(node.this), self.compile(node.expression)
        for side, child in ((left, node.this), (right, node.expression)):
            if side.type not in (BOOLEAN, NULL):
                raise ExpressionError(
                    f"Operator {word} requires BOOLEAN operands, but "
                    f"{format_expression(child)} is {side.type}."
                )
        lf, rf = left.fn, right.fn
        if self.java:  # Java's && and || on Booleans: NULL throws, the right side may not run
            stop = word == "OR"
            return _make(
                BOOLEAN,
                lambda r: stop if _unboxed(lf(r)) is stop else _unboxed(rf(r)),
                [left, right],
            )
        if word == "AND":

            def evaluate(row: Row) -> Any:
                a = lf(row)
                if a is False:
                    return False
                b = rf(row)
                return False if b is False else None if a is None or b is None else True
        else:

            def evaluate(row: Row) -> Any:
                a = lf(row)
                if a is True:
                    return True
                b = rf(row)
                return True if b is True else None if a is None or b is None else False

        return _make(BOOLEAN, evaluate, [left, right])

    def _and(self, node: exp.And) -> _Node:
        return self._logical(node, "AND")

    def _or(self, node: exp.Or) -> _Node:
        return self._logical(node, "OR")

    def _not(self, node: exp.Not) -> _Node:
        inner = self.compile(node.this)
        if inner.type not in (BOOLEAN, NULL):
            raise ExpressionError(
                f"Operator NOT requires a BOOLEAN operand, but "
                f"{format_expression(node.this)} is {inner.type}."
            )
        f = inner.fn
        if self.java:
            return _make(BOOLEAN, lambda r: not _unboxed(f(r)), [inner])
        return _make(BOOLEAN, lambda r: None if (v := f(r)) is None else not v, [inner])

    def _is(self, node: exp.Is) -> _Node:
        if not isinstance(node.expression, exp.Null):
            raise ExpressionError(f"Unsupported expression: {format_expression(node)}")
        inner = self.compile(node.this)
        f = inner.fn
        return _make(BOOLEAN, lambda r: f(r) is None, [inner])

    def _between(self, node: exp.Between) -> _Node:
        value = node.this
        low = self._comparison(
            exp.GTE(this=value, expression=node.args["low"]), "Invalid expression: "
        )
        high = self._comparison(
            exp.LTE(this=value, expression=node.args["high"]), "Invalid expression: "
        )
        lf, hf = low.fn, high.fn

        def evaluate(row: Row) -> Any:
            a = lf(row)
            if a is False:
                return False
            b = hf(row)
            return False if b is False else None if a is None or b is None else True

        return _make(BOOLEAN, evaluate, [low, high])

    def _in(self, node: exp.In) -> _Node:
        # ksqlDB's InListEvaluator: NULL literals dropped from the list (they never match), the
        # value and the rest coerced to one type, and the answer never NULL (no match: false)
        items = [e for e in node.expressions if not isinstance(e, exp.Null)]
        try:
            value, *members = self.coerced([node.this, *items])
        except ExpressionError as error:
            raise ExpressionError(f"Invalid Predicate: {error.message}") from error
        vf = value.fn
        slots = building_slots()
        if all(i.const for i in members):
            found, _ = _members([i.fn({}) for i in members])

            def evaluate(row: Row) -> Any:
                v = vf(row)
                return v is not None and v in found
        elif slots is not None and all(i.const or i.bound for i in members):
            # a cached plan's IN list: its members folded once per execution, as above
            item_fns = [i.fn for i in members]
            folded = slots.subtree(lambda row: _members([f(row) for f in item_fns])[0])

            def evaluate(row: Row) -> Any:
                v = vf(row)
                return v is not None and v in folded(row)
        else:
            fns = [i.fn for i in members]

            def evaluate(row: Row) -> Any:
                v = vf(row)
                return v is not None and any(v == f(row) for f in fns)

        return _make(BOOLEAN, evaluate, [value, *members])

    def coerced(self, nodes: Sequence[exp.Expr]) -> list[_Node]:
        """``nodes`` compiled and converted to the type ksqlDB coerces them to together
        (`coercion`): literals' values coerced, other expressions CAST.

        Raises:
            ExpressionError: ksqlDB's refusal (no common type, a literal that does not parse).
        """
        compiled = {id(n): self.compile(n) for n in nodes}

        def type_of(node: exp.Expr) -> SqlType:
            known = compiled.get(id(node))
            return (known if known is not None else self.compile(node)).type

        common = coercion.common_type(nodes, type_of)
        return [self._to_type(n, compiled[id(n)], common) for n in nodes]

    def _to_type(self, node: exp.Expr, compiled: _Node, t: SqlType | None) -> _Node:
        source = compiled.type
        if t is None or source == t or source == NULL:
            return compiled
        f = compiled.fn
        if coercion.is_literal(node):
            return _make(t, lambda r: coercion.literal_value(f(r), source, t), [compiled])
        return _make(t, lambda r: cast_value(f(r), source, t), [compiled], fallible=True)

    def _like(self, node: exp.Like, escape: str | None = None) -> _Node:
        value, pattern = self.compile(node.this), self.compile(node.expression)
        if value.type not in (STRING, NULL):
            raise ExpressionError(
                "The column type for Like condition must be VARCHAR. "
                f"The column type is {value.type}"
            )
        if pattern.type not in (STRING, NULL):
            raise ExpressionError("Like condition must be between strings")
        negate = bool(node.args.get("negate"))
        vf, pf = value.fn, pattern.fn
        if pattern.const:
            text = pf({})
            regex = None if text is None else like_regex(text, escape)

            def evaluate(row: Row) -> Any:
                v = vf(row)
                if v is None or regex is None:
                    return None
                return (regex.fullmatch(v) is not None) != negate
        else:

            def evaluate(row: Row) -> Any:
                v, p = vf(row), pf(row)
                if v is None or p is None:
                    return None
                return (like_regex(p, escape).fullmatch(v) is not None) != negate

        return _make(BOOLEAN, evaluate, [value, pattern])

    def _escape(self, node: exp.Escape) -> _Node:
        escape = self.compile(node.expression)
        text = escape.fn({}) if escape.const else None
        if not isinstance(node.this, exp.Like) or not isinstance(text, str) or len(text) != 1:
            raise ExpressionError("LIKE ESCAPE takes one character")
        return self._like(node.this, text)

    # -- CASE, CAST, access, constructors, functions ---------------------------------------

    def _case(self, node: exp.Case) -> _Node:
        branches = node.args.get("ifs") or []
        operand = self.compile(node.this) if node.this is not None else None
        conditions: list[_Node] = []
        for branch in branches:
            if operand is not None:
                cond = self._comparison(exp.EQ(this=node.this, expression=branch.this))
            else:
                cond = self.compile(branch.this)
                if cond.type not in (BOOLEAN, NULL):
                    raise ExpressionError(
                        "WHEN operand type should be boolean. Type for "
                        f"'{format_expression(branch.this)}' is {cond.type}"
                    )
            conditions.append(cond)
        results = [self.compile(b.args["true"]) for b in branches]
        default = node.args.get("default")
        if default is not None:
            results.append(self.compile(default))
        t = common_type([r.type for r in results])
        if t is None:
            raise ExpressionError(
                "Invalid Case expression. Type for all 'THEN' clauses should be "
                f"the same: {', '.join(str(r.type) for r in results)}."
            )
        if t == NULL:
            raise ExpressionError("Invalid Case expression. All case branches have NULL type")
        pairs = [(c.fn, _converted(r, t)) for c, r in zip(conditions, results, strict=False)]
        otherwise = _converted(results[-1], t) if default is not None else _const_fn(None)

        def evaluate(row: Row) -> Any:
            for cond, then in pairs:
                if cond(row) is True:
                    return then(row)
            return otherwise(row)

        return _make(t, evaluate, [*conditions, *results])

    def _cast(self, node: exp.Cast) -> _Node:
        inner = self.compile(node.this)
        target = resolve_type(from_datatype(node.args["to"]), self.scope.custom_types)
        source = inner.type
        if not castable(source, target):
            raise CodegenError(f"Cast of {source} to {target} is not supported")
        f = inner.fn
        return _make(target, lambda r: cast_value(f(r), source, target), [inner], fallible=True)

    def _structderef(self, node: hx.StructDeref) -> _Node:
        base = self.compile(node.this)
        if isinstance(node.expression, exp.Star):
            raise ExpressionError(f"'{format_expression(node)}' is only allowed in a SELECT list")
        name = identifier_name(node.expression)
        if not isinstance(base.type, StructType):
            raise ExpressionError(
                f"Can't dereference {format_expression(node.this)}: it is "
                f"{base.type}, not a STRUCT."
            )
        found = next((f for f in base.type.fields if f.name == name), None)
        if found is None:
            raise ExpressionError(
                f"Could not find field '{name}' in '{format_expression(node.this)}'."
            )
        f = base.fn
        return _make(found.type, lambda r: None if (s := f(r)) is None else s.get(name), [base])

    def _bracket(self, node: exp.Bracket) -> _Node:
        base, index = self.compile(node.this), self.compile(node.expressions[0])
        bt, it = base.type, index.type
        bf, xf = base.fn, index.fn
        if isinstance(bt, ArrayType):
            if it not in (*INTEGRAL, NULL):
                raise ExpressionError(
                    f"Array index must be INTEGER, not {it}: {format_expression(node)}"
                )

            def element(row: Row) -> Any:
                items, i = bf(row), xf(row)
                if items is None or i is None or i == 0:
                    return None
                position = i - 1 if i > 0 else len(items) + i
                return items[position] if 0 <= position < len(items) else None

            return _make(bt.element, element, [base, index])
        if isinstance(bt, MapType):
            if it != NULL and not comparable(bt.key, it, "EQUAL"):
                raise ExpressionError(
                    f"Map key must be {bt.key}, not {it}: {format_expression(node)}"
                )
            return _make(bt.value, _strict2(bf, xf, lambda m, k: m.get(k)), [base, index])
        raise ExpressionError(f"Can't subscript {format_expression(node.this)}: it is {bt}.")

    def _arrayconstructor(self, node: hx.ArrayConstructor) -> _Node:
        if not node.expressions:
            raise ExpressionError(
                "Array constructor cannot be empty. Please supply at least one "
                "element (see https://github.com/confluentinc/ksql/issues/4239)."
            )
        items = self.coerced(list(node.expressions))
        t = next((i.type for i in items if i.type != NULL), NULL)
        if t == NULL:
            raise ExpressionError(
                "Cannot construct an array with all NULL elements (see https://github.com/"
                "confluentinc/ksql/issues/4239). As a workaround, you may cast a NULL value to the "
                "desired type."
            )
        fns = [i.fn for i in items]
        return _make(ArrayType(t), lambda r: [f(r) for f in fns], items)

    def _mapconstructor(self, node: hx.MapConstructor) -> _Node:
        if not node.expressions:
            raise ExpressionError(
                "Map constructor cannot be empty. Please supply at least one key value pair "
                "(see https://github.com/confluentinc/ksql/issues/4239)."
            )
        keys = self.coerced([e.this for e in node.expressions])
        values = self.coerced([e.expression for e in node.expressions])
        types = []
        for items, what, item in ((keys, "keys", "key"), (values, "values", "value")):
            t = next((i.type for i in items if i.type != NULL), NULL)
            if t == NULL:
                raise ExpressionError(
                    f"Cannot construct a map with all NULL {what} (see https://github.com/"
                    "confluentinc/ksql/issues/4239). As a workaround, you may cast a NULL "
                    f"{item} to the desired type."
                )
            types.append(t)
        pairs = [(k.fn, v.fn) for k, v in zip(keys, values, strict=True)]
        return _make(
            MapType(types[0], types[1]), lambda r: {k(r): v(r) for k, v in pairs}, [*keys, *values]
        )

    def _structconstructor(self, node: hx.StructConstructor) -> _Node:
        names = [identifier_name(e.this) for e in node.expressions]
        if len(set(names)) != len(names):
            raise ExpressionError("Duplicate field names found in STRUCT")
        values = [self.compile(e.expression) for e in node.expressions]
        t = StructType(tuple(StructField(n, v.type) for n, v in zip(names, values, strict=True)))
        pairs = [(n, v.fn) for n, v in zip(names, values, strict=True)]
        return _make(t, lambda r: {n: f(r) for n, f in pairs}, values)

    def _anonymous(self, node: exp.Anonymous) -> _Node:
        name = str(node.this).upper()
        if len(node.expressions) == 1 and isinstance(node.expressions[0], exp.Star):
            # ksqlDB's grammar reads F(*) as a call without arguments (COUNT(*) is an aggregate's)
            node = exp.Anonymous(this=node.this, expressions=[])
        if name in fl.LAMBDA_FUNCTIONS:
            return self._lambda_call(node, name)
        resolver = FUNCTIONS.get(name)
        if resolver is None:
            user = user_index.lookup(name, "SCALAR")
            if user is not None:
                return self._user_call(node, user)
            raise ExpressionError(f"Can't find any functions with the name '{name}'")
        if any(isinstance(a, exp.Lambda) for a in node.expressions):
            shown = ", ".join(
                "LAMBDA" if isinstance(a, exp.Lambda) else str(self._function_argument(a).type)
                for a in node.expressions
            )
            raise ExpressionError(f"Function '{node.this}' does not accept parameters ({shown}).")
        args = [self._function_argument(a) for a in node.expressions]
        resolved = resolver([a.type for a in args])
        if resolved is None:
            shown = ", ".join(str(a.type) for a in args)
            raise ExpressionError(f"Function '{node.this}' does not accept parameters ({shown}).")
        t, impl = resolved
        fns = (
            [_converted(a, t) for a in args]
            if name in ("COALESCE", "IFNULL", "GREATEST", "LEAST")
            else [a.fn for a in args]
        )
        if name in NULL_TOLERANT:
            return _make(t, lambda r: impl(*(f(r) for f in fns)), args, fallible=True)

        def call(row: Row) -> Any:
            values = [f(row) for f in fns]
            return None if None in values else impl(*values)

        if not args and name in VOLATILE:  # reads the clock: not folded into a constant
            return _Node(t, call, False, frozenset())
        return _make(t, call, args, fallible=True)

    def _user_call(self, node: exp.Anonymous, function: user_index.UserFunction) -> _Node:
        """A function from the extension folder: never folded into a constant (it may count its
        calls or read the world, as ksqlDB's UDFs may), NULL where it raises."""
        if any(isinstance(a, exp.Lambda) for a in node.expressions):
            raise ExpressionError(
                f"Function '{function.name}' does not accept a lambda: it is not a lambda function"
            )
        args = [self._function_argument(a) for a in node.expressions]
        overload, t = user_index.resolve(function, [a.type for a in args])
        impl = user_index.scalar_impl(function.name, overload, [a.type for a in args], t)
        fns = [a.fn for a in args]
        refs = frozenset().union(*(a.refs for a in args))
        return _Node(t, lambda row: impl(*(f(row) for f in fns)), False, refs)

    def _lambda_call(self, node: exp.Anonymous, name: str) -> _Node:
        """TRANSFORM, REDUCE or FILTER: the lambdas are typed from the other arguments."""
        nodes = node.expressions
        for lambda_node in nodes:  # ksqlDB checks the parameter names before any type
            if isinstance(lambda_node, exp.Lambda):
                names = [identifier_name(p) for p in lambda_node.expressions]
                self.scope.with_lambda(names, [NULL] * len(names))
        args: dict[int, _Node] = {
            i: self._function_argument(a)
            for i, a in enumerate(nodes)
            if not isinstance(a, exp.Lambda)
        }

        def lambda_type(position: int, types: tuple[SqlType, ...]) -> SqlType:
            lambda_node = nodes[position]
            assert isinstance(lambda_node, exp.Lambda)
            args[position] = self._lambda(lambda_node, types)
            return args[position].type

        shapes = [
            len(a.expressions) if isinstance(a, exp.Lambda) else args[i].type
            for i, a in enumerate(nodes)
        ]
        t, impl = fl.bind(name, str(node.this), shapes, lambda_type)
        children = [args[i] for i in range(len(nodes))]
        fns = [c.fn for c in children]

        def call(row: Row) -> Any:
            try:
                return impl(*(f(row) for f in fns))
            except fl.LambdaAbort:
                return None

        return _make(t, call, children, fallible=True)

    def _lambda(self, node: exp.Lambda, types: tuple[SqlType, ...]) -> _Node:
        """A lambda argument: its value, per row, is a Python function of the parameters."""
        names = [identifier_name(p) for p in node.expressions]
        body = _Compiler(self.scope.with_lambda(names, types)).compile(node.this)
        refs = body.refs - set(names)
        volatile = any(
            f.name.upper() in VOLATILE and not f.expressions for f in node.find_all(exp.Anonymous)
        )
        body_fn = body.fn

        def bind(row: Row) -> Callable[..., Any]:
            outer = cast(MutableMapping[str, Any], row)  # only read
            return lambda *values: body_fn(ChainMap(dict(zip(names, values, strict=True)), outer))

        return _Node(body.type, bind, not refs and not volatile, refs)

    def _function_argument(self, node: exp.Expr) -> _Node:
        """A call's argument; a bare time unit (``DAYS``) is an INTERVAL UNIT constant."""
        if isinstance(node, exp.Column) and not node.table and not node.this.quoted:
            unit_ms = INTERVAL_UNITS.get(node.name.upper())
            if unit_ms is not None:
                return _constant(INTERVAL_UNIT, unit_ms)
        return self.compile(node)


def _unboxed(value: Any) -> Any:
    """A value Java unboxes inside a lambda: NULL throws."""
    if value is None:
        raise fl.LambdaAbort("NULL operand")
    return value


def _unboxed2(lf: Evaluator, rf: Evaluator, op: Callable[[Any, Any], Any]) -> Evaluator:
    """``op`` of two operands inside a lambda: a NULL operand or a failure throws."""

    def evaluate(row: Row) -> Any:
        a, b = _unboxed(lf(row)), _unboxed(rf(row))
        try:
            return op(a, b)
        except (EvalFailure, ArithmeticError, ValueError) as error:
            raise fl.LambdaAbort(str(error)) from error

    return evaluate


def _java_str(value: Any) -> str:
    return "null" if value is None else str(value)


def _java_decimal(f: Evaluator) -> Evaluator:
    """A DOUBLE's values as Java's ``BigDecimal.valueOf`` makes them (from the shortest text that
    reads back as the double: 1.1 is exactly 1.1); a NaN or infinity fails, as it does in Java."""

    def evaluate(row: Row) -> Any:
        value = f(row)
        if value is None:
            return None
        if not math.isfinite(value):
            raise EvalFailure(f"Cannot compare {format_double(value)} with a DECIMAL")
        return Decimal(repr(value))

    return evaluate


def _strict2(lf: Evaluator, rf: Evaluator, op: Callable[[Any, Any], Any]) -> Evaluator:
    """``op`` of two operands, NULL when either is NULL."""

    def evaluate(row: Row) -> Any:
        a = lf(row)
        if a is None:
            return None
        b = rf(row)
        return None if b is None else op(a, b)

    return evaluate


def _converted(node: _Node, t: SqlType) -> Evaluator:
    """The node's evaluator, with its numeric values converted to the wider type ``t``."""
    convert = convert_numeric(node.type, t) if is_numeric(t) else None
    f = node.fn
    if convert is None:
        return f
    return lambda r: None if (v := f(r)) is None else convert(v)


def convert_numeric(source: SqlType, target: SqlType) -> Callable[[Any], Any] | None:
    """The function turning values of numeric type ``source`` into ``target`` (None: as is)."""
    if source == target or source == NULL:
        return None
    if target == DOUBLE:
        return float
    if isinstance(target, DecimalType) and source in INTEGRAL:
        return Decimal
    return None


def _integer_op(op: str, t: SqlType) -> Callable[[int, int], int]:
    if op == "+":
        return lambda a, b: wrap_int(a + b, t)
    if op == "-":
        return lambda a, b: wrap_int(a - b, t)
    if op == "*":
        return lambda a, b: wrap_int(a * b, t)

    def divide(a: int, b: int) -> int:
        if b == 0:
            raise EvalFailure("/ by zero")
        quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        return wrap_int(quotient, t) if op == "/" else a - b * quotient

    return divide


def _double_op(op: str) -> Callable[[Any, Any], float]:
    import math
    import operator

    if op in "+-*":
        base = {"+": operator.add, "-": operator.sub, "*": operator.mul}[op]
        return lambda a, b: float(base(float(a), float(b)))

    def divide(a: Any, b: Any) -> float:
        a, b = float(a), float(b)
        if b == 0:
            if op == "%" or a == 0 or math.isnan(a):
                return math.nan
            return math.copysign(math.inf, a) * math.copysign(1, b)
        return a / b if op == "/" else math.fmod(a, b)

    return divide


def _decimal_op(op: str, t: DecimalType) -> Callable[[Any, Any], Decimal]:
    def operate(a: Any, b: Any) -> Decimal:
        with localcontext() as ctx:
            ctx.prec = 100
            x, y = Decimal(a), Decimal(b)
            if op in "/%" and y == 0:
                raise EvalFailure("/ by zero")
            result = (
                {"+": x + y, "-": x - y, "*": x * y}[op]
                if op in "+-*"
                else (x / y if op == "/" else x % y)
            )
        return fit_decimal(result, t)

    return operate


def like_regex(pattern: str, escape: str | None = None) -> re.Pattern[str]:
    """A SQL LIKE pattern (``%`` any run, ``_`` one character) as a regex for ``fullmatch``."""
    out: list[str] = []
    chars = iter(pattern)
    for ch in chars:
        if escape is not None and ch == escape:
            out.append(re.escape(next(chars, "")))
        elif ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
    return re.compile("".join(out), re.DOTALL)
