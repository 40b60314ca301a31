"""Expressions over columns: pyarrow.compute where it gives the per-record compiler's values. Pure.

`vectorize` compiles an expression (already accepted by `engine.expressions.compile_expression`,
which keeps defining its type, its NULL rules and its errors) into a `Vector`: a function from a
`Batch` to a column. A node runs as an Arrow kernel only where the kernel's result is the
per-record one for every input:

- column references and constants (folded by the per-record compiler);
- ``+ - *`` and unary minus on INTEGER, BIGINT and DOUBLE: Arrow's unchecked integer kernels wrap
  around in two's complement as Java's int and long do (`wrap_int`), IEEE 754 doubles alike; an
  INTEGER widens to BIGINT or DOUBLE exactly, a BIGINT to DOUBLE rounds to nearest as float() does;
  ``+`` of two STRINGs (NULL if either is);
- ``= <> < <= > >=`` between INTEGER and BIGINT, between INTEGER or DOUBLE and DOUBLE (an INTEGER
  is a double exactly, a BIGINT not always: that pair runs per record), between STRINGs (UTF-8 byte
  order is code point order, as Python compares) and between BOOLEANs; a NULL side gives false,
  as ksqlDB's generated code does;
- ``AND``, ``OR`` (Kleene's logic), ``NOT``, ``IS [NOT] NULL``;
- ``UCASE``, ``LCASE`` and ``LEN`` over ASCII text (Java and Arrow agree there; a column holding
  other text runs per record: Java upper-cases ``ß`` to ``SS``, Arrow to ``ẞ``).

Every other node (``/`` and ``%`` with their division by zero, DECIMAL, CAST, CASE, the other
functions, containers) runs per record: its per-record closure over rows of just the columns it
reads, nested inside the kernels around it. A row whose value a per-record node raises on or
returns in a shape the column cannot hold is reported (`Vector.run`'s ``bad``), so the caller runs
that row per record instead, and a query's answer never depends on which path computed it
(tests/engine/test_columnar_differential.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from headwater.engine.columnar.batch import Batch, Column, arrow_type, broadcast, to_column
from headwater.engine.expressions import Compiled, Scope, compile_expression
from headwater.engine.functions import user_index
from headwater.engine.functions.types import BIGINT, BOOLEAN, DOUBLE, INTEGER, NULL, STRING
from headwater.sqlparse_ext.sqltypes import SqlType

Run = Callable[[Batch, dict[int, str]], Column]
_NUMBERS = (INTEGER, BIGINT, DOUBLE)
_ARITHMETIC: dict[type[exp.Expr], Callable[..., Any]] = {
    exp.Add: pc.add,
    exp.Sub: pc.subtract,
    exp.Mul: pc.multiply,
}
_COMPARE: dict[type[exp.Expr], Callable[..., Any]] = {
    exp.EQ: pc.equal,
    exp.NEQ: pc.not_equal,
    exp.GT: pc.greater,
    exp.GTE: pc.greater_equal,
    exp.LT: pc.less,
    exp.LTE: pc.less_equal,
}
_ASCII_FUNCTIONS: dict[str, tuple[Callable[[Any], Any], SqlType]] = {
    "UCASE": (pc.ascii_upper, STRING),
    "LCASE": (pc.ascii_lower, STRING),
    "LEN": (pc.utf8_length, INTEGER),
}


@dataclass(frozen=True, slots=True)
class Vector:
    """A compiled expression over columns.

    Attributes:
        type: its SQL type (the per-record compiler's).
        run: (batch, bad) -> its column over the batch; rows it could not compute as the
            per-record path would are added to ``bad`` (index -> why), holding NULL.
        per_row: the subexpressions computed row by row, as ksqlDB prints them (none: all of it
            runs as Arrow kernels).
        text: the expression as ksqlDB prints it.
    """

    type: SqlType
    run: Run
    per_row: tuple[str, ...]
    text: str

    @property
    def mode(self) -> str:
        """``vectorized``, ``per record`` or ``partly vectorized``, for EXPLAIN."""
        if not self.per_row:
            return "vectorized"
        return "per record" if self.per_row == (self.text,) else "partly vectorized"


def vectorize(node: exp.Expr, scope: Scope) -> Vector:
    """The expression ``node`` (as accepted by `compile_expression` in ``scope``) over columns.

    Raises:
        ExpressionError: what `compile_expression` raises for it.
    """
    if isinstance(node, exp.Alias):
        node = node.this
    compiled = compile_expression(node, scope)
    if compiled.constant:
        value, t = compiled.evaluate({}), compiled.type
        return Vector(t, lambda batch, bad: broadcast(value, t, batch.size), (), compiled.text)
    built = _kernel(node, scope, compiled) if arrow_type(compiled.type) is not None else None
    return built if built is not None else per_row(compiled, scope)


def per_row(compiled: Compiled, scope: Scope) -> Vector:
    """``compiled`` evaluated row by row (its closure), as a column."""
    t, f = compiled.type, compiled.evaluate
    names = sorted(n for n in compiled.references if n in scope.columns)

    def run(batch: Batch, bad: dict[int, str]) -> Column:
        values: list[Any] = []
        for i, row in enumerate(batch.rows([n for n in names if n in batch.columns])):
            try:
                values.append(f(row))
            except Exception as exc:  # noqa: BLE001 - the row runs per record, which reports it
                bad.setdefault(i, f"{type(exc).__name__}: {exc}")
                values.append(None)
            if user_index.failures_pending():  # a Python function raised on the row: it runs
                bad.setdefault(i, "; ".join(user_index.take_failures()))  # per record, logged
        column, wrong = to_column(values, t)
        for i, why in wrong.items():
            bad.setdefault(i, why)
        return column

    return Vector(t, run, (compiled.text,), compiled.text)


def _kernel(node: exp.Expr, scope: Scope, compiled: Compiled) -> Vector | None:
    """The Arrow kernel of ``node`` (whose result Arrow holds), or None: it runs per record."""
    t, text = compiled.type, compiled.text
    kind = type(node)
    if kind is exp.Paren:
        return vectorize(node.this, scope)
    if kind is exp.Column:
        assert isinstance(node, exp.Column)
        name, _t = scope.resolve(node)
        return Vector(t, lambda batch, bad: batch.columns[name], (), text)
    if kind in _ARITHMETIC:
        return _arithmetic(node, scope, t, text)
    if kind is exp.Neg:
        inner = vectorize(node.this, scope)
        if inner.type not in _NUMBERS:
            return None
        return Vector(t, lambda b, bad: pc.negate(inner.run(b, bad)), inner.per_row, text)
    if kind in _COMPARE:
        return _comparison(node, scope, t, text)
    if kind in (exp.And, exp.Or):
        left, right = vectorize(node.this, scope), vectorize(node.expression, scope)
        if {left.type, right.type} - {BOOLEAN, NULL}:
            return None
        kleene = pc.and_kleene if kind is exp.And else pc.or_kleene
        return Vector(
            t,
            lambda b, bad: kleene(_bool(left.run(b, bad)), _bool(right.run(b, bad))),
            left.per_row + right.per_row,
            text,
        )
    if kind is exp.Not:
        inner = vectorize(node.this, scope)
        if inner.type not in (BOOLEAN, NULL):
            return None
        return Vector(t, lambda b, bad: pc.invert(_bool(inner.run(b, bad))), inner.per_row, text)
    if kind is exp.Is and isinstance(node.expression, exp.Null):
        inner = vectorize(node.this, scope)
        if arrow_type(inner.type) is None:
            return None
        return Vector(t, lambda b, bad: pc.is_null(inner.run(b, bad)), inner.per_row, text)
    if kind is exp.Anonymous:
        user = user_index.lookup(str(node.this), "SCALAR")
        if user is not None:
            return _python_function(node, scope, compiled, user)
        return _ascii_function(node, scope, compiled)
    return None


def _python_function(
    node: exp.Expr, scope: Scope, compiled: Compiled, function: user_index.UserFunction
) -> Vector | None:
    """A vectorized Python function: one call per batch over its arguments' columns. A batch it
    raises on (or answers in another shape) runs row by row, as the per-record path does."""
    arguments = [vectorize(a, scope) for a in node.expressions]
    if any(arrow_type(a.type) is None and a.type != NULL for a in arguments):
        return None
    overload, result = user_index.resolve(function, [a.type for a in arguments])
    if not overload.vectorized:
        return None
    call = user_index.vectorized_impl(function.name, overload, result)
    slow = per_row(compiled, scope)
    steps = tuple(s for a in arguments for s in a.per_row)

    def run(b: Batch, bad: dict[int, str]) -> Column:
        columns = []
        for argument in arguments:
            column = argument.run(b, bad)
            if isinstance(column, list):
                return slow.run(b, bad)
            columns.append(column)
        try:
            return call(*columns)
        except Exception:  # noqa: BLE001 - the rows run one by one, which logs what fails
            return slow.run(b, bad)

    return Vector(compiled.type, run, steps, compiled.text)


def _arithmetic(node: exp.Expr, scope: Scope, t: SqlType, text: str) -> Vector | None:
    left, right = vectorize(node.this, scope), vectorize(node.expression, scope)
    steps = left.per_row + right.per_row
    if type(node) is exp.Add and left.type == right.type == STRING == t:
        return Vector(
            t,
            lambda b, bad: pc.binary_join_element_wise(left.run(b, bad), right.run(b, bad), ""),
            steps,
            text,
        )
    if left.type not in _NUMBERS or right.type not in _NUMBERS or t not in _NUMBERS:
        return None
    target = arrow_type(t)
    operate = _ARITHMETIC[type(node)]

    def run(b: Batch, bad: dict[int, str]) -> Column:
        a = left.run(b, bad).cast(target, safe=False)  # type: ignore[union-attr]
        c = right.run(b, bad).cast(target, safe=False)  # type: ignore[union-attr]
        return operate(a, c)  # unchecked: wraps around as Java does

    return Vector(t, run, steps, text)


def _comparison(node: exp.Expr, scope: Scope, t: SqlType, text: str) -> Vector | None:
    left, right = vectorize(node.this, scope), vectorize(node.expression, scope)
    pair = {left.type, right.type}
    if pair <= {INTEGER, BIGINT}:
        target = pa.int64()
    elif pair <= {INTEGER, DOUBLE}:
        target = pa.float64()
    elif pair in ({STRING}, {BOOLEAN}):
        target = arrow_type(left.type)
    else:
        return None  # BIGINT against DOUBLE (not exact as doubles), temporal strings, ...
    compare = _COMPARE[type(node)]

    def run(b: Batch, bad: dict[int, str]) -> Column:
        a = left.run(b, bad).cast(target, safe=False)  # type: ignore[union-attr]
        c = right.run(b, bad).cast(target, safe=False)  # type: ignore[union-attr]
        return pc.fill_null(compare(a, c), False)

    return Vector(t, run, left.per_row + right.per_row, text)


def _ascii_function(node: exp.Expr, scope: Scope, compiled: Compiled) -> Vector | None:
    name = str(node.this).upper()
    found = _ASCII_FUNCTIONS.get(name)
    arguments = node.expressions
    if found is None or len(arguments) != 1:
        return None
    kernel, result = found
    inner = vectorize(arguments[0], scope)
    if inner.type != STRING or compiled.type != result:
        return None
    slow = per_row(compiled, scope)

    def run(b: Batch, bad: dict[int, str]) -> Column:
        column = inner.run(b, bad)
        if pc.all(pc.string_is_ascii(column)).as_py() is False:
            return slow.run(b, bad)  # Java's case rules and UTF-16 lengths differ from Arrow's
        return kernel(column)

    return Vector(compiled.type, run, inner.per_row, compiled.text)


def _bool(column: Column) -> pa.Array:
    if isinstance(column, list):  # never: BOOLEAN is an Arrow type
        raise TypeError("a BOOLEAN column held as a list")
    return column if column.type == pa.bool_() else column.cast(pa.bool_())
