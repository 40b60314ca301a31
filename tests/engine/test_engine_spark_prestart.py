"""``headwater.engine.start=startup``: the engine's child starts Spark with the server, warms it up,
and is stopped at once (by its process group) when the server stops while Spark is still starting."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from headwater.engine.spark.host import QueryEngine
from headwater.engine.spark.settings import EngineSettings
from headwater.kafka.clients import KafkaSettings
from headwater.metastore.catalog import Catalog

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups"),
]


def _engine(tmp_path: Path) -> QueryEngine:
    settings = EngineSettings(
        checkpoint_root=str(tmp_path / "checkpoints"),
        log_file=str(tmp_path / "spark.log"),
        start_at_startup=True,
    )
    # no broker is needed: no query runs, and warming up reads no topic
    return QueryEngine(settings, KafkaSettings("127.0.0.1:9"), Catalog)


def _group_gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_spark_starts_with_the_server_and_warms_up_without_a_query(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    engine.start()
    try:
        deadline = time.monotonic() + 120
        while engine.spark_state != "UP":
            assert time.monotonic() < deadline, (tmp_path / "spark.log").read_text()[-3000:]
            time.sleep(0.2)
        pid = engine._process.pid
        log = (tmp_path / "spark.log").read_text()
        assert "its Python workers warm" in log, log[-3000:]
        # then, in the background, one small batch of a stateful operator (a first aggregation
        # then starts ~8 s sooner)
        while "Spark's stateful operators warm in" not in log:
            assert time.monotonic() < deadline + 60, log[-3000:]
            time.sleep(0.5)
            log = (tmp_path / "spark.log").read_text()
    finally:
        engine.close()
    assert _group_gone(pid, 10), "the JVM or a Python worker outlived the engine"


def test_a_server_that_stops_while_spark_starts_does_not_wait_for_it(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    engine.start()
    deadline = time.monotonic() + 10
    while engine._process is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    pid = engine._process.pid
    time.sleep(2)  # Spark is starting (its JVM is up within ~1 s, the session takes ~11 s)
    assert engine.spark_state == "STARTING"
    began = time.monotonic()
    engine.close()
    assert time.monotonic() - began < 5, "close waited for a Spark that had no query to stop"
    assert _group_gone(pid, 5), "the JVM or a Python worker outlived the engine"
