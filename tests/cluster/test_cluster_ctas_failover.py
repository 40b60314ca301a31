"""A materialized aggregate in a 3-server cluster: one server runs the CREATE TABLE AS SELECT (the
controller), the table's partition has an active and a standby replica. While records flow, kill -9
of the server running the query and of the server holding the active replica: pull queries keep
answering within their lag bound, the query moves, and each key's final count equals the records
written for it (nothing lost, nothing counted twice)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import pytest

from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import producer

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

KEYS = [f"k{i}" for i in range(8)]


def _controller(urls: list[str]) -> str | None:
    seen = set()
    for url in urls:
        try:
            seen.add(httpx.get(f"{url}/clusterStatus", timeout=5).json().get("controller"))
        except httpx.HTTPError:
            return None
    return seen.pop() if len(seen) == 1 else None


def _replicas(url: str, table: str) -> list[str]:
    """[active, standbys...] of the table's partition 0, from one server's /clusterStatus."""
    status = httpx.get(f"{url}/clusterStatus", timeout=5).json()["clusterStatus"]
    replicas: list[str] = []
    for host, view in status.items():
        query = view["activeStandbyPerQuery"].get(table, {})
        if query.get("activePartitions"):
            replicas.insert(0, host)
        if query.get("standByPartitions"):
            replicas.append(host)
    return replicas


def _counts(url: str, table: str) -> dict[str, int] | str:
    """Each key's count, or the error the pull query gave."""
    try:
        answer = httpx.post(
            f"{url}/query",
            json={
                "ksql": f"SELECT * FROM {table};",
                "streamsProperties": {
                    "ksql.query.pull.table.scan.enabled": True,
                    "acceptable.offset.lag": 10_000,
                },
            },
            timeout=10,
        )
    except httpx.HTTPError as exc:
        return repr(exc)
    if answer.status_code != 200:
        return answer.text
    return {
        row["row"]["columns"][0]: row["row"]["columns"][1] for row in answer.json() if "row" in row
    }


def test_ctas_survives_kill_9_of_its_runner_and_of_the_active_replica(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6].upper()
    source, table = f"AGG_IN_{suffix}", f"AGG_N_{suffix}"
    common = [
        "-b",
        memory_broker.bootstrap_servers,
        "--service-id",
        f"aggfail_{suffix}",
        "--set",
        f"headwater.query.checkpoint.root={tmp_path / 'checkpoints'}",
        "--set",
        "num.standby.replicas=1",
    ]
    servers = [server_factory(*common, "--state-dir", str(tmp_path / f"s{i}")) for i in range(3)]
    by_id = {f"127.0.0.1:{s.port}": s for s in servers}
    urls = [s.url for s in servers]
    deadline = time.monotonic() + 60
    while (controller := _controller(urls)) is None:
        assert time.monotonic() < deadline, "no controller agreed on"
        time.sleep(0.2)
    for sql in (
        (
            f"CREATE STREAM {source} (id STRING KEY, n INT) WITH (kafka_topic='{source}', "
            "partitions=1, value_format='JSON');"
        ),
        f"CREATE TABLE {table} AS SELECT id, COUNT(*) AS n FROM {source} GROUP BY id;",
    ):
        answer = servers[0].ksql(sql)
        assert answer.status_code == 200, answer.text

    written: Counter[str] = Counter()
    writer = producer(memory_broker.settings(), "agg-flow")
    stop = threading.Event()

    def flow() -> None:
        i = 0
        while not stop.is_set() and i < 600:
            key = KEYS[i % len(KEYS)]
            writer.produce(source, json.dumps({"N": i}).encode(), key.encode())
            written[key] += 1
            writer.poll(0)
            i += 1
            stop.wait(0.03)
        writer.flush(10)

    feeder = threading.Thread(target=flow)
    feeder.start()
    try:
        deadline = time.monotonic() + 120  # Spark starts, the table is assigned and restored
        while not isinstance(counts := _counts(urls[0], table), dict) or not counts:
            assert time.monotonic() < deadline, f"no answer from the table: {counts}"
            time.sleep(0.5)
        replicas = _replicas(urls[0], table)
        assert len(replicas) == 2, replicas
        active, standby = replicas
        victims = [by_id[controller]]  # runs the query
        if active != controller and standby != controller:
            victims.append(by_id[active])  # holds the active replica
        survivors = [s for s in servers if s not in victims]
        for victim in victims:
            victim.kill()
        # pull queries keep answering from the survivors within their lag bound
        failures, answers = 0, 0
        end = time.monotonic() + 20
        while time.monotonic() < end:
            for server in survivors:
                if isinstance(_counts(server.url, table), dict):
                    answers += 1
                else:
                    failures += 1
            time.sleep(0.2)
        assert answers > 0, "no pull query answered after the kills"
        feeder.join(120)
    finally:
        stop.set()
        feeder.join(30)
    assert sum(written.values()) > 0
    deadline = time.monotonic() + 180  # the query moved, caught up and its table replicas too
    for server in survivors:  # each: a replica may still be catching up (a refusal, 50302)
        while (counts := _counts(server.url, table)) != dict(written):
            assert time.monotonic() < deadline, (
                f"{server.url}: counts {counts} for written {dict(written)} "
                f"({failures} failed pull queries after the kills)"
            )
            time.sleep(1)
