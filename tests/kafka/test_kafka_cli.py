"""`headwater broker` as a user runs it: ready line, SIGTERM leaves nothing behind, data survives."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kafka_helpers import children_of, make_topic, produce, read_all, wait_gone

from headwater.kafka.clients import KafkaSettings

HEADWATER = str(Path(sys.executable).with_name("headwater"))
READY = re.compile(r"broker ready: (127\.0\.0\.1:\d+) \(durable in (.+)\)")


def _start_cli(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [HEADWATER, "broker", "--data-dir", str(data_dir), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    match = READY.fullmatch(line.strip())
    if match is None:
        process.kill()
        _, err = process.communicate()
        pytest.fail(f"no ready line: {line!r}, stderr: {err}", pytrace=False)
    assert Path(match.group(2)) == data_dir.resolve()
    return process, match.group(1)


def _sigterm(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    return process.returncode, out, err


@pytest.mark.kafka
@pytest.mark.durable
@pytest.mark.slow
def test_cli_broker_stops_cleanly_and_keeps_data(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    process, bootstrap = _start_cli(data_dir)
    try:
        children = children_of(process.pid)
        assert len(children) == 2  # tansu and weed
        settings = KafkaSettings(bootstrap_servers=bootstrap)
        make_topic(settings, "cli-topic", 2)
        produce(settings, "cli-topic", 50)
        before = read_all(settings, "cli-topic", range(2))
        code, out, err = _sigterm(process)
        assert code == 0, err
        assert "broker stopped" in out
        assert wait_gone(children, timeout_s=1) == []
    finally:
        process.kill()
        process.communicate()

    again, bootstrap = _start_cli(data_dir)
    try:
        assert read_all(KafkaSettings(bootstrap_servers=bootstrap), "cli-topic", range(2)) == before
        children = children_of(again.pid)
        assert _sigterm(again)[0] == 0
        assert wait_gone(children, timeout_s=1) == []
    finally:
        again.kill()
        again.communicate()
    assert (data_dir / "logs" / "tansu.log").is_file()
    assert (data_dir / "logs" / "weed.log").is_file()


def test_cli_reports_a_taken_port_without_traceback() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [HEADWATER, "broker", "--port", str(port)],
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in result.stderr
    assert "Traceback" not in result.stderr
