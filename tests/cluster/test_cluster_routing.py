"""cluster/routing.py: which replicas may answer a pull query, in which order, or why none can."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.cluster.assignment import PartitionId, Replicas
from headwater.cluster.routing import (
    NoReplica,
    ReplicaLag,
    ReplicaState,
    ReplicaView,
    Role,
    RoutePlan,
    RoutingBound,
    route,
    strictest,
)

P = PartitionId("ORDERS", 3)
R = Replicas("a", ("b", "c"))
ALL = {"a": True, "b": True, "c": True}
NO_A = {"a": False, "b": True, "c": True}
# The partition ends at 100: a is caught up, b is 10 behind (50 ms stale), c 5 behind (20 ms).
LAGS = {
    "a": ReplicaLag(100, 100, 0),
    "b": ReplicaLag(90, 100, 50),
    "c": ReplicaLag(95, 100, 20),
}
NONE = RoutingBound()


def _hosts(
    alive: dict[str, bool] = ALL,
    lags: dict[str, ReplicaLag] = LAGS,
    bound: RoutingBound = NONE,
    self_id: str = "z",
    replicas: Replicas = R,
) -> tuple[str, ...] | NoReplica:
    result = route(P, replicas, alive, lags, bound, self_id)
    return result.hosts if isinstance(result, RoutePlan) else result


@pytest.mark.parametrize(
    ("alive", "lags", "bound", "self_id", "expected"),
    [
        (ALL, LAGS, NONE, "z", ("a", "c", "b")),  # the active, then standbys by lag
        (NO_A, LAGS, NONE, "z", ("c", "b")),  # a dead active is skipped
        ({"b": True, "c": True}, LAGS, NONE, "z", ("c", "b")),  # unknown liveness is down
        (NO_A, LAGS, RoutingBound(max_offset_lag=5), "z", ("c",)),  # lag 5 is within 5
        (ALL, {**LAGS, "a": ReplicaLag(80, 100, 900)}, RoutingBound(8), "z", ("c",)),
        (ALL, LAGS, RoutingBound(max_staleness_ms=30), "z", ("a", "c")),  # b is 50 ms stale
        (ALL, {**LAGS, "c": ReplicaLag(95, 100)}, RoutingBound(max_staleness_ms=30), "z", ("a",)),
        (NO_A, {**LAGS, "b": ReplicaLag(100, 100)}, RoutingBound(max_staleness_ms=0), "z", ("b",)),
        (ALL, LAGS, RoutingBound(min_position=96), "z", ("a",)),  # read-your-writes
        (NO_A, LAGS, RoutingBound(min_position=95), "z", ("c",)),
        ({}, LAGS, NONE, "b", ("b",)),  # this server is always alive to itself
    ],
)
def test_route_rules(
    alive: dict[str, bool],
    lags: dict[str, ReplicaLag],
    bound: RoutingBound,
    self_id: str,
    expected: tuple[str, ...],
) -> None:
    assert _hosts(alive, lags, bound, self_id) == expected


def test_the_active_goes_first_even_when_a_standby_is_as_caught_up() -> None:
    caught_up = {h: ReplicaLag(100, 100, 0) for h in "abc"}
    assert _hosts(lags=caught_up, self_id="c") == ("a", "c", "b")


@pytest.mark.parametrize(("self_id", "expected"), [("z", ("a", "b", "c")), ("c", ("a", "c", "b"))])
def test_among_standbys_of_equal_lag_this_server_goes_first_then_by_id(
    self_id: str, expected: tuple[str, ...]
) -> None:
    equal = {**LAGS, "b": ReplicaLag(95, 100, 20)}
    assert _hosts(lags=equal, self_id=self_id) == expected


def test_lag_is_measured_against_the_highest_end_any_replica_reported() -> None:
    old_report = {**LAGS, "b": ReplicaLag(90, 90, 0)}  # b thinks it is caught up
    result = route(P, R, NO_A, old_report, RoutingBound(max_offset_lag=5), "z")
    assert isinstance(result, RoutePlan) and result.hosts == ("c",)
    assert result.skipped[1] == ReplicaView("b", Role.STANDBY, ReplicaState.TOO_FAR_BEHIND, 90, 10)
    # Its "0 ms stale" was measured against its old end: unknown against the real one.
    stale = route(P, R, NO_A, old_report, RoutingBound(max_staleness_ms=1000), "z")
    assert isinstance(stale, RoutePlan) and stale.hosts == ("c",)
    assert stale.skipped[1].state is ReplicaState.TOO_STALE


def test_a_replica_without_a_lag_report_serves_only_unbounded_reads_and_last() -> None:
    partial = {"a": LAGS["a"], "c": LAGS["c"]}
    assert _hosts(lags=partial) == ("a", "c", "b")
    assert _hosts(NO_A, partial, RoutingBound(max_offset_lag=1000)) == ("c",)
    assert _hosts(NO_A, {}, NONE) == ("b", "c")


def test_no_servable_replica_gives_a_retriable_answer_naming_every_replica() -> None:
    result = route(P, R, NO_A, {**LAGS, "c": ReplicaLag(95, 100)}, RoutingBound(2, 30), "z")
    assert isinstance(result, NoReplica) and result.retriable
    assert [v.state for v in result.replicas] == [
        ReplicaState.DOWN,
        ReplicaState.TOO_FAR_BEHIND,
        ReplicaState.TOO_FAR_BEHIND,
    ]
    assert result.message() == (
        "no replica of ORDERS partition 3 can serve this read (acceptable.offset.lag=2, "
        "max.staleness.ms=30): active a: DOWN (position 100, lag 0, staleness 0 ms); "
        "standby b: TOO_FAR_BEHIND (position 90, lag 10, staleness 50 ms); "
        "standby c: TOO_FAR_BEHIND (position 95, lag 5). Retry later or relax the bound."
    )


@pytest.mark.parametrize(
    ("lags", "bound", "state"),
    [
        ({}, RoutingBound(max_offset_lag=5), ReplicaState.LAG_UNKNOWN),
        ({"a": ReplicaLag(40, 100, 1)}, RoutingBound(min_position=41), ReplicaState.BEHIND_TOKEN),
        ({"a": ReplicaLag(40, 100)}, RoutingBound(max_staleness_ms=9), ReplicaState.TOO_STALE),
        ({"a": ReplicaLag(40, 100, 10)}, RoutingBound(max_staleness_ms=9), ReplicaState.TOO_STALE),
    ],
)
def test_each_bound_names_its_own_state(
    lags: dict[str, ReplicaLag], bound: RoutingBound, state: ReplicaState
) -> None:
    result = route(P, Replicas("a"), {"a": True}, lags, bound, "z")
    assert isinstance(result, NoReplica) and result.replicas[0].state is state


def test_the_strictest_bound_wins() -> None:
    request = RoutingBound(max_offset_lag=100)
    session = RoutingBound(max_offset_lag=10, min_position=7)
    table = RoutingBound(max_offset_lag=50, max_staleness_ms=200, min_position=3)
    assert strictest(request, session, table) == RoutingBound(10, 200, 7)
    assert strictest() == RoutingBound() and RoutingBound().unbounded
    assert RoutingBound().describe() == "no bound"


def test_a_negative_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="max_offset_lag"):
        RoutingBound(max_offset_lag=-1)


# -- properties -------------------------------------------------------------------------------

SERVERS = ("s0", "s1", "s2", "s3", "s4")
optional = st.none() | st.integers(0, 30)


@st.composite
def cases(draw: st.DrawFn) -> tuple[Replicas, dict[str, bool], dict[str, ReplicaLag], RoutingBound]:
    servers = draw(st.lists(st.sampled_from(SERVERS), min_size=1, max_size=4, unique=True))
    alive = {s: draw(st.booleans()) for s in draw(st.sets(st.sampled_from(SERVERS)))}
    lags = {
        s: ReplicaLag(draw(st.integers(0, 60)), draw(st.integers(30, 60)), draw(optional))
        for s in draw(st.sets(st.sampled_from(SERVERS)))
    }
    bound = RoutingBound(draw(optional), draw(optional), draw(st.none() | st.integers(0, 60)))
    return Replicas(servers[0], tuple(servers[1:])), alive, lags, bound


PROPERTY = settings(max_examples=400, derandomize=True, database=None, deadline=None)


@PROPERTY
@given(case=cases(), self_id=st.sampled_from(SERVERS))
def test_every_host_routed_to_is_alive_and_within_every_bound(
    case: tuple[Replicas, dict[str, bool], dict[str, ReplicaLag], RoutingBound], self_id: str
) -> None:
    replicas, alive, lags, bound = case
    result = route(P, replicas, alive, lags, bound, self_id)
    servers = replicas.servers
    end = max((lags[s].end_offset for s in servers if s in lags), default=0)

    def servable(host: str) -> bool:
        if not (alive.get(host, False) or host == self_id):
            return False
        report = lags.get(host)
        if report is None:
            return bound.unbounded
        lag = max(0, end - report.position)
        staleness = 0 if lag == 0 else report.staleness_ms if report.end_offset >= end else None
        return (
            (bound.max_offset_lag is None or lag <= bound.max_offset_lag)
            and (bound.min_position is None or report.position >= bound.min_position)
            and (
                bound.max_staleness_ms is None
                or (staleness is not None and staleness <= bound.max_staleness_ms)
            )
        )

    expected = {s for s in servers if servable(s)}
    if isinstance(result, NoReplica):
        assert not expected and [v.host for v in result.replicas] == list(servers)
        return
    assert set(result.hosts) == expected and len(result.hosts) == len(expected)
    assert {v.host for v in result.skipped} == set(servers) - expected
    if replicas.active in expected:
        assert result.hosts[0] == replicas.active
    standbys = [v for v in result.candidates if v.role is Role.STANDBY]
    keys = [(v.lag is None, v.lag or 0, v.host != self_id, v.host) for v in standbys]
    assert keys == sorted(keys)


@PROPERTY
@given(case=cases(), self_id=st.sampled_from(SERVERS))
def test_the_order_does_not_depend_on_how_the_inputs_are_listed(
    case: tuple[Replicas, dict[str, bool], dict[str, ReplicaLag], RoutingBound], self_id: str
) -> None:
    replicas, alive, lags, bound = case
    first = route(P, replicas, alive, lags, bound, self_id)
    flipped_alive = dict(reversed(list(alive.items())))
    flipped_lags = dict(reversed(list(lags.items())))
    assert route(P, replicas, flipped_alive, flipped_lags, bound, self_id) == first
    assert route(P, replicas, alive, lags, bound, self_id) == first
