"""``headwater server`` as a user runs it: a child process on the embedded broker, then SIGTERM."""

from __future__ import annotations

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
        [str(exe), "server", "-b", memory_broker.bootstrap_servers, "--port", str(port),
         "--service-id", service_id, "--state-dir", str(tmp_path / "data")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
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
