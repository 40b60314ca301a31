"""A lag bound holds against every write acknowledged before the query arrived, not only against
the end the replica's restorer last fetched (issue 21: the chaos soak saw lags understated by up to
7 records under load)."""

from __future__ import annotations

import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from headwater.gateway.app import create_app
from headwater.gateway.services import Services

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette wants httpx2 for its TestClient
    from starlette.testclient import TestClient

pytestmark = pytest.mark.kafka


@pytest.fixture
def services(memory_services: Callable[..., Services]) -> Services:
    return memory_services("bounded")


@pytest.fixture
def client(services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(services)) as test_client:
        yield test_client


def _insert(client: TestClient, table: str, key: str, value: int) -> None:
    answer = client.post(
        "/ksql", json={"ksql": f"INSERT INTO {table} (ID, V) VALUES ('{key}', {value});"}
    )
    assert answer.status_code == 200, answer.text


def _scan(client: TestClient, table: str, **properties: Any) -> Any:
    return client.post(
        "/query", json={"ksql": f"SELECT * FROM {table};", "streamsProperties": properties}
    )


def test_writes_the_restorer_has_not_fetched_count_in_a_bounded_answer(
    services: Services, client: TestClient
) -> None:
    table = f"B_{uuid.uuid4().hex[:6].upper()}"
    created = client.post(
        "/ksql",
        json={
            "ksql": f"CREATE TABLE {table} (ID STRING PRIMARY KEY, "
            f"V INT) WITH (kafka_topic='{table.lower()}', "
            "partitions=1, value_format='JSON');"
        },
    )
    assert created.status_code == 200, created.text
    _insert(client, table, "a", 1)
    deadline = time.monotonic() + 15
    while len(_scan(client, table).json()) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert services.tables is not None
    services.tables.restorer.stop()  # the replica stops following its topic: its end goes stale
    try:
        for i in range(3):
            _insert(client, table, f"b{i}", i)
        unbounded = _scan(client, table)
        assert unbounded.status_code == 200, unbounded.text
        assert [s["lag"] for s in unbounded.json()[0]["header"]["servedBy"]] == [0]  # its own view

        within = _scan(client, table, **{"acceptable.offset.lag": 5})
        assert within.status_code == 200, within.text
        assert [(s["position"], s["lag"]) for s in within.json()[0]["header"]["servedBy"]] == [
            (1, 3)
        ]

        began = time.monotonic()
        beyond = _scan(client, table, **{"acceptable.offset.lag": 2})
        assert beyond.status_code == 503, beyond.text
        body = beyond.json()
        assert body["error_code"] == 50302 and "lag 3" in body["message"], body
        assert time.monotonic() - began < 2  # a moment to catch up, then refused
    finally:
        services.tables.restorer.start()
    deadline = time.monotonic() + 15
    while True:  # following again, it catches up within the bound
        answer = _scan(client, table, **{"acceptable.offset.lag": 0})
        if answer.status_code == 200:
            break
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.05)
    assert len(answer.json()) == 5
