"""`headwater run` through click's CliRunner: scripts, -e, output formats, exit status, failover."""

from __future__ import annotations

import http.server
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from shell_fakes import INFO, FakeKsql

from headwater.shell.main import Hooks, run_command

SCRIPT = """-- set up
CREATE STREAM orders (id STRING KEY, amount INT) WITH (kafka_topic='orders');
SHOW STREAMS;
SELECT * FROM orders WHERE id = 'a';
"""


def invoke(fake: FakeKsql, *args: str, input: str | None = None) -> object:
    return CliRunner().invoke(run_command, list(args), obj=Hooks(fake.transport()), input=input)


def test_runs_a_script(tmp_path: Path) -> None:
    script = tmp_path / "setup.sql"
    script.write_text(SCRIPT)
    fake = FakeKsql()
    result = CliRunner().invoke(
        run_command, [str(script), "--server", "http://ksql:8088"], obj=Hooks(fake.transport())
    )
    assert result.exit_code == 0, result.output
    assert "Stream created" in result.stdout
    assert "| ORDERS " in result.stdout
    assert "served by:" in result.stdout and "lag 3" in result.stdout
    assert [b["ksql"].split()[0] for b in fake.bodies] == ["CREATE", "SHOW", "SELECT"]


def test_f_option_and_stdin(tmp_path: Path) -> None:
    script = tmp_path / "s.sql"
    script.write_text("SHOW STREAMS;")
    fake = FakeKsql()
    result = CliRunner().invoke(run_command, ["-f", str(script)], obj=Hooks(fake.transport()))
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(
        run_command, ["-"], obj=Hooks(fake.transport()), input="LIST TOPICS;"
    )
    assert result.exit_code == 0 and "orders" in result.stdout


def test_exit_1_with_a_caret_at_the_first_bad_statement(tmp_path: Path) -> None:
    script = tmp_path / "bad.sql"
    script.write_text("SHOW STREAMS;\nSELECT * FORM t;\nSHOW STREAMS;\n")
    fake = FakeKsql()
    result = CliRunner().invoke(run_command, [str(script)], obj=Hooks(fake.transport()))
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"{script}: does not parse (line 2); nothing ran",
        "Error: line 2:15: Syntax Error",
        "Syntax error at or near 't' at line 2:15",
        "expected ',' or FROM, found 't'",
        "  SELECT * FORM t;",
        "                ^",
    ]
    assert fake.bodies == []  # checked before anything ran
    assert "Traceback" not in result.output


def test_exit_1_on_a_server_error_after_the_statements_before_it_ran() -> None:
    fake = FakeKsql()
    result = CliRunner().invoke(
        run_command,
        ["-e", "SHOW STREAMS", "-e", "DESCRIBE nope;", "-e", "SHOW TABLES;"],
        obj=Hooks(fake.transport()),
    )
    assert result.exit_code == 1
    assert "<command line>: the statement at line 2 failed" in result.stderr
    assert "Could not find STREAM/TABLE 'NOPE'" in result.stderr
    assert [b["ksql"] for b in fake.bodies] == ["SHOW STREAMS;", "DESCRIBE nope;"]


def test_output_json_and_csv() -> None:
    fake = FakeKsql()
    result = invoke(fake, "-e", "SELECT * FROM orders WHERE id = 'a';", "--output", "json")
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    doc = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert doc["rows"][0]["ID"] == "a" and doc["servedBy"][1]["lag"] == 3
    result = invoke(fake, "-e", "SELECT * FROM orders WHERE id = 'a';", "-o", "csv")
    assert result.stdout.splitlines()[0] == "ID,TOTAL,TAGS"  # type: ignore[attr-defined]
    assert "lag 3" in result.stderr  # type: ignore[attr-defined]


def test_define_option() -> None:
    fake = FakeKsql()
    result = invoke(fake, "-e", "SELECT * FROM ${src};", "--define", "src=orders")
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    assert fake.bodies[-1]["sessionVariables"] == {"src": "orders"}
    result = invoke(fake, "-e", "SHOW STREAMS;", "--define", "oops")
    assert result.exit_code == 2  # type: ignore[attr-defined]


def test_exactly_one_source() -> None:
    result = invoke(FakeKsql(), "-e", "SHOW STREAMS;", "x.sql")
    assert result.exit_code == 2  # type: ignore[attr-defined]
    assert invoke(FakeKsql()).exit_code == 2  # type: ignore[attr-defined]


def test_failover_to_the_next_server_in_process() -> None:
    fake = FakeKsql(refuse_hosts=("dead",))
    result = invoke(
        fake, "-e", "SHOW STREAMS;", "--server", "http://dead:8088", "--server", "http://live:8088"
    )
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    assert fake.hosts == ["live"]


# -- over real sockets: a port that refuses connections, then a server that answers -----------------


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        text = json.loads(self.rfile.read(length))["ksql"]
        body = json.dumps(
            [
                {
                    "@type": "streams",
                    "statementText": text,
                    "warnings": [],
                    "streams": [
                        {
                            "name": "LIVE_STREAM",
                            "topic": "t",
                            "keyFormat": "KAFKA",
                            "valueFormat": "JSON",
                            "isWindowed": False,
                        }
                    ],
                }
            ]
        )
        self._send(body)

    def do_GET(self) -> None:
        self._send(json.dumps(INFO))

    def _send(self, body: str) -> None:
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def live_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _refusing_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens there any more


def test_failover_over_the_network(live_url: str) -> None:
    result = CliRunner().invoke(
        run_command, ["-e", "SHOW STREAMS;", "--server", _refusing_url(), "--server", live_url]
    )
    assert result.exit_code == 0, result.output
    assert "LIVE_STREAM" in result.stdout


def test_no_server_answers_is_an_error_not_a_traceback() -> None:
    result = CliRunner().invoke(run_command, ["-e", "SHOW STREAMS;", "-s", _refusing_url()])
    assert result.exit_code == 1
    assert result.stderr.startswith("<command line>: the statement at line 1 failed\nError: ")
    assert "Traceback" not in result.output


def test_headwater_e_and_f_run_without_a_prompt_as_ksql_does(tmp_path: Path) -> None:
    from headwater.cli import main

    fake = FakeKsql()
    ran = CliRunner().invoke(
        main,
        ["-s", "http://ksql:8088", "-e", "SHOW STREAMS", "-o", "csv"],
        obj=Hooks(fake.transport()),
    )
    assert ran.exit_code == 0, ran.output
    assert fake.bodies[-1]["ksql"] == "SHOW STREAMS;"
    script = tmp_path / "s.sql"
    script.write_text(SCRIPT, encoding="utf-8")
    ran = CliRunner().invoke(
        main, ["-s", "http://ksql:8088", "-f", str(script)], obj=Hooks(fake.transport())
    )
    assert ran.exit_code == 0, ran.output
    assert fake.bodies[-1]["ksql"].startswith("SELECT * FROM orders")
    both = CliRunner().invoke(
        main,
        ["-s", "http://ksql:8088", "-e", "SHOW STREAMS", "-f", str(script)],
        obj=Hooks(fake.transport()),
    )
    assert both.exit_code == 2 and "not both" in both.output


def test_the_groups_server_output_and_defines_reach_run() -> None:
    from headwater.cli import main

    fake = FakeKsql(refuse_hosts=("127.0.0.1", "localhost"))  # the default server must not be used
    result = CliRunner().invoke(
        main,
        ["--server", "http://live:8088", "-o", "json", "-d", "s=orders", "run", "-"],
        obj=Hooks(fake.transport()),
        input="SHOW STREAMS;\n",
    )
    assert result.exit_code == 0, result.output
    assert fake.hosts == ["live"]
    assert result.stdout.lstrip().startswith(("[", "{"))  # -o json
    assert fake.bodies[0]["sessionVariables"] == {"s": "orders"}
    # the command's own options win over the group's
    fake = FakeKsql()
    result = CliRunner().invoke(
        main,
        ["-s", "http://dead:8088", "run", "-s", "http://live:8088", "-e", "SHOW STREAMS;"],
        obj=Hooks(fake.transport()),
    )
    assert result.exit_code == 0, result.output
    assert fake.hosts == ["live"]
