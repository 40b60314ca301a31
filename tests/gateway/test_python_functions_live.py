"""Python functions on a live node (issue 31): a scalar, an aggregate and a table function from a
temporary extension folder, in a CSAS and a CTAS on Spark (whose workers get the module's text with
the query), a pull query and a push query, with exact results; SHOW and DESCRIBE FUNCTIONS list
them with their module. (The standalone Spark cluster: tests/gateway/test_spark_standalone.py.)"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import httpx
import pytest

from headwater.kafka.broker import EmbeddedBroker
from tests.gateway.test_persistent_queries import _ok, _read_topic

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

MODULE = """
from headwater.functions import udaf, udf, udtf


@udf(description="ten times the number", author="tests", version="2.0")
def tenfold(x: int) -> int:
    return 10 * x


@udf()
def fails_on(x: int) -> int:
    if x == 2:
        raise ValueError("two is not allowed")
    return x


@udf()
def naps(x: int) -> int:
    if x == 3:
        import time

        time.sleep(600)  # hangs: stopped at headwater.functions.call.timeout.ms
    return x


@udaf(description="the product of the numbers")
class product:
    def initialize(self) -> int:
        return 1

    def aggregate(self, state: int, x: int) -> int:
        return state * x

    def merge(self, a: int, b: int) -> int:
        return a * b

    def map(self, state: int) -> int:
        return state


@udtf()
def upto(n: int) -> list[int]:
    return list(range(n))
"""


def test_python_functions_run_in_every_kind_of_query(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, tmp_path: Path
) -> None:
    ext = tmp_path / "ext"
    ext.mkdir()
    (ext / "numbers.py").write_text(MODULE)
    suffix = uuid.uuid4().hex[:6].upper()
    source, projected, rows, products = (
        f"PF_IN_{suffix}",
        f"PF_OUT_{suffix}",
        f"PF_ROWS_{suffix}",
        f"PF_PRODUCT_{suffix}",
    )
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(tmp_path / "node"),
        "--service-id",
        f"pf_{suffix}",
        "--set",
        f"ksql.extension.dir={ext}",
        "--set",
        "ksql.streams.cache.max.bytes.buffering=0",
        "--set",
        "headwater.functions.call.timeout.ms=1500",
    )
    listed = _ok(server.ksql("SHOW FUNCTIONS;"))[0]["functions"]
    mine = {f["name"]: f for f in listed if "source" in f}
    assert {n: f["type"] for n, f in mine.items()} == {
        "FAILS_ON": "SCALAR",
        "NAPS": "SCALAR",
        "PRODUCT": "AGGREGATE",
        "TENFOLD": "SCALAR",
        "UPTO": "TABLE",
    }
    assert mine["TENFOLD"]["source"] == str(ext / "numbers.py")
    info = httpx.get(f"{server.url}/info", timeout=10).json()
    assert [(m["module"], m["functions"]) for m in info["extensions"]] == [
        (str(ext / "numbers.py"), ["FAILS_ON", "NAPS", "PRODUCT", "TENFOLD", "UPTO"])
    ]
    assert len(info["extensions"][0]["sha256"]) == 64
    assert info["extensionProblems"] == []
    described = _ok(server.ksql("DESCRIBE FUNCTION tenfold;"))[0]
    assert (described["author"], described["version"], described["path"]) == (
        "tests",
        "2.0",
        str(ext / "numbers.py"),
    )
    assert described["functions"][0]["arguments"][0]["name"] == "x"

    _ok(
        server.ksql(
            f"CREATE STREAM {source} (id STRING KEY, v INT) WITH (kafka_topic='{source}', "
            "partitions=1, value_format='JSON');"
        )
    )
    _ok(
        server.ksql(
            f"CREATE STREAM {projected} AS SELECT id, tenfold(v) AS t, fails_on(v) AS f, "
            f"naps(v) AS n FROM {source};"
        )
    )
    _ok(server.ksql(f"CREATE STREAM {rows} AS SELECT id, upto(v) AS i FROM {source};"))
    _ok(
        server.ksql(
            f"CREATE TABLE {products} AS SELECT id, product(v) AS p FROM {source} GROUP BY id;"
        )
    )
    for key, value in (("a", 1), ("a", 2), ("b", 3), ("a", 4)):
        _ok(server.ksql(f"INSERT INTO {source} (id, v) VALUES ('{key}', {value});"))

    got = _read_topic(memory_broker, projected, 1, want=4)
    assert [(k, v) for k, v, _ in got] == [
        (b"a", {"T": 10, "F": 1, "N": 1}),
        (b"a", {"T": 20, "F": None, "N": 2}),  # the function raised: NULL, the record went on
        (b"b", {"T": 30, "F": 3, "N": None}),  # it hung: stopped after 1.5 s, NULL
        (b"a", {"T": 40, "F": 4, "N": 4}),
    ]
    got = _read_topic(memory_broker, rows, 1, want=10)
    assert [(k, v["I"]) for k, v, _ in got] == [
        (b"a", 0),
        (b"a", 0),
        (b"a", 1),
        (b"b", 0),
        (b"b", 1),
        (b"b", 2),
        (b"a", 0),
        (b"a", 1),
        (b"a", 2),
        (b"a", 3),
    ]
    got = _read_topic(memory_broker, products, 1, want=4)
    assert {k: v for k, v, _ in got} == {b"a": {"P": 8}, b"b": {"P": 3}}

    deadline = time.monotonic() + 30
    while True:  # a pull query over the materialized table calls the scalar function too
        pulled = server.query(f"SELECT id, tenfold(p) AS tp FROM {products} WHERE id = 'a';")
        found = [i["row"]["columns"] for i in pulled.json() if "row" in i]
        if found == [["a", 80]] or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert found == [["a", 80]], pulled.text

    # a push query without state, from the stream's start
    pushed = server.query(
        f"SELECT id, tenfold(v) AS t FROM {source} EMIT CHANGES LIMIT 4;",
        streamsProperties={"auto.offset.reset": "earliest"},
    )
    assert [i["row"]["columns"] for i in pushed.json() if "row" in i] == [
        ["a", 10],
        ["a", 20],
        ["b", 30],
        ["a", 40],
    ], pushed.text

    # a push query with state: a transient Spark query, its workers load the module too
    pushed = server.query(
        f"SELECT id, product(v) AS p FROM {source} GROUP BY id EMIT CHANGES LIMIT 4;",
        streamsProperties={"auto.offset.reset": "earliest"},
    )
    assert [i["row"]["columns"] for i in pushed.json() if "row" in i] == [
        ["a", 1],
        ["a", 2],
        ["b", 3],
        ["a", 8],
    ], pushed.text

    status = _ok(server.ksql(f"DESCRIBE {projected} EXTENDED;"))[0]["sourceDescription"]
    assert "two is not allowed" in json.dumps(status) or "longer than 1500 ms" in json.dumps(
        status
    ), status
    assert server.stop() == 0

    # The same node started again without the module: its queries are refused by name (ERROR),
    # the server runs on, and a statement calling the function is refused as ksqlDB refuses it.
    empty = tmp_path / "empty"
    empty.mkdir()
    again = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(tmp_path / "node"),
        "--service-id",
        f"pf_{suffix}",
        "--set",
        f"ksql.extension.dir={empty}",
    )
    deadline = time.monotonic() + 30
    while True:
        statuses = httpx.get(f"{again.url}/queryStatus", timeout=10).json()["queries"]
        if len(statuses) == 3 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert {s["state"] for s in statuses.values()} == {"ERROR"}, statuses
    assert any("calls FAILS_ON, NAPS, TENFOLD," in s["message"] for s in statuses.values()), (
        statuses
    )
    assert any("calls PRODUCT" in s["message"] for s in statuses.values()), statuses
    refused = again.ksql(f"CREATE STREAM x_{suffix} AS SELECT tenfold(v) FROM {source};")
    assert refused.status_code == 400, refused.text
    assert "Can't find any functions with the name 'TENFOLD'" in refused.text
    assert again.query(f"SELECT * FROM {products};").status_code == 200  # the rest works
    assert again.stop() == 0
