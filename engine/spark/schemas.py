"""The shapes of the rows the Spark stages of a persistent query pass on, as Spark DDL strings. Pure.

Kept apart so that the Kafka source's driver side (`kafka_source`, loaded by Spark's streaming
source runner, one Python process per query source) names them without importing the operators.
"""

from __future__ import annotations

#: The rows a query's source yields: sink records, or skipped records (``error`` set).
OUTPUT_SCHEMA = (
    "key binary, value binary, timestamp long, partition int, "
    "source_partition int, source_offset long, error string"
)
#: The rows of a source without a query: the Kafka records as read.
RAW_SCHEMA = "key binary, value binary, timestamp long, partition int, offset long"
#: Stage 1's rows: the group (or, over a table, the source key) to shuffle by, the pickled
#: `GroupedRow` / `TableChange`, and for a skipped record its error.
GROUPED_SCHEMA = (
    "group binary, row binary, source_partition int, source_offset long, "
    "error string, detail binary"
)
#: What the aggregate stage gives the sink (`OUTPUT_SCHEMA` plus the input sequence).
AGGREGATED_SCHEMA = (
    "key binary, value binary, timestamp long, partition int, "
    "source_partition int, source_offset long, source_seq int, "
    "source_rank long, error string"
)
#: What a source's task gives the join: the join task, a pickled list of its `SideRecord`s, and
#: for a skipped record its error.
ENTRY_SCHEMA = (
    "task int, row binary, source_partition int, source_offset long, error string, detail binary"
)
