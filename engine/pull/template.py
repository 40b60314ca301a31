"""Cached pull plans: a pull query planned once per literal-free shape, bound per execution. Pure.

:func:`build_template` takes a parsed pull query and the positions of its literals (from
``sqlparse_ext.shape``), replaces each literal by a :class:`~headwater.engine._bound.BoundValue`
of the type the literal had, and plans that tree as :func:`~headwater.engine.pull.query.plan_pull`
would, but for the key access: subtrees of literals become slots folded per execution
(``engine._bound``) and the key extractor is prepared ahead. :meth:`PullTemplate.bind` then takes
the literal values of a query of the same shape, folds them, derives the key access from them (the
same extraction as the uncached planner, over the same tree) and gives a plan to execute.

What stays a literal (its value is then part of what the template matches): a literal the shape
scan found but the tree does not hold where it was (LIMIT), one inside a type (``DECIMAL(10, 2)``),
and a string compared with ROWTIME/WINDOWSTART/WINDOWEND (ksqlDB rewrites those to epoch
milliseconds while planning).

Any failure to build a template means the shape is not cached; any failure to bind means this one
execution runs through the uncached planner, which reports errors exactly as always.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

from sqlglot import exp

from headwater.engine._bound import BoundSlots, BoundValue, activate, deactivate
from headwater.engine.expressions import PSEUDO_TIMESTAMPS, Scope, compile_expression
from headwater.engine.pull._keys import KeyAccess, TableScan, TemplateMiss
from headwater.engine.pull.query import (
    PlanParts,
    PullPlan,
    PullResult,
    TableReader,
    execute_pull,
    plan_parts,
    stream_pull,
)
from headwater.engine.pull.where_rules import KeyOperand
from headwater.metastore.catalog import Source
from headwater.sqlparse_ext.statements import Select

__all__ = ["BoundPull", "PullTemplate", "TemplateMiss", "build_template"]

_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between, exp.In)
_EMPTY_SCOPE = Scope({})


@dataclasses.dataclass(frozen=True, slots=True)
class BoundPull:
    """A cached plan bound to one execution's literal values."""

    plan: PullPlan
    folded: list[Any]

    def execute(self, reader: TableReader, partitions: Collection[int] | None = None) -> PullResult:
        """:func:`~headwater.engine.pull.query.execute_pull` with this execution's values active."""
        token = activate(self.folded)
        try:
            return execute_pull(self.plan, reader, partitions=partitions)
        finally:
            deactivate(token)

    def stream(
        self, reader: TableReader, partitions: Collection[int] | None = None
    ) -> Iterator[list[Any]]:
        """:func:`~headwater.engine.pull.query.stream_pull` with this execution's values active while
        each row is computed (the rows may be consumed from several threads, one at a time)."""
        rows = stream_pull(self.plan, reader, partitions)
        while True:
            token = activate(self.folded)
            try:
                row = next(rows, None)
            finally:
                deactivate(token)
            if row is None:
                return
            yield row


@dataclasses.dataclass(frozen=True, slots=True)
class PullTemplate:
    """A pull query planned for every query of its shape.

    Attributes:
        source: the table it reads, as the catalog held it (a new Source object means the
            template is stale).
        custom_types: the catalog's custom types it was planned with (likewise).
        table_scan_enabled: the setting it was planned under.
        range_scan_enabled: likewise.
        fixed: (literal index, value) of the literals it keeps as they were.
    """

    source: Source
    custom_types: Mapping[str, Any]
    table_scan_enabled: bool
    range_scan_enabled: bool
    fixed: tuple[tuple[int, object], ...]
    parts: PlanParts
    slots: BoundSlots
    quick_access: Callable[[], KeyAccess] | None = None
    key_operands: tuple[KeyOperand, ...] = ()

    def matches(
        self,
        values: Sequence[object],
        source: Source | None,
        custom_types: Mapping[str, Any],
        table_scan_enabled: bool,
        range_scan_enabled: bool = True,
    ) -> bool:
        """Whether this template answers a query of its shape with these values, now."""
        return (
            source is self.source
            and custom_types is self.custom_types
            and table_scan_enabled == self.table_scan_enabled
            and range_scan_enabled == self.range_scan_enabled
            and all(_same(values[i], v) for i, v in self.fixed)
        )

    def bind(self, values: Sequence[object]) -> BoundPull:
        """The plan for these literal values.

        Raises:
            Exception: a fold or the key extraction failed, or a key value is NULL: plan this
                execution afresh (the uncached planner says why).
        """
        folded = self.slots.fold(values)
        parts = self.parts
        access: KeyAccess = TableScan()
        if parts.extractor is not None:
            token = activate(folded)
            try:
                quick = self.quick_access
                if quick is not None:
                    access = quick()
                else:
                    parts.extractor.check_operands(self.key_operands)
                    access = parts.extractor.access(parts.where)
            finally:
                deactivate(token)
        return BoundPull(parts.plan(access), folded)


def _same(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


def build_template(
    select: Select,
    starts: Sequence[int],
    values: Sequence[object],
    source: Source,
    custom_types: Mapping[str, Any],
    table_scan_enabled: bool,
    range_scan_enabled: bool = True,
) -> PullTemplate:
    """A template for ``select`` (a pull query on ``source``, parsed from the text whose literals
    start at ``starts`` and hold ``values``).

    Raises:
        Exception: the query cannot be planned with bound values (then do not cache its shape).
    """
    slot_of = {start: i for i, start in enumerate(starts)}
    used: set[int] = set()
    query = select.query

    def bind_literals(node: exp.Expr) -> exp.Expr:
        copied = node.copy()
        for literal in list(copied.find_all(exp.Literal)):
            start = literal.meta.get("start")
            index = None if start is None else slot_of.get(select.offset + int(start))
            if index is None or _kept(literal):
                continue
            target: exp.Expr = literal
            if isinstance(literal.parent, exp.Neg) and literal.parent.this is literal:
                target = literal.parent
            bound = BoundValue(this=index)
            bound.meta["type"] = compile_expression(target, _EMPTY_SCOPE).type
            bound.meta["negate"] = target is not literal
            if target is copied:
                copied = bound
            else:
                target.replace(bound)
            used.add(index)
        return copied

    bound_query = dataclasses.replace(
        query,
        select=tuple(bind_literals(item) for item in query.select),
        where=None if query.where is None else bind_literals(query.where),
    )
    slots = BoundSlots()
    quick = None
    operands: tuple[KeyOperand, ...] = ()
    with slots.building():
        parts = plan_parts(bound_query, source, custom_types)
        if parts.extractor is not None:
            operands = parts.where_plan(table_scan_enabled, range_scan_enabled).key_operands
            parts.extractor.prepare(parts.where)
            quick = parts.extractor.quick_access(parts.where)
    fixed = tuple((i, values[i]) for i in range(len(values)) if i not in used)
    return PullTemplate(
        source,
        custom_types,
        table_scan_enabled,
        range_scan_enabled,
        fixed,
        parts,
        slots,
        quick,
        operands,
    )


def _kept(literal: exp.Literal) -> bool:
    """Whether a literal must stay as it is (see the module docstring)."""
    if literal.find_ancestor(exp.DataType) is not None:
        return True
    parent = literal.parent
    if isinstance(parent, exp.Neg):
        parent = parent.parent
    if literal.is_string and isinstance(parent, _COMPARISONS):
        operands = [
            parent.this,
            parent.args.get("expression"),
            parent.args.get("low"),
            parent.args.get("high"),
            *parent.expressions,
        ]
        return any(
            isinstance(o, exp.Column) and o.name.upper() in PSEUDO_TIMESTAMPS for o in operands
        )
    return False
