"""Which queries the Spark driver starts: the query limit and the memory left (pure, no Spark)."""

from __future__ import annotations

from headwater.engine.spark.admission import admit, available_mb, creation_order
from headwater.engine.spark.driver import QueryDriver
from headwater.engine.spark.settings import EngineSettings
from headwater.kafka.clients import KafkaSettings


def test_no_more_persistent_queries_than_the_limit_start() -> None:
    decided = admit(["CSAS_C_7", "CSAS_D_9"], ["CSAS_A_1", "CSAS_B_3"], (), 3, None, 150, 1024)
    assert decided.start == ("CSAS_C_7",)
    assert set(decided.waiting) == {"CSAS_D_9"}
    assert "already runs 3 persistent queries" in decided.waiting["CSAS_D_9"]
    assert "ksql.query.persistent.active.limit (3)" in decided.waiting["CSAS_D_9"]
    # a slot freed (a TERMINATE): the waiting one starts
    assert admit(["CSAS_D_9"], ["CSAS_A_1", "CSAS_C_7"], (), 3, None, 150, 1024).start == (
        "CSAS_D_9",
    )


def test_push_queries_are_not_counted_but_need_memory() -> None:
    decided = admit(
        ["push1", "CSAS_B_2"], ["CSAS_A_1", "push0"], {"push0", "push1"}, 2, None, 150, 1024
    )
    assert decided.start == ("push1", "CSAS_B_2")
    decided = admit(["push1"], ["CSAS_A_1"], {"push1"}, 1, 1100, 150, 1024)
    assert decided.start == ()
    assert "1100 MB of memory available" in decided.waiting["push1"]


def test_memory_admits_as_many_as_fit_above_the_reserve() -> None:
    decided = admit(["Q_1", "Q_2", "Q_3"], [], (), 100, 1024 + 320, 150, 1024)
    assert decided.start == ("Q_1", "Q_2")
    assert "needs about 150 MB beyond the 1024 MB" in decided.waiting["Q_3"]


def test_available_memory_and_creation_order() -> None:
    meminfo = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2097152 kB\n"
    assert available_mb(meminfo) == 2048
    assert available_mb("MemTotal: 1 kB\n") is None
    ids = ["CSAS_M_10_12", "INSERTQUERY_3", "CSAS_M_2_9", "transient_abc"]
    assert sorted(ids, key=creation_order) == [
        "INSERTQUERY_3",
        "CSAS_M_2_9",
        "CSAS_M_10_12",
        "transient_abc",
    ]


def test_spark_keeps_a_bounded_pool_of_idle_python_workers() -> None:
    conf = EngineSettings(python_idle_workers=2).spark_conf()
    assert conf["spark.python.factory.idleWorkerMaxPoolSize"] == "2"
    assert conf["spark.python.worker.reuse"] == "true"


class _NoSpark(QueryDriver):
    """The driver's bookkeeping without Spark: a start succeeds at once, a stop does nothing."""

    def __init__(self, settings: EngineSettings) -> None:
        super().__init__(settings, KafkaSettings("127.0.0.1:1"))
        self.started: list[str] = []

    def _start(self, query_id: str) -> None:
        self._queries[query_id].state = "RUNNING"
        self._queries[query_id].message = ""
        self.started.append(query_id)

    def _stop(self, query_id: str) -> None:
        self._queries[query_id].handle = None


def test_the_driver_runs_no_more_than_its_limit_and_a_terminate_starts_the_next() -> None:
    driver = _NoSpark(
        EngineSettings(
            max_queries=2, memory_reserve_mb=0, query_memory_mb=0, max_starting_queries=10
        )
    )
    wanted = {"CSAS_C_12": {"n": 3}, "CSAS_A_2": {"n": 1}, "CSAS_B_5": {"n": 2}, "push_x": {"n": 4}}
    driver.sync(wanted, transient={"push_x"})
    assert driver.started == ["CSAS_A_2", "CSAS_B_5", "push_x"]  # the oldest first
    status = driver.statuses()["CSAS_C_12"]
    assert status["state"] == "PENDING"
    assert "ksql.query.persistent.active.limit (2)" in status["message"]
    driver.check()  # nothing freed: it keeps waiting
    assert driver.started == ["CSAS_A_2", "CSAS_B_5", "push_x"]
    del wanted["CSAS_A_2"]  # TERMINATE
    driver.sync(wanted, transient={"push_x"})
    assert driver.started[-1] == "CSAS_C_12"
    assert {q: s["state"] for q, s in driver.statuses().items()} == {
        "CSAS_B_5": "RUNNING",
        "CSAS_C_12": "RUNNING",
        "push_x": "RUNNING",
    }


def test_queries_start_one_after_another() -> None:
    decided = admit(["Q_1", "Q_2", "Q_3"], [], (), 100, None, 150, 1024, starting=0, max_starting=1)
    assert decided.start == ("Q_1",)
    assert "1 other query is starting" in decided.waiting["Q_2"]
    decided = admit(["Q_2", "Q_3"], ["Q_1"], (), 100, None, 150, 1024, starting=1, max_starting=1)
    assert decided.start == ()
