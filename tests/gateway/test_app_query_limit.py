"""``ksql.query.persistent.active.limit`` through ``POST /ksql``: a real runner and submitter on the
embedded broker (no Spark: the limit is checked when a statement is validated)."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

with warnings.catch_warnings():
    # Starlette 1.10 wants httpx2 for its TestClient and warns when it falls back on httpx.
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from headwater.gateway.app import create_app
from headwater.gateway.services import Limits

pytestmark = pytest.mark.kafka

LIMIT = 2


@pytest.fixture(scope="module")
def client(memory_services: Callable[..., Any]) -> Iterator[TestClient]:
    services = memory_services("query-limit", limits=Limits(persistent_query_limit=LIMIT))
    with TestClient(create_app(services)) as test_client:
        yield test_client


def _ksql(client: TestClient, text: str) -> Any:
    return client.post("/ksql", json={"ksql": text, "streamsProperties": {}})


def _queries(client: TestClient) -> list[str]:
    answer = _ksql(client, "SHOW QUERIES;")
    assert answer.status_code == 200, answer.text
    return sorted(q["id"] for q in answer.json()[0]["queries"])


def test_a_query_beyond_the_limit_is_refused_until_terminate_frees_a_slot(
    client: TestClient,
) -> None:
    name = f"SRC_{uuid.uuid4().hex[:6]}".upper()
    source = (
        f"CREATE STREAM {name} (id STRING KEY, v INT) WITH (kafka_topic='{name.lower()}', "
        "partitions=1, value_format='JSON');"
    )
    assert _ksql(client, source).status_code == 200
    for n in range(LIMIT):
        created = _ksql(client, f"CREATE STREAM {name}_{n} AS SELECT id, v FROM {name};")
        assert created.status_code == 200, created.text
    assert len(_queries(client)) == LIMIT

    over = f"CREATE STREAM {name}_X AS SELECT id, v FROM {name};"
    for text in (over, f"INSERT INTO {name}_0 SELECT id, v + 1 AS v FROM {name};"):
        refused = _ksql(client, text)
        assert refused.status_code == 400, refused.text
        body = refused.json()
        assert body["@type"] == "generic_error"
        assert body["error_code"] == 40000
        assert body["message"] == (
            "Not executing statement(s) as it would cause the number of active, persistent "
            "queries to exceed the configured limit. Use the TERMINATE command to terminate "
            "existing queries, or increase the 'ksql.query.persistent.active.limit' setting via "
            "the 'ksql-server.properties' file. Current persistent query count: 3. "
            "Configured limit: 2."
        )
    assert len(_queries(client)) == LIMIT  # nothing was appended
    shown = _ksql(client, "SHOW STREAMS;")  # what starts no query still works
    assert shown.status_code == 200
    assert f"{name}_X" not in {s["name"] for s in shown.json()[0]["streams"]}

    # a script is run in order: the statements before the refused one stand, as they are reported
    first = min(_queries(client))
    script = f"TERMINATE {first};\n{over}\nCREATE STREAM {name}_Y AS SELECT id, v FROM {name};"
    answer = _ksql(client, script)
    assert answer.status_code == 400, answer.text
    assert [e["statementText"].split()[0] for e in answer.json()["entities"]] == [
        "TERMINATE",
        "CREATE",
    ]
    assert "Current persistent query count: 3. Configured limit: 2." in answer.json()["message"]
    assert len(_queries(client)) == LIMIT

    assert _ksql(client, "TERMINATE ALL;").status_code == 200
    assert _queries(client) == []
