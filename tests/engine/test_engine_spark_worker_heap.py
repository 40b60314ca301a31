"""`worker_heap`: what a reused Spark Python worker built is frozen once, out of PySpark's
collection after every task."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from headwater.engine.spark import worker_heap


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    worker_heap._pending, worker_heap._last = False, None
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()  # the test process's heap is the pytest run's: give it back
    gc.set_threshold(*threshold)
    worker_heap._pending, worker_heap._last = False, None


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_what_a_reused_worker_built_is_frozen_at_the_start_of_a_later_task() -> None:
    clock = _Clock()
    kept = [object() for _ in range(1000)]  # stands for a built pipeline
    worker_heap.built()
    assert worker_heap.task_starts(clock, reused=True)
    assert gc.get_freeze_count() >= len(kept)
    # PySpark's collection after the next task no longer walks what was frozen
    assert not worker_heap.task_starts(clock, reused=True)  # nothing built since


def test_nothing_is_frozen_until_something_is_built() -> None:
    assert not worker_heap.task_starts(_Clock(), reused=True)
    assert gc.get_freeze_count() == 0


def test_a_worker_that_is_not_reused_is_left_alone() -> None:
    worker_heap.built()
    assert not worker_heap.task_starts(_Clock(), reused=False)
    assert gc.get_freeze_count() == 0


def test_a_reused_worker_is_told_by_pysparks_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_REUSE_WORKER", raising=False)
    worker_heap.built()
    assert not worker_heap.task_starts(_Clock())  # a test, a driver: no PySpark daemon
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")  # as the daemon sets it for the workers it keeps
    assert worker_heap.task_starts(_Clock())


def test_builds_in_a_row_pay_one_collection_and_the_last_is_frozen_later() -> None:
    clock = _Clock()
    worker_heap.built()
    assert worker_heap.task_starts(clock, reused=True)
    clock.now += 1
    worker_heap.built()  # a second query's pipeline, 1 s later
    assert not worker_heap.task_starts(clock, reused=True)  # not yet: one collection per 5 s
    clock.now += worker_heap.SETTLE_EVERY_S
    assert worker_heap.task_starts(clock, reused=True)  # frozen at a later task's start


def test_the_collection_before_the_freeze_takes_the_garbage_building_left() -> None:
    clock = _Clock()

    class Node:
        other: object

    gc.disable()  # only task_starts may collect here
    try:
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle: garbage once the names go, freed only by a collection
        gone = weakref.ref(a)
        del a, b
        worker_heap.built()
        assert worker_heap.task_starts(clock, reused=True)
    finally:
        gc.enable()
    assert gone() is None  # collected, not frozen for the worker's life


def test_a_worker_that_drops_its_pipelines_gives_them_back_to_the_collector() -> None:
    worker_heap.built()
    assert worker_heap.task_starts(_Clock(), reused=True)
    assert gc.get_freeze_count() > 0
    worker_heap.forget()
    assert gc.get_freeze_count() == 0


def test_a_reused_worker_collects_its_young_generation_less_often_but_still_collects() -> None:
    default = gc.get_threshold()
    assert not worker_heap.young_generation(reused=False)
    assert gc.get_threshold() == default  # a test, a driver: left alone
    assert worker_heap.young_generation(reused=True)
    assert gc.get_threshold() == (worker_heap.YOUNG_OBJECTS, *default[1:])

    class Node:
        pass

    cycle = Node()
    cycle.self = cycle  # type: ignore[attr-defined]  # garbage only the collector frees
    gone = weakref.ref(cycle)
    del cycle
    gc.collect()  # what the test run made before: the count starts from here
    orphan = Node()
    orphan.self = orphan  # type: ignore[attr-defined]
    freed = weakref.ref(orphan)
    del orphan
    kept = [[] for _ in range(worker_heap.YOUNG_OBJECTS // 2)]
    assert freed() is not None  # fewer new containers than the threshold: not collected yet
    kept += [[] for _ in range(worker_heap.YOUNG_OBJECTS)]
    assert freed() is None and gone() is None  # past it: the young collection freed the cycle
