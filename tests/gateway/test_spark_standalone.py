"""Scaling out: a persistent query on a Spark standalone cluster (a master and a worker started from
the PySpark package's own launcher on 127.0.0.1), chosen by one setting, `spark.master`. The query
calls a Python function of the server's extension folder: the executors get its module's text with
the query, never the folder."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from confluent_kafka import TopicPartition

from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import consumer

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SPARK_HOME = Path(pyspark.__file__).parent
FUNCTIONS = """
from headwater.functions import udaf, udf, udtf


@udf()
def tenfold(x: int) -> int:
    return 10 * x


@udaf()
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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_port(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"Spark daemon exited:\n{log.read_text()[-3000:]}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    pytest.fail(f"Spark daemon not listening on {port} after 60 s:\n{log.read_text()[-3000:]}")


@pytest.fixture
def spark_cluster(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(master URL, worker work dir) of a one-worker standalone cluster; stopped by pid after."""
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_NO_DAEMONIZE": "1",
    }
    launcher = str(SPARK_HOME / "bin" / "spark-class")
    port = _free_port()
    work = tmp_path / "worker"
    work.mkdir()
    started: list[subprocess.Popen[bytes]] = []
    try:
        master_log = tmp_path / "master.log"
        with master_log.open("wb") as out:
            master = subprocess.Popen(
                [
                    launcher,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(_free_port()),
                ],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        started.append(master)
        _wait_port(port, master, master_log)
        worker_log = tmp_path / "worker.log"
        with worker_log.open("wb") as out:
            worker = subprocess.Popen(
                [
                    launcher,
                    "org.apache.spark.deploy.worker.Worker",
                    f"spark://127.0.0.1:{port}",
                    "--host",
                    "127.0.0.1",
                    "--webui-port",
                    str(_free_port()),
                    "--cores",
                    "2",
                    "--memory",
                    "2g",
                    "--work-dir",
                    str(work),
                ],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        started.append(worker)
        deadline = time.monotonic() + 60
        while "Successfully registered with master" not in worker_log.read_text(errors="replace"):
            if time.monotonic() > deadline or worker.poll() is not None:
                pytest.fail(f"the worker did not register:\n{worker_log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield f"spark://127.0.0.1:{port}", work
    finally:
        for process in reversed(started):  # each in its own session: the group holds executors
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)


def _read(
    broker: EmbeddedBroker, topic: str, partitions: int, want: int
) -> list[tuple[bytes | None, dict]]:
    reader = consumer(broker.settings(), f"sa-{uuid.uuid4().hex[:6]}")
    reader.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[bytes | None, dict]] = []
    deadline = time.monotonic() + 180
    while len(got) < want and time.monotonic() < deadline:
        got += [
            (m.key(), json.loads(m.value() or b"null"))
            for m in reader.consume(100, 0.5)
            if m.error() is None
        ]
    reader.close()
    return got


def test_a_csas_runs_on_a_standalone_cluster(
    memory_broker: EmbeddedBroker,
    server_factory,  # type: ignore[no-untyped-def]
    spark_cluster: tuple[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    master, work = spark_cluster
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # the executors reach the driver here
    suffix = uuid.uuid4().hex[:6].upper()
    source, sink = f"SA_IN_{suffix}", f"SA_OUT_{suffix}"
    ext = tmp_path / "ext"
    ext.mkdir()
    (ext / "scaling.py").write_text(FUNCTIONS)
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(tmp_path / "node"),
        "--service-id",
        f"sa_{suffix}",
        "--set",
        f"spark.master={master}",
        "--set",
        f"ksql.extension.dir={ext}",
    )
    for sql in (
        (
            f"CREATE STREAM {source} (id STRING KEY, v INT) WITH (kafka_topic='{source}', "
            "partitions=2, value_format='JSON');"
        ),
        f"CREATE STREAM {sink} AS SELECT id, tenfold(v) AS w FROM {source} WHERE v > 1;",
        f"CREATE STREAM {sink}_ROWS AS SELECT id, upto(v) AS i FROM {source} WHERE v > 1;",
        f"CREATE TABLE {sink}_P AS SELECT id, product(v) AS p FROM {source} GROUP BY id;",
        f"INSERT INTO {source} (id, v) VALUES ('a', 1);",
        f"INSERT INTO {source} (id, v) VALUES ('b', 2);",
        f"INSERT INTO {source} (id, v) VALUES ('c', 3);",
    ):
        answer = server.ksql(sql)
        assert answer.status_code == 200, answer.text
    assert sorted(_read(memory_broker, sink, 2, 2)) == [(b"b", {"W": 20}), (b"c", {"W": 30})], (
        server.log()
    )
    rows = _read(memory_broker, f"{sink}_ROWS", 2, 5)
    assert sorted((k, v["I"]) for k, v in rows) == [
        (b"b", 0),
        (b"b", 1),
        (b"c", 0),
        (b"c", 1),
        (b"c", 2),
    ], server.log()
    assert dict(_read(memory_broker, f"{sink}_P", 2, 3)) == {
        b"a": {"P": 1},
        b"b": {"P": 2},
        b"c": {"P": 3},
    }
    apps = [p.name for p in work.iterdir()]
    assert any(name.startswith("app-") for name in apps), f"no executor ran on the worker: {apps}"
    assert server.stop() == 0
