"""What a Spark Python worker keeps for its life, kept out of the garbage collector's walk.

PySpark's daemon runs ``gc.collect()`` in a reused Python worker after every task: a full
collection, which walks every object the worker tracks. Most of them live as long as the worker: the
modules it imported (pyarrow, pyspark, headwater's operators) and the pipelines it built and cached
per query (`source_rows`, `aggregation`, `joins`). A worker with one query's pipeline spent more of
its CPU in those collections than in the query (py-spy, 2,400 records/s on a 2-partition source:
~90% of the workers' samples, ~0.1 CPU s per micro-batch). Once a worker has built what it keeps,
`task_starts` (at the start of a source task, and in the task that built it right after building,
before it reads a record) collects once and moves every object left to the permanent generation
(``gc.freeze``): later collections walk only what a task made. Frozen objects are still freed when
nothing refers to them; only a cycle among them would stay: the collection before the freeze takes
the garbage that building left, and what a task makes as it runs (its records, Arrow batches, the
state connection of a stateful operator) does not exist yet at those points. A worker pays that
collection once, in the first micro-batch of a query (which builds its pipeline anyway), not in a
later one.

A task allocates as it goes (a tuple per record and per grouped row, a dict per decoded value):
with CPython's default threshold (a young collection every 700 new containers) the collector ran
every few records, each time walking what the task had made so far into the older generations, and
took a third of an aggregation's first stage (4.8 -> 3.1 us a record, 1M keys, 50k records, with
collection off; 3.3 with `YOUNG_OBJECTS`). So a reused worker collects its young generation every
`YOUNG_OBJECTS` new containers instead (`young_generation`): the garbage a cycle keeps alive is
still collected, at most that many objects later, and PySpark's full collection after each task
still runs.

Only in a reused worker (``SPARK_REUSE_WORKER`` set, as PySpark's daemon sets it for the workers it
keeps: the ones it collects after each task); elsewhere (a test calling the stages in process) the
heap is left alone. At most one such collection per `SETTLE_EVERY_S` per worker, so a worker that
builds many pipelines in a row (the QTT replay, thousands of cases) pays for few of them; one built
meanwhile is frozen at the start of a later task; a worker that drops its pipelines (`forget`)
unfreezes.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import Callable

#: The least time between two collections before a freeze, in one worker.
SETTLE_EVERY_S = 5.0
#: New containers between two collections of the young generation in a reused worker (CPython's
#: default: 700); the older generations keep their default ratios to it.
YOUNG_OBJECTS = 100_000

_lock = threading.Lock()
_pending = False
_last: float | None = None


def built() -> None:
    """The worker built something it keeps for its life (a cached pipeline)."""
    global _pending
    with _lock:
        _pending = True


def task_starts(clock: Callable[[], float] = time.monotonic, reused: bool | None = None) -> bool:
    """At the start of a source task, or right after it built a pipeline and before it reads a
    record: in a reused worker (``reused``; unset, read from the environment), if
    something was built since the last freeze and the last one is at least `SETTLE_EVERY_S` ago,
    collect and freeze what is left; whether it did."""
    global _pending, _last
    if not young_generation(reused):
        return False
    with _lock:
        now = clock()
        if not _pending or (_last is not None and now - _last < SETTLE_EVERY_S):
            return False
        _pending, _last = False, now
    gc.collect()
    gc.freeze()
    return True


def young_generation(reused: bool | None = None) -> bool:
    """In a reused worker (``reused``; unset, read from the environment), the collector's young
    generation set to `YOUNG_OBJECTS` new containers; whether it is a reused worker."""
    if not (bool(os.environ.get("SPARK_REUSE_WORKER")) if reused is None else reused):
        return False
    threshold, *older = gc.get_threshold()
    if threshold != YOUNG_OBJECTS:
        gc.set_threshold(YOUNG_OBJECTS, *older)
    return True


def forget() -> None:
    """The worker dropped what it kept (`source_rows.forget_pipelines`): what was frozen goes back
    to the collector, which frees what nothing refers to any more."""
    global _pending
    with _lock:
        _pending = False
    gc.unfreeze()
