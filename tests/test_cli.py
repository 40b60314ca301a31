"""The ``headwater`` command: help on every subcommand, and ``headwater parse``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from headwater.cli import main


def test_help_lists_the_subcommands() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for command in ("broker", "parse"):
        assert command in result.output


@pytest.mark.parametrize("command", ["broker", "parse"])
def test_every_subcommand_has_help(command: str) -> None:
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0 and "Usage:" in result.output


def test_console_script_is_installed() -> None:
    # The entry point itself, as a user runs it (not just the click object).
    exe = Path(sys.executable).with_name("headwater")
    done = subprocess.run(
        [str(exe), "--help"], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "broker" in done.stdout


def test_parse_reports_each_statement(tmp_path: Path) -> None:
    script = tmp_path / "ok.sql"
    script.write_text(
        "-- a comment; with a semicolon\n"
        "CREATE STREAM pv (uid STRING KEY, page STRING)\n"
        "  WITH (kafka_topic='pv', value_format='${fmt}');\n"
        "SELECT * FROM pv WHERE uid = 'a;b' EMIT CHANGES;\n"
    )
    result = CliRunner().invoke(main, ["parse", str(script), "-d", "fmt=JSON", "--sql"])
    assert result.exit_code == 0, result.output
    assert "line 2: CreateSource PV" in result.output
    assert "value_format='JSON'" in result.output
    assert "line 4: Select" in result.output
    assert "2 statement(s) parsed" in result.output


def test_parse_points_at_the_error_and_fails() -> None:
    script = (
        "SHOW STREAMS;\nCREATE STREAM s (v INT)\n  WITH (kafka_topic='t' value_format='JSON');\n"
    )
    result = CliRunner().invoke(main, ["parse", "-"], input=script)
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[:3] == [
        "Error: line 3:25: Syntax Error",
        "Syntax error at or near 'value_format' at line 3:25",
        "expected ',' or ')' in the WITH list, found 'value_format'",
    ]
    assert lines[3] == "    WITH (kafka_topic='t' value_format='JSON');"
    assert lines[4].index("^") == lines[3].index("value_format")
    assert "Traceback" not in result.output


def test_parse_rejects_a_malformed_define() -> None:
    result = CliRunner().invoke(main, ["parse", "-", "-d", "novalue"], input="SHOW STREAMS;")
    assert result.exit_code == 2 and "NAME=VALUE" in result.output
