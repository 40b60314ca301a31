"""QTT cases through a live query's Spark stage: ``python -m conformance.qtt --spark``. Does I/O
(a Spark session in a child process, its logs in a file).

After the in-process run (`qtt`), the stateless query stages of every passed case are made again
inside one Spark job, many cases per job: each case is one row, run by one Spark Python worker
through `source_rows.rows_of`, which is what a live query's source task runs (from the payload the
driver builds: the query, the catalog objects it reads, deserialized in the worker), with the case's
schema registry, its calls in their order; the rows that come back are compared with the in-process
rows, call by call. A case agrees when every call of every stateless query gives the same rows
(keys, values, timestamps, partitions, skipped records with their messages).

The aggregations and joins of the passed cases are replayed in the same child through Spark's
stateful operators, one call per micro-batch (`qtt_spark_state`), and compared call by call the
same way.

What is not replayed: the Kafka source and the sink around the stages (their tests:
tests/engine/test_engine_spark_*.py and the CSAS/CTAS tests on a live node).
"""

from __future__ import annotations

import json
import os
import pickle
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from conformance.stages import CaseStages, comparable


@dataclass(frozen=True)
class Replay:
    """The Spark replay's verdicts."""

    replayed: int  # passed cases with at least one persistent query
    agreed: int
    calls: int
    differences: list[tuple[str, str]]  # (case, what differed)
    seconds: float
    log: str
    stateful: int = 0  # replayed cases with state (through Spark's stateful operators)


def replay(recorded: list[tuple[str, bytes]]) -> Replay:
    """Replays each case's pickled `CaseStages` on Spark; every case's verdict."""
    from conformance.qtt_spark_state import StatefulTask

    cases: dict[str, CaseStages] = {name: pickle.loads(body) for name, body in recorded}
    tasks: dict[str, bytes] = {}
    stateful: dict[int, StatefulTask] = {}
    owners: list[tuple[str, str]] = []  # per stateful task: its case and query
    for name, case in cases.items():
        if not case.stages:
            continue
        stateless = [
            (s.payload, [records for records, _ in s.calls])
            for s in case.stages.values()
            if not s.shape
        ]
        if stateless:
            tasks[name] = pickle.dumps((case.registry, stateless), protocol=pickle.HIGHEST_PROTOCOL)
        for query_id, stage in case.stages.items():
            if stage.shape and stage.calls:
                stateful[len(owners)] = StatefulTask(
                    _own_payload(stage.payload, name),
                    stage.shape,
                    case.registry,
                    [r for r, _ in stage.calls],
                    tuple(stage.topics),
                )
                owners.append((name, query_id))
    log = Path(tempfile.gettempdir()) / f"headwater-qtt-spark-{os.getpid()}.log"
    started = time.monotonic()
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as child:
        answers, stateful_answers = child.submit(_run_job, tasks, stateful, str(log)).result()
    by_case: dict[str, dict[str, Any]] = {}
    for index, (name, query_id) in enumerate(owners):
        by_case.setdefault(name, {})[query_id] = stateful_answers[index]
    differences: list[tuple[str, str]] = []
    calls = 0
    replayed = sorted(set(tasks) | set(by_case))
    for name in replayed:
        stateless_answer = pickle.loads(answers[name]) if name in tasks else []
        found = _difference(cases[name], stateless_answer, by_case.get(name, {}))
        calls += sum(len(s.calls) for s in cases[name].stages.values())
        if found:
            differences.append((name, found))
    return Replay(
        replayed=len(replayed),
        agreed=len(replayed) - len(differences),
        calls=calls,
        differences=differences,
        seconds=time.monotonic() - started,
        log=str(log),
        stateful=len(by_case),
    )


def _own_payload(payload: str, case: str) -> str:
    """``payload`` made the case's own: a worker builds a query's pipeline once per payload (its
    serdes keep the schema ids they looked up), and two cases may run the same query against
    registries that gave other ids."""
    body = json.loads(payload)
    body["replayCase"] = case
    return json.dumps(body, sort_keys=True)


def _difference(
    case: CaseStages, answer: list[Any], aggregations: dict[str, Any] | None = None
) -> str:
    """What the first differing call gave on each path ('' when every call agrees): ``answer``,
    the stateless stages' calls in their order; ``aggregations``, each aggregation's calls."""
    stateless = [(q, s) for q, s in case.stages.items() if not s.shape]
    aggregations = aggregations or {}
    compared: list[tuple[str, Any, Any]] = list(
        zip([q for q, _ in stateless], [s for _, s in stateless], answer, strict=True)
    )
    compared += [(q, s, aggregations[q]) for q, s in case.stages.items() if s.shape and s.calls]
    for query_id, stage, got in compared:
        if isinstance(got, str):
            return f"{query_id}: the Spark worker failed: {got}"
        for index, ((records, rows), spark_rows) in enumerate(zip(stage.calls, got, strict=True)):
            if comparable(rows) != comparable(spark_rows):
                return (
                    f"{query_id}, call {index + 1} ({len(records)} record(s)): in process "
                    f"{comparable(rows)!r}, on Spark {comparable(spark_rows)!r}"
                )
    return ""


def report(result: Replay, verbose: bool = False) -> str:
    lines = [
        (
            f"on Spark ({result.replayed} cases, {result.calls} stage calls, "
            f"{result.seconds:.1f} s with Spark's start; its log: {result.log}):"
        ),
        (
            f"  {result.agreed} of {result.replayed} passed cases give the same rows on Spark "
            f"({len(result.differences)} differ): their stateless stages in one job through a "
            f"source task's path, the aggregations and joins of {result.stateful} of them "
            "through Spark's stateful operators and state store, a call per micro-batch"
        ),
        "  not replayed: the Kafka source's reads and the sink's writes around the stages",
    ]
    shown = result.differences if verbose else result.differences[:5]
    lines.extend(f"  DIFFERS {name}: {what[:500]}" for name, what in shown)
    return "\n".join(lines)


# -- the child process ----------------------------------------------------------------------------


def _run_job(
    tasks: dict[str, bytes], stateful: dict[int, Any], log: str
) -> tuple[dict[str, bytes], dict[int, Any]]:
    """In a child process: one Spark session, one job over every case's stateless stages, then
    the aggregations' streaming queries (`qtt_spark_state`); its logs in ``log``."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    from conformance.qtt_spark_state import run_tasks
    from headwater.engine.spark.driver import start_session, stop_runner_forks
    from headwater.engine.spark.settings import EngineSettings

    spark = start_session(EngineSettings(log_file=log))
    try:
        names = sorted(tasks)
        answers: dict[str, bytes] = {}
        if names:
            rows = [(i, tasks[name]) for i, name in enumerate(names)]
            frame = spark.createDataFrame(rows, "task int, body binary").repartition(2)
            done = frame.mapInArrow(_replay_batches, "task int, rows binary").collect()
            answers = {names[row.task]: bytes(row.rows) for row in done}
        with tempfile.TemporaryDirectory(prefix="headwater-qtt-state-") as folder:
            return answers, run_tasks(spark, stateful, folder) if stateful else {}
    except Exception as exc:  # noqa: BLE001 - py4j errors do not cross processes; their text does
        raise RuntimeError(f"the Spark job failed (see {log}): {exc}") from None
    finally:
        spark.stop()
        stop_runner_forks()


def _replay_batches(batches: Iterator[Any]) -> Iterator[Any]:
    """In a Spark Python worker: each case's stages through `rows_of`, as a live query's task."""
    import traceback

    import pyarrow as pa

    from headwater.engine.formats import schema_registry
    from headwater.engine.spark.packed import unpack
    from headwater.engine.spark.source_rows import forget_pipelines, rows_of

    for batch in batches:
        tasks, answers = [], []
        for task, body in zip(batch.column("task").to_pylist(), batch.column("body").to_pylist()):
            registry, stages = pickle.loads(body)
            schema_registry.use(registry)
            answer: list[Any] = []
            for payload, calls in stages:
                forget_pipelines()  # every case starts from a worker that has not run its queries
                try:
                    options = {"query": payload, "output": "records"}
                    answer.append(
                        [
                            [
                                row
                                for packed in rows_of(options, iter(call))
                                for out in unpack(pa.Table.from_batches([packed]))
                                for row in out.to_pylist()
                            ]
                            for call in calls
                        ]
                    )
                except Exception as exc:  # noqa: BLE001 - one case's crash is its verdict
                    answer.append("".join(traceback.format_exception_only(type(exc), exc)).strip())
            tasks.append(task)
            answers.append(pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))
        schema_registry.use(None)
        yield pa.RecordBatch.from_pydict(
            {"task": tasks, "rows": answers},
            schema=pa.schema([("task", pa.int32()), ("rows", pa.binary())]),
        )
