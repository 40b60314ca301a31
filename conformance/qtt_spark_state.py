"""QTT cases' aggregations and joins through Spark's stateful operators, many cases per streaming
query: the stateful half of ``python -m conformance.qtt --spark`` (`qtt_spark`). Runs inside its
Spark child.

Each query with state of a passed case is a *task*. Its calls (one input record each, in the
order the in-process runner made them) become micro-batches: batch ``i`` holds the ``i``-th call of
every task. The source (`ReplaySource`) runs stage 1 of each task's call in its Spark task through
`source_rows.rows_of` (what a live query's Kafka source task runs), Spark shuffles the grouped rows
and keeps the states in its state store (RocksDB), and the operators are those of
`engine.spark.aggregation` (`ChangeProcessor` for a table source, `AggregateProcessor`, or
`WindowedProcessor`), and for a join `engine.spark.joins`' `JoinProcessor` (a call enters the
join on the leaf of the topic it was read from) before them, fed one task's rows at a time: a Spark
key is the task's own key marked with the task (``b"<task>:"`` before a group, ``task * 4096``
added to a join task), and the wrapper (`_Replay`) hands the operator that task's pipeline and
schema registry. A ``foreachBatch`` collects each batch's rows per task, to be compared with the
in-process rows of the same call. One streaming query per shape of plan (`_SHAPES`): a query's
chain of operators is fixed.

Not replayed: the Kafka source's reading and the sink's writing (their tests:
tests/engine/test_engine_spark_*.py).
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import Row
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
    ReadAllAvailable,
    ReadLimit,
)
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

NAME = "headwater-qtt-replay"
_PARTS = 2  # tasks per batch: the tasks are split over two Spark tasks (the machine's cores)
#: What the replay's final stage gives: `AGGREGATED_SCHEMA` and the task it belongs to.
REPLAYED_SCHEMA = (
    "key binary, value binary, timestamp long, partition int, source_partition int, "
    "source_offset long, source_seq int, source_rank long, error string, task int"
)
_SHAPES = ("stream", "table", "windowed", "join", "join+stream", "join+table", "join+windowed")
#: A join's Spark key is its join task (an int); the replay's adds the task's index times this.
_JOIN_STRIDE = 4096
_SHAPE_MAX_S = 900.0  # the longest one shape's streaming query may take


@dataclass(frozen=True)
class StatefulTask:
    """One query with state of one case: its payload (as the driver writes it), its plan's shape
    (`_SHAPES`), its case's schema registry, the records of its calls in order, and (a join) the
    topic each call read."""

    payload: str
    shape: str
    registry: Any
    calls: list[tuple[Any, ...]]
    topics: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Part(InputPartition):
    batch: int
    part: int


class ReplaySource(DataSource):
    """``readStream.format("headwater-qtt-replay").option("tasks", <pickle file>)``: batch ``i``
    gives stage 1's rows of every task's ``i``-th call, the group prefixed with the task."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        from headwater.engine.spark.schemas import ENTRY_SCHEMA, GROUPED_SCHEMA

        return ENTRY_SCHEMA if self.options.get("join") == "true" else GROUPED_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _Reader({k.lower(): v for k, v in self.options.items()})


_loaded: dict[str, dict[int, StatefulTask]] = {}


def _tasks(path: str) -> dict[int, StatefulTask]:
    """The tasks of a replay file (read once per process)."""
    found = _loaded.get(path)
    if found is None:
        found = pickle.loads(Path(path).read_bytes())
        _loaded[path] = found
    return found


class _Reader(DataSourceStreamReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.path = options["tasks"]
        self.batches = max((len(t.calls) for t in _tasks(self.path).values()), default=0)

    def initialOffset(self) -> dict[str, int]:
        return {"batch": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        return {"batch": min(self.batches, int(start["batch"]) + 1)}  # one call per batch

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        if int(end["batch"]) <= int(start["batch"]):
            return []
        return [_Part(int(start["batch"]), part) for part in range(_PARTS)]

    def commit(self, end: dict[str, int]) -> None:
        pass

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, _Part)
        import pyarrow as pa

        from headwater.engine.formats import schema_registry
        from headwater.engine.spark.source_rows import rows_of

        for index, task in sorted(_tasks(self.path).items()):
            if index % _PARTS != partition.part or partition.batch >= len(task.calls):
                continue
            schema_registry.use(task.registry)
            records = iter(task.calls[partition.batch])
            if task.shape.startswith("join"):
                from headwater.engine.spark.joins import pipelines_of

                leaf = pipelines_of(task.payload)[0].topics[task.topics[partition.batch]]
                options = {"query": task.payload, "output": "join", "leaf": str(leaf)}
                for batch in rows_of(options, records):
                    keys = [index * _JOIN_STRIDE + t + 1 for t in batch.column("task").to_pylist()]
                    yield batch.set_column(0, "task", pa.array(keys, pa.int32()))
                continue
            prefix = b"%d:" % index
            options = {"query": task.payload, "output": "grouped"}
            for batch in rows_of(options, records):
                groups = [prefix + bytes(g) for g in batch.column("group").to_pylist()]
                yield batch.set_column(0, "group", pa.array(groups, pa.binary()))
        schema_registry.use(None)


class _Replay(StatefulProcessor):
    """An aggregation operator of `engine.spark.aggregation` serving every task: each Spark key's
    rows go to it with its task's pipeline and registry; what it gives is marked with the task
    (``regroup``: its rows go on to the next stage, keyed by the task's prefix again)."""

    def __init__(self, operator: str, path: str, regroup: bool) -> None:
        self.operator, self.path, self.regroup = operator, path, regroup

    def init(self, handle: StatefulProcessorHandle) -> None:
        from headwater.engine.formats import schema_registry
        from headwater.engine.spark import aggregation, joins

        tasks = _tasks(self.path)
        first = tasks[min(tasks)]  # the layout (buckets) is the same for every task
        module = joins if self.operator == "JoinProcessor" else aggregation
        # the operator builds (and the worker keeps) the first task's pipelines: under its
        # registry, as every task's are built, or their serdes would have none
        schema_registry.use(first.registry)
        try:
            self.inner = getattr(module, self.operator)(first.payload)
            self.inner.init(handle)
        finally:
            schema_registry.use(None)

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        from headwater.engine.formats import schema_registry
        from headwater.engine.spark.aggregation import pipeline_of
        from headwater.engine.spark.joins import pipelines_of

        if self.operator == "JoinProcessor":
            index, join_task = divmod(int(key[0]), _JOIN_STRIDE)
            key = (join_task - 1,)
        else:
            index = int(bytes(key[0]).partition(b":")[0])
        task = _tasks(self.path)[index]
        prefix = b"%d:" % index
        schema_registry.use(task.registry)
        if self.operator == "JoinProcessor":
            self.inner.payload = task.payload
            self.inner.join, self.inner.after = pipelines_of(task.payload)
        else:
            self.inner.pipeline = pipeline_of(task.payload)
        try:
            for row in self.inner.handleInputRows(key, rows, timerValues):
                fields = row.asDict()
                if self.regroup:
                    if row.error is None:
                        fields["group"] = prefix + bytes(row.group)
                    else:
                        fields["group"] = prefix
                    yield Row(**fields)
                else:
                    yield Row(**fields, task=index)
        finally:
            schema_registry.use(None)

    def close(self) -> None:
        pass


def run_tasks(spark: Any, tasks: dict[int, StatefulTask], folder: str) -> dict[int, Any]:
    """Every task's rows per call (a list per call; a string: the shape's query failed), one
    streaming query per shape, its files (tasks, checkpoint) in ``folder``."""
    from headwater.engine.spark.schemas import GROUPED_SCHEMA

    spark.dataSource.register(ReplaySource)
    answers: dict[int, Any] = {}
    for shape in _SHAPES:
        chosen = {i: t for i, t in tasks.items() if t.shape == shape}
        if not chosen:
            continue
        path = Path(folder) / f"{shape}.tasks"
        path.write_bytes(pickle.dumps(chosen, protocol=pickle.HIGHEST_PROTOCOL))
        joined = shape.startswith("join")
        frame = (
            spark.readStream.format(NAME)
            .option("tasks", str(path))
            .option("join", "true" if joined else "false")
            .load()
        )
        after = shape.removeprefix("join").removeprefix("+")
        if joined:
            frame = frame.groupBy("task").transformWithState(
                _Replay("JoinProcessor", str(path), bool(after)),
                GROUPED_SCHEMA if after else REPLAYED_SCHEMA,
                "Append",
                "None",
            )
        if after == "table":
            frame = frame.groupBy("group").transformWithState(
                _Replay("ChangeProcessor", str(path), True), GROUPED_SCHEMA, "Append", "None"
            )
        if after:
            operator = "WindowedProcessor" if after == "windowed" else "AggregateProcessor"
            frame = frame.groupBy("group").transformWithState(
                _Replay(operator, str(path), False), REPLAYED_SCHEMA, "Append", "None"
            )
        got: dict[int, dict[int, list[dict[str, Any]]]] = {i: {} for i in chosen}
        seen: set[int] = set()

        def collect(batch: Any, batch_id: int, got: Any = got, seen: set[int] = seen) -> None:
            for row in batch.toArrow().to_pylist():
                got[row.pop("task")].setdefault(batch_id, []).append(row)
            seen.add(batch_id)

        query = (
            frame.writeStream.foreachBatch(collect)
            .option("checkpointLocation", str(Path(folder) / f"{shape}.checkpoint"))
            .start()
        )
        calls = max(len(t.calls) for t in chosen.values())
        deadline = time.monotonic() + _SHAPE_MAX_S
        try:
            while len(seen) < calls:
                failure = query.exception()
                if failure is not None:
                    raise RuntimeError(str(failure))
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{len(seen)} of {calls} batches in {_SHAPE_MAX_S:.0f} s")
                time.sleep(0.1)
        except Exception as exc:  # noqa: BLE001 - one shape's failure is its tasks' verdict
            for index in chosen:
                answers[index] = f"the {shape} replay failed: {exc}"
            continue
        finally:
            query.stop()
        for index, task in chosen.items():
            answers[index] = [got[index].get(call, []) for call in range(len(task.calls))]
    return answers
