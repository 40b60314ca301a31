"""A persistent query's SELECT, checked and compiled: what it reads, what it writes, per record. Pure.

ksqlDB's logical plan for a stateless query over one stream is source -> WHERE -> PARTITION BY ->
SELECT. This module applies its rules (the messages are ksqlDB's):

- the scope is the source's columns plus ``ROWTIME``, ``ROWPARTITION`` and ``ROWOFFSET``;
- without PARTITION BY the key columns stay the source's, and every one must be selected (as a
  column, optionally aliased); with PARTITION BY the key columns are the partitioning expressions,
  in their order, and each must be selected (``*`` selects them); ``PARTITION BY NULL`` drops the key;
- ``*`` is the key columns then the value columns; after PARTITION BY, the new key columns, then
  the source's value columns, then its old key columns (those not made keys);
- every expression is compiled by `headwater.engine.expressions`, the compiler pull queries use.

Aggregations (GROUP BY, windows, HAVING) are `aggregate_plan.py`'s; what later issues bring (joins,
table functions) is refused here with the construct named, before anything reaches the command log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlglot import exp

from headwater.engine.errors import CodegenError, ExpressionError
from headwater.engine.expressions import (
    Evaluator,
    Scope,
    UnresolvedColumn,
    compile_expression,
    expand_stars,
    format_expression,
    output_name,
    pseudo_timestamps_in_millis,
    resolve_type,
    select_names,
)
from headwater.engine.functions import user_index
from headwater.engine.functions.aggregates import AGGREGATE_NAMES
from headwater.engine.functions.types import BIGINT, BOOLEAN, INTEGER, NULL
from headwater.engine.functions.user_index import FunctionNames
from headwater.engine.persistent.join_plan import (
    JoinError,
    JoinPlan,
    MissingSource,
    joined_catalog,
    plan_joins,
)
from headwater.engine.values import has_map, map_key_refusal
from headwater.metastore.catalog import Catalog, Column, Source, SourceKind
from headwater.sqlparse_ext.sqltypes import ArrayType, SqlType, identifier_name
from headwater.sqlparse_ext.statements import Query

PSEUDO_COLUMNS: Mapping[str, SqlType] = {
    "ROWTIME": BIGINT,
    "ROWPARTITION": INTEGER,
    "ROWOFFSET": BIGINT,
}
#: A windowed source's rows carry their window's bounds too (its records' keys hold them).
WINDOW_COLUMNS: Mapping[str, SqlType] = {"WINDOWSTART": BIGINT, "WINDOWEND": BIGINT}
RESERVED_NAMES = ("ROWTIME", "ROWPARTITION", "ROWOFFSET", "WINDOWSTART", "WINDOWEND")

#: ksqlDB's aggregate functions (see `functions/aggregates.py`): only in aggregations.
AGGREGATE_FUNCTIONS = frozenset(
    {
        "COUNT",
        "COUNT_DISTINCT",
        "SUM",
        "AVG",
        "MIN",
        "MAX",
        "TOPK",
        "TOPKDISTINCT",
        "COLLECT_LIST",
        "COLLECT_SET",
        "HISTOGRAM",
        "EARLIEST_BY_OFFSET",
        "LATEST_BY_OFFSET",
        "STDDEV_SAMP",
        "STDDEV_SAMPLE",
        "STDDEV_POP",
        "CORRELATION",
        "AVERAGE",
    }
)
#: ksqlDB's table functions: one input row gives several output rows.
TABLE_FUNCTIONS = FunctionNames(("EXPLODE", "CUBE_EXPLODE"), "TABLE")


class QueryCompileError(ExpressionError):
    """A persistent query ksqlDB would refuse, or that needs what headwater does not run yet.

    Attributes:
        construct: the clause or construct at fault (``GROUP BY``, ``WINDOW``, ...), when one is.
    """

    def __init__(
        self, message: str, construct: str | None = None, node: exp.Expr | None = None
    ) -> None:
        super().__init__(message)
        self.construct = construct
        self.offset = _offset(node)


@dataclass(frozen=True, slots=True)
class OutputColumn:
    """A column the query writes: its name, type, whether it is part of the record key."""

    name: str
    type: SqlType
    key: bool

    def catalog_column(self) -> Column:
        """As the catalog stores it."""
        return Column(self.name, self.type.sql(), key=self.key)


@dataclass(frozen=True, slots=True)
class CompiledQuery:
    """A checked persistent query: what it reads and writes, and its per-record functions.

    Attributes:
        source: the stream it reads.
        columns: the output columns, key columns first (in key order), then value columns.
        row_filter: WHERE, or None.
        keys: one evaluator per output key column (same order as the key columns).
        values: one evaluator per output value column.
        key_reads_value: per key column, whether its expression reads anything but key columns
            (value or pseudo columns: then a record without a value gets NULL there, as ksqlDB's
            repartition gives).
        partition_by: the PARTITION BY expressions as written ("" without), for EXPLAIN.
        where_text: the WHERE expression as ksqlDB prints it ("" without).
    """

    source: Source
    columns: tuple[OutputColumn, ...]
    row_filter: Evaluator | None = field(repr=False, compare=False)
    keys: tuple[Evaluator, ...] = field(repr=False, compare=False)
    values: tuple[Evaluator, ...] = field(repr=False, compare=False)
    key_reads_value: tuple[bool, ...] = ()
    partition_by: tuple[str, ...] = ()
    where_text: str = ""
    projection_text: tuple[str, ...] = ()
    join: Any = field(default=None, repr=False, compare=False)  # a `join_plan.JoinPlan`
    table_functions: tuple[TableFunction, ...] = field(default=(), repr=False, compare=False)
    #: what the vectorized path (`columnar_run.py`) compiles again: the scope, WHERE (as the
    #: evaluator reads it), the key and value expressions in column order
    scope: Scope | None = field(default=None, repr=False, compare=False)
    where_node: exp.Expr | None = field(default=None, repr=False, compare=False)
    key_nodes: tuple[exp.Expr, ...] = field(default=(), repr=False, compare=False)
    value_nodes: tuple[exp.Expr, ...] = field(default=(), repr=False, compare=False)

    @property
    def key_columns(self) -> tuple[OutputColumn, ...]:
        """The output key columns."""
        return tuple(c for c in self.columns if c.key)

    @property
    def value_columns(self) -> tuple[OutputColumn, ...]:
        """The output value columns."""
        return tuple(c for c in self.columns if not c.key)

    @property
    def kind(self) -> SourceKind:
        """What it produces: a table from a table (its changelog, row by row), else a stream."""
        return self.source.kind

    def catalog_columns(self) -> tuple[Column, ...]:
        """The output columns as the catalog stores a sink's columns."""
        return tuple(c.catalog_column() for c in self.columns)


def refuse_reserved_names(items: Sequence[exp.Expr], joined: bool = False) -> None:
    """ksqlDB's Analyzer check of a persistent query's SELECT items, made as it analyses them,
    before any column is resolved: an item named after a system column (ROWTIME, ROWPARTITION,
    ROWOFFSET, WINDOWSTART, WINDOWEND) is refused, as an alias when the aliased expression is not
    that column itself (``L.ROWTIME AS ROWTIME`` is the column itself). In a join an unaliased
    ``S.ROWTIME`` is named ``S_ROWTIME`` first (ksqlDB's AstSanitizer), so it passes."""
    for item in items:
        if joined and isinstance(item, exp.Column) and item.table:
            continue
        name = output_name(item)
        if name is None or name.upper() not in RESERVED_NAMES:
            continue
        inner = item.this if isinstance(item, exp.Alias) else item
        itself = (
            identifier_name(inner.this)
            if isinstance(inner, exp.Column) and not isinstance(inner.this, exp.Star)
            else format_expression(inner)
        )
        if itself.upper() != name.upper():
            raise QueryCompileError(
                f"`{name}` is a reserved column name. You cannot use it as an alias for a column.",
                None,
                item,
            )
        raise QueryCompileError(
            f"Reserved column name in select: `{name}`. Please remove or alias the column.",
            None,
            item,
        )


def compile_query(query: Query, catalog: Catalog, sink_name: str) -> CompiledQuery:
    """Checks a persistent query's SELECT against the catalog and compiles it.

    Args:
        query: the SELECT of ``CREATE STREAM ... AS`` or ``INSERT INTO ...``.
        catalog: the snapshot it is checked against.
        sink_name: the stream it writes (named in ksqlDB's messages).

    Raises:
        QueryCompileError: ksqlDB would refuse the query, or it needs a later construct.
    """
    if query.joins:
        refuse_reserved_names(query.select, joined=True)
        plan = plan_query_joins(query, catalog, sink_name)
        return replace(
            compile_query(plan.query, joined_catalog(plan, catalog), sink_name), join=plan
        )
    _refuse_later_constructs(query)
    source = catalog.source(query.source.name)
    if source is None:
        raise QueryCompileError(f"{query.source.name} does not exist.")
    refuse_reserved_names(query.select)
    if source.kind is SourceKind.TABLE and query.partition_by:
        raise QueryCompileError(
            "PARTITION BY is not supported on tables: a table is keyed by its PRIMARY KEY.",
            "PARTITION BY",
            query.partition_by[0],
        )
    if source.windowed and source.kind is SourceKind.TABLE:
        raise QueryCompileError("KSQL does not support persistent queries on windowed tables.")
    custom = dict(catalog.types)
    columns = {c.name: resolve_type(c.type, custom) for c in source.columns}
    pseudo = {**PSEUDO_COLUMNS, **(WINDOW_COLUMNS if source.windowed else {})}
    scope_columns = {**{k: v for k, v in pseudo.items() if k not in columns}, **columns}
    qualifiers = frozenset(n for n in (source.name, query.source.name, query.source.alias) if n)
    scope = Scope(scope_columns, qualifiers, custom)

    row_filter, where_text = _where(query.where, scope)
    aliases = {n for n in (output_name(i) for i in query.select) if n and n not in scope_columns}
    partition = _partition_by(query.partition_by, scope, aliases)
    items = _expand(query.select, source, columns, qualifiers, partition)
    for item in items:
        _refuse_functions(item, allow_table=True)
    # generated names skip the source's column names (ksqlDB's AstSanitizer alias generator)
    names = select_names(items, [c.name for c in source.columns])
    items, table_functions = _table_functions(items, scope, source)
    if table_functions:
        scope = Scope(
            {**scope.columns, **{f.name: f.type for f in table_functions}}, qualifiers, custom
        )
    compiled = []
    for item, name in zip(items, names, strict=True):
        try:
            c = compile_expression(item, scope)
        except UnresolvedColumn as error:
            if error.column in ("WINDOWSTART", "WINDOWEND"):  # only windowed sources have them
                raise QueryCompileError(
                    f"Reserved column name in select: `{error.column}`. "
                    "Please remove or alias the column.",
                    None,
                    item,
                ) from error
            raise QueryCompileError(
                f"SELECT column '{error.column}' cannot be resolved.", None, item
            ) from error
        except CodegenError as error:  # ksqlDB's CodeGenRunner names the clause
            raise QueryCompileError(f"Invalid Select: {error.message}") from error
        except ExpressionError as error:
            raise QueryCompileError(error.message) from error
        if c.type == NULL:
            raise QueryCompileError(
                "Can't infer a type of null. Please explicitly cast it to a "
                "required type, e.g. CAST(null AS VARCHAR)."
            )
        compiled.append((item, name, c))

    key_of_item = _match_keys(compiled, source, partition, sink_name, qualifiers)
    for index in key_of_item:
        _item, name, c = compiled[index]
        if has_map(c.type):
            raise QueryCompileError(map_key_refusal(name, c.type))
    keys: list[tuple[OutputColumn, Evaluator] | None] = [None] * _key_count(source, partition)
    key_nodes: list[exp.Expr | None] = [None] * len(keys)
    values: list[tuple[OutputColumn, Evaluator]] = []
    value_nodes: list[exp.Expr] = []
    seen: dict[str, str] = {}
    key_names = {c.name for c in source.columns if c.key}
    reads_value: list[bool] = [False] * len(keys)
    for index, (item, name, c) in enumerate(compiled):
        if name in seen:
            raise QueryCompileError(f"Duplicate value columns found in schema: `{name}` {c.type}")
        seen[name] = name
        slot = key_of_item.get(index)
        if slot is None:
            if name in RESERVED_NAMES:  # (a key named after PARTITION BY ROWTIME is ksqlDB's)
                if isinstance(item, exp.Alias):
                    raise QueryCompileError(
                        f"`{name}` is a reserved column name. You cannot use "
                        "it as an alias for a column.",
                        None,
                        item,
                    )
                raise QueryCompileError(
                    f"Reserved column name in select: `{name}`. Please remove or alias the column.",
                    None,
                    item,
                )
            values.append((OutputColumn(name, c.type, False), c.evaluate))
            value_nodes.append(item)
        else:
            keys[slot] = (OutputColumn(name, c.type, True), c.evaluate)
            key_nodes[slot] = item
            # ksqlDB evaluates a key expression on the key when it reads key columns only, else on
            # the value row, which holds the value and pseudo columns (PartitionByParamsFactory):
            # without a value, such a key is NULL
            reads_value[slot] = bool(c.references - key_names)
    if not values:
        raise QueryCompileError("The projection contains no value columns.")
    chosen = [k for k in keys if k is not None]
    if source.windowed and partition:  # after ksqlDB's own checks, so its refusals come first
        raise QueryCompileError(
            f"PARTITION BY over a windowed source is not supported yet: `{source.name}` is "
            f"{source.windowed} windowed.",
            "windowed source",
        )
    return CompiledQuery(
        source=source,
        columns=tuple(k for k, _ in chosen) + tuple(v for v, _ in values),
        row_filter=row_filter,
        keys=tuple(f for _, f in chosen),
        key_reads_value=tuple(r for r, k in zip(reads_value, keys, strict=True) if k is not None),
        values=tuple(f for _, f in values),
        partition_by=tuple(
            "NULL" if p.node is None else format_expression(p.node) for p in partition
        ),
        where_text=where_text,
        projection_text=tuple(format_expression(_bare(item)) for item, _, _ in compiled),
        table_functions=tuple(table_functions),
        scope=scope,
        where_node=None if query.where is None else pseudo_timestamps_in_millis(query.where),
        key_nodes=tuple(n for n in key_nodes if n is not None),
        value_nodes=tuple(value_nodes),
    )


@dataclass(frozen=True, slots=True)
class TableFunction:
    """A table function of the SELECT (``EXPLODE(a)``, ``CUBE_EXPLODE(a)``, or one from the
    extension folder): its argument's evaluator (a Python function's: of all its arguments, as a
    list), and the column (``name``, ``type``) its values take in each output row."""

    kind: str
    argument: Evaluator = field(repr=False, compare=False)
    name: str = ""
    type: SqlType = NULL
    call: Any = field(default=None, repr=False, compare=False)

    def rows(self, row: Mapping[str, Any]) -> list[Any]:
        """The values it gives for one input row (none for a NULL or empty array)."""
        values = self.argument(row)
        if self.call is not None:
            return list(self.call(values))
        if not values:
            return []
        return list(values) if self.kind == "EXPLODE" else cube(list(values))


def cube(columns: list[Any]) -> list[list[Any]]:
    """ksqlDB's CUBE_EXPLODE: every combination of the columns and NULLs, in its order (a NULL
    column gives one possibility, not two)."""
    size = len(columns)
    if size > 30:
        raise ValueError(f"cube_explode: too many columns ({size}); max is 30")
    present = 0
    for index, value in enumerate(columns):
        if value is not None:
            present |= 1 << (size - 1 - index)
    found = []
    for mask in range(1 << size):
        if mask & present != mask:
            continue  # the same row as another (a NULL column stays NULL)
        found.append(
            [
                columns[size - 1 - bit] if mask & (1 << bit) else None
                for bit in reversed(range(size))
            ]
        )
    return found


def _table_functions(
    items: list[exp.Expr], scope: Scope, source: Source
) -> tuple[list[exp.Expr], list[TableFunction]]:
    """The SELECT items with each table function call replaced by the column of its values, and
    the table functions (ksqlDB's rules: streams only, array arguments)."""
    found: list[TableFunction] = []
    rewritten: list[exp.Expr] = []
    for item in items:
        copy = item.copy()
        for call in list(copy.find_all(exp.Anonymous)):
            kind = call.name.upper()
            if kind not in TABLE_FUNCTIONS:
                continue
            if source.kind is SourceKind.TABLE:
                raise QueryCompileError(
                    "Table source is not supported with table functions", "table function", call
                )
            user = user_index.lookup(kind, "TABLE")
            if user is not None:
                found.append(_user_table_function(user, call, scope, f"$TF_{len(found)}"))
                replacement = exp.column(exp.to_identifier(found[-1].name, quoted=True))
                if call is copy:
                    copy = replacement
                else:
                    call.replace(replacement)
                continue
            if len(call.expressions) != 1:
                raise QueryCompileError(
                    f"Function '{kind.lower()}' takes one argument.", None, call
                )
            try:
                argument = compile_expression(call.expressions[0], scope)
            except UnresolvedColumn as error:
                raise QueryCompileError(
                    f"SELECT column '{error.column}' cannot be resolved.", None, call
                ) from error
            except ExpressionError as error:
                raise QueryCompileError(error.message, None, call) from error
            if not isinstance(argument.type, ArrayType):
                alternatives = (
                    "explode(ARRAY<DECIMAL> input)\nexplode(ARRAY<T> list)"
                    if kind == "EXPLODE"
                    else "cube_explode(ARRAY<T> columns)"
                )
                raise QueryCompileError(
                    f"Function '{kind.lower()}' does not accept parameters "
                    f"({argument.type.sql()}).\nValid alternatives are:\n{alternatives}",
                    None,
                    call,
                )
            name = f"$TF_{len(found)}"
            element = argument.type.element
            found.append(
                TableFunction(
                    kind, argument.evaluate, name, element if kind == "EXPLODE" else argument.type
                )
            )
            replacement = exp.column(exp.to_identifier(name, quoted=True))
            if call is copy:
                copy = replacement
            else:
                call.replace(replacement)
        rewritten.append(copy)
    return rewritten, found


def _user_table_function(
    function: user_index.UserFunction, call: exp.Anonymous, scope: Scope, name: str
) -> TableFunction:
    """A call of a table function from the extension folder."""
    arguments = []
    for node in call.expressions:
        try:
            arguments.append(compile_expression(node, scope))
        except UnresolvedColumn as error:
            raise QueryCompileError(
                f"SELECT column '{error.column}' cannot be resolved.", None, call
            ) from error
        except ExpressionError as error:
            raise QueryCompileError(error.message, None, call) from error
    types = [a.type for a in arguments]
    try:
        overload, element = user_index.resolve(function, types)
    except ExpressionError as error:
        raise QueryCompileError(error.message, None, call) from error
    evaluators = [a.evaluate for a in arguments]
    return TableFunction(
        function.name,
        lambda row: [f(row) for f in evaluators],
        name,
        element,
        user_index.table_impl(function.name, overload, types, element),
    )


def plan_query_joins(query: Query, catalog: Catalog, sink_name: str) -> JoinPlan:
    """The join plan of a query with JOINs (`join_plan.plan_joins`), refusals as compile errors."""
    try:
        return plan_joins(query, catalog, sink_name)
    except JoinError as error:
        node = error.node
        if node is None and not isinstance(error, MissingSource):
            node = query.joins[0].on  # where the join is (a missing source: where it is named)
        if error.later:
            raise QueryCompileError(f"{error.message} (not supported yet)", "JOIN", node) from error
        raise QueryCompileError(error.message, "JOIN", node) from error
    except UnresolvedColumn as error:
        raise QueryCompileError(
            f"JOIN ON column '{error.column}' cannot be resolved.", "JOIN"
        ) from error
    except ExpressionError as error:
        raise QueryCompileError(error.message, "JOIN") from error


def describe_shape(compiled: CompiledQuery, sink: str) -> list[str]:
    """The query's steps, one line each, for EXPLAIN (ksqlDB's step names)."""
    steps = [f"> [ SINK ] | Schema: {_schema(compiled.columns)} | Logger: {sink}"]
    steps.append(
        f"\t\t > [ PROJECT ] | Schema: {_schema(compiled.columns)} | "
        f"Expressions: {', '.join(compiled.projection_text)}"
    )
    if compiled.partition_by:
        steps.append(f"\t\t\t\t > [ REKEY ] | PARTITION BY {', '.join(compiled.partition_by)}")
    if compiled.where_text:
        steps.append(f"\t\t\t\t\t\t > [ FILTER ] | Condition: {compiled.where_text}")
    source = compiled.source
    steps.append(
        f"\t\t\t\t\t\t\t\t > [ SOURCE ] | Schema: "
        f"{', '.join(_column_sql(c.name, c.type, c.key) for c in source.columns)} | "
        f"Topic: {source.topic}"
    )
    return steps


# -- the pieces --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _PartitionExpr:
    node: exp.Expr | None  # None: PARTITION BY NULL
    name: str
    type: SqlType


def _refuse_later_constructs(query: Query) -> None:
    later = (
        (
            "GROUP BY",
            query.group_by,
            query.group_by[0] if query.group_by else None,
            "aggregations arrive with issue 15",
        ),
        ("HAVING", query.having, query.having, "aggregations arrive with issue 15"),
    )
    for construct, present, node, when in later:
        if present:
            raise QueryCompileError(
                f"{construct} is not supported in persistent queries yet ({when}).",
                construct,
                node,
            )
    if query.window is not None:
        raise QueryCompileError("WINDOW clause requires a GROUP BY clause.", "WINDOW")
    if query.emit == "FINAL":
        raise QueryCompileError(
            "EMIT FINAL is only supported for windowed aggregations.", "EMIT FINAL"
        )
    if query.limit is not None:
        raise QueryCompileError("LIMIT is not supported in persistent queries: remove it.", "LIMIT")


def _offset(node: exp.Expr | None) -> int | None:
    """Where ``node`` starts in its statement's text (the parser records token positions)."""
    if node is None:
        return None
    starts = [int(n.meta["start"]) for n in node.walk() if "start" in n.meta]
    return min(starts) if starts else None


def _refuse_functions(node: exp.Expr, allow_table: bool = False) -> None:
    for call in node.find_all(exp.Func):
        name = (call.name if isinstance(call, exp.Anonymous) else call.sql_name()).upper()
        if name in AGGREGATE_FUNCTIONS or name in AGGREGATE_NAMES or isinstance(call, exp.AggFunc):
            raise QueryCompileError(
                f"Aggregate function {name} can only be used in the SELECT or HAVING of an "
                "aggregation (a query with GROUP BY).",
                "aggregate function",
                call,
            )
        if name in TABLE_FUNCTIONS and not allow_table:
            raise QueryCompileError(
                f"Table functions are only allowed in the SELECT list: {name}.",
                "table function",
                call,
            )


def _where(where: exp.Expr | None, scope: Scope) -> tuple[Evaluator | None, str]:
    if where is None:
        return None, ""
    _refuse_functions(where)
    try:
        compiled = compile_expression(pseudo_timestamps_in_millis(where), scope)
    except UnresolvedColumn as error:
        raise QueryCompileError(f"WHERE column '{error.column}' cannot be resolved.") from error
    except ExpressionError as error:
        raise QueryCompileError(f"Error in WHERE expression: {error.message}") from error
    if compiled.type not in (BOOLEAN, NULL):
        raise QueryCompileError(
            "Type error in WHERE expression: Should evaluate to boolean but is "
            f"{compiled.text} ({compiled.type}) instead."
        )
    return compiled.evaluate, compiled.text


def _partition_by(
    nodes: Sequence[exp.Expr], scope: Scope, aliases: set[str]
) -> list[_PartitionExpr]:
    result: list[_PartitionExpr] = []
    if any(isinstance(n, exp.Null) for n in nodes):
        if len(nodes) > 1:
            raise QueryCompileError("Cannot PARTITION BY multiple columns including NULL")
        return [_PartitionExpr(None, "", NULL)]
    own = [output_name(n) for n in nodes]
    synthetic = iter(select_names(list(nodes)))
    for node, name in zip(nodes, own, strict=True):
        _refuse_functions(node)
        try:
            compiled = compile_expression(node, scope)
        except UnresolvedColumn as error:
            hint = (
                (
                    f" '{error.column}' must be a column in the source schema since PARTITION BY "
                    "is applied on the input."
                )
                if error.column in aliases
                else ""
            )
            raise QueryCompileError(
                f"PARTITION BY column '{error.column}' cannot be resolved.{hint}"
            ) from error
        except ExpressionError as error:
            raise QueryCompileError(f"Error in PARTITION BY expression: {error.message}") from error
        given = next(synthetic)
        result.append(_PartitionExpr(node, name or given, compiled.type))
    return result


def _expand(
    items: Sequence[exp.Expr],
    source: Source,
    columns: Mapping[str, SqlType],
    qualifiers: frozenset[str],
    partition: list[_PartitionExpr],
) -> list[exp.Expr]:
    """The SELECT list with ``*`` and ``S->*`` replaced by one item per column."""
    try:
        return expand_stars(items, qualifiers, columns, lambda: _star(source, partition))
    except ExpressionError as error:
        raise QueryCompileError(error.message) from error


def _star(source: Source, partition: list[_PartitionExpr]) -> list[exp.Expr]:
    def column(name: str) -> exp.Expr:
        return exp.column(exp.to_identifier(name, quoted=True))

    if not partition:
        return [
            column(c.name) for c in (*source.key_columns, *(c for c in source.columns if not c.key))
        ]
    new_keys = [p for p in partition if p.node is not None]
    as_columns = {_column_name(p.node) for p in new_keys if p.node is not None} - {None}
    items: list[exp.Expr] = []
    for p in new_keys:
        assert p.node is not None
        if _column_name(p.node) == p.name:
            items.append(p.node.copy())
        else:
            items.append(exp.alias_(p.node.copy(), exp.to_identifier(p.name, quoted=True)))
    items.extend(column(c.name) for c in source.columns if not c.key and c.name not in as_columns)
    items.extend(column(c.name) for c in source.key_columns if c.name not in as_columns)
    return items


def _column_name(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
        return identifier_name(node.this)
    return None


def _bare(node: exp.Expr) -> exp.Expr:
    return node.this if isinstance(node, exp.Alias) else node


def _normal(node: exp.Expr) -> str:
    """An expression's text with qualifiers dropped: equal for the same expression."""
    copy = _bare(node).copy()
    for column in copy.find_all(exp.Column):
        column.set("table", None)
        column.set("this", exp.to_identifier(identifier_name(column.this), quoted=True))
    return format_expression(copy)


def _key_count(source: Source, partition: list[_PartitionExpr]) -> int:
    if partition:
        return sum(1 for p in partition if p.node is not None)
    return len(source.key_columns)


def _match_keys(
    compiled: list[tuple[exp.Expr, str, Any]],
    source: Source,
    partition: list[_PartitionExpr],
    sink: str,
    qualifiers: frozenset[str],
) -> dict[int, int]:
    """select-item index -> key slot; raises when a key is missing or selected twice."""
    if partition:
        wanted = [_normal(p.node) for p in partition if p.node is not None]
    else:
        wanted = [
            _normal(exp.column(exp.to_identifier(c.name, quoted=True))) for c in source.key_columns
        ]
    found: dict[int, int] = {}
    by_slot: dict[int, list[str]] = {}
    for index, (item, name, _c) in enumerate(compiled):
        text = _normal(item)
        for slot, key_text in enumerate(wanted):
            if text == key_text:
                by_slot.setdefault(slot, []).append(name)
                found[index] = slot
                break
    for slot, names in by_slot.items():
        if len(names) > 1:
            key = wanted[slot].strip('"')
            raise QueryCompileError(
                f"The projection contains a key column (`{key}`) more than "
                f"once, aliased as: {' and '.join(sorted(names))}."
            )
    missing = [slot for slot in range(len(wanted)) if slot not in by_slot]
    if missing:
        qualifier = source.name
        if partition:  # ksqlDB names every partitioning expression then
            texts = [_qualified(p.node, qualifier) for p in partition if p.node is not None]
            noun = "partitioning expression" + ("s" if len(texts) > 1 else "")
        else:  # ksqlDB names every key column then too
            texts = [c.name for c in source.key_columns]
            noun = "key column" + ("s" if len(texts) > 1 else "")
        listed = texts[0] if len(texts) == 1 else ", ".join(texts[:-1]) + " and " + texts[-1]
        raise QueryCompileError(
            f"The query used to build `{sink}` must include the {noun} "
            f"{listed} in its projection (eg, SELECT {', '.join(texts)}...)."
        )
    return found


def _qualified(node: exp.Expr | None, qualifier: str) -> str:
    assert node is not None
    copy = node.copy()
    for column in copy.find_all(exp.Column):
        column.set("table", exp.to_identifier(qualifier))
    return format_expression(copy)


def _column_sql(name: str, type_text: str, key: bool) -> str:
    return f"`{name}` {type_text}" + (" KEY" if key else "")


def _schema(columns: Sequence[OutputColumn]) -> str:
    return ", ".join(_column_sql(c.name, c.type.sql(), c.key) for c in columns)
