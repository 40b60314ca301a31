"""The engine's answers to the metastore's planner about persistent queries. Pure.

The metastore stays below the engine: its planner is handed `QUERY_ANALYZER` (a
`headwater.metastore.plan.QueryAnalyzer`) and learns from it what a SELECT reads, writes and
produces, and whether a sink's columns can be written in its formats.
"""

from __future__ import annotations

from dataclasses import dataclass

from headwater.engine.errors import SerdeError
from headwater.engine.formats.serde import RowSerde
from headwater.engine.formats.windows import window_size_ms
from headwater.engine.persistent.aggregate_plan import (
    compile_aggregate,
    describe_aggregate,
    is_aggregation,
)
from headwater.engine.persistent.columnar_group import grouping_line
from headwater.engine.persistent.columnar_run import execution_line
from headwater.engine.persistent.query_plan import (
    OutputColumn,
    QueryCompileError,
    compile_query,
    describe_shape,
)
from headwater.metastore.catalog import Catalog, Source, SourceKind
from headwater.metastore.errors import ValidationError
from headwater.metastore.plan import QueryShape
from headwater.sqlparse_ext.statements import Query


class _Analyzer:
    """A `metastore.plan.QueryAnalyzer` over the engine's query compilers."""

    def shape(self, query: Query, catalog: Catalog, sink_name: str) -> QueryShape:
        """The query's sources, output columns and result kind; ValidationError when refused."""
        try:
            if is_aggregation(query):
                aggregate = compile_aggregate(query, catalog, sink_name)
                window = aggregate.window
                return QueryShape(
                    aggregate.join.sources if aggregate.join else (aggregate.source.name,),
                    tuple(c.catalog_column() for c in aggregate.columns),
                    SourceKind.TABLE,
                    window.kind if window else None,
                    window.size_ms if window and not window.session else None,
                )
            compiled = compile_query(query, catalog, sink_name)
        except QueryCompileError as error:
            raise ValidationError(error.message, error.offset) from error
        sources = compiled.join.sources if compiled.join else (compiled.source.name,)
        windowed = compiled.source.windowed if compiled.join is None else None
        return QueryShape(  # a windowed stream's query writes its windows on (ksqlDB's KeyFormat)
            sources,
            compiled.catalog_columns(),
            compiled.kind,
            windowed,
            window_size_ms(compiled.source) if windowed else None,
        )

    def check_sink(self, sink: Source, catalog: Catalog) -> None:
        """ValidationError when the sink's columns cannot be written in its formats."""
        try:
            RowSerde.for_source(sink, catalog.types)
        except SerdeError as error:
            raise ValidationError(error.message) from error


#: The engine's analysis of persistent queries, handed to the metastore's planner.
QUERY_ANALYZER = _Analyzer()


@dataclass(frozen=True, slots=True)
class QueryDescription:
    """What EXPLAIN shows of a persistent query: its source, output columns and steps."""

    source: str
    columns: tuple[OutputColumn, ...]
    steps: tuple[str, ...]


def describe_query(query: Query, catalog: Catalog, sink_name: str) -> QueryDescription:
    """The description of a persistent query's SELECT (raises QueryCompileError when refused)."""
    if is_aggregation(query):
        aggregate = compile_aggregate(query, catalog, sink_name)
        return QueryDescription(
            aggregate.source.name,
            aggregate.columns,
            (
                *describe_aggregate(aggregate, sink_name),
                grouping_line(aggregate, catalog.source(sink_name)),
            ),
        )
    compiled = compile_query(query, catalog, sink_name)
    steps = describe_shape(compiled, sink_name)
    steps.append(execution_line(compiled, catalog.source(sink_name)))
    return QueryDescription(compiled.source.name, compiled.columns, tuple(steps))
