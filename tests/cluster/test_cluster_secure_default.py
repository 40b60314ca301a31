"""Internal traffic is authenticated with no setting at all (issue 21, item 4, point 1).

Two real servers with no ``cluster.auth.secret`` agree on a generated secret through the
service's secret topic: they see each other alive (their heartbeats are signed and accepted),
while an unsigned heartbeat or lag report from a plain HTTP client gets ksqlDB's 401.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest

from headwater.kafka.broker import EmbeddedBroker

pytestmark = [pytest.mark.kafka]


def _alive(url: str) -> dict[str, bool]:
    status = httpx.get(f"{url}/clusterStatus", timeout=5).json()["clusterStatus"]
    return {host: view["hostAlive"] for host, view in status.items()}


def test_unsigned_internal_requests_are_refused_and_peers_still_see_each_other(
    memory_broker: EmbeddedBroker, server_factory: Any
) -> None:
    common = [
        "-b",
        memory_broker.bootstrap_servers,
        "--service-id",
        f"sec-{uuid.uuid4().hex[:8]}",
        "--in-memory",
    ]
    first, second = server_factory(*common), server_factory(*common)
    hosts = {f"127.0.0.1:{first.port}", f"127.0.0.1:{second.port}"}
    deadline = time.monotonic() + 30
    while not (
        set(_alive(first.url)) == hosts
        and all(_alive(first.url).values())
        and set(_alive(second.url)) == hosts
        and all(_alive(second.url).values())
    ):
        assert time.monotonic() < deadline, (_alive(first.url), _alive(second.url))
        time.sleep(0.1)
    forged = {"hostInfo": {"host": "10.9.9.9", "port": 1}, "timestamp": int(time.time() * 1000)}
    for path, body in (("/heartbeat", forged), ("/lag", {**forged, "lagInfo": {}})):
        answer = httpx.post(f"{first.url}{path}", json=body, timeout=5)
        assert answer.status_code == 401, answer.text
        error = answer.json()
        assert error["@type"] == "generic_error" and error["error_code"] == 40100, error
        assert "X-Headwater-Auth" in error["message"]
    assert "10.9.9.9:1" not in _alive(first.url)
