"""kill -9 of a server while it submits statements, then a restart (issue 8, command log).

Catalogs must come out identical on the restarted server and on a second server with the same
service id; every statement the client saw acknowledged must be there; no command applied twice.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from headwater.kafka.broker import EmbeddedBroker

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _digest(url: str) -> str:
    return str(httpx.get(f"{url}/info", timeout=10).json()["catalogDigest"])


def test_kill_9_while_submitting_then_restart(
    memory_broker: EmbeddedBroker,
    server_factory,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    service_id = f"crash-{uuid.uuid4().hex[:8]}"
    common = ["-b", memory_broker.bootstrap_servers, "--service-id", service_id]
    first = server_factory(*common, "--state-dir", str(tmp_path / "a"))
    acknowledged: list[str] = []
    stop = threading.Event()

    def submit() -> None:
        for i in range(10_000):
            if stop.is_set():
                return
            name = f"S{i}"
            sql = (
                f"CREATE STREAM {name} (ID INT KEY, V INT) WITH (kafka_topic='{service_id}-{i}', "
                "partitions=1, value_format='JSON');"
            )
            try:
                answer = httpx.post(f"{first.url}/ksql", json={"ksql": sql}, timeout=10)
            except httpx.HTTPError:
                return
            if answer.status_code == 200:
                acknowledged.append(name)

    client = threading.Thread(target=submit)
    client.start()
    deadline = time.monotonic() + 60
    while len(acknowledged) < 8 and time.monotonic() < deadline and client.is_alive():
        time.sleep(0.02)
    first.kill()  # mid-submission: the client is sending the next statement
    stop.set()
    client.join(30)
    assert len(acknowledged) >= 8, first.log()

    restarted = server_factory(*common, "--state-dir", str(tmp_path / "a"))
    second = server_factory(*common, "--state-dir", str(tmp_path / "b"))
    # Let both follow the log to its end (a statement the killed server committed but never
    # acknowledged may still be there), then compare.
    for server in (restarted, second):
        assert server.ksql("SHOW STREAMS;").status_code == 200
    deadline = time.monotonic() + 30
    while _digest(restarted.url) != _digest(second.url):
        assert time.monotonic() < deadline, "catalogs differ"
        time.sleep(0.2)

    streams = restarted.ksql("SHOW STREAMS;").json()[0]["streams"]
    names = [s["name"] for s in streams]
    assert set(acknowledged) <= set(names), "an acknowledged statement is missing"
    assert len(names) == len(set(names))
    statuses = httpx.get(f"{restarted.url}/status", timeout=10).json()["commandStatuses"]
    successes = [c for c, status in statuses.items() if status == "SUCCESS"]
    assert len(successes) == len(names), "a command was applied twice, or one is missing"
    assert statuses == httpx.get(f"{second.url}/status", timeout=10).json()["commandStatuses"]
