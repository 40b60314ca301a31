"""Bad input always gets a clean 4xx in ksqlDB's error shape, on every endpoint (issue 21, item 2).

Hostile and malformed bodies and a wrong type in every request field, on every POST endpoint
(internal ones too); and, with ``-m corpus``, mutations of ksqlDB's own statements. Each answer
must be a 2xx or a 4xx with ksqlDB's error body, never a 5xx, and the server must keep answering.
"""

from __future__ import annotations

import json
import random
import re
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from conformance import corpus
from headwater.gateway.app import create_app
from headwater.gateway.services import Limits, Services

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette wants httpx2 for its TestClient
    from starlette.testclient import TestClient

pytestmark = pytest.mark.kafka

CORPUS = corpus.STATEMENTS


@pytest.fixture(scope="module")
def services(memory_services: Callable[..., Services]) -> Services:
    return memory_services("fuzz", limits=Limits(catch_up_timeout_s=1.0))


@pytest.fixture(scope="module")
def client(services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(services), raise_server_exceptions=False) as test_client:
        created = test_client.post(
            "/ksql",
            json={
                "ksql": (
                    "CREATE TABLE FT (ID STRING PRIMARY KEY, V INT) WITH (kafka_topic='fuzz-ft', "
                    "partitions=1, value_format='JSON');"
                )
            },
        )
        assert created.status_code == 200, created.text
        yield test_client


def _check(answer: Any, what: str) -> None:
    """2xx, or a 4xx with ksqlDB's error body; never a 5xx."""
    assert answer.status_code < 500, f"{what}: {answer.status_code} {answer.text[:300]}"
    if answer.status_code >= 400:
        body = answer.json()
        assert isinstance(body, dict), f"{what}: {answer.text[:300]}"
        assert {"@type", "error_code", "message"} <= set(body), f"{what}: {body}"
        assert body["error_code"] // 100 == answer.status_code, f"{what}: {body}"


WRONG = [None, True, 1, -1, 1.5, 10**40, "x", [], [1, "a"], {}, {"a": {"b": []}}, "\ud800"]
"""Values of the wrong type (or hostile) for any request field."""

FIELDS = {
    "/ksql": {
        "ksql": "SHOW STREAMS;",
        "streamsProperties": {},
        "sessionVariables": {},
        "commandSequenceNumber": 0,
        "parameters": [],
    },
    "/query": {
        "ksql": "SELECT * FROM FT WHERE ID = 'a';",
        "streamsProperties": {},
        "sessionVariables": {},
        "parameters": [],
    },
    "/query-stream": {
        "sql": "SELECT * FROM FT WHERE ID = 'a';",
        "properties": {},
        "sessionVariables": {},
    },
    "/close-query": {"queryId": "q"},
    "/heartbeat": {"hostInfo": {"host": "127.0.0.1", "port": 1}, "timestamp": 1},
    "/lag": {"hostInfo": {"host": "127.0.0.1", "port": 1}, "lags": {}},
}


@pytest.mark.parametrize("endpoint", sorted(FIELDS))
def test_a_wrong_type_in_any_field_is_a_clean_4xx(client: TestClient, endpoint: str) -> None:
    valid = FIELDS[endpoint]
    for field in valid:
        for wrong in WRONG:
            body = {**valid, field: wrong}
            _check(client.post(endpoint, content=json.dumps(body)), f"{endpoint} {field}={wrong!r}")
    assert client.get("/info").status_code == 200


HOSTILE_BODIES = [
    b"",
    b"null",
    b"[]",
    b"123",
    b'"x"',
    b"{",
    b"\xff\xfe",
    b'{"ksql": "SELECT 1"',
    b"[" * 100_000,
    b'{"a":' * 50_000,
    json.dumps({"ksql": "SELECT \ud800 FROM FT;"}).encode(),
    json.dumps({"ksql": "x" * 900_000}).encode(),
    b"{}" * 10,
    b'{"ksql": "\\u0000;"}',
]


@pytest.mark.parametrize("endpoint", [*sorted(FIELDS), "/inserts-stream"])
def test_malformed_and_hostile_bodies_are_a_clean_4xx(client: TestClient, endpoint: str) -> None:
    for body in HOSTILE_BODIES:
        _check(client.post(endpoint, content=body), f"{endpoint} {body[:40]!r}")
    assert client.get("/info").status_code == 200


def test_inserts_stream_lines_of_the_wrong_shape(client: TestClient) -> None:
    header = json.dumps({"target": "FT"}).encode()
    for line in [
        b"[]",
        b"1",
        b'{"ID": []}',
        b'{"V": "x"}',
        b'{"ID": "a", "V": 1e400}',
        b"{",
        b'{"ID": "\\ud800"}',
    ]:
        answer = client.post("/inserts-stream", content=header + b"\n" + line + b"\n")
        assert answer.status_code < 500, (line, answer.text)
    for target in WRONG:
        _check(
            client.post("/inserts-stream", content=json.dumps({"target": target}).encode()),
            f"target={target!r}",
        )


def _mutations(statement: str, rng: random.Random) -> Iterator[str]:
    """A few random edits of one statement: a cut, a doubled span, swapped tokens, an inserted
    character or keyword, a changed number."""
    tokens = re.findall(r"\s+|\w+|'[^']*'|`[^`]*`|.", statement)
    n = len(tokens)
    i, j = sorted(rng.sample(range(n + 1), 2)) if n > 1 else (0, n)
    yield "".join(tokens[:i] + tokens[j:])
    yield "".join(tokens[:j] + tokens[i:j] + tokens[j:])
    if n > 2:
        a, b = rng.sample(range(n), 2)
        swapped = list(tokens)
        swapped[a], swapped[b] = swapped[b], swapped[a]
        yield "".join(swapped)
    noise = rng.choice(
        [
            "'",
            "`",
            "(",
            ")",
            ",",
            ";",
            "${x}",
            "?",
            " WHERE ",
            " KEY ",
            " AS ",
            " STRUCT<",
            " -",
            "\\",
            "\u00e9",
            " 99999999999999999999 ",
        ]
    )
    k = rng.randrange(n + 1)
    yield "".join(tokens[:k]) + noise + "".join(tokens[k:])
    yield re.sub(r"\d+", lambda m: rng.choice(["0", "-1", "100000000", m.group() * 9]), statement)


@pytest.mark.corpus
def test_mutated_corpus_statements_get_a_clean_answer(client: TestClient) -> None:
    if not CORPUS.is_file():
        pytest.fail(corpus.missing(CORPUS))
    statements = [s.strip() for s in CORPUS.read_text().split(";\n") if s.strip()]
    rng = random.Random(21)
    sample = rng.sample(statements, 100)
    for statement in sample:
        for mutated in _mutations(statement, rng):
            text = mutated if mutated.rstrip().endswith(";") else mutated + ";"
            endpoint = "/query" if text.lstrip().upper().startswith("SELECT") else "/ksql"
            _check(client.post(endpoint, json={"ksql": text}), f"{endpoint} {text[:200]!r}")
    assert client.get("/info").status_code == 200
