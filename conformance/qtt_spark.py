"""QTT cases through a live query's Spark stage: ``python -m conformance.qtt --spark``. Does I/O
(a Spark session in a child process, its logs in a file).

After the in-process run (`qtt`), the stateless query stages of every passed case are made again
inside one Spark job, many cases per job: each case is one row, run by one Spark Python worker
through `source_rows.rows_of`, which is what a live query's source task runs (from the payload the
driver builds: the query, the catalog objects it reads, deserialized in the worker), with the case's
schema registry, its calls in their order; the rows that come back are compared with the in-process
rows, call by call. A case agrees when every call of every stateless query gives the same rows
(keys, values, timestamps, partitions, skipped records with their messages).

What is not replayed: the stages with state (an aggregate's grouping, change and aggregate steps in
Spark's state store, a join's sides); the Kafka source and the sink around the stage (their tests:
tests/engine/test_engine_spark_*.py and the CSAS/CTAS tests on a live node). The report counts the
cases with such queries apart.
"""

from __future__ import annotations

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

    replayed: int  # passed cases with at least one stateless stage
    agreed: int
    calls: int
    differences: list[tuple[str, str]]  # (case, what differed)
    with_state: int  # replayed cases that also have queries with state (those not replayed)
    state_only: int  # passed cases whose queries all keep state: nothing replayed
    seconds: float
    log: str


def replay(recorded: list[tuple[str, bytes]]) -> Replay:
    """Replays each case's pickled `CaseStages` on Spark; every case's verdict."""
    cases: dict[str, CaseStages] = {name: pickle.loads(body) for name, body in recorded}
    tasks: dict[str, bytes] = {}
    state_only = 0
    for name, case in cases.items():
        if not case.stages:
            state_only += int(case.stateful > 0)
            continue
        stages = [(s.payload, [records for records, _ in s.calls]) for s in case.stages.values()]
        tasks[name] = pickle.dumps((case.registry, stages), protocol=pickle.HIGHEST_PROTOCOL)
    log = Path(tempfile.gettempdir()) / f"headwater-qtt-spark-{os.getpid()}.log"
    started = time.monotonic()
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as child:
        answers: dict[str, bytes] = child.submit(_run_job, tasks, str(log)).result()
    differences: list[tuple[str, str]] = []
    calls = 0
    for name in tasks:
        found = _difference(cases[name], pickle.loads(answers[name]))
        calls += sum(len(s.calls) for s in cases[name].stages.values())
        if found:
            differences.append((name, found))
    return Replay(
        replayed=len(tasks),
        agreed=len(tasks) - len(differences),
        calls=calls,
        differences=differences,
        with_state=sum(1 for n in tasks if cases[n].stateful),
        state_only=state_only,
        seconds=time.monotonic() - started,
        log=str(log),
    )


def _difference(case: CaseStages, answer: list[Any]) -> str:
    """What the first differing call gave on each path ('' when every call agrees)."""
    for (query_id, stage), got in zip(case.stages.items(), answer, strict=True):
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
            f"on Spark (one job, {result.replayed} cases, {result.calls} stage calls, "
            f"{result.seconds:.1f} s with Spark's start; its log: {result.log}):"
        ),
        (
            f"  {result.agreed} of {result.replayed} passed cases with stateless queries give "
            f"the same rows on Spark's workers ({len(result.differences)} differ)"
        ),
        (
            f"  not replayed: the stages with state of {result.with_state} of them, and "
            f"{result.state_only} passed cases whose queries all keep state"
        ),
    ]
    shown = result.differences if verbose else result.differences[:5]
    lines.extend(f"  DIFFERS {name}: {what[:500]}" for name, what in shown)
    return "\n".join(lines)


# -- the child process ----------------------------------------------------------------------------


def _run_job(tasks: dict[str, bytes], log: str) -> dict[str, bytes]:
    """In a child process: one Spark session, one job over every case; its logs in ``log``."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    from headwater.engine.spark.driver import start_session
    from headwater.engine.spark.settings import EngineSettings

    spark = start_session(EngineSettings(log_file=log))
    try:
        names = sorted(tasks)
        rows = [(i, tasks[name]) for i, name in enumerate(names)]
        frame = spark.createDataFrame(rows, "task int, body binary").repartition(2)
        done = frame.mapInArrow(_replay_batches, "task int, rows binary").collect()
        return {names[row.task]: bytes(row.rows) for row in done}
    except Exception as exc:  # noqa: BLE001 - py4j errors do not cross processes; their text does
        raise RuntimeError(f"the Spark job failed (see {log}): {exc}") from None
    finally:
        spark.stop()


def _replay_batches(batches: Iterator[Any]) -> Iterator[Any]:
    """In a Spark Python worker: each case's stages through `rows_of`, as a live query's task."""
    import traceback

    import pyarrow as pa

    from headwater.engine.formats import schema_registry
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
                            [row for out in rows_of(options, iter(call)) for row in out.to_pylist()]
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
