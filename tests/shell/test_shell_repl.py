"""The REPL over prompt_toolkit's pipe input and DummyOutput: multi-line statements, shell
commands, the history file, completion refreshed from the server, errors without tracebacks."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput
from shell_fakes import FakeKsql

from headwater.shell.main import open_shell
from headwater.shell.repl import is_complete, local_command


@pytest.fixture
def pipe() -> Iterator[PipeInput]:
    with create_pipe_input() as pipe_input:
        yield pipe_input


def shell(pipe: PipeInput, fake: FakeKsql, keys: str, history: Path | None, **kw: object) -> int:
    pipe.send_text(keys)
    pipe.close()
    return open_shell(
        ["http://ksql:8088"],
        "table",
        history_file=history,
        transport=fake.transport(),
        input=pipe,
        output_device=DummyOutput(),
        refresh_catalog=False,
        **kw,
    )  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "complete"),
    [
        ("", True),
        ("SHOW STREAMS", False),
        ("SHOW STREAMS;", True),
        ("SELECT *\nFROM t", False),
        ("SELECT *\nFROM t;", True),
        ("SELECT 'a;", False),  # the ; is inside an open string
        ("SELECT 'a;';", True),
        ("SHOW STREAMS; -- done", True),
        ("/* SHOW STREAMS;", False),
        ("exit", True),
        ("output json", True),
    ],
)
def test_is_complete(text: str, complete: bool) -> None:
    assert is_complete(text) is complete


def test_local_commands() -> None:
    assert local_command("quit;") == ("quit", "")
    assert local_command("OUTPUT csv") == ("output", "csv")
    assert local_command("SHOW STREAMS;") is None


def test_multi_line_statement_runs_once_complete_and_goes_to_history(
    pipe: PipeInput, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeKsql()
    history = tmp_path / "data" / "headwater" / "history"
    keys = "CREATE STREAM orders (id STRING KEY,\ramount INT)\rWITH (kafka_topic='orders');\r"
    keys += "SHOW\rSTREAMS;\rexit\r"
    assert shell(pipe, fake, keys, history) == 0
    out = capsys.readouterr().out
    assert "headwater shell, connected to http://ksql:8088" in out
    assert "Stream created" in out and "| ORDERS " in out
    assert out.rstrip().endswith("Exiting headwater.")
    assert [b["ksql"] for b in fake.bodies] == [
        "CREATE STREAM orders (id STRING KEY,\namount INT)\nWITH (kafka_topic='orders');",
        "SHOW\nSTREAMS;",
    ]
    saved = history.read_text()
    assert "+SHOW\n+STREAMS;" in saved and "+exit" in saved


def test_output_command_and_eof(pipe: PipeInput, capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeKsql()
    assert shell(pipe, fake, "output json\rSHOW STREAMS;\routput\routput xml\r", None) == 0
    captured = capsys.readouterr()
    assert '"@type": "streams"' in captured.out
    assert "Output format: JSON" in captured.out
    assert "Unknown output format 'xml'" in captured.err


def test_errors_show_a_caret_and_the_loop_goes_on(
    pipe: PipeInput, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeKsql()
    assert shell(pipe, fake, "SELEC 1;\rDESCRIBE nope;\rSHOW STREAMS;\r", None) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines()[:5] == [
        "Error: line 1:1: Syntax Error",
        "Unknown statement 'SELEC'",
        "Did you mean 'SELECT'?",
        "  SELEC 1;",
        "  ^",
    ]
    assert "Could not find STREAM/TABLE 'NOPE'" in captured.err
    assert "Stream Name" in captured.out  # the statement after the errors ran
    assert "Traceback" not in captured.err


def test_completion_names_are_refreshed_after_ddl(
    pipe: PipeInput, monkeypatch: pytest.MonkeyPatch
) -> None:
    import headwater.shell.repl as repl_module

    seen: list[object] = []
    real_repl = repl_module.repl

    def spy(runner, completer, settings, **kw):  # type: ignore[no-untyped-def]
        seen.append(completer)
        return real_repl(runner, completer, settings, **kw)

    monkeypatch.setattr(repl_module, "repl", spy)
    fake = FakeKsql()
    pipe.send_text(
        "CREATE STREAM clicks (id STRING KEY, url STRING) WITH (kafka_topic='c');\r"
        "DEFINE who = 'me';\r"
    )
    pipe.close()
    open_shell(
        ["http://ksql:8088"],
        history_file=None,
        transport=fake.transport(),
        input=pipe,
        output_device=DummyOutput(),
        refresh_catalog=True,
    )
    completer = seen[0]
    # The refresher thread may still run: wait for the DESCRIBE it sends.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and "CLICKS" not in completer.metadata.columns:  # type: ignore[attr-defined]
        time.sleep(0.01)
    meta = completer.metadata  # type: ignore[attr-defined]
    assert meta.streams == ("CLICKS",)
    assert meta.columns["CLICKS"] == ("ID", "URL")
    assert "who" in meta.variables
