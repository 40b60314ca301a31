"""Security end to end: real ``headwater server`` processes with BASIC authentication (and TLS).

Internal traffic between two servers still flows (signed with the generated secret), while a
client needs a listed user's credentials everywhere but the open paths.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from headwater.kafka.broker import EmbeddedBroker

pytestmark = [pytest.mark.kafka]

USER, PASSWORD = "fred", "let me in"


def _credentials(tmp_path: Path) -> Path:
    path = tmp_path / "users.properties"
    path.write_text(f"# test users\n{USER}: {PASSWORD},user\n", encoding="utf-8")
    return path


def _wait_alive(url: str, hosts: set[str], **client: Any) -> None:
    deadline = time.monotonic() + 30
    while True:
        answer = httpx.get(f"{url}/clusterStatus", timeout=5, **client)
        assert answer.status_code == 200, answer.text
        alive = {h: v["hostAlive"] for h, v in answer.json()["clusterStatus"].items()}
        if set(alive) == hosts and all(alive.values()):
            return
        assert time.monotonic() < deadline, alive
        time.sleep(0.1)


def test_basic_authentication_with_two_servers(
    memory_broker: EmbeddedBroker, server_factory: Any, tmp_path: Path
) -> None:
    common = [
        "-b",
        memory_broker.bootstrap_servers,
        "--in-memory",
        "--service-id",
        f"basic-{uuid.uuid4().hex[:8]}",
        "--set",
        "authentication.method=BASIC",
        "--set",
        f"authentication.basic.credentials.file={_credentials(tmp_path)}",
        "--set",
        "authentication.realm=KsqlServer-Props",
    ]
    first, second = server_factory(*common), server_factory(*common)
    hosts = {f"127.0.0.1:{first.port}", f"127.0.0.1:{second.port}"}
    for server in (first, second):
        _wait_alive(server.url, hosts, auth=(USER, PASSWORD))
    refused = httpx.post(f"{first.url}/ksql", json={"ksql": "SHOW STREAMS;"}, timeout=5)
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == 'Basic realm="KsqlServer-Props"'
    assert refused.json()["error_code"] == 40100
    wrong = httpx.get(f"{first.url}/info", auth=(USER, "guess"), timeout=5)
    assert wrong.status_code == 401
    shown = httpx.post(
        f"{first.url}/ksql", json={"ksql": "SHOW STREAMS;"}, auth=(USER, PASSWORD), timeout=10
    )
    assert shown.status_code == 200, shown.text
    assert httpx.get(f"{second.url}/healthcheck", timeout=5).status_code == 200
    assert httpx.post(f"{second.url}/heartbeat", json={}, timeout=5).status_code == 401


def test_tls_listener_and_internal_traffic_over_tls(
    memory_broker: EmbeddedBroker,
    server_factory: Any,
    self_signed: tuple[Path, Path],
    tmp_path: Path,
) -> None:
    """Two servers with TLS and BASIC: heartbeats and forwarded pull queries (signed, with no
    user) go over TLS between them."""
    cert, key = self_signed
    common = [
        "-b",
        memory_broker.bootstrap_servers,
        "--in-memory",
        "--service-id",
        f"tls-{uuid.uuid4().hex[:8]}",
        "--set",
        "authentication.method=BASIC",
        "--set",
        f"authentication.basic.credentials.file={_credentials(tmp_path)}",
        "--set",
        "listeners=https://127.0.0.1:0",
        "--set",
        "num.standby.replicas=0",
        "--set",
        f"ssl.certificate.location={cert}",
        "--set",
        f"ssl.key.location={key}",
    ]
    first = server_factory(*common, tls_ca=str(cert))
    second = server_factory(*common, tls_ca=str(cert))
    first.auth = second.auth = (USER, PASSWORD)
    assert first.url.startswith("https://")
    hosts = {f"127.0.0.1:{first.port}", f"127.0.0.1:{second.port}"}
    for server in (first, second):
        _wait_alive(server.url, hosts, verify=server.verify, auth=server.auth)  # over TLS
    with pytest.raises(httpx.HTTPError):  # cleartext is not served
        httpx.get(f"http://127.0.0.1:{first.port}/info", timeout=3)
    with pytest.raises(httpx.HTTPError):  # nor is the certificate trusted by default
        httpx.get(f"{first.url}/info", timeout=3)
    created = first.ksql(
        "CREATE TABLE T (ID STRING PRIMARY KEY, V INT) WITH "
        "(kafka_topic='t-tls', partitions=4, value_format='JSON');"
    )
    assert created.status_code == 200, created.text
    keys = [f"k{i}" for i in range(8)]
    for i, k in enumerate(keys):
        inserted = first.ksql(f"INSERT INTO T (ID, V) VALUES ('{k}', {i});")
        assert inserted.status_code == 200, inserted.text
    served: set[str] = set()
    deadline = time.monotonic() + 30
    for server in (first, second):
        for i, k in enumerate(keys):
            while True:
                answer = server.query(f"SELECT * FROM T WHERE ID = '{k}';")
                rows = (
                    [item["row"]["columns"] for item in answer.json() if "row" in item]
                    if answer.status_code == 200
                    else []
                )
                if rows == [[k, i]]:
                    break
                assert time.monotonic() < deadline, answer.text
                time.sleep(0.1)
            header = answer.json()[0]["header"]
            served |= {s["host"] for s in header["servedBy"] if server.url[8:] != s["host"]}
    assert served, "no pull query was forwarded to the other server"


def test_clients_over_tls_with_basic_authentication(
    memory_broker: EmbeddedBroker,
    server_factory: Any,
    self_signed: tuple[Path, Path],
    tmp_path: Path,
) -> None:
    import os
    import subprocess
    import sys

    from headwater import dbapi

    cert, key = self_signed
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--in-memory",
        "--set",
        f"ssl.certificate.location={cert}",
        "--set",
        f"ssl.key.location={key}",
        "--set",
        "authentication.method=BASIC",
        "--set",
        f"authentication.basic.credentials.file={_credentials(tmp_path)}",
        tls_ca=str(cert),
    )
    with dbapi.connect(server.url, user=USER, password=PASSWORD, verify=str(cert)) as connection:
        cursor = connection.cursor()
        cursor.execute("SHOW STREAMS")
        assert cursor.fetchall() is not None
    refusing = dbapi.connect(server.url, user=USER, password="guess", verify=str(cert), retries=0)
    with refusing, pytest.raises(dbapi.AuthorizationError, match="Unauthorized"):
        refusing.cursor().execute("SHOW STREAMS")
    exe = str(Path(sys.executable).with_name("headwater"))
    shell = [
        exe,
        "run",
        "-s",
        server.url,
        "-u",
        USER,
        "--ca-file",
        str(cert),
        "-e",
        "SHOW STREAMS;",
    ]
    ran = subprocess.run(
        shell,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HEADWATER_PASSWORD": PASSWORD},
    )
    assert ran.returncode == 0, ran.stderr
    refused = subprocess.run(
        shell,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HEADWATER_PASSWORD": "guess"},
    )
    assert refused.returncode == 1 and "authentication failed: Unauthorized" in refused.stderr
    assert "Traceback" not in refused.stderr
