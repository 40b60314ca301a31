"""The shell follows a persistent query it created until the query runs (shell/progress.py)."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from headwater.shell import runner as runner_module
from headwater.shell.executor import Entity, RowStream
from headwater.shell.format import OutputFormat
from headwater.shell.progress import created_query_id, description_state, starting_line
from headwater.shell.runner import Runner
from headwater.sqlparse_ext import parse_one

CREATED = {
    "@type": "currentStatus",
    "commandStatus": {
        "status": "SUCCESS",
        "message": "Created query with query ID: CSAS_OUT_3",
    },
}


def _described(state: str, error: str = "") -> list[Mapping[str, Any]]:
    errors = [{"errorMessage": error, "type": "SYSTEM"}] if error else []
    return [{"queryDescription": {"id": "CSAS_OUT_3", "state": state, "queryErrors": errors}}]


class _Executor:
    """Answers one CSAS, then EXPLAIN with the states given, one per look."""

    def __init__(self, states: list[list[Mapping[str, Any]]]) -> None:
        self.states = states
        self.looks = 0

    def run(self, text: str, source_name: str = "<input>") -> Iterator[tuple[Any, Any]]:
        yield parse_one(text), Entity(CREATED, None)

    def query_entities(self, text: str) -> list[Mapping[str, Any]]:
        assert text == "EXPLAIN CSAS_OUT_3;"
        found = self.states[min(self.looks, len(self.states) - 1)]
        self.looks += 1
        return found


def _run(states: list[list[Mapping[str, Any]]], progress: bool = True) -> _Executor:
    executor = _Executor(states)
    runner = Runner(
        executor,  # type: ignore[arg-type]
        OutputFormat.TABLE,
        interactive=True,
        progress=progress,
        stdout=io.StringIO(),
    )
    assert runner.run("CREATE STREAM out AS SELECT * FROM s;")
    return executor


@pytest.fixture(autouse=True)
def _fast_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner_module, "_FOLLOW_POLL_S", 0.01)


def test_a_starting_query_is_followed_until_it_runs(capsys: pytest.CaptureFixture[str]) -> None:
    executor = _run([_described("PENDING"), _described("PENDING"), _described("RUNNING")])
    assert executor.looks == 3
    err = capsys.readouterr().err
    assert "Query CSAS_OUT_3 is starting: waiting for Spark" in err
    assert "Query CSAS_OUT_3 is running (started in 0 s)." in err


def test_a_query_that_fails_to_start_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    _run([_described("PENDING"), _described("ERROR", "Python worker failed to connect back")])
    assert "Query CSAS_OUT_3 failed to start: Python worker failed to connect back" in (
        capsys.readouterr().err
    )


def test_a_running_query_says_nothing_and_scripts_do_not_wait(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _run([_described("RUNNING")]).looks == 1
    assert "Query CSAS_OUT_3" not in capsys.readouterr().err
    assert _run([_described("PENDING")], progress=False).looks == 0


def test_what_the_lines_say() -> None:
    assert created_query_id(CREATED) == "CSAS_OUT_3"
    assert (
        created_query_id({"commandStatus": {"status": "SUCCESS", "message": "Stream created"}})
        is None
    )
    assert created_query_id({"@type": "streams"}) is None
    assert description_state(_described("ERROR", "boom")) == ("ERROR", "boom")
    assert description_state([{"@type": "x"}]) == ("", "")
    assert starting_line("Q", "PENDING", 4.2) == (
        "Query Q is starting: waiting for Spark to start it and finish its first micro-batch "
        "(4 s; Ctrl-C stops waiting)"
    )


class _PushExecutor:
    """Answers one push query whose first row comes after ``delay_s``; SHOW QUERIES gives the
    states given, one per look."""

    def __init__(self, states: list[str], delay_s: float) -> None:
        self.states = states
        self.delay_s = delay_s
        self.looks = 0

    def run(self, text: str, source_name: str = "<input>") -> Iterator[tuple[Any, Any]]:
        def rows() -> Iterator[tuple[Any, ...]]:
            time.sleep(self.delay_s)
            yield ("a", 1)

        yield parse_one(text), RowStream(("ID", "N"), ("STRING", "BIGINT"), rows(), "transient_1")

    def query_entities(self, text: str) -> list[Mapping[str, Any]]:
        assert text == "SHOW QUERIES;"
        state = self.states[min(self.looks, len(self.states) - 1)]
        self.looks += 1
        push = {"id": "transient_1", "queryType": "PUSH", "state": state}
        return [{"@type": "queries", "queries": [push] if state else []}]


def _push(states: list[str], delay_s: float, progress: bool = True) -> tuple[_PushExecutor, str]:
    executor = _PushExecutor(states, delay_s)
    out = io.StringIO()
    runner = Runner(
        executor,  # type: ignore[arg-type]
        OutputFormat.TABLE,
        interactive=True,
        progress=progress,
        stdout=out,
    )
    assert runner.run("SELECT ID, COUNT(*) AS N FROM s GROUP BY ID EMIT CHANGES;")
    return executor, out.getvalue()


def test_a_push_query_starting_on_spark_says_so_until_its_first_row(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(runner_module, "PUSH_QUIET_S", 0.05)
    executor, out = _push(["PENDING"], delay_s=0.5)
    assert executor.looks >= 2
    err = capsys.readouterr().err
    assert "Push query transient_1 is starting: waiting for Spark" in err
    assert err.endswith(
        "\r"
    )  # the line is cleared before the first row (click drops ANSI off a tty)
    assert "|a  " in out


def test_a_push_query_that_runs_says_when_and_a_direct_one_says_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(runner_module, "PUSH_QUIET_S", 0.05)
    _push(["PENDING", "PENDING", "RUNNING"], delay_s=0.5)
    assert "Push query transient_1 is running (started in 0 s)" in capsys.readouterr().err
    executor, _ = _push(["RUNNING"], delay_s=0.3)  # no Spark: RUNNING at once
    assert executor.looks == 1
    assert "Push query" not in capsys.readouterr().err
    executor, _ = _push(["PENDING"], delay_s=0.0)  # rows before the quiet time: no look
    assert executor.looks == 0
    executor, _ = _push(["PENDING"], delay_s=0.3, progress=False)
    assert executor.looks == 0
    assert "Push query" not in capsys.readouterr().err
