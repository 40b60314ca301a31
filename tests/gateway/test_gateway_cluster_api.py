"""gateway.cluster_api: /heartbeat, /lag and /clusterStatus in-process, and internal auth (401s).

The agent is a real ClusterAgent that is never started (no Kafka, no threads), with a clock the
test moves; the app is built from the cluster routes over a Services-like namespace.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.applications import Starlette

from headwater.cluster import auth
from headwater.cluster.agent import ClusterAgent, wall_clock_ms
from headwater.cluster.assignment import PartitionId
from headwater.cluster.epochs import ControlState, PartitionLeader
from headwater.cluster.settings import ClusterSettings
from headwater.gateway.app import EXCEPTION_HANDLERS
from headwater.gateway.cluster_api import CLUSTER_ROUTES, active_standby_per_query
from headwater.kafka.clients import KafkaSettings
from headwater.store.lag import LagInfo

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette wants httpx2 for its TestClient
    from starlette.testclient import TestClient

SELF = "127.0.0.1:9001"
PEER = "127.0.0.1:9002"
SECRET = "s3cret"
LAG_HEAD = b'{"hostInfo": {"host": "h", "port": 1}, "timestamp": 1, "lagInfo": '


class FakeClock:
    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


class FakeControl:
    def __init__(self, state: ControlState) -> None:
        self._state = state

    def state(self) -> ControlState:
        return self._state


def make_agent(clock: FakeClock, secret: str | None = None) -> ClusterAgent:
    local = {"USERS": {0: LagInfo(7, 10, 3), 1: LagInfo(4, 4, 0)}}
    return ClusterAgent(
        KafkaSettings("127.0.0.1:1"),
        "api",
        ClusterSettings(SELF, auth_secret=secret),
        lambda: local,
        clock_ms=clock,
    )


def client_for(services: object) -> TestClient:
    app = Starlette(routes=CLUSTER_ROUTES, exception_handlers=EXCEPTION_HANDLERS)
    app.state.services = services
    return TestClient(app)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def agent(clock: FakeClock) -> ClusterAgent:
    return make_agent(clock)


@pytest.fixture
def client(agent: ClusterAgent) -> Iterator[TestClient]:
    with client_for(SimpleNamespace(cluster=agent)) as test_client:
        yield test_client


def heartbeat(sender: str = PEER, timestamp: int = 5) -> dict[str, Any]:
    host, port = sender.rsplit(":", 1)
    return {"hostInfo": {"host": host, "port": int(port)}, "timestamp": timestamp}


def lag_report(sender: str = PEER, timestamp: int = 5, end: int = 12) -> dict[str, Any]:
    body = heartbeat(sender, timestamp)
    body["lagInfo"] = {"USERS": {"0": {"current": end, "end": end, "lag": 0}}}
    return body


def signed_post(
    client: TestClient,
    path: str,
    body: Any,
    *,
    secret: str = SECRET,
    at_ms: int | None = None,
    signed_body: bytes | None = None,
) -> Any:
    content = json.dumps(body).encode()
    now = wall_clock_ms() if at_ms is None else at_ms
    header = auth.sign(secret, now, "POST", path, content if signed_body is None else signed_body)
    return client.post(path, content=content, headers={auth.HEADER: header})


def test_heartbeat_is_recorded_and_decided(
    client: TestClient, agent: ClusterAgent, clock: FakeClock
) -> None:
    for _ in range(3):
        answer = client.post("/heartbeat", json=heartbeat())
        assert answer.status_code == 200 and answer.json() == {"isOk": True}
    agent.check()
    status = agent.statuses()[PEER]
    assert status.alive and status.last_heartbeat_ms == clock.now_ms
    assert agent.live() == {SELF, PEER}
    clock.now_ms += 301  # three send intervals missed
    agent.check()
    assert not agent.statuses()[PEER].alive and agent.live() == {SELF}


def test_lag_report_is_merged_with_max_end(client: TestClient, agent: ClusterAgent) -> None:
    assert client.post("/lag", json=lag_report(end=12)).json() == {"isOk": True}
    assert agent.host_lags()[PEER] == {"USERS": {0: LagInfo(12, 12, 0)}}
    lags = agent.replica_lags("USERS", 0)
    assert (lags[SELF].position, lags[SELF].end_offset) == (7, 12)
    assert (lags[PEER].position, lags[PEER].end_offset) == (12, 12)
    assert set(agent.replica_lags("USERS", 1)) == {SELF}
    # An older report overtaken in flight does not replace the newer one.
    client.post("/lag", json=lag_report(timestamp=4, end=3))
    assert agent.host_lags()[PEER]["USERS"][0].end_offset_position == 12


@pytest.mark.parametrize(
    ("path", "content", "fragment"),
    [
        ("/heartbeat", b"not json", "not valid JSON"),
        ("/heartbeat", b"[]", "JSON object"),
        ("/heartbeat", b'{"timestamp": 1}', "hostInfo"),
        ("/heartbeat", b'{"hostInfo": {"host": "h", "port": 0}, "timestamp": 1}', "port"),
        ("/heartbeat", b'{"hostInfo": {"host": "h", "port": 1}}', "timestamp"),
        ("/lag", b'{"hostInfo": {"host": "h", "port": 1}, "timestamp": 1}', "lagInfo"),
        ("/lag", LAG_HEAD + b'{"T": {"x": {"current": 1, "end": 1, "lag": 0}}}}', "no number"),
        ("/lag", LAG_HEAD + b'{"T": {"0": {"current": -1, "end": 1, "lag": 0}}}}', ">= 0"),
    ],
)
def test_malformed_bodies_are_400(
    client: TestClient, agent: ClusterAgent, path: str, content: bytes, fragment: str
) -> None:
    answer = client.post(path, content=content)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error_code"] == 40000 and fragment in answer.json()["message"]
    assert agent.peers() == frozenset() and set(agent.lag_reports()) == {SELF}


@pytest.mark.parametrize("path", ["/heartbeat", "/lag"])
@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("missing", "missing"),
        ("wrong secret", "bad signature"),
        ("other body", "bad signature"),
        ("too old", "too far"),
        ("garbage", "malformed"),
    ],
)
def test_unauthenticated_requests_are_401_and_change_nothing(
    clock: FakeClock, path: str, case: str, reason: str
) -> None:
    agent = make_agent(clock, SECRET)
    body = lag_report()
    with client_for(SimpleNamespace(cluster=agent)) as client:
        if case == "missing":
            answer = client.post(path, json=body)
        elif case == "wrong secret":
            answer = signed_post(client, path, body, secret="guess")
        elif case == "other body":
            answer = signed_post(client, path, body, signed_body=b"{}")
        elif case == "too old":
            answer = signed_post(client, path, body, at_ms=wall_clock_ms() - 60_000)
        else:
            answer = client.post(path, json=body, headers={auth.HEADER: "t=1,sig=zz"})
    assert answer.status_code == 401, answer.text
    assert answer.json()["error_code"] == 40100 and reason in answer.json()["message"]
    assert agent.peers() == frozenset() and set(agent.lag_reports()) == {SELF}


def test_signed_requests_pass(clock: FakeClock) -> None:
    agent = make_agent(clock, SECRET)
    with client_for(SimpleNamespace(cluster=agent)) as client:
        assert signed_post(client, "/heartbeat", heartbeat()).status_code == 200
        assert signed_post(client, "/lag", lag_report()).status_code == 200
        # A signature for /lag does not authorize the same body on /heartbeat.
        content = json.dumps(heartbeat()).encode()
        header = auth.sign(SECRET, wall_clock_ms(), "POST", "/lag", content)
        replayed = client.post("/heartbeat", content=content, headers={auth.HEADER: header})
    assert replayed.status_code == 401
    assert agent.peers() == {PEER} and PEER in agent.host_lags()


def test_cluster_status_shape(clock: FakeClock) -> None:
    agent = make_agent(clock)
    leader = PartitionLeader(active=SELF, standbys=(PEER,), leader_epoch=1)
    state = ControlState(
        controller=SELF, controller_epoch=1, partitions={PartitionId("USERS", 1): leader}
    )
    with client_for(SimpleNamespace(cluster=agent, control=FakeControl(state))) as client:
        client.post("/heartbeat", json=heartbeat())
        client.post("/lag", json=lag_report())
        agent.check()
        body = client.get("/clusterStatus").json()
    hosts = body["clusterStatus"]
    assert set(hosts) == {SELF, PEER}
    me, peer = hosts[SELF], hosts[PEER]
    assert me["hostAlive"] is True and me["lastStatusUpdateMs"] == clock.now_ms
    assert me["activeStandbyPerQuery"] == {
        "USERS": {
            "activeStores": ["USERS"],
            "activePartitions": [{"topic": "USERS", "partition": 1}],
            "standByStores": [],
            "standByPartitions": [],
        }
    }
    assert peer["activeStandbyPerQuery"]["USERS"]["standByPartitions"] == [
        {"topic": "USERS", "partition": 1}
    ]
    assert me["hostStoreLags"] == {
        "stateStoreLags": {
            "USERS": {
                "lagByPartition": {
                    "0": {"currentOffsetPosition": 7, "endOffsetPosition": 10, "offsetLag": 3},
                    "1": {"currentOffsetPosition": 4, "endOffsetPosition": 4, "offsetLag": 0},
                },
                "size": 2,
            }
        },
        "updateTimeMs": clock.now_ms,
    }
    assert peer["hostAlive"] is True and peer["lastStatusUpdateMs"] == clock.now_ms
    assert peer["hostStoreLags"]["stateStoreLags"]["USERS"]["size"] == 1


def test_cluster_status_without_control_or_reports(clock: FakeClock) -> None:
    agent = make_agent(clock)
    with client_for(SimpleNamespace(cluster=agent, control=None)) as client:
        client.post("/heartbeat", json=heartbeat())
        agent.check()
        hosts = client.get("/clusterStatus").json()["clusterStatus"]
    assert hosts[PEER]["activeStandbyPerQuery"] == {}
    assert hosts[PEER]["hostStoreLags"] == {"stateStoreLags": {}, "updateTimeMs": 0}
    assert active_standby_per_query(None) == {}


def test_no_cluster_agent_is_404() -> None:
    with client_for(SimpleNamespace()) as client:
        answers = [client.post("/heartbeat", json=heartbeat()), client.get("/clusterStatus")]
    assert [a.status_code for a in answers] == [404, 404]
    assert answers[0].json()["error_code"] == 40400


@pytest.mark.parametrize("path", ["/heartbeat", "/lag"])
def test_oversized_bodies_are_413_before_they_are_buffered(
    client: TestClient, agent: ClusterAgent, path: str
) -> None:
    answer = client.post(path, content=b"{" + b" " * (2 * 1024 * 1024) + b"}")
    assert answer.status_code == 413 and answer.json()["error_code"] == 41300
    assert agent.peers() == frozenset()
