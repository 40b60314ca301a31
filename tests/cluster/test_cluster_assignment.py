"""cluster/assignment.py: KIP-708's worked examples, Kafka's own cases, table cases and properties.

The worked examples are those of KIP-708 ("Rack aware StandbyTask assignment for Kafka Streams",
section "Example of standby task allocation"), with the active task 0_0 on Node-1. The ported cases
come from Kafka's ``ClientTagAwareStandbyTaskAssignorTest`` (apache/kafka, streams module), whose
expected standby sets are copied here with their PID numbers as server ids ``n1`` .. ``n9``.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.cluster.assignment import (
    Assignment,
    PartitionId,
    Replicas,
    ServerInfo,
    assign,
    assign_standbys,
    moves,
    parse_rack_tags,
    promote,
)

P0 = PartitionId("t", 0)
ZC = ("zone", "cluster")


def grid(clusters: int, zones: int) -> list[ServerInfo]:
    """KIP-708's layout: Node-1.. numbered cluster by cluster, zones a, b, c within each."""
    return [
        ServerInfo(f"n{c * zones + z + 1}", {"cluster": f"c{c + 1}", "zone": "abc"[z]})
        for c in range(clusters)
        for z in range(zones)
    ]


def standby_sets(a: Assignment) -> dict[PartitionId, set[str]]:
    return {p: set(r.standbys) for p, r in a.items()}


# --- KIP-708's worked examples -------------------------------------------------------------------


def test_kip708_absolute_preferred_9_nodes_3_clusters_by_3_zones() -> None:
    # KIP-708 "Absolute Preferred Standby Task Distribution": both standbys differ from the active
    # and from each other in cluster and zone: "Node-5 ... Node-9" (lowest ids win the tie).
    a = assign_standbys({P0: "n1"}, grid(3, 3), 2, ZC)
    assert a[P0] == Replicas("n1", ("n5", "n9"))
    assert assign_standbys({P0: "n5"}, grid(3, 3), 2, ZC)[P0] == Replicas("n5", ("n1", "n9"))


def test_kip708_partially_preferred_6_nodes_2_clusters_by_3_zones() -> None:
    # KIP-708 "Partially Preferred Standby Task Distribution": the 1st standby on the other cluster
    # and another zone (Node-5), the 2nd only on the third zone (Node-3 or Node-6).
    a = assign_standbys({P0: "n1"}, grid(2, 3), 2, ZC)
    assert set(a[P0].standbys) in ({"n5", "n3"}, {"n5", "n6"})  # as Kafka's test accepts
    assert a[P0] == Replicas("n1", ("n3", "n5"))  # standbys are listed by server id


def test_kip708_least_loaded_fallback_4_nodes_2_clusters_by_2_zones() -> None:
    # KIP-708 "Fallback to the least-loaded standby distribution": the 1st standby on the other
    # cluster and zone (Node-4); both tags are then used up, so the 2nd goes to the least loaded.
    servers = grid(2, 2)
    a = assign_standbys({P0: "n1"}, servers, 2, ZC)
    assert set(a[P0].standbys) in ({"n4", "n2"}, {"n4", "n3"})
    # With a second partition active on Node-2, the least loaded fallback keeps standbys balanced.
    b = assign_standbys({P0: "n1", PartitionId("u", 0): "n2"}, servers, 2, ZC)
    assert "n4" in b[P0].standbys and "n3" in b[PartitionId("u", 0)].standbys
    assert sorted(b.standby_counts().values()) == [1, 1, 1, 1]


@pytest.mark.parametrize("clusters_zones", [(3, 3), (2, 3), (2, 2)])
def test_kip708_layouts_under_assign_spread_every_tag_as_far_as_it_goes(
    clusters_zones: tuple[int, int],
) -> None:
    servers = grid(*clusters_zones)
    a = assign([PartitionId("t", i) for i in range(12)], servers, 2, ZC)
    tags = {s.server_id: s.tags for s in servers}
    for r in a.values():
        for t, n in zip(ZC, (clusters_zones[1], clusters_zones[0]), strict=True):
            assert len({tags[s][t] for s in r.servers}) == min(3, n)


# --- Kafka's ClientTagAwareStandbyTaskAssignorTest, ported --------------------------------------

T00, T01, T02 = PartitionId("0", 0), PartitionId("0", 1), PartitionId("0", 2)
T10, T11, T12 = PartitionId("1", 0), PartitionId("1", 1), PartitionId("1", 2)


def kafka_grid() -> list[ServerInfo]:
    """PID_1..PID_9: clusters 1-3 of three clients each, in zones 1, 2, 3."""
    return [
        ServerInfo(f"n{i + 1}", {"zone": f"z{i % 3 + 1}", "cluster": f"c{i // 3 + 1}"})
        for i in range(9)
    ]


@pytest.mark.parametrize(
    ("actives", "expected"),
    [
        (  # shouldDistributeStandbyTasksWhenActiveTasksAreLocatedOnSameZone
            {T00: "n1", T10: "n1", T01: "n4", T11: "n4", T02: "n7", T12: "n7"},
            {
                "n1": ({"n9", "n5"}, {"n6", "n8"}),
                "n4": ({"n2", "n9"}, {"n3", "n8"}),
                "n7": ({"n5", "n3"}, {"n2", "n6"}),
            },
        ),
        (  # shouldDistributeStandbyTasksWhenActiveTasksAreLocatedOnSameCluster
            {T00: "n1", T10: "n1", T01: "n2", T11: "n2", T02: "n3", T12: "n3"},
            {
                "n1": ({"n9", "n5"}, {"n6", "n8"}),
                "n2": ({"n4", "n9"}, {"n6", "n7"}),
                "n3": ({"n5", "n7"}, {"n4", "n8"}),
            },
        ),
    ],
)
def test_kafka_nine_clients_two_standbys(
    actives: dict[PartitionId, str], expected: dict[str, tuple[set[str], ...]]
) -> None:
    a = assign_standbys(actives, kafka_grid(), 2, ZC)
    for r in a.values():
        assert set(r.standbys) in expected[r.active]
    loaded = set(actives.values())
    assert a.standby_counts() == {f"n{i}": 2 for i in range(1, 10) if f"n{i}" not in loaded}


def test_kafka_partial_rack_awareness() -> None:
    # shouldDoThePartialRackAwareness: tags cluster then zone; 2 clusters x 3 zones.
    servers = [
        ServerInfo(f"n{i + 1}", {"cluster": f"c{i // 3 + 1}", "zone": f"z{i % 3 + 1}"})
        for i in range(6)
    ]
    a = assign_standbys({T00: "n1", T10: "n6"}, servers, 2, ("cluster", "zone"))
    assert set(a[T00].standbys) in ({"n5", "n3"}, {"n5", "n6"})
    assert set(a[T10].standbys) in ({"n2", "n4"}, {"n2", "n1"})
    counts = a.standby_counts()
    assert counts["n2"] == counts["n5"] == 1 and sum(counts.values()) == 4


def test_kafka_different_zones_even_when_clients_reached_capacity() -> None:
    servers = [
        ServerInfo(f"n{i + 1}", {"zone": f"z{i % 3 + 1}", "cluster": "c1"}) for i in range(6)
    ]
    actives = {T00: "n1", T01: "n2", T02: "n3", T10: "n4", T11: "n5", T12: "n6"}
    a = assign_standbys(actives, servers, 1, ZC)
    zone = {s.server_id: s.tags["zone"] for s in servers}
    assert all(zone[r.standbys[0]] != zone[r.active] for r in a.values())
    assert a.standby_counts() == {f"n{i}": 1 for i in range(1, 7)}


@pytest.mark.parametrize(
    ("servers", "rack_tags", "standbys", "expected"),
    [
        (  # shouldIgnoreTagsThatAreNotPresentInRackAwareness
            [
                ServerInfo("n1", {"cluster": "c1", "zone": "z1"}),
                ServerInfo("n2", {"cluster": "c1", "zone": "z2"}),
                ServerInfo("n3", {"cluster": "c2", "zone": "z1"}),
            ],
            ("cluster",),
            1,
            ("n3",),
        ),
        (  # shouldHandleOverlappingTagValuesBetweenDifferentTagKeys
            [
                ServerInfo("n1", {"zone": "z1", "cluster": "c1"}),
                ServerInfo("n2", {"zone": "c1", "cluster": "c3"}),
            ],
            ZC,
            1,
            ("n2",),
        ),
        (  # shouldNotAssignStandbyTasksIfThereAreNoEnoughClients
            [ServerInfo("n1", {"zone": "z1", "cluster": "c1"})],
            ZC,
            1,
            (),
        ),
    ],
)
def test_kafka_single_task_cases(
    servers: list[ServerInfo], rack_tags: tuple[str, ...], standbys: int, expected: tuple[str, ...]
) -> None:
    assert assign_standbys({T00: "n1"}, servers, standbys, rack_tags)[T00].standbys == expected


def test_kafka_least_loaded_when_clients_share_all_tags() -> None:
    servers = [ServerInfo(f"n{i}", {"cluster": "c1", "zone": "z1"}) for i in range(1, 5)]
    a = assign_standbys({T00: "n1", T01: "n2", T02: "n3", T10: "n4"}, servers, 1, ZC)
    assert a.standby_counts() == {"n1": 1, "n2": 1, "n3": 1, "n4": 1}


# --- table cases ------------------------------------------------------------------------------


def plain(n: int) -> list[ServerInfo]:
    return [ServerInfo(f"h{i}:8088") for i in range(n)]


def parts(n: int, table: str = "t") -> list[PartitionId]:
    return [PartitionId(table, i) for i in range(n)]


def test_no_servers_or_no_partitions_give_an_empty_assignment() -> None:
    assert assign(parts(4), [], 1, ()) == Assignment()
    assert assign([], plain(3), 1, ()) == Assignment() and len(Assignment()) == 0


def test_fewer_servers_than_replicas_places_as_many_standbys_as_servers_allow() -> None:
    a = assign(parts(4), plain(2), 3, ())
    assert all(len(r.standbys) == 1 and len(set(r.servers)) == 2 for r in a.values())
    assert all(r.standbys == () for r in assign(parts(3), plain(1), 2, ()).values())


def test_a_leaving_server_has_its_actives_taken_over_by_their_standbys() -> None:
    before = assign(parts(6), plain(3), 1, ())
    gone = "h0:8088"
    after = assign(parts(6), plain(3)[1:], 1, (), previous=before)
    for p, r in before.items():
        if r.active == gone:
            assert after[p].active == r.standbys[0]  # promoted, not copied
    assert moves(before, after) == sum(gone in r.servers for r in before.values())


def test_a_balanced_assignment_is_returned_unchanged() -> None:
    a = assign(parts(10), grid(2, 3), 2, ZC)
    assert assign(parts(10), grid(2, 3), 2, ZC, previous=a) == a


def test_an_overloaded_server_hands_an_active_to_a_standby_first() -> None:
    prev = Assignment.of({PartitionId("t", i): Replicas("a", ("b",)) for i in range(2)})
    a = assign(parts(2), [ServerInfo("a"), ServerInfo("b")], 1, (), previous=prev)
    assert a.active_counts() == {"a": 1, "b": 1} and moves(prev, a) == 0


@pytest.mark.parametrize(
    ("lags", "expected"),
    [
        ({"b": 5, "c": 2}, "c"),
        ({"b": 2, "c": 2}, "b"),  # a tie goes to the lowest id
        ({"c": 9}, "c"),  # no lag reported for b: it ranks last
        ({}, "b"),
    ],
)
def test_promote_picks_the_least_lagging_live_standby(lags: dict[str, int], expected: str) -> None:
    other = PartitionId("t", 1)
    a = Assignment.of({P0: Replicas("a", ("b", "c", "d")), other: Replicas("b", ("a",))})
    out = promote(a, {"a", "d"}, {(P0, s): n for s, n in lags.items()} | {(P0, "d"): 0})
    assert out[P0] == Replicas(expected, tuple(s for s in ("b", "c", "d") if s != expected))
    assert out[other] == a[other]


def test_promote_leaves_a_partition_without_a_live_standby_alone() -> None:
    a = Assignment.of({P0: Replicas("a", ("b",))})
    assert promote(a, {"a", "b"}, {}) == a


def test_moves_counts_new_copies_not_role_swaps() -> None:
    old = Assignment.of({P0: Replicas("a", ("b", "c"))})
    assert moves(old, Assignment.of({P0: Replicas("b", ("a", "c"))})) == 0
    assert moves(old, Assignment.of({P0: Replicas("b", ("d", "e"))})) == 2
    assert moves(old, Assignment.of({PartitionId("u", 0): Replicas("z")})) == 0


def test_values_validate_and_normalise() -> None:
    with pytest.raises(ValueError, match="distinct"):
        Replicas("a", ("a",))
    with pytest.raises(ValueError, match="once"):
        Assignment(((P0, Replicas("a")), (P0, Replicas("b"))))
    with pytest.raises(ValueError, match="duplicate"):
        assign(parts(1), [ServerInfo("a"), ServerInfo("a")], 0, ())
    with pytest.raises(ValueError, match=">= 0"):
        assign(parts(1), plain(1), -1, ())
    with pytest.raises(ValueError, match="unknown"):
        assign_standbys({P0: "x"}, plain(1), 0, ())
    assert PartitionId("a", 10) < PartitionId("b", 2) and PartitionId("a", 2) < PartitionId("a", 10)
    a = Assignment(((PartitionId("t", 1), Replicas("a")), (P0, Replicas("b"))))
    assert list(a) == [P0, PartitionId("t", 1)] and hash(a) == hash(Assignment.of(dict(a)))


def test_server_tags_come_from_client_tag_settings() -> None:
    s = ServerInfo.from_properties(
        "h:1", {"client.tag.zone": "eu-1a", "client.tag.cluster": "k1", "num.standby.replicas": "1"}
    )
    assert dict(s.tags) == {"cluster": "k1", "zone": "eu-1a"} and s == ServerInfo("h:1", s.tags)
    assert parse_rack_tags(" zone, cluster,,zone") == ("zone", "cluster")


# --- properties -------------------------------------------------------------------------------

PROPS = settings(derandomize=True, max_examples=200, deadline=None)
Case = tuple[list[ServerInfo], list[PartitionId], int]


@st.composite
def clusters(draw: st.DrawFn, tagged: bool = True) -> Case:
    """Servers covering a full grid of tag values (every combination present), partitions, N."""
    if tagged:
        shape = draw(st.tuples(st.integers(1, 3), st.integers(1, 3)))
        cells = list(itertools.product(range(shape[0]), range(shape[1])))
        extra = draw(st.lists(st.sampled_from(cells), max_size=3))
        servers = [
            ServerInfo(f"s{i}:80", {"cluster": f"c{c}", "zone": f"z{z}"})
            for i, (c, z) in enumerate(cells + extra)
        ]
    else:
        servers = plain(draw(st.integers(1, 7)))
    tables = draw(st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 8)), max_size=3))
    partitions = [PartitionId(t, i) for t, n in tables for i in range(n)]
    return servers, partitions, draw(st.integers(0, 3))


def check_shape(
    a: Assignment, servers: list[ServerInfo], partitions: list[PartitionId], n: int
) -> None:
    ids = {s.server_id for s in servers}
    assert set(a) == set(partitions)
    for r in a.values():
        assert len(set(r.servers)) == len(r.servers) == 1 + min(n, len(servers) - 1)
        assert set(r.servers) <= ids


def spread(a: Assignment, servers: list[ServerInfo]) -> None:
    tags = {s.server_id: s.tags for s in servers}
    for t in ZC:
        values = {s.tags[t] for s in servers}
        for r in a.values():
            assert len({tags[s][t] for s in r.servers}) == min(len(r.servers), len(values))


@PROPS
@given(clusters())
def test_replicas_are_distinct_complete_and_spread_over_every_tag(case: Case) -> None:
    servers, partitions, n = case
    a = assign(partitions, servers, n, ZC)
    check_shape(a, servers, partitions, n)
    spread(a, servers)
    counts = [a.active_counts().get(s.server_id, 0) for s in servers]
    assert not partitions or max(counts) - min(counts) <= 1


@PROPS
@given(clusters(tagged=False))
def test_without_tags_actives_and_standbys_are_balanced(case: Case) -> None:
    servers, partitions, n = case
    a = assign(partitions, servers, n, ())
    check_shape(a, servers, partitions, n)
    for counts in (a.active_counts(), a.standby_counts()):
        values = [counts.get(s.server_id, 0) for s in servers]
        assert max(values) - min(values) <= 1


@PROPS
@given(clusters(), st.randoms(use_true_random=False))
def test_the_result_ignores_input_order_and_is_stable(case: Case, rnd: random.Random) -> None:
    servers, partitions, n = case
    a = assign(partitions, servers, n, ZC)
    shuffled_s, shuffled_p = list(servers), list(partitions)
    rnd.shuffle(shuffled_s)
    rnd.shuffle(shuffled_p)
    assert assign(shuffled_p, shuffled_s, n, ZC) == a
    assert assign(partitions, servers, n, ZC, previous=a) == a  # converged: nothing moves


@PROPS
@given(clusters(tagged=False), st.booleans())
def test_one_server_joining_or_leaving_moves_about_its_share(case: Case, join: bool) -> None:
    # A joining server: every copy made lands on it, and it takes no more than its fair share.
    # A leaving server: each replica it held is rebuilt once (its actives are promoted standbys);
    # restoring standby balance may move up to two more (measured over 3000 random clusters).
    servers, partitions, n = case
    grown = plain(len(servers) + 1)
    if join:
        before = assign(partitions, grown[:-1], n, ())
        after = assign(partitions, grown, n, (), previous=before)
        new = grown[-1].server_id
        replicas = sum(len(r.servers) for r in after.values())
        assert moves(before, after) == sum(new in r.servers for r in after.values())
        assert moves(before, after) <= math.ceil(replicas / len(grown))
    else:
        before = assign(partitions, grown, n, ())
        after = assign(partitions, grown[1:], n, (), previous=before)
        held = sum(grown[0].server_id in r.servers for r in before.values())
        assert moves(before, after) <= held + 2
    check_shape(after, grown if join else grown[1:], partitions, n)


@PROPS
@given(clusters(), st.data())
def test_promote_takes_the_least_lagging_live_standby(case: Case, data: st.DataObject) -> None:
    servers, partitions, n = case
    a = assign(partitions, servers, n, ZC)
    dead = set(data.draw(st.sets(st.sampled_from([s.server_id for s in servers]))))
    lag = {(p, s): data.draw(st.integers(0, 5)) for p, r in a.items() for s in r.standbys}
    out = promote(a, dead, lag)
    for p, r in a.items():
        live = [s for s in r.standbys if s not in dead]
        if r.active in dead and live:
            assert out[p].active == min(live, key=lambda s: (lag[(p, s)], s))
            assert set(out[p].servers) == set(r.servers) - {r.active}
        else:
            assert out[p] == r
