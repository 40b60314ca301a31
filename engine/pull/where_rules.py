"""ksqlDB's rules for a pull query's WHERE on a table: which access it takes, what it refuses. Pure.

ksqlDB plans a table's pull query in three steps, and this module follows them (its source:
``QueryFilterNode``, ``PullQueryRewriter``, ``LogicRewriter`` and ``PullPhysicalPlanBuilder``):

1. The WHERE is rewritten: ``BETWEEN`` into ``>=`` and ``<=``, ``IN`` into ORs of ``=``, NOT pushed
   down to the comparisons (De Morgan), and the result put in disjunctive normal form.
2. Each disjunct is validated. A term must be a comparison or a LIKE; anything else (``IS NULL``, a
   boolean column, ``NOT`` over a comparison, a function) is refused outright. A comparison must
   have a column on one side and no column on the other, must not be ``<>``/``IS [NOT] DISTINCT
   FROM`` on a key column, must not repeat a key column; a disjunct must bound some key column, and
   every one of a multi-column key. Breaking any of these makes the query a table scan when table
   scans are enabled, and is refused with ksqlDB's words otherwise (some are refused either way).
3. When no disjunct needs a scan, the key constraint of each is extracted (an ``=`` on a key
   column wins over a range on it; a NULL key value is refused): every disjunct an equality on
   the whole key is a key lookup; a single disjunct with one range on a STRING or BYTES key is a
   range scan (a table scan when ``ksql.query.pull.range.scan.enabled`` is off, or the table is
   windowed); anything else is a table scan, refused ("Query requires table scan to be enabled")
   when table scans are disabled.

What this decides is whether a query is answered, and ksqlDB's plan kind. Which rows are read is
``_keys.KeyExtractor``'s business: it may read fewer (a range where ksqlDB scans), never other
rows, because the whole WHERE is applied to every row read.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

from headwater.engine._format import format_expression
from headwater.engine.coercion import base_name
from headwater.engine.errors import PullQueryError
from headwater.engine.functions.types import BYTES, STRING
from headwater.sqlparse_ext.sqltypes import SqlType, identifier_name

MAX_DISJUNCTS = 10_000
"""Most disjuncts a WHERE may expand to in normal form before it is planned as a scan."""

WINDOW_BOUNDS = ("WINDOWSTART", "WINDOWEND")

_SYNTAX_HELP = (
    " See https://cnfl.io/queries for more info.\n"
    "Add EMIT CHANGES if you intended to issue a push query."
)
_WHERE_HELP = (
    "\nPull queries require a WHERE clause that:\n"
    " - includes a key equality expression, e.g. `SELECT * FROM X WHERE <key-column> = Y;`.\n"
    " - in the case of a multi-column key, is a conjunction of equality expressions that cover "
    "all key columns.\n"
    " - to support range expressions, e.g.,  SELECT * FROM X WHERE <key-column> < Y;`, range "
    "scans need to be enabled by setting ksql.query.pull.range.scan.enabled=true"
)
_WINDOW_HELP = (
    "\n - (optionally) limits the time bounds of the windowed table.\n"
    "\t Bounds on [`WINDOWSTART`, `WINDOWEND`] are supported\n"
    "\t Supported operators are [EQUAL, GREATER_THAN, GREATER_THAN_OR_EQUAL, LESS_THAN, "
    "LESS_THAN_OR_EQUAL]"
)
_SCAN_HELP = (
    "\nIf more flexible queries are needed, , table scans can be enabled by setting "
    "ksql.query.pull.table.scan.enabled=true."
)
SCAN_REQUIRED = (
    "Query requires table scan to be enabled. Table scans can be enabled by setting "
    "ksql.query.pull.table.scan.enabled=true"
)

#: sqlglot's comparison nodes: ksqlDB's ComparisonExpression.Type name and its symbol.
_COMPARISONS: dict[type[exp.Expr], tuple[str, str]] = {
    exp.EQ: ("EQUAL", "="),
    exp.NEQ: ("NOT_EQUAL", "<>"),
    exp.GT: ("GREATER_THAN", ">"),
    exp.GTE: ("GREATER_THAN_OR_EQUAL", ">="),
    exp.LT: ("LESS_THAN", "<"),
    exp.LTE: ("LESS_THAN_OR_EQUAL", "<="),
    exp.NullSafeEQ: ("IS_NOT_DISTINCT_FROM", "IS NOT DISTINCT FROM"),
    exp.NullSafeNEQ: ("IS_DISTINCT_FROM", "IS DISTINCT FROM"),
}
_NOT_KEYED = ("NOT_EQUAL", "IS_DISTINCT_FROM", "IS_NOT_DISTINCT_FROM")
_WINDOW_COMPARISONS = frozenset(
    ("EQUAL", "GREATER_THAN", "GREATER_THAN_OR_EQUAL", "LESS_THAN", "LESS_THAN_OR_EQUAL")
)
_RANGE_KEY_TYPES = (STRING, BYTES)


class PlanKind(enum.Enum):
    """ksqlDB's kind of pull-query plan (``PullPhysicalPlanType``)."""

    KEY_LOOKUP = "KEY_LOOKUP"
    RANGE_SCAN = "RANGE_SCAN"
    TABLE_SCAN = "TABLE_SCAN"


@dataclass(frozen=True, slots=True)
class KeyOperand:
    """The value side of a comparison with key column ``column``, which ksqlDB resolves to a key
    value: it must not be NULL, and must convert to the column's type (``text`` is the
    comparison, as ksqlDB's refusal quotes it)."""

    column: str
    value: exp.Expr
    text: str


@dataclass(frozen=True, slots=True)
class WherePlan:
    """What ksqlDB's rules make of a WHERE.

    Attributes:
        kind: the plan kind.
        key_operands: the values compared with key columns where ksqlDB resolves them (none when
            the WHERE needed a scan before extraction): the caller refuses a NULL among them
            (``KeyExtractor.check_operands``).
    """

    kind: PlanKind
    key_operands: tuple[KeyOperand, ...] = ()


@dataclass(frozen=True, slots=True)
class _Term:
    """One term of a disjunct: a comparison (``kind`` its type name), a LIKE, or other."""

    node: exp.Expr
    kind: str  # a comparison's type name, "LIKE", or "OTHER"
    left: exp.Expr | None = None
    right: exp.Expr | None = None
    negated: bool = False

    def text(self) -> str:
        if self.left is not None and self.right is not None and self.kind in _SYMBOLS:
            inner = f"({format_expression(self.left)} {_SYMBOLS[self.kind]} "
            inner += f"{format_expression(self.right)})"
        else:
            inner = format_expression(self.node)
        return f"(NOT {inner})" if self.negated else inner


_SYMBOLS = dict(_COMPARISONS.values())


class _TooMany(Exception):
    """The WHERE expands to more than MAX_DISJUNCTS disjuncts."""


def invalid_where(message: str, windowed: bool) -> PullQueryError:
    """ksqlDB's ``invalidWhereClauseException``: the cause, then what a pull query's WHERE needs."""
    return PullQueryError(
        f"{message}. {_SYNTAX_HELP}{_WHERE_HELP}{_WINDOW_HELP if windowed else ''}{_SCAN_HELP}"
    )


def plan_where(
    where: exp.Expr | None,
    keys: Sequence[tuple[str, SqlType]],
    columns: Mapping[str, SqlType],
    *,
    windowed: bool,
    table_scans: bool,
    range_scans: bool,
) -> WherePlan:
    """ksqlDB's plan kind for a pull query on a table, or its refusal.

    Args:
        where: the WHERE clause (pseudo timestamps already in milliseconds), or None.
        keys: the table's key columns (not a windowed table's bounds), in key order.
        columns: every column the WHERE may name, with its type.
        windowed: whether the table is windowed.
        table_scans: ``ksql.query.pull.table.scan.enabled``.
        range_scans: ``ksql.query.pull.range.scan.enabled``.

    Raises:
        PullQueryError: ksqlDB's refusal, word for word.
    """
    if where is None:
        if table_scans:
            return WherePlan(PlanKind.TABLE_SCAN)
        raise invalid_where("Missing WHERE clause", windowed)
    try:
        disjuncts = _dnf(where, False)
    except _TooMany:
        if table_scans:
            return WherePlan(PlanKind.TABLE_SCAN)
        raise PullQueryError(
            f"{SCAN_REQUIRED} (the WHERE clause expands to more than {MAX_DISJUNCTS} "
            "alternatives, too many for key lookups)"
        ) from None
    rules = _Rules(keys, columns, windowed, table_scans)
    if any(rules.needs_scan(d) for d in disjuncts):  # (it raises when scans are off)
        return WherePlan(PlanKind.TABLE_SCAN)
    constraints: list[str | None] = []  # per disjunct: EQUAL, a range type, or None (no key)
    operands: list[KeyOperand] = []
    for disjunct in disjuncts:
        constraints.append(rules.constraint(disjunct, operands))
        if windowed:
            _check_window_bounds(disjunct)
    if any(c is None for c in constraints):
        kind = PlanKind.TABLE_SCAN
    elif all(c == "EQUAL" for c in constraints):
        kind = PlanKind.KEY_LOOKUP
    elif len(constraints) == 1:
        kind = PlanKind.RANGE_SCAN
    else:
        kind = PlanKind.TABLE_SCAN
    if kind is PlanKind.RANGE_SCAN and (not range_scans or windowed):
        kind = PlanKind.TABLE_SCAN
    if kind is PlanKind.TABLE_SCAN and not table_scans:
        raise PullQueryError(SCAN_REQUIRED)
    return WherePlan(kind, tuple(operands))


def _dnf(node: exp.Expr, negated: bool) -> list[list[_Term]]:
    """``node`` (negated when asked) as an OR of ANDs of terms, ksqlDB's rewrite."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Not):
        return _dnf(node.this, not negated)
    if isinstance(node, (exp.And, exp.Or)):
        conjunction = isinstance(node, exp.And) != negated
        left, right = _dnf(node.this, negated), _dnf(node.expression, negated)
        if not conjunction:
            if len(left) + len(right) > MAX_DISJUNCTS:
                raise _TooMany
            return left + right
        if len(left) * len(right) > MAX_DISJUNCTS:
            raise _TooMany
        return [a + b for a in left for b in right]
    if isinstance(node, exp.Between):
        low = [_Term(node, "GREATER_THAN_OR_EQUAL", node.this, node.args["low"], negated)]
        high = [_Term(node, "LESS_THAN_OR_EQUAL", node.this, node.args["high"], negated)]
        return [low, high] if negated else [low + high]
    if isinstance(node, exp.In) and not node.args.get("query") and node.expressions:
        terms = [_Term(node, "EQUAL", node.this, item, negated) for item in node.expressions]
        if negated:
            return [terms]
        if len(terms) > MAX_DISJUNCTS:
            raise _TooMany
        return [[t] for t in terms]
    if type(node) in _COMPARISONS:
        kind = _COMPARISONS[type(node)][0]
        return [[_Term(node, kind, node.this, node.expression, negated)]]
    if isinstance(node, exp.Escape) and isinstance(node.this, exp.Like):
        return [[_Term(node, "LIKE", node.this.this, node.this.expression, negated)]]
    if isinstance(node, exp.Like):
        return [[_Term(node, "LIKE", node.this, node.expression, negated)]]
    return [[_Term(node, "OTHER", negated=negated)]]


def _column(node: exp.Expr | None) -> str | None:
    """The name of the column ``node`` is, if it is one."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
        return identifier_name(node.this)
    return None


def _names_column(node: exp.Expr) -> bool:
    return any(not isinstance(c.this, exp.Star) for c in node.find_all(exp.Column))


def _column_side(term: _Term) -> tuple[str | None, exp.Expr | None]:
    """ksqlDB's choice: the right side if it is a column, else the left; and the other side."""
    right, left = _column(term.right), _column(term.left)
    if right is not None:
        return right, term.left
    return left, term.right


def _disjunct_text(disjunct: list[_Term]) -> str:
    text = disjunct[0].text()
    for term in disjunct[1:]:
        text = f"({text} AND {term.text()})"
    return text


class _Rules:
    """ksqlDB's validation of one table's disjuncts (``QueryFilterNode.Validator``) and its key
    constraint extraction (``KeyValueExtractor``)."""

    def __init__(
        self,
        keys: Sequence[tuple[str, SqlType]],
        columns: Mapping[str, SqlType],
        windowed: bool,
        table_scans: bool,
    ) -> None:
        self.keys = [name for name, _ in keys]
        self.key_types = dict(keys)
        self.columns = columns
        self.windowed = windowed
        self.table_scans = table_scans
        self.described = "[" + ", ".join(f"`{n}` {t} KEY" for n, t in keys) + "]"

    def _scan_or_raise(self, message: str, windowed: bool) -> bool:
        if self.table_scans:
            return True
        raise invalid_where(message, windowed)

    def needs_scan(self, disjunct: list[_Term]) -> bool:
        """Whether this disjunct makes the query a table scan (raises when that is refused)."""
        seen: list[str] = []
        scan = False
        for term in disjunct:
            if term.negated or term.kind == "OTHER":
                raise invalid_where(f"Unsupported expression in WHERE clause: {term.text()}", False)
            if term.kind == "LIKE":
                scan = self._like(term) or scan
                continue
            column, other = _column_side(term)
            if column is None:
                scan = self._scan_or_raise(
                    "A comparison must directly reference a key column", self.windowed
                )
                continue
            if other is not None and _names_column(other):
                scan = self._scan_or_raise(
                    "A comparison must be between a key column and a resolvable expression",
                    self.windowed,
                )
                continue
            if column in WINDOW_BOUNDS:
                if term.kind not in _WINDOW_COMPARISONS:
                    raise invalid_where(f"Unsupported `{column}` bounds: {term.kind}", True)
                if not self.windowed:
                    raise invalid_where(
                        "Cannot use WINDOWSTART/WINDOWEND on non-windowed source", False
                    )
                continue
            if column not in self.columns:
                raise invalid_where(f"Bound on non-existent column `{column}`", self.windowed)
            if column not in self.key_types:
                continue
            if term.kind in _NOT_KEYED:
                scan = self._scan_or_raise(
                    f"Bound on key columns '{self.described}' must currently be '='",
                    self.windowed,
                )
            if column in seen and not self.table_scans:
                raise invalid_where(
                    "A comparison condition on the key column cannot be combined with other "
                    "comparisons such as an IN predicate",
                    self.windowed,
                )
            if column not in seen:
                seen.append(column)
        if scan:
            return True
        if not seen:
            return self._scan_or_raise(
                f"WHERE clause missing key column for disjunct: {_disjunct_text(disjunct)}",
                self.windowed,
            )
        if len(seen) != len(self.keys):
            specified = ", ".join(f"`{k}`" for k in self.keys if k in seen)
            return self._scan_or_raise(
                "Multi-column sources must specify every key in the WHERE clause. "
                f"Specified: [{specified}] Expected: {self.described}",
                self.windowed,
            )
        return False

    def _like(self, term: _Term) -> bool:
        column = _column(term.left)
        if column is None:
            return self._scan_or_raise("Like condition must be between strings", self.windowed)
        if column not in self.columns:
            raise invalid_where(f"Like condition on non-existent column `{column}`", self.windowed)
        if self.columns[column] != STRING:
            raise invalid_where(
                "The column type for Like condition must be VARCHAR. The column type is "
                f"{base_name(self.columns[column])}",
                self.windowed,
            )
        pattern = term.right
        while isinstance(pattern, exp.Paren):
            pattern = pattern.this
        if not (
            isinstance(pattern, exp.Null) or isinstance(pattern, exp.Literal) and pattern.is_string
        ):
            raise invalid_where(
                f"Like condition on non-string pattern {_java_class(pattern)}", self.windowed
            )
        return False

    def constraint(self, disjunct: list[_Term], operands: list[KeyOperand]) -> str | None:
        """The disjunct's key constraint: "EQUAL", a range comparison's type name, or None (a
        table scan); appends the key values it resolves to ``operands``."""
        chosen: dict[str, str] = {}
        for term in disjunct:
            if term.kind == "LIKE":
                continue
            column, other = _column_side(term)
            if column is None or other is None or column not in self.key_types:
                continue
            operands.append(KeyOperand(column, other, term.text()))
            if chosen.get(column) == "EQUAL":
                continue
            if term.kind == "EQUAL" or column not in chosen:
                chosen[column] = term.kind
        if not chosen:
            return None
        if len(chosen) > 1:
            return "EQUAL" if all(k == "EQUAL" for k in chosen.values()) else None
        ((column, kind),) = chosen.items()
        if kind == "EQUAL":
            return kind
        return kind if self.key_types[column] in _RANGE_KEY_TYPES else None


def _check_window_bounds(disjunct: list[_Term]) -> None:
    """ksqlDB's ``WindowBoundsExtractor``: one bound of each kind per window column, and an
    equality bound alone on its column."""
    bounds: dict[tuple[str, str], bool] = {}
    for term in disjunct:
        if term.kind == "LIKE":
            continue
        column = _column(term.right)
        inverted = column is not None
        if column is None:
            column = _column(term.left)
        if column not in WINDOW_BOUNDS:
            continue
        kind = term.kind
        if kind in ("LESS_THAN", "LESS_THAN_OR_EQUAL"):
            kind = "GREATER_THAN" if inverted else "LESS_THAN"
        elif kind in ("GREATER_THAN", "GREATER_THAN_OR_EQUAL"):
            kind = "LESS_THAN" if inverted else "GREATER_THAN"
        fresh = (column, kind) not in bounds
        bounds[(column, kind)] = True
        if (column, "EQUAL") in bounds and (
            (column, "LESS_THAN") in bounds or (column, "GREATER_THAN") in bounds
        ):
            raise invalid_where(
                f"`{term.text()}` cannot be combined with other `{column}` bounds", True
            )
        if not fresh:
            raise invalid_where(f"Duplicate `{column}` bounds on: {kind}", True)


def _java_class(node: exp.Expr | None) -> str:
    """The name of the ksqlDB expression class a node parses to (it names it in one refusal)."""
    names = {
        exp.Column: "UnqualifiedColumnReferenceExp",
        exp.Literal: "IntegerLiteral",
        exp.Boolean: "BooleanLiteral",
        exp.Anonymous: "FunctionCall",
        exp.Cast: "Cast",
    }
    name = next((v for k, v in names.items() if isinstance(node, k)), "Expression")
    if isinstance(node, exp.Literal) and not node.is_string and "." in node.name:
        name = "DecimalLiteral"
    return f"io.confluent.ksql.execution.expression.tree.{name}"
