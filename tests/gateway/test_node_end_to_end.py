"""A node as a user runs it: the embedded broker in its state folder, the shell, scripts, curl-like HTTP
and DB-API against it; stopping and starting it keeps every stream, table and row.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from headwater import dbapi
from headwater.localnode import ensure_local_node

pytestmark = [pytest.mark.kafka, pytest.mark.durable, pytest.mark.slow]

SCRIPT = """
CREATE STREAM CLICKS (USER_ID STRING KEY, URL STRING) WITH (kafka_topic='clicks', partitions=2, value_format='JSON');
CREATE TABLE USERS (ID STRING PRIMARY KEY, NAME STRING, AGE INT) WITH (kafka_topic='users', partitions=2, value_format='JSON');
INSERT INTO USERS (ID, NAME, AGE) VALUES ('alice', 'Alice', 31);
INSERT INTO USERS (ID, NAME, AGE) VALUES ('bob', 'Bob', 42);
INSERT INTO CLICKS (USER_ID, URL) VALUES ('alice', '/home');
"""


def _headwater(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("headwater")
    return subprocess.run(
        [str(exe), *args], input=stdin, capture_output=True, text=True, timeout=120, check=False
    )


def _pull(url: str, sql: str, want: int) -> list[list[object]]:
    deadline = time.monotonic() + 20
    while True:
        answer = httpx.post(f"{url}/query", json={"ksql": sql}, timeout=10)
        rows = (
            [i["row"]["columns"] for i in answer.json() if "row" in i]
            if answer.status_code == 200
            else []
        )
        if len(rows) >= want or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


def test_node_script_shell_http_dbapi_and_restart(server_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    state = tmp_path / "node"
    node = server_factory("--state-dir", str(state))  # no -b: its own durable embedded broker
    script = tmp_path / "setup.sql"
    script.write_text(SCRIPT, encoding="utf-8")

    ran = _headwater("run", str(script), "--server", node.url)
    assert ran.returncode == 0, ran.stderr
    assert "Table created" in ran.stdout and "Stream created" in ran.stdout

    # HTTP, as with curl.
    assert _pull(node.url, "SELECT * FROM USERS WHERE ID = 'alice';", 1) == [["alice", "Alice", 31]]

    # The shell's one-statement mode, CSV output.
    one = _headwater(
        "run",
        "-e",
        "SELECT NAME, AGE FROM USERS WHERE ID = 'bob';",
        "--server",
        node.url,
        "--output",
        "csv",
    )
    assert one.returncode == 0, one.stderr
    assert "Bob,42" in one.stdout

    # A bad statement: exit 1, the caret under the error.
    bad = _headwater("run", "-e", "SELECT * FROM NOPE;", "--server", node.url)
    assert bad.returncode == 1 and "NOPE" in bad.stderr

    # DB-API, with a parameter safely quoted.
    with dbapi.connect(node.url) as connection:
        cursor = connection.cursor()
        cursor.execute(
            "INSERT INTO USERS (ID, NAME, AGE) VALUES (?, ?, ?)", ("carol", "O'Hara", 27)
        )
        deadline = time.monotonic() + 20
        while True:
            cursor.execute("SELECT NAME, AGE FROM USERS WHERE ID = ?", ("carol",))
            rows = cursor.fetchall()
            if rows or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert rows == [("O'Hara", 27)]
        assert [d[0] for d in cursor.description] == ["NAME", "AGE"]
        assert cursor.served_by and cursor.served_by[0].lag == 0

    # Stop and start the node: streams, tables and rows are all still there.
    assert node.stop() == 0, node.log()
    node.start()
    assert _pull(node.url, "SELECT ID FROM USERS;", 3) and sorted(
        _pull(node.url, "SELECT ID FROM USERS;", 3)
    ) == [["alice"], ["bob"], ["carol"]]
    assert _pull(node.url, "SELECT URL FROM CLICKS;", 1) == [["/home"]]
    shown = node.ksql("SHOW STREAMS; SHOW TABLES;").json()
    assert [s["name"] for s in shown[0]["streams"]] == ["CLICKS"]
    assert [t["name"] for t in shown[1]["tables"]] == ["USERS"]


def test_local_node_started_for_the_shell_and_stopped(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    node = ensure_local_node(tmp_path / "node", url)
    try:
        assert node.process is not None, "nothing ran there: this call must have started the node"
        assert httpx.get(f"{url}/healthcheck", timeout=5).status_code == 200
        again = ensure_local_node(tmp_path / "other", url)
        assert again.process is None, "a running node is used, not started twice"
    finally:
        node.stop()
    assert node.process.returncode == 0, (tmp_path / "node" / "server.log").read_text()
    assert (tmp_path / "node" / "broker").is_dir(), (
        "the node keeps its broker's data in its state dir"
    )
    assert not (tmp_path / "node" / "node.json").exists(), "a stopped node says it serves no more"


def test_a_local_node_says_where_kafka_listens_and_stops_in_the_background(tmp_path: Path) -> None:
    from headwater.localnode import announcement

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    node = ensure_local_node(tmp_path / "node", url)
    assert node.process is not None
    try:
        said = announcement(node, tmp_path / "node")
        assert said is not None and said.startswith(f"serving {url} (embedded broker 127.0.0.1:")
        assert str(tmp_path / "node") in said
        began = time.monotonic()
        node.stop(wait=False)  # what leaving the shell does: no wait for the broker to close
        assert time.monotonic() - began < 1.0
        # starting it again at once waits for the stopping node to let go of its state folder
        again = ensure_local_node(tmp_path / "node", url)
        assert again.process is not None and httpx.get(f"{url}/healthcheck").status_code == 200
        again.stop()
        assert again.process.returncode == 0
    finally:
        node.stop()
