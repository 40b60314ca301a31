"""Two server processes with one service id race conflicting statements: one winner per round, and
identical catalogs at the end (issue 8, command log)."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from headwater.kafka.broker import EmbeddedBroker

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_two_servers_race_conflicting_creates(
    memory_broker: EmbeddedBroker,
    server_factory,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    service_id = f"race-{uuid.uuid4().hex[:8]}"
    common = ["-b", memory_broker.bootstrap_servers, "--service-id", service_id]
    servers = [server_factory(*common, "--state-dir", str(tmp_path / name)) for name in "ab"]
    rounds = 8
    for i in range(rounds):
        answers: list[httpx.Response | None] = [None, None]

        def submit(which: int, i: int = i, answers: list[httpx.Response | None] = answers) -> None:
            # Same name, different columns: exactly one of the two can take effect.
            column = "A INT" if which == 0 else "B STRING"
            sql = (
                f"CREATE STREAM R{i} (ID INT KEY, {column}) WITH "
                f"(kafka_topic='{service_id}-{i}', partitions=1, value_format='JSON');"
            )
            answers[which] = httpx.post(
                f"{servers[which].url}/ksql", json={"ksql": sql}, timeout=60
            )

        threads = [threading.Thread(target=submit, args=(w,)) for w in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(90)
        codes = sorted(a.status_code for a in answers if a is not None)
        assert codes == [200, 400], [a.text for a in answers if a is not None]
        loser = next(a for a in answers if a is not None and a.status_code == 400)
        assert "already exists" in loser.json()["message"]

    def digest(url: str) -> str:
        return str(httpx.get(f"{url}/info", timeout=10).json()["catalogDigest"])

    deadline = time.monotonic() + 20
    while digest(servers[0].url) != digest(servers[1].url):
        assert time.monotonic() < deadline, "catalogs differ"
        time.sleep(0.1)
    describe = " ".join(f"DESCRIBE R{i};" for i in range(rounds))
    fields = []
    for server in servers:
        described = server.ksql(describe)
        assert described.status_code == 200, described.text
        fields.append([e["sourceDescription"]["fields"] for e in described.json()])
    assert fields[0] == fields[1]
