"""SQL expressions: type-checked once, then evaluated per row with closures. Pure (no I/O).

Owns ksqlDB's expression semantics for pull queries and INSERT VALUES: literal typing (``1``
INTEGER, ``10000000000`` BIGINT, ``1.5`` DECIMAL(2, 1), ``1.5e0`` DOUBLE), column resolution
(unquoted names upper-cased; ``T.COL`` through the source's name or alias), SQL three-valued logic,
numeric widening (INTEGER < BIGINT < DECIMAL < DOUBLE), comparisons, BETWEEN, IN, LIKE, CASE, CAST,
struct/array/map access, constructors and the functions of `functions/registry.py`; output column names (a
column's own name, a struct field's name, else ``KSQL_COL_n``). The node-by-node rules live in
`_compiler.py`, the scope in `_scope.py`, INSERT VALUES in `insert_values.py`. Expressions without
column references are folded into constants when compiled, so errors in them (``CAST('x' AS INT)``)
surface before any row is read; on rows, a value an operation cannot handle gives NULL, as in
ksqlDB.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

from headwater.engine._compiler import (
    _Compiler,
    comparable,
    convert_numeric,
    like_regex,
)
from headwater.engine._format import format_expression
from headwater.engine._scope import Evaluator, Row, Scope, UnresolvedColumn, resolve_type
from headwater.engine.errors import ExpressionError
from headwater.engine.functions.temporal import parse_partial_timestamp
from headwater.engine.functions.types import NULL, EvalFailure, NullType
from headwater.sqlparse_ext import expressions as hx
from headwater.sqlparse_ext.sqltypes import (
    SqlType,
    StructType,
    identifier_name,
)

__all__ = [
    "NULL",
    "Compiled",
    "EvalFailure",
    "Evaluator",
    "NullType",
    "Row",
    "Scope",
    "UnresolvedColumn",
    "comparable",
    "compile_expression",
    "convert_numeric",
    "expand_stars",
    "format_expression",
    "like_regex",
    "output_name",
    "pseudo_timestamps_in_millis",
    "resolve_type",
    "select_names",
    "star_of",
    "struct_star_fields",
]


@dataclass(frozen=True, slots=True)
class Compiled:
    """A type-checked expression.

    Attributes:
        type: the result type (`NULL` for a bare NULL literal).
        name: the output column name ksqlDB gives it in a SELECT list.
        evaluate: row -> value; a row maps column names to values of the value model.
        references: the column names it reads.
        constant: True when it reads no column (then ``evaluate({})`` is its value).
        text: ksqlDB's rendering of the expression, for messages.
        bound: True when it reads no column but a cached plan's bound values (then
            ``evaluate({})`` is its value while an execution's values are active).
    """

    type: SqlType
    name: str
    evaluate: Evaluator
    references: frozenset[str]
    constant: bool
    text: str
    bound: bool = False


def output_name(node: exp.Expr) -> str | None:
    """The column name ksqlDB gives a SELECT item by itself, or None (then ``KSQL_COL_n``)."""
    if isinstance(node, exp.Alias):
        return identifier_name(node.args["alias"])
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
        return identifier_name(node.this)
    if isinstance(node, hx.StructDeref) and isinstance(node.expression, exp.Identifier):
        return identifier_name(node.expression)
    return None


def select_names(nodes: Sequence[exp.Expr], taken: Sequence[str] = ()) -> list[str]:
    """ksqlDB's output names of SELECT items.

    Items without a name of their own get ``KSQL_COL_0``, ``KSQL_COL_1``, ... in select order,
    skipping names already used; struct field names that repeat get ``_1``, ``_2`` suffixes.
    """
    own = [output_name(n) for n in nodes]
    used = set(taken) | {
        n for n, node in zip(own, nodes, strict=True) if n and not isinstance(node, hx.StructDeref)
    }
    names: list[str] = []
    counter = 0
    for name, node in zip(own, nodes, strict=True):
        if name is None:
            while f"KSQL_COL_{counter}" in used:
                counter += 1
            name = f"KSQL_COL_{counter}"
            counter += 1
        elif isinstance(node, hx.StructDeref) and name in used:
            suffix = 1
            while f"{name}_{suffix}" in used:
                suffix += 1
            name = f"{name}_{suffix}"
        used.add(name)
        names.append(name)
    return names


def star_of(item: exp.Expr, qualifiers: frozenset[str]) -> bool:
    """Whether a SELECT item is ``*`` or ``T.*``.

    Raises:
        ExpressionError: For ``T.*`` whose ``T`` is not the source's name or alias.
    """
    if not (
        isinstance(item, exp.Star)
        or isinstance(item, exp.Column)
        and isinstance(item.this, exp.Star)
    ):
        return False
    table = item.args.get("table")
    if table is not None and identifier_name(table) not in qualifiers:
        raise ExpressionError(
            f"'{identifier_name(table)}' is not a valid stream/table name or alias."
        )
    return True


def _dereferenced_type(node: exp.Expr, columns: Mapping[str, SqlType]) -> SqlType | None:
    """The type of a column, or of a field of a field of ... a STRUCT column (``V->A->B``)."""
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
        return columns.get(identifier_name(node.this))
    if isinstance(node, hx.StructDeref) and not isinstance(node.expression, exp.Star):
        parent = _dereferenced_type(node.this, columns)
        if isinstance(parent, StructType):
            name = identifier_name(node.expression)
            return next((f.type for f in parent.fields if f.name == name), None)
    return None


def struct_star_fields(item: exp.Expr, columns: Mapping[str, SqlType]) -> list[exp.Expr] | None:
    """``S->*`` as one ``S->F`` item per field of the STRUCT column ``S``; None for other items.

    Raises:
        ExpressionError: When ``S`` is not a STRUCT column.
    """
    if not (isinstance(item, hx.StructDeref) and isinstance(item.expression, exp.Star)):
        return None
    base = item.this
    struct = _dereferenced_type(base, columns)
    if not isinstance(struct, StructType):
        raise ExpressionError(f"Cannot expand {format_expression(base)}->*: not a STRUCT column.")
    return [
        hx.StructDeref(this=base.copy(), expression=exp.to_identifier(f.name, quoted=True))
        for f in struct.fields
    ]


def expand_stars(
    items: Sequence[exp.Expr],
    qualifiers: frozenset[str],
    columns: Mapping[str, SqlType],
    star: Callable[[], list[exp.Expr]],
) -> list[exp.Expr]:
    """A SELECT list with ``*``/``T.*`` replaced by ``star()`` and ``S->*`` by ``S``'s fields.

    Raises:
        ExpressionError: For ``T.*`` of an unknown qualifier or ``S->*`` of a non-STRUCT column.
    """
    expanded: list[exp.Expr] = []
    for item in items:
        if star_of(item, qualifiers):
            expanded.extend(star())
        elif (fields := struct_star_fields(item, columns)) is not None:
            expanded.extend(fields)
        else:
            expanded.append(item)
    return expanded


_TIME_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between)
#: Pseudo columns holding epoch milliseconds that ksqlDB compares with timestamp strings.
PSEUDO_TIMESTAMPS = ("ROWTIME", "WINDOWSTART", "WINDOWEND")


def pseudo_timestamps_in_millis(where: exp.Expr) -> exp.Expr:
    """``where`` with timestamp strings compared to ROWTIME, WINDOWSTART or WINDOWEND turned into
    epoch milliseconds, as ksqlDB rewrites them (``ROWTIME >= '2020-02-23T23:45'``; see
    :func:`parse_partial_timestamp` for the forms).

    Raises:
        ExpressionError: If such a string is not a timestamp (ksqlDB's message).
    """

    def is_pseudo(node: object) -> bool:
        return (
            isinstance(node, exp.Column)
            and not node.table
            and (node.name.upper() in PSEUDO_TIMESTAMPS)
        )

    def as_millis(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Literal) and node.is_string:
            try:
                return exp.Literal.number(parse_partial_timestamp(node.this))
            except ValueError as error:
                raise ExpressionError(str(error)) from None
        return node

    def rewrite(node: exp.Expr) -> exp.Expr:
        if isinstance(node, _TIME_COMPARISONS) and any(
            is_pseudo(child) for child in (node.this, node.args.get("expression"))
        ):
            for arg in ("this", "expression", "low", "high"):
                child = node.args.get(arg)
                if isinstance(child, exp.Expr):
                    node.set(arg, as_millis(child))
        return node

    if not any(is_pseudo(c) for c in where.find_all(exp.Column)):
        return where
    return where.copy().transform(rewrite)


def compile_expression(node: exp.Expr, scope: Scope, *, synthetic_index: int = 0) -> Compiled:
    """Type-checks ``node`` against ``scope`` and builds its evaluator.

    Args:
        node: a sqlglot expression as the headwater parser builds it (an ``Alias`` names it).
        scope: the columns it may reference.
        synthetic_index: ``n`` of the ``KSQL_COL_n`` name used when it has no name of its own.

    Returns:
        The compiled expression.

    Raises:
        ExpressionError: If it does not type-check (messages in ksqlDB's words); an unknown
            column raises `UnresolvedColumn`.
    """
    name = output_name(node) or f"KSQL_COL_{synthetic_index}"
    inner = node.this if isinstance(node, exp.Alias) else node
    try:
        result = _Compiler(scope).compile(inner)
        text = format_expression(inner)
    except RecursionError:
        raise ExpressionError(
            "The expression is nested too deeply to compile; split it into smaller expressions."
        ) from None
    return Compiled(result.type, name, result.fn, result.refs, result.const, text, result.bound)
