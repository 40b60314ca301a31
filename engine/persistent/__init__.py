"""headwater.engine.persistent: persistent queries (CREATE ... AS SELECT, INSERT INTO ... SELECT).

The pure side, read and tested without a JVM, in plan/run pairs: a `*_plan` module checks a query
against the catalog and builds what it computes, the matching `*_run` module runs that over Kafka
records. `query_plan` / `query_run`: a SELECT (ksqlDB's rules for projections, keys and PARTITION
BY, the expression compiler of pull queries for every expression), run record by record as one
function of a batch: decode, filter, re-key, project, encode. `aggregate_plan` / `aggregate_run`:
GROUP BY, windows and HAVING, run as the stages group, (change,) aggregate. `join_plan` /
`join_run`: joins, with Kafka Streams' semantics. `analyzer` answers the metastore's planner.
The Spark binding (`headwater.engine.spark`) only distributes those batches and keeps offsets and
checkpoints.
"""

from headwater.engine.persistent.analyzer import QUERY_ANALYZER
from headwater.engine.persistent.query_plan import (
    CompiledQuery,
    QueryCompileError,
    compile_query,
    describe_shape,
)
from headwater.engine.persistent.query_run import (
    InputRecord,
    OutputRecord,
    ProcessingError,
    RecordPipeline,
)

__all__ = [
    "QUERY_ANALYZER",
    "CompiledQuery",
    "InputRecord",
    "OutputRecord",
    "ProcessingError",
    "QueryCompileError",
    "RecordPipeline",
    "compile_query",
    "describe_shape",
]
