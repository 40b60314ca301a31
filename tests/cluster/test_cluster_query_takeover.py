"""A persistent query in a 3-server cluster: one server runs it (the controller); kill -9 of that
server while records flow, and another server takes the query over from the shared checkpoint
without a restart: every input record appears exactly once in the sink topic."""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import TopicPartition

from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import consumer, producer

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def _controller(urls: list[str]) -> str | None:
    seen = set()
    for url in urls:
        try:
            seen.add(httpx.get(f"{url}/clusterStatus", timeout=5).json().get("controller"))
        except httpx.HTTPError:
            return None
    return seen.pop() if len(seen) == 1 else None


def _states(url: str) -> dict[str, Any]:
    shown = httpx.post(f"{url}/ksql", json={"ksql": "SHOW QUERIES;"}, timeout=10).json()
    return {q["id"]: q["state"] for q in shown[0]["queries"]}


def _eventually(probe: Any, wanted: Any, timeout_s: float = 15.0) -> Any:
    """``probe()``'s value once it equals ``wanted`` (a loaded 2-core machine answers late), else
    its last value after ``timeout_s``, for the assertion to show."""
    deadline = time.monotonic() + timeout_s
    while (found := probe()) != wanted and time.monotonic() < deadline:
        time.sleep(0.3)
    return found


def test_another_server_takes_over_a_query_when_its_server_dies(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6].upper()
    source, sink = f"TK_IN_{suffix}", f"TK_OUT_{suffix}"
    common = [
        "-b",
        memory_broker.bootstrap_servers,
        "--service-id",
        f"takeover_{suffix}",
        "--set",
        f"headwater.query.checkpoint.root={tmp_path / 'checkpoints'}",
    ]
    servers = [server_factory(*common, "--state-dir", str(tmp_path / f"s{i}")) for i in range(3)]
    by_id = {f"127.0.0.1:{s.port}": s for s in servers}
    urls = [s.url for s in servers]
    deadline = time.monotonic() + 60
    while (controller := _controller(urls)) is None:
        assert time.monotonic() < deadline, "no controller agreed on"
        time.sleep(0.2)
    owner = by_id[controller]
    for sql in (
        (
            f"CREATE STREAM {source} (id STRING KEY, n INT) WITH (kafka_topic='{source}', "
            "partitions=2, value_format='JSON');"
        ),
        f"CREATE STREAM {sink} AS SELECT id, n + 1 AS m FROM {source};",
    ):
        answer = servers[0].ksql(sql)
        assert answer.status_code == 200, answer.text
    query_id = next(iter(_states(owner.url)))
    others = [s for s in servers if s is not owner]
    # every server knows the query; only its owner runs it
    assert all(query_id in _states(s.url) for s in others)
    deadline = time.monotonic() + 15
    while True:  # each server follows the catalog within ~200 ms of applying the command
        running = {
            s.port: set(httpx.get(f"{s.url}/queryStatus", timeout=5).json()["queries"])
            for s in servers
        }
        if running[owner.port] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert running == {s.port: ({query_id} if s is owner else set()) for s in servers}

    total = 400
    writer = producer(memory_broker.settings(), "takeover-flow")
    stop = threading.Event()

    def flow() -> None:
        for i in range(total):
            writer.produce(source, json.dumps({"N": i}).encode(), f"k{i}".encode())
            writer.poll(0)
            if stop.wait(0.05):
                break
        writer.flush(10)

    reader = consumer(memory_broker.settings(), f"takeover-{suffix}")
    reader.assign([TopicPartition(sink, p, 0) for p in range(2)])
    values: list[int] = []

    def read_until(count: int, timeout_s: float) -> None:
        end = time.monotonic() + timeout_s
        while len(values) < count and time.monotonic() < end:
            values.extend(
                json.loads(m.value() or b"null")["M"]
                for m in reader.consume(500, 0.5)
                if m.error() is None
            )

    feeder = threading.Thread(target=flow)
    feeder.start()
    try:
        read_until(40, 120)  # the owner's query is writing
        assert values, "the query wrote nothing"
        # every server shows how the query is doing (the others ask its owner, the controller)
        assert (
            _eventually(lambda: [_states(s.url)[query_id] for s in servers], ["RUNNING"] * 3)
            == ["RUNNING"] * 3
        )
        owner.kill()  # kill -9 of the server running the query
        deadline = time.monotonic() + 60
        while True:
            new = _controller([s.url for s in others])
            if new is not None and new != controller:
                break
            assert time.monotonic() < deadline, "no new controller"
            time.sleep(0.2)
        feeder.join(60)
        read_until(total, 180)
        time.sleep(3)
        read_until(total + 1, 2)  # anything beyond `total` would be a duplicate
    finally:
        stop.set()
        feeder.join(30)
        reader.close()
    assert len(values) == total, f"{len(values)} records for {total} inputs"
    assert sorted(values) == list(range(1, total + 1))
    # the new owner restarts the query from the checkpoint: on a busy machine Spark may take a
    # while (and retry a worker that failed to connect back) before it reports RUNNING again
    assert (
        _eventually(
            lambda: [_states(s.url)[query_id] for s in others], ["RUNNING"] * 2, timeout_s=60
        )
        == ["RUNNING"] * 2
    )
