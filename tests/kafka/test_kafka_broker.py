"""The embedded broker: clean stops by pid, clear errors, durability across restarts and kill -9."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from kafka_helpers import make_topic, pid_running, produce, read_all, wait_gone

from headwater.kafka import broker as broker_module
from headwater.kafka._ports import WEED_ADMIN_GRPC_OFFSET, free_port, free_weed_ports, port_is_free
from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.errors import ChildDied, DataDirUnusable, PortInUse


def test_weed_ports_are_distinct_and_free() -> None:
    ports = free_weed_ports()
    assert len(ports) == 10 and len(set(ports.values())) == 10
    assert ports["admin.port.grpc"] == ports["admin.port"] + WEED_ADMIN_GRPC_OFFSET
    assert all(port_is_free(port) for port in ports.values())


def test_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PortInUse, match=f"port {port} on 127.0.0.1 is already in use"):
            EmbeddedBroker(None, port).start()


def test_unusable_data_dir_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(DataDirUnusable, match="not usable"):
        EmbeddedBroker(blocker / "data").start()


def test_a_data_dir_serves_one_broker_at_a_time(tmp_path: Path) -> None:
    with (tmp_path / "broker.lock").open("wb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(DataDirUnusable, match="in use by another headwater broker"):
            EmbeddedBroker(tmp_path).start()


def test_a_child_dying_at_start_shows_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "tansu"
    fake.write_text("#!/bin/sh\necho 'boom: storage engine unreachable' >&2\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setattr(broker_module, "tansu_binary", lambda: fake)
    with pytest.raises(
        ChildDied, match="(?s)exited with status 3.*boom: storage engine unreachable"
    ):
        EmbeddedBroker(None).start()


@pytest.mark.kafka
def test_stop_leaves_no_process(broker_factory) -> None:
    running = broker_factory(None)
    pids = list(running.pids.values())
    assert pids and all(pid_running(pid) for pid in pids)
    running.stop()
    assert wait_gone(pids, timeout_s=1) == []
    running.stop()  # twice is fine


@pytest.mark.kafka
@pytest.mark.durable
@pytest.mark.slow
def test_durable_restart_keeps_topics_and_offsets(broker_factory, tmp_path: Path) -> None:
    first = broker_factory(tmp_path)
    settings = first.settings()
    make_topic(settings, "orders", 3)
    produce(settings, "orders", 300)
    before = read_all(settings, "orders", range(3))
    first.stop()

    second = broker_factory(tmp_path)
    assert read_all(second.settings(), "orders", range(3)) == before
    assert len(before) == 300


@pytest.mark.kafka
@pytest.mark.durable
@pytest.mark.slow
def test_a_durable_broker_stops_in_seconds_with_clients_connected_and_loses_nothing(
    broker_factory, tmp_path: Path
) -> None:
    from headwater.kafka.clients import producer

    first = broker_factory(tmp_path)
    settings = first.settings()
    make_topic(settings, "kept", 2)
    produce(settings, "kept", 500)
    before = read_all(settings, "kept", range(2))
    connected = producer(settings, "still-connected")  # as a node's clients may be at its stop
    connected.produce("kept", key=b"last", value=b"acknowledged")
    assert connected.flush(10) == 0
    began = time.monotonic()
    first.stop()
    took = time.monotonic() - began
    assert took < 4.0, f"stopping took {took:.1f} s (Tansu drains connections 5 s on SIGTERM)"
    second = broker_factory(tmp_path)
    after = read_all(second.settings(), "kept", range(2))
    assert len(after) == len(before) + 1 and all(r in after for r in before)


@pytest.mark.kafka
@pytest.mark.durable
@pytest.mark.slow
@pytest.mark.parametrize("victims", [("tansu",), ("tansu", "weed")])
def test_records_survive_kill_9(broker_factory, tmp_path: Path, victims: tuple[str, ...]) -> None:
    first = broker_factory(tmp_path)
    settings = first.settings()
    make_topic(settings, "events", 2)
    produce(settings, "events", 200)
    before = read_all(settings, "events", range(2))
    for name in victims:
        os.kill(first.pids[name], signal.SIGKILL)
    assert wait_gone([first.pids[name] for name in victims]) == []
    first.stop()  # reaps the killed, stops the rest

    second = broker_factory(tmp_path)
    assert read_all(second.settings(), "events", range(2)) == before


@pytest.mark.kafka
@pytest.mark.durable
@pytest.mark.slow
def test_children_die_with_a_killed_parent(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import json, sys, time
        from pathlib import Path
        from headwater.kafka.broker import EmbeddedBroker
        broker = EmbeddedBroker(Path({str(tmp_path)!r}))
        broker.start()
        print(json.dumps(broker.pids), flush=True)
        time.sleep(120)
        """
    )
    # The killed parent cannot remove its scratch folder: give it one we remove.
    scratch = Path(tempfile.mkdtemp(prefix="hw-"))
    parent = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    try:
        assert parent.stdout is not None
        pids = json.loads(parent.stdout.readline())
        assert set(pids) == {"tansu", "weed"}
        parent.kill()
        parent.wait()
        assert wait_gone(pids.values()) == []
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.mark.kafka
def test_a_port_taken_after_our_probe_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = iter([taken.getsockname()[1], free_port()])
        monkeypatch.setattr(broker_module, "free_port", lambda: next(ports))
        with EmbeddedBroker(None) as running:
            assert running.port != taken.getsockname()[1]
