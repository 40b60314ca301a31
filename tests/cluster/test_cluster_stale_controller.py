"""A stale controller (SIGSTOP then SIGCONT of its process) cannot change anything (issue 9, point 6)."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from headwater.kafka.broker import EmbeddedBroker

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _status(url: str) -> dict[str, Any]:
    return httpx.get(f"{url}/clusterStatus", timeout=5).json()  # type: ignore[no-any-return]


def _wait(what: str, check: Any, timeout_s: float = 30) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            found = check()
        except httpx.HTTPError:
            found = None
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _assignment(url: str) -> dict[str, Any]:
    return {
        host: view["activeStandbyPerQuery"] for host, view in _status(url)["clusterStatus"].items()
    }


def test_a_frozen_controller_is_replaced_and_cannot_act_when_it_wakes(
    memory_broker: EmbeddedBroker,
    server_factory,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    service_id = f"stale-{uuid.uuid4().hex[:8]}"
    common = ["-b", memory_broker.bootstrap_servers, "--service-id", service_id]
    servers = [server_factory(*common, "--state-dir", str(tmp_path / f"s{i}")) for i in range(3)]
    by_id = {f"127.0.0.1:{s.port}": s for s in servers}
    created = servers[0].ksql(
        "CREATE TABLE T (K STRING PRIMARY KEY, V INT) WITH "
        "(kafka_topic='t-stale', partitions=6, value_format='JSON');"
    )
    assert created.status_code == 200, created.text
    first = _wait(
        "one controller seen by all",
        lambda: (
            {
                (_status(s.url).get("controller"), _status(s.url).get("controllerEpoch"))
                for s in servers
            }
            if len(
                {
                    (_status(s.url).get("controller"), _status(s.url).get("controllerEpoch"))
                    for s in servers
                }
            )
            == 1
            else None
        ),
    )
    ((controller, epoch),) = first
    assert controller in by_id and epoch >= 1
    frozen = by_id[controller]
    others = [s for s in servers if s is not frozen]
    assert frozen.process is not None
    os.kill(frozen.process.pid, signal.SIGSTOP)
    try:
        # The others mark it down, one of them claims a higher epoch and takes its actives over.
        _wait(
            "a new controller",
            lambda: all(
                _status(s.url).get("controllerEpoch", 0) > epoch
                and _status(s.url).get("controller") != controller
                for s in others
            ),
        )
        _wait(
            "no active on the frozen server",
            lambda: all(
                not any(
                    q["activePartitions"] for q in _assignment(s.url).get(controller, {}).values()
                )
                for s in others
            ),
        )
    finally:
        os.kill(frozen.process.pid, signal.SIGCONT)
    new = _status(others[0].url)
    # Woken up, the old controller folds the newer epoch and stops acting at once; every server
    # ends with the same controller, epoch and assignment.
    _wait(
        "identical views",
        lambda: (
            len(
                {
                    (
                        str(_status(s.url).get("controller")),
                        _status(s.url).get("controllerEpoch"),
                        repr(sorted(_assignment(s.url).items())),
                    )
                    for s in servers
                }
            )
            == 1
        ),
    )
    final = _status(frozen.url)
    assert final["controller"] != controller
    assert final["controllerEpoch"] >= new["controllerEpoch"] > epoch
    actives: dict[int, set[str]] = {}
    for host, tables in _assignment(frozen.url).items():
        for partition in tables.get("T", {}).get("activePartitions", []):
            actives.setdefault(partition["partition"], set()).add(host)
    assert sorted(actives) == list(range(6)) and all(len(h) == 1 for h in actives.values())
