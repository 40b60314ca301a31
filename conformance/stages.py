"""What the QTT runner records of a case for its Spark replay (`qtt_spark`). No I/O.

A stateless persistent query's only stage on Spark is the source task's (`source_rows.rows_of`):
records in, rows of `OUTPUT_ARROW` out, from a payload the driver builds (`driver._start`: the query
id, the catalog objects it reads, buffering). The runner records, per stateless query of a case,
that payload and every call it made in process with the rows it gave, so that the same calls can
be made again inside a Spark job and compared row for row.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field
from typing import Any, Protocol

from headwater.engine.formats.own_registry import OwnSchemaRegistry
from headwater.engine.persistent import InputRecord
from headwater.engine.spark.host import query_payload
from headwater.metastore.catalog import Catalog, Query

#: One call of a stage: the records it was given, and the rows (`OUTPUT_ARROW`, as dicts) it gave.
Call = tuple[tuple[InputRecord, ...], list[dict[str, Any]]]


@dataclass
class RecordedStage:
    """One query's stage in one case: its payload, its calls in order, and for a query with state
    the shape of its plan (``stream``, ``table``, ``windowed``, ``join``, ``join+stream``, ...:
    `qtt_spark_state`; "" stateless)."""

    payload: str
    shape: str = ""
    calls: list[Call] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)  # a join's: the topic of each call


@dataclass(frozen=True)
class CaseStages:
    """What a case gives its Spark replay: its stages (every persistent query of the case), and
    its schema registry (schemaful formats read it in the worker too)."""

    stages: dict[str, RecordedStage]
    registry: OwnSchemaRegistry


class _Recording(Protocol):
    stages: dict[str, RecordedStage] | None
    registry: OwnSchemaRegistry


def stage_payload(query: Query, catalog: Catalog, buffering: bool = False, buckets: int = 0) -> str:
    """The payload a live query's tasks get (as `driver._start` writes it); the QTT runs with
    ``cache.max.bytes.buffering=0``, hence no buffering. ``buckets``: an aggregation's state
    buckets (as a new query's checkpoint records them)."""
    body = {
        "queryId": query.id,
        "catalog": query_payload(query, catalog)["catalog"],
        "buffering": buffering,
        "stateBuckets": buckets,
    }
    return json.dumps(body, sort_keys=True)


def recorded_stages(world: _Recording) -> bytes | None:
    """A finished case's stages, pickled to cross process boundaries (None: nothing recorded)."""
    if world.stages is None:
        return None
    recorded = CaseStages(world.stages, world.registry)
    return pickle.dumps(recorded, protocol=pickle.HIGHEST_PROTOCOL)


def comparable(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Rows of `OUTPUT_ARROW` in a canonical order, a skipped record's detail parsed (its JSON
    text may order its fields differently on another path)."""
    out = []
    for row in rows:
        value = row["value"]
        if row["error"] is not None and value is not None:
            detail = json.loads(value)
            value = (detail.get("kind"), detail.get("message"), detail.get("topic"))
        out.append(
            (
                row["source_partition"],
                row["source_offset"],
                row["key"],
                value,
                row["timestamp"],
                row["partition"],
                row["error"],
            )
        )
    return sorted(out, key=repr)
