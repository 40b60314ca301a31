"""A persistent query's joins, checked and planned with ksqlDB's rules. Pure.

ksqlDB plans ``FROM a JOIN b ON ... JOIN c ON ...`` as a left-deep tree of binary joins. Each source
row enters the tree with its columns renamed ``ALIAS_COLUMN`` (key, value and pseudo columns: ksqlDB's
pre-join projection); each join matches rows on the value of its ON expression on either side, and
gives rows that carry both sides' columns plus the join key. A side whose ON expression is not its
key is re-keyed (streams only: a table must be joined on its primary key, or, on the left of a
table-table join, on a foreign key).

This module turns that into a `JoinPlan`: the leaves, the binary steps, and the **joined source**
(the schema of the tree's result, as ksqlDB's JoinNode has it). The rest of the query (WHERE,
SELECT, PARTITION BY, GROUP BY ...) is rewritten to read the joined source's column names and then
compiled by `query_plan.py` / `aggregate_plan.py` exactly as a query over one source: one compiler
for what every expression means, joins or not.

The messages are ksqlDB's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from sqlglot import exp

from headwater.engine.errors import ExpressionError
from headwater.engine.expressions import (
    Evaluator,
    Scope,
    compile_expression,
    format_expression,
    resolve_type,
)
from headwater.engine.functions.types import BIGINT, INTEGER
from headwater.engine.values import has_map, map_key_refusal
from headwater.metastore.catalog import Catalog, Column, Source, SourceKind
from headwater.sqlparse_ext.sqltypes import SqlType, identifier_name
from headwater.sqlparse_ext.statements import Join, Query, SourceRef

JoinKind = Literal["INNER", "LEFT", "RIGHT", "FULL"]
PSEUDO = (("ROWTIME", BIGINT), ("ROWPARTITION", INTEGER), ("ROWOFFSET", BIGINT))
#: The name of the joined source in messages and EXPLAIN.
JOINED = "JOIN"
#: Stream-stream joins without GRACE PERIOD keep ksqlDB's old windows: 24 hours of grace, and
#: LEFT/OUTER results without a match emitted at once (Kafka Streams' ``JoinWindows.of``).
DEFAULT_GRACE_MS = 24 * 3600 * 1000
_KIND_TEXT = {
    "INNER": "[INNER] JOIN",
    "LEFT": "LEFT [OUTER] JOIN",
    "RIGHT": "RIGHT [OUTER] JOIN",
    "FULL": "[FULL] OUTER JOIN",
}


class JoinError(ExpressionError):
    """A join ksqlDB refuses (or headwater does not run yet: ``later`` is True)."""

    def __init__(self, message: str, node: exp.Expr | None = None, later: bool = False) -> None:
        super().__init__(message)
        self.node = node
        self.later = later


class MissingSource(JoinError):
    """A joined stream or table does not exist (where its name is, the caller finds)."""


@dataclass(frozen=True, slots=True)
class JoinLeaf:
    """One source of the join, with its alias and its columns as the join names them."""

    index: int
    source: Source
    alias: str
    columns: tuple[tuple[str, str, SqlType], ...]  # (source column, ALIAS_COLUMN, type)

    @property
    def kind(self) -> SourceKind:
        return self.source.kind

    def prefixed(self, column: str) -> str:
        return f"{self.alias}_{column}"


@dataclass(frozen=True, slots=True)
class JoinStep:
    """One binary join: ``left`` (a leaf or the steps before) with the leaf ``right``.

    Attributes:
        left_key / right_key: the ON expression of each side, over that side's joined columns.
        left_rekey / right_rekey: whether that side is re-keyed (repartitioned) by it.
        before_ms / after_ms / grace_ms: the WITHIN window of a stream-stream join (else None);
            ``grace_ms`` None: no GRACE PERIOD (ksqlDB's old, eager windows).
        key_name: the result's key column (``ALIAS_COLUMN``, or the synthetic ``ROWKEY``).
        foreign_key: a foreign-key table-table join (``left_key`` is the foreign key).
    """

    index: int
    kind: JoinKind
    left: JoinStep | JoinLeaf
    right: JoinLeaf
    left_key: Evaluator = field(repr=False, compare=False)
    right_key: Evaluator = field(repr=False, compare=False)
    left_rekey: bool
    right_rekey: bool
    key_name: str
    key_type: SqlType
    result: SourceKind
    before_ms: int | None = None
    after_ms: int | None = None
    grace_ms: int | None = None
    foreign_key: bool = False
    left_text: str = ""
    right_text: str = ""
    left_column: bool = False  # the ON expression of that side is a plain column reference
    right_column: bool = False

    @property
    def left_kind(self) -> SourceKind:
        return self.left.kind if isinstance(self.left, JoinLeaf) else self.left.result

    @property
    def kind_of(self) -> str:
        """``SS``, ``ST`` or ``TT``."""
        return ("S" if self.left_kind is SourceKind.STREAM else "T") + (
            "S" if self.right.kind is SourceKind.STREAM else "T"
        )

    @property
    def leaves(self) -> tuple[JoinLeaf, ...]:
        before = (self.left,) if isinstance(self.left, JoinLeaf) else self.left.leaves
        return (*before, self.right)

    @property
    def columns(self) -> tuple[tuple[str, SqlType], ...]:
        """Every joined column (``ALIAS_COLUMN`` and type) this step's rows carry."""
        return tuple((p, t) for leaf in self.leaves for _c, p, t in leaf.columns)


@dataclass(frozen=True, slots=True)
class JoinPlan:
    """The joins of a query: the tree, the joined source, and the query rewritten over it."""

    leaves: tuple[JoinLeaf, ...]
    steps: tuple[JoinStep, ...]  # in execution order; the last is the root
    joined: Source
    query: Query
    partitions: int

    @property
    def root(self) -> JoinStep:
        return self.steps[-1]

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(leaf.source.name for leaf in self.leaves)


def plan_joins(query: Query, catalog: Catalog, sink_name: str) -> JoinPlan:
    """The join plan of a query with JOINs; the query comes back rewritten over the joined source.

    Raises:
        JoinError: ksqlDB would refuse the join (its message), or it needs what is not run yet.
    """
    custom = dict(catalog.types)
    refs = [query.source, *(j.source for j in query.joins)]
    leaves = [_leaf(i, ref, catalog, custom) for i, ref in enumerate(refs)]
    _check_sources(leaves, query)
    names = {q: leaf for leaf in leaves for q in {leaf.alias, leaf.source.name}}
    _check_criteria(query.joins, names, leaves)

    steps: list[JoinStep] = []
    tree: JoinStep | JoinLeaf = leaves[0]
    in_tree = {leaves[0].index}
    for number, join in enumerate(query.joins, start=1):
        leaf = leaves[number]
        steps.append(
            _step(
                len(steps), join, tree, in_tree, leaf, names, leaves, custom, len(query.joins) > 1
            )
        )
        tree = steps[-1]
        in_tree.add(leaf.index)
    root = steps[-1]
    _check_windowed(leaves, steps)
    viable = _viable_keys(root)
    selected = [_bare(i) for i in query.select]
    key_name = _key_name(root, viable, query.select, names, leaves)
    steps = _with_key_names(steps, key_name)
    root = steps[-1]
    joined = _joined_source(root, leaves)
    _check_key_selected(root, viable, query, sink_name, names, leaves, selected)
    rewritten = _rewrite_query(query, root, names, leaves)
    return JoinPlan(tuple(leaves), tuple(steps), joined, rewritten, _partitions(root))


# -- leaves and steps ---------------------------------------------------------------------------------


def _leaf(index: int, ref: SourceRef, catalog: Catalog, custom: Mapping[str, object]) -> JoinLeaf:
    source = catalog.source(ref.name)
    if source is None:
        raise MissingSource(f"{ref.name} does not exist.")
    alias = ref.alias or ref.name
    columns = [(c.name, f"{alias}_{c.name}", resolve_type(c.type, custom)) for c in source.columns]
    taken = {c.name for c in source.columns}
    columns += [(n, f"{alias}_{n}", t) for n, t in PSEUDO if n not in taken]
    return JoinLeaf(index, source, alias, tuple(columns))


def _check_sources(leaves: list[JoinLeaf], query: Query) -> None:
    names = [leaf.source.name for leaf in leaves]
    if len(leaves) == 2 and names[0] == names[1]:
        raise JoinError(
            f"Can not join '{names[0]}' to '{names[1]}': self joins are not yet supported."
        )
    for name in names:
        if names.count(name) > 1:
            raise JoinError(
                f"N-way joins do not support multiple occurrences of the same source. "
                f"Source: '{name}'"
            )
    kafka = [leaf.source.name for leaf in leaves if leaf.source.value_format == "KAFKA"]
    if kafka:
        raise JoinError(
            f"Source(s) {', '.join(kafka)} are using the 'KAFKA' value format. This "
            "format does not yet support JOIN."
        )


def _condition(join: Join) -> exp.Expr:
    """A join's ON condition, without the parentheses around it (they say nothing)."""
    on = join.on
    while isinstance(on, exp.Paren):
        on = on.this
    return on


def _check_criteria(
    joins: Sequence[Join], names: Mapping[str, JoinLeaf], leaves: Sequence[JoinLeaf]
) -> None:
    """ksqlDB's analyzer, over every join before any is planned: the two sides of an equality
    each read one source, and not the same one."""
    for join in joins:
        on = _condition(join)
        if not isinstance(on, exp.EQ):
            continue  # refused when its step is planned
        used = [_sources_of(side, names, leaves, "JOIN ON") for side in (on.this, on.expression)]
        if all(len(u) == 1 for u in used) and used[0] == used[1]:
            (only,) = used[0]
            shown = f"`{leaves[only].alias}`"
            raise JoinError(
                "Each side of the join must reference exactly one source and not the same "
                f"source. Left side references {shown} and right references {shown}",
                on,
            )


def _step(
    index: int,
    join: Join,
    tree: JoinStep | JoinLeaf,
    in_tree: set[int],
    leaf: JoinLeaf,
    names: Mapping[str, JoinLeaf],
    leaves: Sequence[JoinLeaf],
    custom: Mapping[str, object],
    n_way: bool,
) -> JoinStep:
    on = _condition(join)
    if isinstance(on, exp.And):
        raise JoinError(
            "Invalid join condition: joins on multiple conditions are not yet "
            f"supported. Got {format_expression(on)}.",
            on,
        )
    if not isinstance(on, exp.EQ):
        raise JoinError(
            f"Unsupported join expression: {format_expression(on)}. Only equality "
            "conditions are supported.",
            on,
        )
    sides = []
    for side in (on.this, on.expression):
        used = _sources_of(side, names, leaves, "JOIN ON")
        if len(used) != 1:
            raise JoinError(
                f"Invalid comparison expression '{format_expression(side)}' in join "
                f"'{format_expression(on)}'. Each side of the join comparision must "
                "contain references from exactly one source.",
                side,
            )
        sides.append((side, used.pop()))
    (a, a_leaf), (b, b_leaf) = sides
    if a_leaf == b_leaf:
        name = leaves[a_leaf].alias
        raise JoinError(
            f"Each side of the join must reference exactly one source and not the "
            f"same source. Left side references `{name}` and right references "
            f"`{name}`",
            on,
        )
    if a_leaf == leaf.index and b_leaf in in_tree:
        (a, a_leaf), (b, b_leaf) = (b, b_leaf), (a, a_leaf)
        flipped = True
    elif b_leaf == leaf.index and a_leaf in in_tree:
        flipped = False
    else:
        raise JoinError(
            f"A join criteria is expected to reference the source (`{leaf.alias}`) in "
            f"the FROM clause, instead the right source references "
            f"`{leaves[b_leaf].alias}` and the left source references "
            f"`{leaves[a_leaf].alias}`",
            on,
        )
    left_text, right_text = _qualified_text(a, names), _qualified_text(b, names)
    shown = f"{right_text} = {left_text}" if flipped else f"{left_text} = {right_text}"
    left_kind = tree.kind if isinstance(tree, JoinLeaf) else tree.result
    kind: JoinKind = join.kind
    if left_kind is SourceKind.TABLE and leaf.kind is SourceKind.STREAM:
        first = leaves[0].source.name if isinstance(tree, JoinStep) else tree.source.name
        raise JoinError(
            f"Invalid join order: table-stream joins are not supported; only "
            f"stream-table joins. Got {first} {_KIND_TEXT[kind]} "
            f"{leaf.source.name}."
        )
    left_scope = _scope(
        tree.columns if isinstance(tree, JoinStep) else tuple((p, t) for _c, p, t in tree.columns),
        custom,
    )
    right_scope = _scope(tuple((p, t) for _c, p, t in leaf.columns), custom)
    left_node, right_node = (
        _rewrite(a, names, leaves, "JOIN ON"),
        _rewrite(b, names, leaves, "JOIN ON"),
    )
    left_compiled = compile_expression(left_node, left_scope)
    right_compiled = compile_expression(right_node, right_scope)
    for node, compiled in ((left_node, left_compiled), (right_node, right_compiled)):
        if has_map(compiled.type):  # the join's key, on each side (ksqlDB's name: alias_column)
            key = node.name if isinstance(node, exp.Column) else compiled.text
            raise JoinError(map_key_refusal(key, compiled.type))
    right_on_key = _is_key_of(b, leaf, names)
    left_on_key = (
        _is_key_of(a, tree, names)
        if isinstance(tree, JoinLeaf)
        else _in_equivalence(a, tree, names)
    )
    foreign = False
    if left_kind is SourceKind.STREAM and leaf.kind is SourceKind.TABLE:
        if kind == "FULL":
            raise JoinError(
                f"Invalid join type: full-outer join not supported for stream-table "
                f"join. Got {leaves[0].source.name} {_KIND_TEXT[kind]} "
                f"{leaf.source.name}."
            )
        if not right_on_key:
            raise JoinError(
                f"Invalid join condition: stream-table joins require to join on the "
                f"table's primary key. Got {shown}."
            )
        if kind == "RIGHT":
            raise JoinError(
                f"Invalid join type: right-outer join not supported for stream-table "
                f"join. Got {leaves[0].source.name} {_KIND_TEXT[kind]} "
                f"{leaf.source.name}."
            )
        if join.within is not None:
            raise JoinError(
                "A window definition was provided for a Stream-Table join. These "
                "joins are not windowed. Please drop the window definition (i.e. the "
                "WITHIN clause) and try to execute your Stream-Table join again."
            )
    elif left_kind is SourceKind.TABLE:
        if join.within is not None:
            raise JoinError(
                "A window definition was provided for a Table-Table join. These "
                "joins are not windowed. Please drop the window definition (i.e. the "
                "WITHIN clause) and try to execute your Table-Table join again."
            )
        if not right_on_key:
            raise JoinError(
                f"Invalid join condition: table-table joins require to join on the "
                f"primary key of the right input table. Got {shown}."
            )
        if not left_on_key:
            foreign = True
            if kind == "FULL":
                raise JoinError(
                    f"Invalid join type: full-outer join not supported for "
                    f"foreign-key table-table join. Got {leaves[0].source.name} "
                    f"{_KIND_TEXT[kind]} {leaf.source.name}."
                )
            if isinstance(tree, JoinStep):  # ksqlDB: both inputs must be sources
                raise JoinError(
                    f"Invalid join condition: foreign-key table-table joins are not "
                    f"supported as part of n-way joins. Got {shown}."
                )
            if kind == "RIGHT":
                raise JoinError("RIGHT OUTER JOIN on a foreign key is not supported")
        if left_compiled.type != right_compiled.type:
            shown_a, type_a, shown_b, type_b = (
                left_text,
                left_compiled.type,
                right_text,
                right_compiled.type,
            )
            if flipped:
                shown_a, type_a, shown_b, type_b = shown_b, type_b, shown_a, type_a
            raise JoinError(
                f"Invalid join condition: types don't match. Got "
                f"{shown_a}{{{type_a.sql()}}} = {shown_b}{{{type_b.sql()}}}."
            )
    else:  # stream-stream
        if join.within is None:
            raise JoinError(
                "Stream-Stream joins must have a WITHIN clause specified. None was "
                "provided. To learn about how to specify a WITHIN clause with a "
                "stream-stream join, please visit: https://docs.confluent.io/"
                "current/ksql/docs/syntax-reference.html#create-stream-as-select"
            )
    if not foreign and left_compiled.type != right_compiled.type:
        raise JoinError(
            f"Invalid join. Key types differ: {left_compiled.type.sql()} vs "
            f"{right_compiled.type.sql()}"
        )
    if (left_kind is SourceKind.TABLE and not left_on_key and not foreign) or (
        leaf.kind is SourceKind.TABLE and not right_on_key
    ):
        raise JoinError(
            "Cannot repartition a TABLE source. If this is a join, make sure that "
            "the criteria uses the TABLE's key column."
        )
    within = join.within
    result = (
        SourceKind.TABLE
        if left_kind is SourceKind.TABLE and leaf.kind is SourceKind.TABLE
        else SourceKind.STREAM
    )
    return JoinStep(
        index=index,
        kind=kind,
        left=tree,
        right=leaf,
        left_key=left_compiled.evaluate,
        right_key=right_compiled.evaluate,
        left_rekey=not left_on_key and not foreign,
        right_rekey=not right_on_key,
        key_name="",
        key_type=left_compiled.type if not foreign else right_compiled.type,
        result=result,
        before_ms=within.before.milliseconds if within else None,
        after_ms=within.after.milliseconds if within else None,
        grace_ms=(within.grace.milliseconds if within and within.grace else None),
        foreign_key=foreign,
        left_text=left_text,
        right_text=right_text,
        left_column=isinstance(a, exp.Column),
        right_column=isinstance(b, exp.Column),
    )


def _check_windowed(leaves: Sequence[JoinLeaf], steps: Sequence[JoinStep]) -> None:
    windowed = [leaf for leaf in leaves if leaf.source.windowed]
    if not windowed:
        return
    plain = [leaf for leaf in leaves if not leaf.source.windowed]
    if plain:
        w, p = windowed[0], plain[0]
        first, second = (w, p) if w.index < p.index else (p, w)
        describe = {id(w): f"is {w.source.windowed} windowed", id(p): "is not windowed"}
        raise JoinError(
            f"Can not join windowed source to non-windowed source.\n"
            f"`{first.source.name}` {describe[id(first)]}\n"
            f"`{second.source.name}` {describe[id(second)]}"
        )
    kinds = {leaf.source.windowed for leaf in leaves}
    if "SESSION" in kinds and len(kinds) > 1:
        a, b = leaves[0].source.windowed, leaves[1].source.windowed
        raise JoinError(
            f"Incompatible windowed sources.\nLeft source: {a}\nRight source: {b}\n"
            "Session windowed sources can only be joined to other session windowed "
            "sources, and may still not result in expected behaviour as session "
            "bounds must be an exact match for the join to work\nHopping and tumbling windowed "
            "sources can only be joined to other hopping and tumbling windowed sources"
        )
    if any(s.left_rekey or s.right_rekey for s in steps):
        raise JoinError(
            "Implicit repartitioning of windowed sources is not supported. See "
            "https://github.com/confluentinc/ksql/issues/4385."
        )
    raise JoinError("Joins of windowed sources are not supported yet.", later=True)


def _partitions(root: JoinStep) -> int:
    def count(node: JoinStep | JoinLeaf) -> int:
        return node.source.partitions if isinstance(node, JoinLeaf) else count(node.right)

    for step in _walk(root):
        if step.foreign_key:
            continue
        left = count(step.left)
        right = step.right.source.partitions
        if left != right:
            a = step.left.alias if isinstance(step.left, JoinLeaf) else step.leaves[0].alias
            b = step.right.alias
            raise JoinError(
                f"Can't join `{a}` with `{b}` since the number of partitions don't "
                f"match. `{a}` partitions = {left}; `{b}` partitions = {right}. "
                "Please repartition either one so that the number of partitions "
                "match."
            )
    return count(root)


def _walk(step: JoinStep) -> list[JoinStep]:
    before = _walk(step.left) if isinstance(step.left, JoinStep) else []
    return [*before, step]


# -- keys ----------------------------------------------------------------------------------------------


def _equivalence(step: JoinStep | JoinLeaf) -> set[str]:
    """ksqlDB's join equivalence set, as the texts of qualified column references."""
    if isinstance(step, JoinLeaf) or step.kind == "FULL":
        return set()
    if step.foreign_key:  # its result has the left table's primary key (a source: the first join)
        assert isinstance(step.left, JoinLeaf)
        primary = step.left.source.key_columns
        return {f"{step.left.alias}.{primary[0].name}"} if len(primary) == 1 else set()
    keys = {step.left_text, step.right_text}
    lefts = _equivalence(step.left)
    return keys | lefts if lefts & keys else keys


def _viable_keys(step: JoinStep | JoinLeaf) -> list[str]:
    """ksqlDB's viable key columns of a join (qualified column texts, ``ALIAS.COLUMN``)."""
    if isinstance(step, JoinLeaf) or step.kind == "FULL":
        return []
    equivalent = _equivalence(step)
    found: list[str] = []
    own = [
        t
        for t, is_column in (
            (step.left_text, step.left_column),
            (step.right_text, step.right_column),
        )
        if is_column
    ]
    for text in (*_viable_keys(step.left), *own):
        if text in equivalent and text not in found:
            found.append(text)
    return found


def _key_name(
    root: JoinStep,
    viable: list[str],
    select: Sequence[exp.Expr],
    names: Mapping[str, JoinLeaf],
    leaves: Sequence[JoinLeaf],
) -> str:
    if root.foreign_key:
        return ""  # a foreign-key join keeps the left table's key
    if not viable:
        taken = {c for leaf in leaves for c, _p, _t in leaf.columns}
        number = 0
        while (name := "ROWKEY" if number == 0 else f"ROWKEY_{number}") in taken:
            number += 1
        return name
    selected = {
        _qualified_text(_bare(i), names)
        for i in select
        if isinstance(_bare(i), exp.Column) and not isinstance(_bare(i).this, exp.Star)
    }
    stars = [i for i in select if isinstance(i, exp.Star) or isinstance(i.this, exp.Star)]
    # ksqlDB's LogicalPlanner: the first viable key column the projection holds (a source's `*`
    # holds its columns), else the first
    chosen = next(
        (
            v
            for v in viable
            if v in selected or _star_covers(stars, names[v.split(".", 1)[0]], names)
        ),
        viable[0],
    )
    alias, column = chosen.split(".", 1)
    return f"{alias}_{column}"


def _with_key_names(steps: list[JoinStep], root_key: str) -> list[JoinStep]:
    named: list[JoinStep] = []
    for step in steps:
        left = named[-1] if named else step.left
        is_root = step is steps[-1]
        if is_root:
            name = root_key
        else:
            viable = _viable_keys(step)
            name = viable[0].replace(".", "_", 1) if viable else f"ROWKEY_{step.index}"
        named.append(replace(step, left=left, key_name=name))
    return named


def key_formats(root: JoinStep) -> dict[int, str]:
    """Step index -> the key format its records are keyed (and repartitioned) in, by ksqlDB's
    rule (JoinNode.resolveKeyFormats): a step takes the format of its left side when that side
    is not repartitioned, else of its right side when that one is not, else the first of its
    sources' formats that is not NONE (else KAFKA); a left step that is not repartitioned takes
    its parent's format, one that is resolves its own."""
    found: dict[int, str] = {}
    step: JoinStep | JoinLeaf = root
    given: str | None = None
    while isinstance(step, JoinStep):
        fmt = given or _preferred_key_format(step) or _first_key_format(step)
        found[step.index] = fmt
        given = None if step.left_rekey else fmt
        step = step.left
    return found


def _preferred_key_format(step: JoinStep) -> str | None:
    if not step.left_rekey:
        left = step.left
        return left.source.key_format if isinstance(left, JoinLeaf) else _preferred_key_format(left)
    if not step.right_rekey:
        return step.right.source.key_format
    return None


def _first_key_format(step: JoinStep) -> str:
    formats = (leaf.source.key_format for leaf in step.leaves)
    return next((f for f in formats if f != "NONE"), "KAFKA")


def _joined_source(root: JoinStep, leaves: Sequence[JoinLeaf]) -> Source:
    """The join's result as a source: its key column, then every leaf's columns (``ALIAS_COL``)."""
    if root.foreign_key:
        left = root.left
        assert isinstance(left, JoinLeaf)
        keys = [
            Column(p, t.sql(), key=True)
            for c, p, t in left.columns
            if (column := left.source.column(c)) is not None and column.key
        ]
        key_names = {k.name for k in keys}
    else:
        keys = [Column(root.key_name, root.key_type.sql(), key=True)]
        key_names = {root.key_name}
    values = [
        Column(p, t.sql())
        for leaf in root.leaves
        for _c, p, t in leaf.columns
        if p not in key_names
    ]
    first = leaves[0].source
    key_format = key_formats(root)[root.index]
    return Source(
        root.result,
        JOINED,
        (*keys, *values),
        topic=first.topic,
        partitions=first.partitions,
        key_format=key_format,
        value_format=first.value_format,
    )


def _check_key_selected(
    root: JoinStep,
    viable: list[str],
    query: Query,
    sink: str,
    names: Mapping[str, JoinLeaf],
    leaves: Sequence[JoinLeaf],
    selected: list[exp.Expr],
) -> None:
    if query.group_by or query.partition_by:
        return  # the key is the grouping / partitioning: query_plan.py, aggregate_plan.py check
    texts = {
        _qualified_text(s, names)
        for s in selected
        if isinstance(s, exp.Column) and not isinstance(s.this, exp.Star)
    }
    stars = [
        exp.column(exp.Star()) if isinstance(s, exp.Star) else s
        for s in selected
        if isinstance(s, exp.Star) or (isinstance(s, exp.Column) and isinstance(s.this, exp.Star))
    ]
    if root.foreign_key:
        left = root.left
        assert isinstance(left, JoinLeaf)
        missing = [
            c
            for c, _p, _t in left.columns
            if (col := left.source.column(c)) is not None
            and col.key
            and f"{left.alias}.{c}" not in texts
            and not _star_covers(stars, left, names)
        ]
        if missing:
            noun = "column" if len(missing) == 1 else "columns"
            raise JoinError(
                f"Primary key {noun} missing in projection. For foreign-key "
                f"table-table joins, the projection must include all primary key "
                f"columns from the left input table (`{left.alias}`). Missing "
                f"{noun}: {', '.join(f'`{m}`' for m in missing)}."
            )
        return
    if viable:
        covered = any(
            v in texts or _star_covers(stars, names[v.split(".", 1)[0]], names) for v in viable
        )
        if not covered:
            noun = "expression" if len(viable) == 1 else "expressions"
            listed = (
                viable[0] if len(viable) == 1 else (", ".join(viable[:-1]) + " or " + viable[-1])
            )
            raise JoinError(
                f"The query used to build `{sink}` must include the join {noun} "
                f"{listed} in its projection (eg, SELECT {viable[0]}...)."
            )
        return
    key = root.key_name
    bare = any(
        isinstance(s, exp.Column)
        and not isinstance(s.this, exp.Star)
        and s.args.get("table") is None
        and identifier_name(s.this) == key
        for s in selected
    )
    if not bare and not any(s.args.get("table") is None for s in stars):
        raise JoinError(
            f"Key missing from projection (ie, SELECT). See https://cnfl.io/2LV7ouS.\n"
            f"The query used to build `{sink}` must include the join expression "
            f"{key} in its projection (eg, SELECT {key}...).\n{key} was added as a "
            "synthetic key column because the join criteria did not match any source "
            "column. This expression must be included in the projection and may be "
            "aliased."
        )


def _star_covers(stars: Sequence[exp.Expr], leaf: JoinLeaf, names: Mapping[str, JoinLeaf]) -> bool:
    for star in stars:
        table = star.args.get("table")
        if table is None or names.get(identifier_name(table)) is leaf:
            return True
    return False


def _is_key_of(node: exp.Expr, leaf: JoinLeaf, names: Mapping[str, JoinLeaf]) -> bool:
    if not isinstance(node, exp.Column):
        return False
    keys = leaf.source.key_columns
    return len(keys) == 1 and identifier_name(node.this) == keys[0].name


def _in_equivalence(node: exp.Expr, step: JoinStep, names: Mapping[str, JoinLeaf]) -> bool:
    return _qualified_text(node, names) in _equivalence(step)


# -- expressions ---------------------------------------------------------------------------------------


def _bare(node: exp.Expr) -> exp.Expr:
    return node.this if isinstance(node, exp.Alias) else node


def _scope(columns: Sequence[tuple[str, SqlType]], custom: Mapping[str, object]) -> Scope:
    return Scope(dict(columns), frozenset(), dict(custom))


def _resolve(
    node: exp.Column, names: Mapping[str, JoinLeaf], leaves: Sequence[JoinLeaf], clause: str
) -> JoinLeaf | None:
    """The leaf a column reference reads (None: no leaf has it, unqualified)."""
    name = identifier_name(node.this)
    table = node.args.get("table")
    if table is not None:
        qualifier = identifier_name(table)
        leaf = names.get(qualifier)
        if leaf is None:
            raise JoinError(f"'{qualifier}' is not a valid stream/table name or alias.", node)
        if not any(c == name for c, _p, _t in leaf.columns):
            raise JoinError(f"{clause} column '{qualifier}.{name}' cannot be resolved.", node)
        return leaf
    having = [leaf for leaf in leaves if any(c == name for c, _p, _t in leaf.columns)]
    if name in ("ROWTIME", "ROWPARTITION", "ROWOFFSET") and clause != "JOIN ON":
        return None  # the joined row's own
    if len(having) > 1:
        could = " or ".join(f"{leaf.alias}.{name}" for leaf in having)
        raise JoinError(f"Column '{name}' is ambiguous. Could be {could}.", node)
    return having[0] if having else None


def _sources_of(
    node: exp.Expr, names: Mapping[str, JoinLeaf], leaves: Sequence[JoinLeaf], clause: str
) -> set[int]:
    found: set[int] = set()
    for column in node.find_all(exp.Column):
        if isinstance(column.this, exp.Star):
            continue
        leaf = _resolve(column, names, leaves, clause)
        if leaf is None:
            raise JoinError(
                f"{clause} column '{identifier_name(column.this)}' cannot be resolved.", column
            )
        found.add(leaf.index)
    return found


def _qualified_text(node: exp.Expr, names: Mapping[str, JoinLeaf]) -> str:
    """ksqlDB's text of an expression with its column references qualified by alias."""
    leaves = list({id(leaf): leaf for leaf in names.values()}.values())
    copy = node.copy()
    columns = [copy] if isinstance(copy, exp.Column) else list(copy.find_all(exp.Column))
    for column in columns:
        if isinstance(column.this, exp.Star):
            continue
        table = column.args.get("table")
        if table is not None:
            leaf = names.get(identifier_name(table))
        else:
            name = identifier_name(column.this)
            owners = [leaf for leaf in leaves if any(c == name for c, _p, _t in leaf.columns)]
            leaf = owners[0] if len(owners) == 1 else None
        if leaf is not None:
            column.set("table", exp.to_identifier(leaf.alias))
    if isinstance(copy, exp.Column) and copy.args.get("table") is not None:
        return f"{identifier_name(copy.args['table'])}.{identifier_name(copy.this)}"
    return format_expression(copy)


def _rewrite(
    node: exp.Expr,
    names: Mapping[str, JoinLeaf],
    leaves: Sequence[JoinLeaf],
    clause: str,
    key_name: str | None = None,
) -> exp.Expr:
    """``node`` reading the joined columns: ``T.X`` and ``X`` become ``T_X``."""
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
        return _column(node, names, leaves, clause) or node
    copy = node.copy()
    for column in list(copy.find_all(exp.Column)):
        if isinstance(column.this, exp.Star) or _in_lambda(column):
            continue
        new = _column(column, names, leaves, clause)
        if new is not None:
            if column is copy:
                return new
            column.replace(new)
    return copy


def _in_lambda(column: exp.Column) -> bool:
    parent = column.parent
    while parent is not None:
        if isinstance(parent, exp.Lambda):
            params = {identifier_name(p) for p in parent.expressions}
            return identifier_name(column.this) in params and column.args.get("table") is None
        parent = parent.parent
    return False


def _column(
    column: exp.Column, names: Mapping[str, JoinLeaf], leaves: Sequence[JoinLeaf], clause: str
) -> exp.Column | None:
    leaf = _resolve(column, names, leaves, clause)
    if leaf is None:
        return None
    name = identifier_name(column.this)
    return exp.column(exp.to_identifier(leaf.prefixed(name), quoted=True))


def _rewrite_query(
    query: Query, root: JoinStep, names: Mapping[str, JoinLeaf], leaves: Sequence[JoinLeaf]
) -> Query:
    items: list[exp.Expr] = []
    for item in query.select:
        bare = _bare(item)
        if isinstance(bare, exp.Star):
            bare = exp.column(exp.Star())
        if isinstance(bare, exp.Column) and isinstance(bare.this, exp.Star):
            table = bare.args.get("table")
            if table is None:
                if not root.foreign_key and not _viable_keys(root):
                    items.append(exp.column(exp.to_identifier(root.key_name, quoted=True)))
                chosen = list(leaves)
            else:
                qualifier = identifier_name(table)
                if qualifier not in names:
                    raise JoinError(
                        f"'{qualifier}' is not a valid stream/table name or alias.", bare
                    )
                chosen = [names[qualifier]]
            for leaf in chosen:
                for c, p, _t in leaf.columns:
                    if c in ("ROWTIME", "ROWPARTITION", "ROWOFFSET"):
                        continue
                    items.append(exp.column(exp.to_identifier(p, quoted=True)))
            continue
        new = _rewrite(bare, names, leaves, "SELECT")
        if isinstance(item, exp.Alias):
            items.append(exp.alias_(new, item.args["alias"]))
        elif isinstance(bare, exp.Column) and isinstance(new, exp.Column):
            # a column keeps its own name unless another source has one of the same name:
            # ``t.name`` is NAME, ``t.id`` T_ID when both sides have an ID
            plain = identifier_name(bare.this)
            owners = sum(1 for leaf in leaves if any(c == plain for c, _p, _t in leaf.columns))
            name = plain if owners == 1 else identifier_name(new.this)
            items.append(
                new
                if name == identifier_name(new.this)
                else exp.alias_(new, exp.to_identifier(name, quoted=True))
            )
        else:
            items.append(new)

    def over(node: exp.Expr | None, clause: str) -> exp.Expr | None:
        return None if node is None else _rewrite(node, names, leaves, clause)

    return replace(
        query,
        select=tuple(items),
        source=SourceRef(JOINED),
        joins=(),
        where=over(query.where, "WHERE"),
        group_by=tuple(_rewrite(g, names, leaves, "GROUP BY") for g in query.group_by),
        partition_by=tuple(_rewrite(p, names, leaves, "PARTITION BY") for p in query.partition_by),
        having=over(query.having, "HAVING"),
    )


def joined_catalog(plan: JoinPlan, catalog: Catalog) -> Catalog:
    """``catalog`` with the joined source in it (what the rewritten query is compiled against)."""
    return replace(catalog, sources={**catalog.sources, JOINED: plan.joined})
