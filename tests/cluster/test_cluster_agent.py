"""cluster.agent on the memory broker: agents in one process talking over real HTTP (uvicorn).

Each node is a ClusterAgent plus the gateway's cluster routes served by uvicorn in a thread on a
free loopback port. Covered: discovery through the members topic, seed peers, detection of a
stopped peer (within 1 s), recovery after ``received_threshold`` heartbeats, the lag merge, and
signed traffic with an intruder refused. One test kills a peer process with SIGKILL.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette

from headwater.cluster.agent import ClusterAgent
from headwater.cluster.liveness import HostStatus
from headwater.cluster.settings import ClusterSettings
from headwater.gateway.app import EXCEPTION_HANDLERS
from headwater.gateway.cluster_api import CLUSTER_ROUTES
from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import KafkaSettings
from headwater.store.lag import LagInfo

pytestmark = pytest.mark.kafka


@dataclass
class Node:
    """One server: an agent, its HTTP endpoints on uvicorn, and the lags it reports."""

    agent: ClusterAgent
    services: SimpleNamespace
    server: uvicorn.Server
    thread: threading.Thread
    sock: socket.socket
    lags: dict[str, dict[int, LagInfo]] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.agent.self_id

    def stop(self) -> None:
        self.agent.stop()
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


NodeFactory = Callable[..., Node]


@pytest.fixture
def service_id() -> str:
    return f"agent-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def make_node(memory_broker: EmbeddedBroker, service_id: str) -> Iterator[NodeFactory]:
    """``make_node(service_id=..., peers=(), secret=None)``: a started node; all stopped after."""
    nodes: list[Node] = []

    def make(
        *, service: str | None = None, peers: tuple[str, ...] = (), secret: str | None = None
    ) -> Node:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self_id = f"127.0.0.1:{sock.getsockname()[1]}"
        lags: dict[str, dict[int, LagInfo]] = {}
        settings = ClusterSettings(self_id, peers=peers, auth_secret=secret)
        agent = start_agent(memory_broker.settings(), service or service_id, settings, lags)
        services = SimpleNamespace(cluster=agent)
        app = Starlette(routes=CLUSTER_ROUTES, exception_handlers=EXCEPTION_HANDLERS)
        app.state.services = services
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        until(lambda: server.started, what="uvicorn to start")
        node = Node(agent, services, server, thread, sock, lags)
        nodes.append(node)
        return node

    yield make
    for node in nodes:
        node.stop()


def start_agent(
    kafka: KafkaSettings,
    service: str,
    settings: ClusterSettings,
    lags: Mapping[str, Mapping[int, LagInfo]],
) -> ClusterAgent:
    agent = ClusterAgent(kafka, service, settings, lambda: lags, announce_interval_ms=500)
    agent.start()
    return agent


def until(condition: Callable[[], Any], *, timeout_s: float = 15, what: str = "") -> float:
    """Poll every 5 ms until ``condition()`` is true; the seconds it took."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout_s, f"timed out waiting for {what}"
        time.sleep(0.005)
    return time.monotonic() - start


def sees_alive(node: Node, *others: Node) -> bool:
    return {o.id for o in others} <= node.agent.live()


def test_three_servers_discover_each_other_through_the_members_topic(
    make_node: NodeFactory,
) -> None:
    nodes = [make_node() for _ in range(3)]
    ids = {n.id for n in nodes}
    until(lambda: all(set(n.agent.members()) == ids for n in nodes), what="membership")

    def heard_from_all(node: Node) -> bool:
        statuses = node.agent.statuses()
        return set(statuses) == ids and all(s.last_heartbeat_ms for s in statuses.values())

    took = until(lambda: all(heard_from_all(n) for n in nodes), what="heartbeats from all")
    assert all(n.agent.live() == ids for n in nodes)
    print(f"\nheartbeats from all {took * 1000:.0f} ms after every member was known")


def test_seed_peers_are_heartbeated_before_they_announce(make_node: NodeFactory) -> None:
    lonely = make_node(service=f"other-{uuid.uuid4().hex[:8]}")
    seeded = make_node(peers=(f"http://{lonely.id}",))
    until(lambda: sees_alive(lonely, seeded) and sees_alive(seeded, lonely), what="seed contact")
    # Neither announced on the other's members topic: the seed and its heartbeats did it.
    assert lonely.id not in seeded.agent.members() and seeded.id not in lonely.agent.members()
    assert lonely.id in seeded.agent.peers() and seeded.id in lonely.agent.peers()


def test_stopped_peer_is_down_within_a_second(make_node: NodeFactory) -> None:
    watcher, victim, bystander = make_node(), make_node(), make_node()
    until(lambda: sees_alive(watcher, victim, bystander), what="all alive")
    time.sleep(0.5)  # steady state
    killed_at = time.monotonic()
    victim.stop()  # sends nothing more, and its endpoints are gone
    until(lambda: victim.id not in watcher.agent.live(), timeout_s=5, what="down")
    took = time.monotonic() - killed_at
    status = watcher.agent.statuses()[victim.id]
    assert status.last_heartbeat_ms is not None
    since_last = status.since_ms - status.last_heartbeat_ms
    print(f"\ndown {took * 1000:.0f} ms after the stop, {since_last} ms after its last heartbeat")
    assert took < 1.0
    assert since_last <= 600
    # The dead peer delays nobody: the bystander stays alive to the watcher throughout.
    for _ in range(20):
        assert bystander.id in watcher.agent.live()
        time.sleep(0.05)


def test_a_hung_peer_delays_no_heartbeat_to_the_others(make_node: NodeFactory) -> None:
    with socket.socket() as hung:  # accepts connections (the kernel does) and never answers
        hung.bind(("127.0.0.1", 0))
        hung.listen(64)
        hung_id = f"127.0.0.1:{hung.getsockname()[1]}"
        watcher = make_node(peers=(hung_id,))
        bystander = make_node()
        until(lambda: sees_alive(bystander, watcher), what="alive")
        until(lambda: hung_id in watcher.agent.statuses(), what="the seed decided")
        deadline = time.monotonic() + 2.5  # longer than one request timeout (2 s)
        while time.monotonic() < deadline:
            assert watcher.id in bystander.agent.live()
            time.sleep(0.02)
        assert hung_id not in watcher.agent.live()


def post_heartbeat(to: Node, sender: str) -> None:
    host, port = sender.rsplit(":", 1)
    body = {"hostInfo": {"host": host, "port": int(port)}, "timestamp": 0}
    assert httpx.post(f"http://{to.id}/heartbeat", json=body, timeout=5).status_code == 200


def test_down_peer_is_up_again_after_received_threshold_heartbeats(
    make_node: NodeFactory, memory_broker: EmbeddedBroker, service_id: str
) -> None:
    watcher, peer = make_node(), make_node()
    until(lambda: sees_alive(watcher, peer), what="alive")
    peer.agent.stop()
    until(lambda: peer.id not in watcher.agent.live(), timeout_s=5, what="down")
    post_heartbeat(watcher, peer.id)
    assert not watcher.agent.check()[peer.id].alive  # one stray heartbeat does not flap it up
    time.sleep(0.1)
    post_heartbeat(watcher, peer.id)
    assert watcher.agent.check()[peer.id].alive  # the second in a row does
    # And a real restart of the peer's agent (same id) comes back on its own heartbeats.
    time.sleep(0.5)
    assert peer.id not in watcher.agent.live()
    restarted = start_agent(memory_broker.settings(), service_id, peer.agent.settings, peer.lags)
    peer.agent = peer.services.cluster = restarted
    took = until(lambda: peer.id in watcher.agent.live(), timeout_s=5, what="back up")
    print(f"\nup again {took * 1000:.0f} ms after the restart")
    assert took < 1.5


def test_a_server_not_listening_yet_finds_no_peer_dead(
    make_node: NodeFactory, memory_broker: EmbeddedBroker, service_id: str
) -> None:
    # A restarted server starts its agent before its HTTP server listens: its peers' heartbeats
    # cannot reach it meanwhile. Deciding anyway, it found them dead 0.3 s later and (the
    # smallest id) claimed the controller with every partition to itself (CI47).
    peer = make_node()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))  # bound, not listening: the peer's heartbeats are refused
    self_id = f"127.0.0.1:{sock.getsockname()[1]}"
    agent = ClusterAgent(
        memory_broker.settings(),
        service_id,
        ClusterSettings(self_id),
        dict,
        announce_interval_ms=500,
        accepting=False,
    )
    agent.start()
    server: uvicorn.Server | None = None
    thread: threading.Thread | None = None
    try:
        assert agent.wait_members_read(10)
        until(lambda: peer.id in agent.members(), what="the peer's announcement")
        time.sleep(1.0)  # > missed_threshold * send_interval: long enough to find it dead
        assert peer.id not in agent.statuses() and not agent.view_ready()
        assert agent.live() == {self_id}
        # nor does it tell its peers it is alive: they would route to a refused connection
        assert self_id not in peer.agent.live()
        assert not peer.agent.statuses().get(self_id, HostStatus(False, None, 0)).alive

        app = Starlette(routes=CLUSTER_ROUTES, exception_handlers=EXCEPTION_HANDLERS)
        app.state.services = SimpleNamespace(cluster=agent)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        until(lambda: server is not None and server.started, what="uvicorn to start")
        agent.accepting()
        assert agent.view_ready() and agent.live() == {self_id, peer.id}
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:  # heard from now on: never down
            assert peer.id in agent.live()
            time.sleep(0.02)
        assert agent.statuses()[peer.id].last_heartbeat_ms is not None
        until(lambda: self_id in peer.agent.live(), what="the peer to hear from it")
    finally:
        agent.stop()
        if server is not None and thread is not None:
            server.should_exit = True
            thread.join(timeout=10)
        sock.close()


def test_lag_reports_merge_with_the_highest_end_offset(make_node: NodeFactory) -> None:
    a, b, c = make_node(), make_node(), make_node()
    a.lags["T"] = {0: LagInfo(5, 10, 5), 1: LagInfo(3, 3, 0)}
    b.lags["T"] = {0: LagInfo(12, 12, 0)}
    c.lags["T"] = {0: LagInfo(8, 8, 0)}
    until(lambda: all(len(n.agent.replica_lags("T", 0)) == 3 for n in (a, b, c)), what="lags")
    for node in (a, b, c):
        lags = node.agent.replica_lags("T", 0)
        assert {h: (lag.position, lag.end_offset) for h, lag in lags.items()} == {
            a.id: (5, 12),
            b.id: (12, 12),
            c.id: (8, 12),
        }
        assert set(node.agent.replica_lags("T", 1)) == {a.id}
    b.lags["T"] = {0: LagInfo(20, 20, 0)}
    until(lambda: a.agent.replica_lags("T", 0)[c.id].end_offset == 20, what="new end")
    status = httpx.get(f"http://{c.id}/clusterStatus", timeout=5).json()["clusterStatus"]
    assert set(status) == {a.id, b.id, c.id} and all(s["hostAlive"] for s in status.values())
    partition = status[a.id]["hostStoreLags"]["stateStoreLags"]["T"]["lagByPartition"]["0"]
    assert partition == {"currentOffsetPosition": 5, "endOffsetPosition": 10, "offsetLag": 5}


def test_signed_traffic_passes_and_an_intruder_is_refused(make_node: NodeFactory) -> None:
    a, b = make_node(secret="s3cret"), make_node(secret="s3cret")
    intruder = make_node(secret="guess")
    a.lags["T"] = {0: LagInfo(1, 1, 0)}
    intruder.lags["T"] = {0: LagInfo(999, 999, 0)}
    until(lambda: sees_alive(a, b) and sees_alive(b, a), what="signed heartbeats")
    until(lambda: b.id in a.agent.members() and intruder.id in a.agent.members(), what="members")
    time.sleep(1.0)  # the intruder was optimistically alive when first seen; now it is judged
    for node in (a, b):
        assert intruder.id not in node.agent.live() and intruder.id in node.agent.statuses()
        assert intruder.id not in node.agent.host_lags()
    assert a.id in b.agent.host_lags()


# A peer in its own process: an agent and the cluster routes on uvicorn, until killed.
PEER_PROCESS = """
import sys
from types import SimpleNamespace

import uvicorn
from starlette.applications import Starlette

from headwater.cluster.agent import ClusterAgent
from headwater.cluster.liveness import HostStatus
from headwater.cluster.settings import ClusterSettings
from headwater.gateway.app import EXCEPTION_HANDLERS
from headwater.gateway.cluster_api import CLUSTER_ROUTES
from headwater.kafka.clients import KafkaSettings

bootstrap, service, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
agent = ClusterAgent(KafkaSettings(bootstrap, replication_factor=1), service,
                     ClusterSettings(f"127.0.0.1:{port}"), lambda: {})
agent.start()
app = Starlette(routes=CLUSTER_ROUTES, exception_handlers=EXCEPTION_HANDLERS)
app.state.services = SimpleNamespace(cluster=agent)
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_killed_peer_process_is_down_within_a_second(
    make_node: NodeFactory, memory_broker: EmbeddedBroker, service_id: str
) -> None:
    watcher, bystander = make_node(), make_node()
    took_ms: list[int] = []
    for _ in range(3):
        port = free_port()
        peer = subprocess.Popen(
            [
                sys.executable,
                "-c",
                PEER_PROCESS,
                memory_broker.bootstrap_servers,
                service_id,
                str(port),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        peer_id = f"127.0.0.1:{port}"

        def heard(peer_id: str = peer_id) -> bool:
            status = watcher.agent.statuses().get(peer_id)
            return status is not None and status.alive and status.last_heartbeat_ms is not None

        try:
            until(heard, timeout_s=30, what="the peer process")
            time.sleep(0.3)
            killed_at = time.monotonic()
            peer.kill()  # SIGKILL, by process id
            until(lambda: not heard(), timeout_s=5, what="down")
            took_ms.append(round((time.monotonic() - killed_at) * 1000))
        finally:
            if peer.poll() is None:
                peer.kill()
            peer.wait(10)
        assert bystander.id in watcher.agent.live()
    print(f"\nkill -9 to down, three runs: {took_ms} ms")
    assert max(took_ms) < 1000
