"""headwater.engine.persistent: persistent queries (CREATE ... AS SELECT, INSERT INTO ... SELECT).

The pure side, read and tested without a JVM: `compile` checks a query against the catalog and
builds what it computes (ksqlDB's rules for projections, keys and PARTITION BY, the expression
compiler of pull queries for every expression); `operators` runs that over Kafka records, record
by record, as one function of a batch: decode, filter, re-key, project, encode. The Spark binding
(`headwater.engine.spark`) only distributes those batches and keeps offsets and checkpoints.
"""

from headwater.engine.persistent.analyzer import QUERY_ANALYZER
from headwater.engine.persistent.compile import (
    CompiledQuery,
    QueryCompileError,
    compile_query,
    describe_shape,
)
from headwater.engine.persistent.operators import (
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
