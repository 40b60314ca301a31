"""The shell's local node: a taken port, and where its Kafka listens (never from an old log)."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from headwater.cli import main
from headwater.localnode import (
    NODE_FILE,
    LocalNode,
    LocalNodeError,
    announcement,
    ensure_local_node,
)


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port something (not headwater) listens on."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield int(listener.getsockname()[1])


def test_a_port_taken_by_something_else_is_one_clear_error(taken_port: int, tmp_path: Path) -> None:
    with pytest.raises(LocalNodeError) as refused:
        ensure_local_node(tmp_path / "node", f"http://127.0.0.1:{taken_port}")
    assert str(refused.value) == (
        f"port {taken_port} on 127.0.0.1 is already in use by something that is not a headwater "
        "server: stop it, or start the local node on another port with --port (e.g. headwater "
        "--port 8089)"
    )
    assert not (tmp_path / "node" / "server.log").exists(), "no node was started"


def test_the_shell_takes_the_local_nodes_port(taken_port: int, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["--port", str(taken_port), "--state-dir", str(tmp_path), "-e", "SHOW STREAMS;"]
    )
    assert result.exit_code == 1
    assert f"starting a local node on http://127.0.0.1:{taken_port}" in result.output
    assert f"Error: port {taken_port} on 127.0.0.1 is already in use" in result.output
    refused = CliRunner().invoke(main, ["--port", "8089", "--server", "http://x:8088"])
    assert refused.exit_code == 2 and "--port" in refused.output
    refused = CliRunner().invoke(main, ["--port", "8089", "run", "-e", "SHOW STREAMS;"])
    assert refused.exit_code == 2 and "--port" in refused.output


def test_where_kafka_listens_comes_from_the_running_node_not_an_old_log(tmp_path: Path) -> None:
    url = "http://127.0.0.1:8088"
    (tmp_path / "server.log").write_text(
        f"catalog loaded; serving {url} (embedded broker 127.0.0.1:40123, old; state in x)\n"
    )
    assert announcement(LocalNode(url), tmp_path) is None  # a log of a node long gone
    said = {
        "pid": os.getpid(),
        "url": url,
        "serving": f"serving {url} (embedded broker 127.0.0.1:5)",
    }
    (tmp_path / NODE_FILE).write_text(json.dumps(said))
    assert announcement(LocalNode(url), tmp_path) == said["serving"]
    assert announcement(LocalNode("http://127.0.0.1:9999"), tmp_path) is None  # another node
    (tmp_path / NODE_FILE).write_text(json.dumps({**said, "pid": 2**22 + 12345}))  # no such process
    assert announcement(LocalNode(url), tmp_path) is None
