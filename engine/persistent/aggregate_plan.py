"""An aggregating persistent query (``CREATE TABLE ... AS SELECT ... GROUP BY``), checked and compiled. Pure.

ksqlDB's logical plan of an aggregation is source -> WHERE -> GROUP BY (re-key by the grouping
expressions) -> AGGREGATE -> HAVING -> SELECT. This module applies its rules (the messages are
ksqlDB's, from its AggregateAnalyzer):

- the key columns are the GROUP BY expressions, in their order; each must be selected, and its
  column takes the name of the SELECT item that selects it;
- every other SELECT item, and HAVING, may read only grouping expressions (or expressions built
  from them) and aggregate calls; aggregate calls cannot nest and cannot appear in GROUP BY;
- over a TABLE source, only aggregate functions that can undo a row are allowed (a changed row is
  taken out of its old group before it is added to its new one).

Compiling splits every SELECT item and HAVING into the aggregate calls it contains (whose arguments
are evaluated on the source row, before aggregation) and a post-aggregation expression over the
grouping values (``$GROUP_i``) and the aggregates' results (``$AGG_i``), compiled by the pull
queries' expression compiler.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlglot import exp

from headwater.engine.errors import ExpressionError
from headwater.engine.expressions import (
    Compiled,
    Evaluator,
    Scope,
    UnresolvedColumn,
    compile_expression,
    expand_stars,
    format_expression,
    pseudo_timestamps_in_millis,
    resolve_type,
    select_names,
)
from headwater.engine.functions import user_index
from headwater.engine.functions.aggregates import (
    AGGREGATE_NAMES,
    Udaf,
    constant_arity,
    intermediate_type,
    resolve_udaf,
)
from headwater.engine.functions.registry import FUNCTIONS
from headwater.engine.functions.types import BIGINT, BOOLEAN, NULL
from headwater.engine.persistent.join_plan import joined_catalog
from headwater.engine.persistent.query_plan import (
    PSEUDO_COLUMNS,
    RESERVED_NAMES,
    TABLE_FUNCTIONS,
    OutputColumn,
    QueryCompileError,
    _bare,
    _normal,
    plan_query_joins,
    refuse_reserved_names,
)
from headwater.engine.values import has_map, map_key_refusal
from headwater.metastore.catalog import Catalog, Source, SourceKind
from headwater.sqlparse_ext.sqltypes import (
    ArrayType,
    MapType,
    SqlType,
    StructType,
    identifier_name,
)
from headwater.sqlparse_ext.statements import Query, Window


@dataclass(frozen=True, slots=True)
class AggregateCall:
    """One aggregate function call: its function and its column arguments (on the source row)."""

    udaf: Udaf
    args: tuple[Evaluator, ...] = field(repr=False, compare=False)
    text: str = ""
    #: the column arguments as written (``args`` compiled), for the vectorized stage 1
    arg_nodes: tuple[exp.Expr, ...] = field(default=(), repr=False, compare=False)


#: Kafka Streams' grace when a window gives none, as ksqlDB sets it: 24 hours less the window size.
DEFAULT_GRACE_MS = 24 * 60 * 60 * 1000
WINDOW_BOUNDS = ("WINDOWSTART", "WINDOWEND")


@dataclass(frozen=True, slots=True)
class WindowSpec:
    """A WINDOW clause in milliseconds.

    Attributes:
        kind: ``TUMBLING``, ``HOPPING`` or ``SESSION``.
        size_ms: the window size (a SESSION window's inactivity gap).
        advance_ms: how far a hopping window advances (the size, for tumbling windows).
        grace_ms: how long after its end a window still accepts late records.
        retention_ms: how long the result table keeps a window, when given.
    """

    kind: str
    size_ms: int
    advance_ms: int
    grace_ms: int
    retention_ms: int | None = None

    @property
    def session(self) -> bool:
        """Whether windows are sessions (merged by activity) rather than fixed time windows."""
        return self.kind == "SESSION"

    def windows_for(self, timestamp: int) -> list[tuple[int, int]]:
        """The time windows ``[start, end)`` a record at ``timestamp`` falls in, earliest first
        (Kafka Streams' TimeWindows: starts are multiples of the advance, none below 0)."""
        first = max(0, timestamp - self.size_ms + self.advance_ms) // self.advance_ms
        first *= self.advance_ms
        return [
            (start, start + self.size_ms) for start in range(first, timestamp + 1, self.advance_ms)
        ]


def window_spec(window: Window, emit_final: bool = False) -> WindowSpec:
    """The spec of a parsed WINDOW clause (ksqlDB's default grace: 24 h less the size, or none
    with EMIT FINAL)."""
    size = window.size.milliseconds
    advance = window.advance.milliseconds if window.advance is not None else size
    if window.grace is not None:
        grace = window.grace.milliseconds
    else:
        grace = 0 if emit_final else max(DEFAULT_GRACE_MS - size, 0)
    retention = window.retention.milliseconds if window.retention is not None else None
    return WindowSpec(window.kind, size, advance, grace, retention)


@dataclass(frozen=True, slots=True)
class CompiledAggregate:
    """A checked aggregating query.

    Attributes:
        source: the stream or table it reads.
        columns: the output columns: the key columns (the GROUP BY expressions, in their order,
            named by the SELECT items that select them), then the value columns.
        row_filter: WHERE (on the source row), or None.
        group_keys: one evaluator per GROUP BY expression (on the source row).
        calls: the aggregate calls, in the order of their ``$AGG_i`` names.
        values: one evaluator per value column, on the aggregated row (``$GROUP_i``, ``$AGG_i``).
        having: HAVING on the aggregated row, or None.
        window: the WINDOW clause, or None.
        emit_final: EMIT FINAL: one record per window, once it closes.
    """

    source: Source
    columns: tuple[OutputColumn, ...]
    row_filter: Evaluator | None = field(repr=False, compare=False)
    group_keys: tuple[Evaluator, ...] = field(repr=False, compare=False)
    calls: tuple[AggregateCall, ...] = field(repr=False, compare=False)
    values: tuple[Evaluator, ...] = field(repr=False, compare=False)
    having: Evaluator | None = field(repr=False, compare=False)
    window: WindowSpec | None = None
    emit_final: bool = False
    group_by_text: tuple[str, ...] = ()
    where_text: str = ""
    join: Any = field(default=None, repr=False, compare=False)  # a `join_plan.JoinPlan`
    having_text: str = ""
    projection_text: tuple[str, ...] = ()
    #: what ``row_filter``, ``group_keys`` and the calls' arguments were compiled from (the
    #: source row's scope, WHERE and GROUP BY as compiled), for the vectorized stage 1
    scope: Scope | None = field(default=None, repr=False, compare=False)
    where_node: exp.Expr | None = field(default=None, repr=False, compare=False)
    group_nodes: tuple[exp.Expr, ...] = field(default=(), repr=False, compare=False)
    #: what ``values`` and ``having`` were compiled from (the aggregated row's scope: ``$GROUP_i``,
    #: ``$AGG_i``, window bounds), for the vectorized stage 3
    post_scope: Scope | None = field(default=None, repr=False, compare=False)
    value_nodes: tuple[exp.Expr, ...] = field(default=(), repr=False, compare=False)
    having_node: exp.Expr | None = field(default=None, repr=False, compare=False)

    @property
    def key_columns(self) -> tuple[OutputColumn, ...]:
        """The output key columns."""
        return tuple(c for c in self.columns if c.key)

    @property
    def value_columns(self) -> tuple[OutputColumn, ...]:
        """The output value columns."""
        return tuple(c for c in self.columns if not c.key)


def is_aggregation(query: Query) -> bool:
    """Whether a query aggregates: GROUP BY, or aggregate calls (refused without GROUP BY, with
    ksqlDB's messages, by `compile_aggregate`)."""
    if query.group_by:
        return True
    nodes = (*query.select, *([query.having] if query.having is not None else []))
    return any(
        call.name.upper() in AGGREGATE_NAMES
        for node in nodes
        for call in node.find_all(exp.Anonymous)
    )


def group_name(index: int) -> str:
    """The aggregated row's name of the ``index``-th grouping value."""
    return f"$GROUP_{index}"


def agg_name(index: int) -> str:
    """The aggregated row's name of the ``index``-th aggregate's result."""
    return f"$AGG_{index}"


def compile_aggregate(query: Query, catalog: Catalog, sink_name: str) -> CompiledAggregate:
    """Checks an aggregating query against the catalog and compiles it.

    Raises:
        QueryCompileError: ksqlDB would refuse the query, or it needs what is not built yet.
    """
    if query.joins:
        plan = plan_query_joins(query, catalog, sink_name)
        return replace(
            compile_aggregate(plan.query, joined_catalog(plan, catalog), sink_name), join=plan
        )
    if query.emit == "FINAL" and query.window is None:
        raise QueryCompileError(
            "EMIT FINAL is only supported for windowed aggregations.", "EMIT FINAL"
        )
    if query.limit is not None:
        raise QueryCompileError("LIMIT is not supported in persistent queries: remove it.", "LIMIT")
    if query.partition_by:
        raise QueryCompileError(
            "PARTITION BY and GROUP BY in the same query is not supported.", "PARTITION BY"
        )
    source = catalog.source(query.source.name)
    if source is None:
        raise QueryCompileError(f"{query.source.name} does not exist.")
    refuse_reserved_names(query.select)
    if source.windowed and source.kind is SourceKind.TABLE:
        raise QueryCompileError("KSQL does not support persistent queries on windowed tables.")
    if source.windowed:
        raise QueryCompileError(
            f"Windowed sources are not supported yet: `{source.name}` is "
            f"{source.windowed} windowed.",
            "windowed source",
        )
    if source.value_format == "KAFKA" and query.group_by:
        raise QueryCompileError(
            f"Source(s) {source.name} are using the 'KAFKA' value format. This "
            "format does not yet support GROUP BY."
        )
    window = window_spec(query.window, query.emit == "FINAL") if query.window is not None else None
    if window is not None and source.kind is SourceKind.TABLE:
        raise QueryCompileError("Windowing not supported for table aggregations.", "WINDOW")
    custom = dict(catalog.types)
    columns = {c.name: resolve_type(c.type, custom) for c in source.columns}
    scope_columns = {**{k: v for k, v in PSEUDO_COLUMNS.items() if k not in columns}, **columns}
    qualifiers = frozenset(n for n in (source.name, query.source.name, query.source.alias) if n)
    scope = Scope(scope_columns, qualifiers, custom)

    if window is not None and query.where is not None:
        _refuse_window_bounds_in_where(query.where)
    row_filter, where_text, where_node = _where(query.where, scope)
    if window is not None:
        for node in (*query.group_by, *([query.having] if query.having is not None else [])):
            _refuse_window_bounds(node)
    groups = _group_by(query.group_by, scope)
    try:
        items = expand_stars(query.select, qualifiers, columns, lambda: _star(source))
    except ExpressionError as error:
        raise QueryCompileError(error.message) from error
    # generated names skip the source's column names (ksqlDB's AstSanitizer alias generator)
    names = select_names(items, [c.name for c in source.columns])

    for node in (*items, *([query.having] if query.having is not None else [])):
        for call in node.find_all(exp.Anonymous):
            name = call.name.upper()
            if (
                name not in AGGREGATE_NAMES
                and name not in TABLE_FUNCTIONS
                and name not in FUNCTIONS
                and user_index.lookup(name) is None
            ):
                raise QueryCompileError(
                    f"Can't find any functions with the name '{name}'", None, call
                )
    splitter = _Splitter(
        scope, [g.normal for g in groups], WINDOW_BOUNDS if window is not None else ()
    )
    post_items = [splitter.split(_bare(item), "SELECT") for item in items]
    having_node = None if query.having is None else splitter.split(query.having, "HAVING")
    if not groups and not splitter.non_aggregate_select:
        calls = ", ".join(c.text.replace("COUNT(*)", "COUNT(ROWTIME)") for c in splitter.calls)
        raise QueryCompileError(
            f"CREATE TABLE AS SELECT statement does not support aggregate "
            f"function [{calls}] without a GROUP BY clause."
        )
    if source.value_format == "DELIMITED" and any(
        isinstance(t, (ArrayType, MapType, StructType)) for t in splitter.intermediates
    ):  # ksqlDB keeps the aggregation's state in the source's value format
        raise QueryCompileError(
            "One of the functions used in the statement has an intermediate type that the value "
            "format can not handle. Please remove the function or change the format.\n"
            "Consider up-voting https://github.com/confluentinc/ksql/issues/3950, which will "
            "resolve this limitation"
        )
    if not splitter.calls:
        raise QueryCompileError(
            "GROUP BY requires aggregate functions in either the SELECT or HAVING clause."
        )
    if splitter.non_aggregate_select:
        raise QueryCompileError(
            "Non-aggregate SELECT expression(s) not part of GROUP BY: "
            + ", ".join(splitter.non_aggregate_select)
            + "\nEither add the column(s) to the GROUP BY or remove them from the SELECT."
        )
    if splitter.non_aggregate_having:
        raise QueryCompileError(
            "Non-aggregate HAVING expression not part of GROUP BY: "
            + ", ".join(splitter.non_aggregate_having)
            + "\nConsider switching the HAVING clause to a WHERE clause before the GROUP BY."
        )
    if source.kind is SourceKind.TABLE:
        stream_only = [c.udaf.name for c in splitter.calls if not c.udaf.table]
        if stream_only:
            unique = list(dict.fromkeys(stream_only))
            listed = (
                unique[0] if len(unique) == 1 else (", ".join(unique[:-1]) + " and " + unique[-1])
            )
            raise QueryCompileError(
                f"The aggregation functions {listed} cannot be applied to a "
                "table source, only to a stream source."
            )

    post_columns = {group_name(i): g.type for i, g in enumerate(groups)}
    if window is not None:
        post_columns.update({name: BIGINT for name in WINDOW_BOUNDS})
    post_columns.update({agg_name(i): c.udaf.return_type for i, c in enumerate(splitter.calls)})
    post_scope = Scope(post_columns, frozenset(), custom)
    texts = {group_name(i): g.text for i, g in enumerate(groups)}
    texts.update({agg_name(i): c.text for i, c in enumerate(splitter.calls)})

    for group in groups:  # ksqlDB's buildAggregateSchema: a grouping expression selected twice
        twice = [f"`{n}`" for i, n in zip(items, names, strict=True) if _normal(i) == group.normal]
        if len(twice) > 1:
            listed = ", ".join(twice[:-1]) + " and " + twice[-1]
            raise QueryCompileError(
                f"The projection contains a key column more than once: {listed}.\n"
                "Each key column must only be in the projection once. If you intended to copy "
                "the key into the value, then consider using the AS_VALUE function to indicate "
                "which key reference should be copied."
            )
    key_slots: dict[int, int] = {}  # select item -> group index
    for index, item in enumerate(items):
        text = _normal(item)
        for g_index, group in enumerate(groups):
            if text == group.normal and g_index not in key_slots.values():
                key_slots[index] = g_index
                break
    missing = [g for i, g in enumerate(groups) if i not in key_slots.values()]
    if missing:
        wanted = [g.text for g in missing]
        noun = "grouping expression" + ("s" if len(wanted) > 1 else "")
        listed = wanted[0] if len(wanted) == 1 else ", ".join(wanted[:-1]) + " and " + wanted[-1]
        raise QueryCompileError(
            f"The query used to build `{sink_name}` must include the {noun} "
            f"{listed} in its projection (eg, SELECT {', '.join(wanted)}...)."
        )

    keys: list[OutputColumn | None] = [None] * len(groups)
    value_columns: list[OutputColumn] = []
    value_fns: list[Evaluator] = []
    value_nodes: list[exp.Expr] = []
    seen: set[str] = set()
    for index, (item, name, post) in enumerate(zip(items, names, post_items, strict=True)):
        slot = key_slots.get(index)
        if name in seen:
            again = (
                groups[slot].type
                if slot is not None
                else _compile_post(post, post_scope, "SELECT", texts).type
            )
            raise QueryCompileError(f"Duplicate value columns found in schema: `{name}` {again}")
        seen.add(name)
        if slot is not None:
            if has_map(groups[slot].type):
                raise QueryCompileError(map_key_refusal(name, groups[slot].type))
            keys[slot] = OutputColumn(name, groups[slot].type, True)
            continue
        if name in RESERVED_NAMES:
            if isinstance(item, exp.Alias):
                raise QueryCompileError(
                    f"`{name}` is a reserved column name. You cannot use it "
                    "as an alias for a column.",
                    None,
                    item,
                )
            raise QueryCompileError(
                f"Reserved column name in select: `{name}`. Please remove or alias the column.",
                None,
                item,
            )
        compiled = _compile_post(post, post_scope, "SELECT", texts)
        if compiled.type == NULL:
            raise QueryCompileError(
                "Can't infer a type of null. Please explicitly cast it to a "
                "required type, e.g. CAST(null AS VARCHAR)."
            )
        value_columns.append(OutputColumn(name, compiled.type, False))
        value_fns.append(compiled.evaluate)
        value_nodes.append(post)
    if not value_columns:
        raise QueryCompileError("The projection contains no value columns.")
    having = None
    having_text = ""
    if having_node is not None:
        compiled_having = _compile_post(having_node, post_scope, "HAVING", texts)
        if compiled_having.type not in (BOOLEAN, NULL):
            raise QueryCompileError(
                "Type error in HAVING expression: Should evaluate to boolean "
                f"but is {format_expression(query.having)} "  # type: ignore[arg-type]
                f"({compiled_having.type}) instead."
            )
        having = compiled_having.evaluate
        having_text = format_expression(query.having)  # type: ignore[arg-type]
    return CompiledAggregate(
        source=source,
        columns=tuple(k for k in keys if k is not None) + tuple(value_columns),
        row_filter=row_filter,
        group_keys=tuple(g.evaluate for g in groups),
        calls=tuple(splitter.calls),
        values=tuple(value_fns),
        having=having,
        window=window,
        emit_final=query.emit == "FINAL",
        group_by_text=tuple(g.text for g in groups),
        where_text=where_text,
        having_text=having_text,
        projection_text=tuple(format_expression(_bare(i)) for i in items),
        scope=scope,
        where_node=where_node,
        group_nodes=tuple(g.node for g in groups),
        post_scope=post_scope,
        value_nodes=tuple(value_nodes),
        having_node=having_node,
    )


# -- the pieces --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Group:
    normal: str
    text: str
    type: SqlType
    evaluate: Evaluator
    node: exp.Expr


def _where(where: exp.Expr | None, scope: Scope) -> tuple[Evaluator | None, str, exp.Expr | None]:
    if where is None:
        return None, "", None
    for call in where.find_all(exp.Anonymous):
        if call.name.upper() in AGGREGATE_NAMES:
            raise QueryCompileError(
                f"Aggregate functions can not be used in the WHERE clause: {call.name.upper()}",
                "WHERE",
                call,
            )
    node = pseudo_timestamps_in_millis(where)
    try:
        compiled = compile_expression(node, scope)
    except UnresolvedColumn as error:
        raise QueryCompileError(f"WHERE column '{error.column}' cannot be resolved.") from error
    except ExpressionError as error:
        raise QueryCompileError(f"Error in WHERE expression: {error.message}") from error
    if compiled.type not in (BOOLEAN, NULL):
        raise QueryCompileError(
            "Type error in WHERE expression: Should evaluate to boolean but is "
            f"{compiled.text} ({compiled.type}) instead."
        )
    return compiled.evaluate, compiled.text, node


def _group_by(nodes: Sequence[exp.Expr], scope: Scope) -> list[_Group]:
    groups: list[_Group] = []
    for node in nodes:
        for call in node.find_all(exp.Anonymous):
            name = call.name.upper()
            if name in AGGREGATE_NAMES:
                raise QueryCompileError(
                    f"GROUP BY does not support aggregate functions: {name} "
                    "is an aggregate function.",
                    "GROUP BY",
                    call,
                )
            if name in TABLE_FUNCTIONS:
                raise QueryCompileError(
                    f"GROUP BY does not support table functions: {name} is a table function.",
                    "GROUP BY",
                    call,
                )
        try:
            compiled = compile_expression(node, scope)
        except UnresolvedColumn as error:
            raise QueryCompileError(
                f"GROUP BY column '{error.column}' cannot be resolved.", None, node
            ) from error
        except ExpressionError as error:
            raise QueryCompileError(f"Error in GROUP BY expression: {error.message}") from error
        normal = _normal(node)
        if any(g.normal == normal for g in groups):
            raise QueryCompileError(f"Duplicate GROUP BY expression: {compiled.text}", None, node)
        groups.append(_Group(normal, compiled.text, compiled.type, compiled.evaluate, node))
    return groups


def _star(source: Source) -> list[exp.Expr]:
    def column(name: str) -> exp.Expr:
        return exp.column(exp.to_identifier(name, quoted=True))

    return [
        column(c.name) for c in (*source.key_columns, *(c for c in source.columns if not c.key))
    ]


class _Splitter:
    """Splits post-aggregation expressions from the aggregate calls inside them."""

    def __init__(self, scope: Scope, group_normals: list[str], bounds: Sequence[str] = ()) -> None:
        self.scope = scope
        self.groups = group_normals
        self.bounds = bounds
        self.calls: list[AggregateCall] = []
        #: ksqlDB's type of each built-in call's stored state (its aggregation schema's column)
        self.intermediates: list[SqlType] = []
        self._call_texts: list[str] = []
        self.non_aggregate_select: list[str] = []
        self.non_aggregate_having: list[str] = []

    def split(self, node: exp.Expr, clause: str) -> exp.Expr:
        """``node`` with grouping expressions and aggregate calls replaced by their names."""
        copy = node.copy()
        stray: list[str] = []
        replaced = self._replace(copy, stray, clause)
        if stray:
            if clause == "SELECT":
                self.non_aggregate_select.append(format_expression(node))
            else:
                self.non_aggregate_having.extend(dict.fromkeys(stray))
        return replaced

    def _replace(self, node: exp.Expr, stray: list[str], clause: str) -> exp.Expr:
        if not isinstance(node, (exp.Literal, exp.Null, exp.Boolean)):
            normal = _normal(node)
            if normal in self.groups:
                return _ref(group_name(self.groups.index(normal)))
        if isinstance(node, exp.Anonymous) and node.name.upper() in AGGREGATE_NAMES:
            return _ref(agg_name(self._call(node)))
        if isinstance(node, exp.Anonymous) and node.name.upper() in TABLE_FUNCTIONS:
            raise QueryCompileError(
                "Table functions cannot be used with aggregations.", "table function", node
            )
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            if identifier_name(node.this) in self.bounds:
                return _ref(identifier_name(node.this))  # windowed: the row's window bounds
            stray.append(format_expression(node))
            return node
        for key, value in list(node.args.items()):
            if isinstance(value, exp.Expr):
                node.set(key, self._replace(value, stray, clause))
            elif isinstance(value, list):
                node.set(
                    key,
                    [
                        self._replace(v, stray, clause) if isinstance(v, exp.Expr) else v
                        for v in value
                    ],
                )
        return node

    def _call(self, call: exp.Anonymous) -> int:
        text = _normal(call)
        if text in self._call_texts:
            return self._call_texts.index(text)
        name = call.name.upper()
        args = list(call.expressions)
        if len(args) == 1 and isinstance(args[0], exp.Star):
            args = []
        for arg in args:
            if self.bounds:
                _refuse_window_bounds(arg)
            for inner in arg.find_all(exp.Anonymous):
                if inner.name.upper() in AGGREGATE_NAMES:
                    raise QueryCompileError(
                        f"Aggregate functions can not be nested: {name}({inner.name.upper()}())",
                        None,
                        call,
                    )
        user = user_index.lookup(name, "AGGREGATE")
        if user is not None:
            self.calls.append(self._user_call(user, call, args))
            self._call_texts.append(text)
            return len(self.calls) - 1
        n_constants = constant_arity(name, len(args))
        column_args = args[: len(args) - n_constants]
        constant_args = args[len(args) - n_constants :]
        evaluators: list[Evaluator] = []
        types: list[SqlType] = []
        for arg in column_args:
            compiled = self._compile_arg(arg, name)
            evaluators.append(compiled.evaluate)
            types.append(compiled.type)
        constants: list[Any] = []
        for arg in constant_args:
            compiled = self._compile_arg(arg, name)
            if not compiled.constant:
                raise QueryCompileError(
                    f"Parameter {len(types) + len(constants) + 1} passed to function {name} "
                    f"must be a literal constant, but was expression: '{format_expression(arg)}'",
                    None,
                    arg,
                )
            constants.append(compiled.evaluate({}))
        try:
            udaf = resolve_udaf(name, types, constants)
            self.intermediates.append(intermediate_type(name, types, constants))
        except ExpressionError as error:
            raise QueryCompileError(error.message, None, call) from error
        self.calls.append(
            AggregateCall(udaf, tuple(evaluators), format_expression(call), tuple(column_args))
        )
        self._call_texts.append(text)
        return len(self.calls) - 1

    def _user_call(
        self, function: user_index.UserFunction, call: exp.Anonymous, args: list[exp.Expr]
    ) -> AggregateCall:
        """A call of an aggregate function from the extension folder: its arguments are its
        columns, then its literal parameters (``__init__``'s), as its overload says."""
        compiled = [self._compile_arg(arg, function.name) for arg in args]
        try:
            overload, result = user_index.resolve(function, [c.type for c in compiled])
        except ExpressionError as error:
            raise QueryCompileError(error.message, None, call) from error
        columns, _ = user_index.split_aggregate_args(overload, len(compiled))
        init_values = []
        for index in range(columns, len(compiled)):
            if not compiled[index].constant:
                raise QueryCompileError(
                    f"Parameter {index + 1} passed to function {function.name} must be a "
                    f"literal constant, but was expression: '{format_expression(args[index])}'",
                    None,
                    args[index],
                )
            init_values.append(compiled[index].evaluate({}))
        try:
            aggregate = user_index.UserAggregate(
                function.name,
                overload,
                [c.type for c in compiled[:columns]],
                init_values,
                result,
            )
        except Exception as error:
            raise QueryCompileError(
                f"Function '{function.name}': {type(error).__name__}: {error}", None, call
            ) from error
        udaf = Udaf(
            function.name,
            result,
            overload.table,
            aggregate.initial,
            aggregate.add,
            aggregate.undo if overload.table else None,
            aggregate.result,
            aggregate.merge,
        )
        return AggregateCall(
            udaf,
            tuple(c.evaluate for c in compiled[:columns]),
            format_expression(call),
            tuple(args[:columns]),
        )

    def _compile_arg(self, arg: exp.Expr, name: str):  # type: ignore[no-untyped-def]
        try:
            return compile_expression(arg, self.scope)
        except UnresolvedColumn as error:
            raise QueryCompileError(
                f"Column '{error.column}' cannot be resolved (an argument of {name}).", None, arg
            ) from error
        except ExpressionError as error:
            raise QueryCompileError(error.message, None, arg) from error


def _refuse_window_bounds(node: exp.Expr) -> None:
    """ksqlDB's refusal of WINDOWSTART/WINDOWEND anywhere but the SELECT of a windowed aggregation
    (in GROUP BY, in HAVING outside aggregates, in aggregate arguments)."""
    for column in node.find_all(exp.Column):
        if isinstance(column.this, exp.Star):
            continue
        name = identifier_name(column.this)
        if name in WINDOW_BOUNDS:
            raise QueryCompileError(
                f"Window bounds column {name} can only be used in the SELECT clause of windowed "
                "aggregations and can not be passed to aggregate functions.\n"
                "See https://github.com/confluentinc/ksql/issues/4397",
                None,
                column,
            )


def _refuse_window_bounds_in_where(where: exp.Expr) -> None:
    """A windowed aggregation's WHERE runs before the window exists: ksqlDB resolves its window
    bounds in the SELECT's scope and then fails to generate the filter's code, before any other
    check of the WHERE (an aggregate call in it included)."""
    for column in where.find_all(exp.Column):
        if isinstance(column.this, exp.Star):
            continue
        name = identifier_name(column.this)
        if name in WINDOW_BOUNDS:
            raise QueryCompileError(f"Error in WHERE expression: Unknown column {name}.")


def _ref(name: str) -> exp.Expr:
    return exp.column(exp.to_identifier(name, quoted=True))


def _compile_post(node: exp.Expr, scope: Scope, clause: str, names: Mapping[str, str]) -> Compiled:
    """Compiles a post-aggregation expression; its errors name the grouping expressions and
    aggregate calls as written (``names``: ``$AGG_0`` -> ``SUM(VALUE)``)."""
    try:
        return compile_expression(node, scope)
    except UnresolvedColumn as error:  # the splitter reported these already
        raise QueryCompileError(f"{clause} column '{error.column}' cannot be resolved.") from error
    except ExpressionError as error:
        message = error.message
        for name, text in names.items():
            message = message.replace(f"`{name}`", text)
        if clause == "HAVING":
            message = f"Error in HAVING expression: {message}"
        raise QueryCompileError(message) from error


def describe_aggregate(compiled: CompiledAggregate, sink: str) -> list[str]:
    """The query's steps, one line each, for EXPLAIN (ksqlDB's step names)."""
    schema = ", ".join(
        f"`{c.name}` {c.type.sql()}" + (" KEY" if c.key else "") for c in compiled.columns
    )
    steps = [
        f"> [ SINK ] | Schema: {schema} | Logger: {sink}",
        (
            f"\t\t > [ PROJECT ] | Schema: {schema} | Expressions: "
            f"{', '.join(compiled.projection_text)}"
        ),
    ]
    if compiled.having_text:
        steps.append(f"\t\t\t\t > [ FILTER ] | Condition: {compiled.having_text}")
    calls = ", ".join(c.text for c in compiled.calls)
    steps.append(f"\t\t\t\t\t\t > [ AGGREGATE ] | Aggregations: {calls}")
    steps.append(f"\t\t\t\t\t\t\t\t > [ GROUP BY ] | {', '.join(compiled.group_by_text)}")
    if compiled.where_text:
        steps.append(f"\t\t\t\t\t\t\t\t\t\t > [ FILTER ] | Condition: {compiled.where_text}")
    source = compiled.source
    columns = ", ".join(f"`{c.name}` {c.type}" + (" KEY" if c.key else "") for c in source.columns)
    steps.append(
        f"\t\t\t\t\t\t\t\t\t\t\t\t > [ SOURCE ] | Schema: {columns} | Topic: {source.topic}"
    )
    return steps
