"""executor.py over the fake server: client-side statements, routing, RUN SCRIPT, error positions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from shell_fakes import FakeKsql

from headwater import dbapi
from headwater.shell.executor import Entity, Executor, Message, Rows, StatementFailed


@pytest.fixture
def fake() -> FakeKsql:
    return FakeKsql()


@pytest.fixture
def executor(fake: FakeKsql, tmp_path: Path) -> Iterator[Executor]:
    with dbapi.connect("http://ksql:8088", transport=fake.transport()) as conn:
        yield Executor(conn, cwd=tmp_path)


def results(executor: Executor, text: str) -> list[object]:
    return [r for _s, r in executor.run(text)]


def test_set_and_unset_become_streams_properties(executor: Executor, fake: FakeKsql) -> None:
    out = results(executor, "SET 'auto.offset.reset' = 'earliest'; SHOW STREAMS;")
    assert out[0] == Message(
        "Successfully changed local property 'auto.offset.reset' to 'earliest'."
    )
    assert fake.bodies[-1]["streamsProperties"] == {"auto.offset.reset": "earliest"}
    out = results(executor, "UNSET 'auto.offset.reset'; SHOW STREAMS;")
    assert "value was 'earliest'" in str(out[0])
    assert fake.bodies[-1]["streamsProperties"] == {}


def test_define_is_sent_as_session_variables_and_checked_locally(
    executor: Executor, fake: FakeKsql
) -> None:
    results(executor, "DEFINE src = 'orders'; SELECT * FROM ${src} WHERE id = 'a';")
    assert fake.bodies[-1]["sessionVariables"] == {"src": "orders"}
    assert fake.bodies[-1]["ksql"] == "SELECT * FROM ${src} WHERE id = 'a';"
    results(executor, "UNDEFINE SRC;")  # names are case-insensitive
    with pytest.raises(StatementFailed) as caught:
        results(executor, "SELECT * FROM ${src};")
    assert "'src' is not defined" in caught.value.message and caught.value.has_position
    assert caught.value.column == 15


def test_show_properties_asks_the_server_and_variables_are_local(
    executor: Executor, fake: FakeKsql
) -> None:
    out = results(executor, "SET 'a.b'='1'; DEFINE x='y'; SHOW PROPERTIES; SHOW VARIABLES;")
    props, variables = out[1], out[2]
    assert isinstance(props, Entity) and props.table is not None
    assert [row[0] for row in props.table.rows] == ["a.b", "ksql.service.id"]
    assert [b["ksql"] for b in fake.bodies] == ["SHOW PROPERTIES;"]
    assert fake.bodies[0]["streamsProperties"] == {"a.b": "1"}
    assert isinstance(variables, Entity) and variables.table is not None
    assert variables.table.rows == (("x", "y"),)


def test_pull_query_rows_with_served_by(executor: Executor) -> None:
    (rows,) = results(executor, "SELECT * FROM orders WHERE id = 'a';")
    assert isinstance(rows, Rows)
    assert rows.columns == ("ID", "TOTAL", "TAGS")
    assert [r[0] for r in rows.rows] == ["a", "b"]
    assert [(s.partition, s.lag) for s in rows.served_by] == [(0, 0), (1, 3)]


def test_run_script_reads_a_file_relative_to_the_working_folder(
    executor: Executor, tmp_path: Path, fake: FakeKsql
) -> None:
    (tmp_path / "setup.sql").write_text(
        "CREATE STREAM s1 (id STRING KEY) WITH (kafka_topic='s1');\nSHOW STREAMS;\n"
    )
    out = results(executor, "RUN SCRIPT 'setup.sql';")
    assert [type(r) for r in out] == [Entity, Entity]
    assert [b["ksql"].split()[0] for b in fake.bodies] == ["CREATE", "SHOW"]


def test_run_script_errors_point_into_the_script(executor: Executor, tmp_path: Path) -> None:
    (tmp_path / "bad.sql").write_text("SHOW STREAMS;\n\nDESCRIBE nope;\n")
    with pytest.raises(StatementFailed) as caught:
        results(executor, "RUN SCRIPT 'bad.sql';")
    assert (caught.value.source_name, caught.value.line) == ("bad.sql", 3)
    with pytest.raises(StatementFailed, match="cannot read the script"):
        results(executor, "RUN SCRIPT 'missing.sql';")


def test_a_parse_error_runs_nothing(executor: Executor, fake: FakeKsql) -> None:
    with pytest.raises(StatementFailed) as caught:
        results(executor, "SHOW STREAMS;\nSELECT * FORM t;")
    error = caught.value
    assert (error.line, error.column, error.has_position) == (2, 15, True)
    assert fake.bodies == []


def test_server_positions_are_made_absolute(executor: Executor) -> None:
    # The fake answers `SHOW TYPES` (valid locally) with a 40001 at line 1, column 6 of the
    # statement; the statement starts at line 2, column 3 of the input.
    with pytest.raises(StatementFailed) as caught:
        results(executor, "SHOW STREAMS;\n  SHOW TYPES;")
    error = caught.value
    assert (error.line, error.column, error.error_code, error.has_position) == (2, 8, 40001, True)
    # Without a position from the server, the error sits at the statement's start.
    with pytest.raises(StatementFailed) as caught:
        results(executor, "SHOW STREAMS;\n  DESCRIBE nope;")
    error = caught.value
    assert (error.line, error.column, error.has_position) == (2, 3, False)
