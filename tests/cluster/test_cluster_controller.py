"""cluster/controller.py: the control plane on the in-memory embedded broker, and its pure planner.

Several ControlPlanes with different server ids share one control topic in this process; each one's
view of liveness is a set the test edits. A SIGSTOPped controller is simulated with the plane's
pause/resume hooks (its follower freezes and its decider holds the record it decided on).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from headwater.cluster.assignment import PartitionId
from headwater.cluster.control_codec import encode
from headwater.cluster.controller import ControlPlane, PlaneStatus, plan_decision
from headwater.cluster.epochs import (
    AssignmentDecision,
    ControllerClaim,
    ControlState,
    PartitionLeader,
    fold,
    fold_all,
)
from headwater.cluster.members import Member
from headwater.cluster.settings import ClusterSettings, control_topic
from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import admin_client, create_topic, producer

A, B, C = "a:1", "b:1", "c:1"
TIMEOUT_S = 15.0


def _parts(n: int, table: str = "T") -> set[PartitionId]:
    return {PartitionId(table, i) for i in range(n)}


class _Cluster:
    """Control planes on one topic, with test-controlled liveness views, partitions and lags."""

    def __init__(self, broker: EmbeddedBroker, partitions: set[PartitionId], standbys: int) -> None:
        self.kafka = broker.settings()
        self.service_id = f"ctl-{uuid.uuid4().hex[:8]}"
        self.partitions = partitions
        self.standbys = standbys
        self.lags: dict[tuple[PartitionId, str], int] = {}
        self.views: dict[str, set[str]] = {}
        self.planes: dict[str, ControlPlane] = {}
        self.observed: list[tuple[str, ControlState]] = []
        self._lock = threading.Lock()

    def add(
        self, server: str, live: set[str], ready: Callable[[], bool] | None = None
    ) -> ControlPlane:
        self.views[server] = set(live)

        def seen(state: ControlState) -> None:
            with self._lock:
                self.observed.append((server, state))

        plane = ControlPlane(
            self.kafka,
            self.service_id,
            ClusterSettings(server, num_standby_replicas=self.standbys),
            live=lambda: frozenset(self.views[server]),
            members=lambda: {s: Member(s) for s in self.views[server]},
            partitions=lambda: frozenset(self.partitions),
            lags=lambda: dict(self.lags),
            on_change=seen,
            decide_interval_ms=50,
            live_ready=ready,
        )
        self.planes[server] = plane
        plane.start()
        return plane

    def stop(self) -> None:
        for plane in self.planes.values():
            plane.stop()

    def converged(self, servers: list[str]) -> ControlState:
        """Wait until the planes of ``servers`` have folded the same records; that state."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            states = [self.planes[s].state() for s in servers]
            positions = {self.planes[s].position() for s in servers}
            if len(positions) == 1 and all(st == states[0] for st in states):
                time.sleep(0.3)  # nothing more comes (no churn)
                if {self.planes[s].position() for s in servers} == positions:
                    return states[0]
            assert time.monotonic() < deadline, f"no convergence: {states}"
            time.sleep(0.05)

    def assert_one_active_per_epoch(self) -> None:
        """No (partition, leader epoch) had two actives in any state any server observed."""
        seen: dict[tuple[PartitionId, int], str] = {}
        with self._lock:
            observed = list(self.observed)
        assert observed
        for server, state in observed:
            for p, leader in state.partitions.items():
                first = seen.setdefault((p, leader.leader_epoch), leader.active)
                assert first == leader.active, f"{server}: {p} epoch {leader.leader_epoch}"


@pytest.fixture
def cluster(memory_broker: EmbeddedBroker) -> Iterator[Callable[[set[PartitionId], int], _Cluster]]:
    made: list[_Cluster] = []

    def make(partitions: set[PartitionId], standbys: int) -> _Cluster:
        made.append(_Cluster(memory_broker, partitions, standbys))
        return made[-1]

    yield make
    for c in made:
        c.stop()


def _fully_assigned(parts: set[PartitionId], standbys: int) -> Callable[[ControlState], bool]:
    return lambda s: (
        set(s.partitions) == parts
        and all(len(l.standbys) == standbys for l in s.partitions.values())
    )


@pytest.mark.kafka
def test_cluster_controller_single_server_assigns_everything_to_itself(
    cluster: Callable[[set[PartitionId], int], _Cluster],
) -> None:
    c = cluster(_parts(4), 2)
    plane = c.add(A, {A})
    assert plane.wait_for(_fully_assigned(_parts(4), 0), TIMEOUT_S)
    state = c.converged([A])
    assert plane.is_controller() and plane.status() is PlaneStatus.RUNNING
    assert (state.controller, state.controller_epoch) == (A, 1)
    assert set(state.partitions.values()) == {PartitionLeader(A, (), 0)}
    assert [(r.writer, r.accepted) for r in plane.folded()] == [(A, True), (A, True)]


@pytest.mark.kafka
def test_cluster_controller_three_servers_spread_actives_and_standbys(
    cluster: Callable[[set[PartitionId], int], _Cluster],
) -> None:
    c = cluster(_parts(6), 1)
    for server in (A, B, C):
        c.add(server, {A, B, C})
    assert c.planes[C].wait_for(_fully_assigned(_parts(6), 1), TIMEOUT_S)
    state = c.converged([A, B, C])
    assert (state.controller, state.controller_epoch) == (A, 1)
    assert [p.is_controller() for p in c.planes.values()] == [True, False, False]
    actives = [l.active for l in state.partitions.values()]
    assert sorted(actives) == [A, A, B, B, C, C]
    assert all(l.active not in l.standbys for l in state.partitions.values())
    assert all(l.leader_epoch == 0 for l in state.partitions.values())
    claims = [r for r in c.planes[B].folded() if isinstance(r.record, ControllerClaim)]
    assert [(r.writer, r.accepted) for r in claims] == [(A, True)]
    c.assert_one_active_per_epoch()


@pytest.mark.kafka
def test_cluster_controller_failover_promotes_the_most_caught_up_standby(
    cluster: Callable[[set[PartitionId], int], _Cluster],
) -> None:
    c = cluster(_parts(6), 2)
    for server in (A, B, C):
        c.add(server, {A, B, C})
    assert c.planes[B].wait_for(_fully_assigned(_parts(6), 2), TIMEOUT_S)
    before = c.converged([A, B, C])
    first, second = sorted(p for p, l in before.partitions.items() if l.active == A)
    c.lags.update({(first, B): 0, (first, C): 7, (second, B): 9, (second, C): 1})

    c.planes[A].stop()  # the controller's server dies ...
    c.views[B].discard(A)  # ... and the others mark it down
    c.views[C].discard(A)
    assert c.planes[C].wait_for(
        lambda s: (
            s.controller == B and all(A not in l.replicas.servers for l in s.partitions.values())
        ),
        TIMEOUT_S,
    )
    after = c.converged([B, C])
    assert after.controller_epoch == 2
    assert after.partitions[first].active == B and after.partitions[second].active == C
    for p, leader in after.partitions.items():
        old = before.partitions[p]
        moved = p in (first, second)
        assert leader.leader_epoch == old.leader_epoch + (1 if moved else 0)
        assert leader.active == old.active or moved
        assert len(leader.standbys) == 1 and leader.active not in leader.standbys
    c.assert_one_active_per_epoch()


@pytest.mark.kafka
def test_a_restarted_server_decides_nothing_before_it_knows_who_is_alive(
    cluster: Callable[[set[PartitionId], int], _Cluster],
) -> None:
    # A restarted server has heard from no peer yet: its view names only itself. Were it to act on
    # that view, it (the smallest id) would claim the controller role and assign every partition to
    # itself without standbys (seen in test_cluster_failover: pull queries failed with LAG_UNKNOWN).
    c = cluster(_parts(6), 1)
    for server in (B, C):
        c.add(server, {B, C})
    assert c.planes[C].wait_for(_fully_assigned(_parts(6), 1), TIMEOUT_S)
    before = c.converged([B, C])
    assert before.controller == B

    ready = threading.Event()
    restarted = c.add(A, {A}, ready.is_set)
    assert restarted.wait_caught_up(TIMEOUT_S)
    # Long enough for a claim to be appended and folded (its producer's first send included).
    claimed = restarted.wait_for(lambda s: s.controller == A, 2.0)
    assert not claimed and restarted.state() == before
    assert all(r.writer != A for r in restarted.folded())

    c.views[A] = {A, B, C}  # its peers heard from: the controller is alive
    c.views[B].add(A)
    c.views[C].add(A)
    c.lags.update({(p, A): 0 for p in _parts(6)})  # its stores are caught up
    ready.set()
    assert c.planes[B].wait_for(
        lambda s: sum(l.active == A for l in s.partitions.values()) == 2, TIMEOUT_S
    )
    after = c.converged([A, B, C])
    assert after.controller == B and after.controller_epoch == before.controller_epoch
    assert all(len(l.standbys) == 1 for l in after.partitions.values())
    assert all(r.writer != A for r in restarted.folded())
    c.assert_one_active_per_epoch()


@pytest.mark.kafka
def test_cluster_controller_a_stale_controller_cannot_change_anything(
    cluster: Callable[[set[PartitionId], int], _Cluster],
) -> None:
    c = cluster(_parts(3), 1)
    for server in (A, B, C):
        c.add(server, {A, B, C})
    assert c.planes[B].wait_for(_fully_assigned(_parts(3), 1), TIMEOUT_S)
    c.converged([A, B, C])

    # SIGSTOP the controller just as it decides to place a new table's partition.
    assert c.planes[A].pause()
    new = PartitionId("NEW", 0)
    c.partitions.add(new)
    deadline = time.monotonic() + TIMEOUT_S
    while not c.planes[A].holding():
        assert time.monotonic() < deadline, "the paused controller never decided"
        time.sleep(0.02)
    # Meanwhile the others mark it down; one takes over and places the partition itself.
    c.views[B].discard(A)
    c.views[C].discard(A)
    assert c.planes[B].wait_for(lambda s: s.controller == B and new in s.partitions, TIMEOUT_S)
    taken_over = c.converged([B, C])
    assert all(l.active != A for l in taken_over.partitions.values())

    c.planes[A].resume()  # SIGCONT: it appends what it decided on its old state
    final = c.converged([A, B, C])
    assert final == replace(taken_over, last_record_offset=final.last_record_offset)
    assert not c.planes[A].is_controller() and c.planes[B].is_controller()
    for plane in c.planes.values():
        after = taken_over.last_record_offset
        stale = [r for r in plane.folded() if r.writer == A and r.offset > after]
        assert len(stale) == 1 and isinstance(stale[0].record, AssignmentDecision)
        assert new in stale[0].record.assignment and not stale[0].accepted
        assert stale[0].reason.startswith(("conflict", "stale controller")), stale[0].reason
    histories = {tuple((r.offset, r.accepted) for r in p.folded()) for p in c.planes.values()}
    assert len(histories) == 1  # every server accepted and ignored the same records
    c.assert_one_active_per_epoch()


@pytest.mark.kafka
def test_cluster_controller_unreadable_record_degrades_without_skipping(
    memory_broker: EmbeddedBroker,
) -> None:
    kafka = memory_broker.settings()
    service = f"ctl-{uuid.uuid4().hex[:8]}"
    create_topic(admin_client(kafka), kafka, control_topic(service), 1)
    writer = producer(kafka, "test-writer")
    writer.produce(control_topic(service), encode(ControllerClaim("z:1", 1, 0)), b"z:1")
    writer.produce(control_topic(service), b'{"v":99,"type":"claim"}', b"z:1")
    writer.flush(10)
    plane = ControlPlane(
        kafka,
        service,
        ClusterSettings(A),
        live=lambda: {A},
        members=dict,
        partitions=lambda: _parts(2),
        lags=dict,
        decide_interval_ms=20,
    )
    plane.start()
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while plane.status() is not PlaneStatus.DEGRADED:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert "offset 1" in plane.reason() and "format 99" in plane.reason()
        assert not plane.wait_for(lambda s: s.controller == A, 0.5)  # never claims
        assert plane.position() == 1 and plane.state().controller == "z:1"
        assert not plane.is_controller()
    finally:
        plane.stop()
    assert plane.status() is PlaneStatus.STOPPED


# -- the pure planner ------------------------------------------------------------------------------

P0, P1 = PartitionId("T", 0), PartitionId("T", 1)


def _state(*leaders: tuple[PartitionId, PartitionLeader], controller: str = A) -> ControlState:
    return fold_all(
        [(0, ControllerClaim(controller, 1, 0)), (1, AssignmentDecision(1, 1, dict(leaders)))]
    )


def test_cluster_controller_plan_is_none_unless_controller_and_something_changes() -> None:
    state = _state((P0, PartitionLeader(A, (B,), 0)), (P1, PartitionLeader(B, (A,), 0)))
    settings = ClusterSettings(A, num_standby_replicas=1)
    assert plan_decision(state, settings, {A, B}, {}, {P0, P1}, {}, 2) is None
    assert plan_decision(state, ClusterSettings(B), {A, B}, {}, {P0, P1}, {}, 2) is None


def test_cluster_controller_plan_promotes_bumps_and_removes_dropped_partitions() -> None:
    state = _state((P0, PartitionLeader(B, (A, C), 4)), (P1, PartitionLeader(A, (B,), 0)))
    settings = ClusterSettings(A, num_standby_replicas=1)
    lags = {(P0, A): 5, (P0, C): 0}
    plan = plan_decision(state, settings, {A, C}, {}, {P0}, lags, 2)  # P1's table was dropped
    assert plan == AssignmentDecision(1, 2, {P0: PartitionLeader(C, (A,), 5)}, frozenset({P1}))
    assert plan is not None
    folded, accepted, _ = fold(state, 3, plan)
    assert accepted and set(folded.partitions) == {P0}  # the control state forgets P1


def test_cluster_controller_plan_removes_a_dropped_table_even_when_nothing_else_changes() -> None:
    state = _state((P0, PartitionLeader(A, (), 0)), (P1, PartitionLeader(A, (), 0)))
    plan = plan_decision(state, ClusterSettings(A), {A}, {}, {P0}, {}, 2)
    assert plan == AssignmentDecision(1, 2, {}, frozenset({P1}))
    assert plan_decision(state, ClusterSettings(A), {A}, {}, {P0, P1}, {}, 2) is None


def test_a_returning_server_warms_up_as_a_standby_before_it_takes_an_active_back() -> None:
    # A holds six actives, B their (caught-up) standbys; C returns: balancing gives it two
    parts = [PartitionId("W", i) for i in range(6)]
    state = _state(*((p, PartitionLeader(A, (B,), 0)) for p in parts))
    settings = ClusterSettings(A, num_standby_replicas=1)
    lags = {(p, B): 0 for p in parts}
    cold = plan_decision(state, settings, {A, B, C}, {}, parts, lags, 2)
    assert cold is not None
    folded, accepted, _ = fold(state, 3, cold)
    assert accepted
    actives = [leader.active for leader in folded.partitions.values()]
    assert actives.count(B) == 2 and C not in actives  # the warm standby takes its share at once
    warming = [p for p, leader in folded.partitions.items() if C in leader.standbys]
    assert len(warming) >= 2  # C restores as a standby first
    # once C's stores have caught up, the next decision hands it its share
    caught_up = {**lags, **{(p, C): 3 for p in warming}}
    warm = plan_decision(folded, settings, {A, B, C}, {}, parts, caught_up, 4)
    assert warm is not None
    moved, _, _ = fold(folded, 5, warm)
    assert [leader.active for leader in moved.partitions.values()].count(C) == 2


def test_without_standbys_an_active_moves_at_once() -> None:
    parts = [PartitionId("W", i) for i in range(4)]
    state = _state(*((p, PartitionLeader(A, (), 0)) for p in parts))
    plan = plan_decision(
        state, ClusterSettings(A, num_standby_replicas=0), {A, C}, {}, parts, {}, 2
    )
    assert plan is not None and [leader.active for leader in plan.assignment.values()].count(C) == 2
