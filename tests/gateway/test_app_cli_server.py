"""``headwater server`` as a user runs it: a child process on the embedded broker, then SIGTERM."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from headwater.kafka.broker import EmbeddedBroker

pytestmark = pytest.mark.kafka


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_server_command_serves_and_stops_on_sigterm(
    memory_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    port = _free_port()
    service_id = f"cli-{uuid.uuid4().hex[:8]}"
    exe = Path(sys.executable).with_name("headwater")
    child = subprocess.Popen(
        [
            str(exe),
            "server",
            "-b",
            memory_broker.bootstrap_servers,
            "--port",
            str(port),
            "--service-id",
            service_id,
            "--state-dir",
            str(tmp_path / "data"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            assert child.poll() is None, child.communicate()
            try:
                info = httpx.get(f"{url}/info", timeout=2).json()
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not start listening"
                time.sleep(0.1)
        assert info["KsqlServerInfo"]["ksqlServiceId"] == service_id
        assert info["KsqlServerInfo"]["serverStatus"] == "RUNNING"
        answer = httpx.post(f"{url}/ksql", json={"ksql": "CREATE TYPE T1 AS INT; SHOW TYPES;"})
        assert answer.status_code == 200, answer.text
        assert answer.json()[1]["types"]["T1"]["type"] == "INTEGER"
    finally:
        child.terminate()
        out, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    assert "catalog loaded" in out and "server stopped" in out
    assert list((tmp_path / "data" / "catalog").iterdir()), "no final catalog snapshot"


def test_a_server_without_java_says_so_at_start_and_refuses_persistent_queries(
    memory_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    port = _free_port()
    no_java = tmp_path / "bin"
    no_java.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"} | {"PATH": str(no_java)}
    exe = Path(sys.executable).with_name("headwater")
    child = subprocess.Popen(
        [
            str(exe),
            "server",
            "-b",
            memory_broker.bootstrap_servers,
            "--port",
            str(port),
            "--service-id",
            f"nojava-{uuid.uuid4().hex[:8]}",
            "--state-dir",
            str(tmp_path / "data"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            assert child.poll() is None, child.communicate()
            try:
                httpx.get(f"{url}/info", timeout=2).json()
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not start listening"
                time.sleep(0.1)
        created = httpx.post(
            f"{url}/ksql",
            json={
                "ksql": (
                    "CREATE STREAM s (id STRING KEY, v INT) WITH (kafka_topic='nojava', partitions=1, "
                    "value_format='JSON');"
                )
            },
        )
        assert created.status_code == 200, created.text
        for text, kind in (
            ("CREATE STREAM s2 AS SELECT * FROM s;", "CREATE ... AS SELECT"),
            ("INSERT INTO s SELECT * FROM s;", "INSERT INTO ... SELECT"),
        ):
            refused = httpx.post(f"{url}/ksql", json={"ksql": text})
            assert refused.status_code == 400, refused.text
            assert refused.json()["message"].startswith(
                f"{kind} runs a persistent query on Spark, and this server cannot run Spark: Java "
                "was not found on the PATH (JAVA_HOME is not set); install Java 17 or newer"
            )
        shown = httpx.post(f"{url}/ksql", json={"ksql": "SHOW QUERIES; SHOW STREAMS;"})
        assert shown.json()[0]["queries"] == [] and len(shown.json()[1]["streams"]) == 1
        pulled = httpx.post(f"{url}/query", json={"ksql": "SELECT * FROM s;"})
        assert pulled.status_code == 200, pulled.text  # pull queries still work
        stateful = httpx.post(
            f"{url}/query",
            json={"ksql": "SELECT id, COUNT(*) AS n FROM s GROUP BY id EMIT CHANGES;"},
            timeout=10,
        )
        assert stateful.status_code == 400, stateful.text
        assert "this server cannot run Spark: Java was not found" in stateful.json()["message"]
    finally:
        child.terminate()
        _out, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    warned = [line for line in err.splitlines() if "cannot" in line or "refused" in line]
    assert warned == [
        (
            "WARNING headwater.server: persistent queries and push queries with state are "
            "refused on this server (they run on Spark): Java was not found on the PATH "
            "(JAVA_HOME is not set); install Java 17 or newer (Debian/Ubuntu: apt-get "
            "install openjdk-17-jre-headless) or set JAVA_HOME to one. Everything else "
            "works."
        )
    ], err


def test_a_taken_port_is_one_clear_line_and_exit_1(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("headwater")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [str(exe), "server", "--in-memory", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        (
            f"Error: port {port} on 127.0.0.1 is already in use (another server listens there): "
            "stop it, or choose another port with --port"
        )
    ]
    assert done.stdout == ""  # nothing started: no broker, no catalog
