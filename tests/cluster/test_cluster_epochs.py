"""cluster/epochs.py: the control-topic fold (controller claims, assignment decisions, epochs)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.cluster.assignment import PartitionId
from headwater.cluster.epochs import (
    AssignmentDecision,
    ControllerClaim,
    ControlRecord,
    ControlState,
    PartitionLeader,
    elect,
    fold,
    fold_all,
    is_active,
    is_controller,
    is_fenced,
    next_claim,
    next_leader_epoch,
)

P0 = PartitionId("ORDERS", 0)
P1 = PartitionId("ORDERS", 1)
SERVERS = ("a", "b", "c")


def _with_controller(server: str = "a") -> ControlState:
    """``server`` is controller (epoch 1, offset 0); a holds P0 at leader epoch 3, standby b."""
    state, ok, _ = fold(ControlState(), 0, ControllerClaim(server, 1, 0))
    assert ok
    decision = AssignmentDecision(1, 1, {P0: PartitionLeader("a", ("b",), 3)})
    state, ok, _ = fold(state, 1, decision)
    assert ok
    return state


def test_the_first_claim_makes_a_controller_at_epoch_one() -> None:
    state, accepted, reason = fold(ControlState(), 0, ControllerClaim("b", 1, 0))
    assert accepted and reason == "b is controller at epoch 1"
    assert (state.controller, state.controller_epoch, state.last_record_offset) == ("b", 1, 0)
    assert is_controller(state, "b") and not is_controller(state, "a")


@pytest.mark.parametrize(
    ("record", "reason_start"),
    [
        (ControllerClaim("b", 3, 2), "stale claim by b: epoch 3"),  # skips an epoch
        (ControllerClaim("b", 1, 2), "stale claim by b: epoch 1"),  # the current epoch again
        (ControllerClaim("b", 2, 1), "conflict: validated at offset 1"),  # missed offset 1
        (ControllerClaim("b", 2, 3), "validated at offset 3, beyond its own offset 2"),
        (AssignmentDecision(2, 2, {}), "stale controller: decision from controller epoch 2"),
        (AssignmentDecision(0, 2, {}), "stale controller: decision from controller epoch 0"),
        (AssignmentDecision(1, 0, {}), "conflict: validated at offset 0"),
    ],
)
def test_records_that_break_a_rule_change_nothing_but_the_position(
    record: ControlRecord, reason_start: str
) -> None:
    state = _with_controller()
    after, accepted, reason = fold(state, 2, record)
    assert not accepted and reason.startswith(reason_start), reason
    assert after == replace(state, last_record_offset=2)


@pytest.mark.parametrize(
    ("leader", "accepted", "reason_part"),
    [
        (PartitionLeader("a", ("c",), 3), True, ""),  # standbys change, same active and epoch
        (PartitionLeader("a", ("b",), 7), True, ""),  # an epoch may jump
        (PartitionLeader("b", ("a",), 4), True, ""),  # a new active with a new epoch
        (PartitionLeader("b", ("a",), 3), False, "without a new leader epoch"),
        (PartitionLeader("a", ("b",), 2), False, "below the current 3"),
        (PartitionLeader("a", ("a",), 3), False, "distinct"),
        (PartitionLeader("a", ("b", "b"), 3), False, "distinct"),
    ],
)
def test_leader_epochs_never_go_down_and_go_up_when_the_active_changes(
    leader: PartitionLeader, accepted: bool, reason_part: str
) -> None:
    state = _with_controller()
    after, ok, reason = fold(state, 2, AssignmentDecision(1, 2, {P0: leader}))
    assert ok is accepted and reason_part in reason
    assert after.partitions[P0] == (leader if accepted else state.partitions[P0])


def test_a_decision_is_all_or_nothing() -> None:
    state = _with_controller()
    decision = AssignmentDecision(
        1, 2, {P1: PartitionLeader("c", (), 0), P0: PartitionLeader("c", (), 3)}
    )
    after, ok, reason = fold(state, 2, decision)
    assert not ok and reason.startswith("invalid assignment: ORDERS/0")
    assert P1 not in after.partitions
    assert fold(state, 2, AssignmentDecision(1, 2, {P1: PartitionLeader("c", (), -1)}))[1] is False


def test_a_server_stops_acting_as_active_the_moment_it_folds_a_higher_leader_epoch() -> None:
    state = _with_controller()
    assert is_active(state, "a", P0) == 3 and is_active(state, "b", P0) is None
    assert is_active(state, "a", P1) is None
    moved, ok, _ = fold(state, 2, AssignmentDecision(1, 2, {P0: PartitionLeader("b", ("c",), 4)}))
    assert ok
    assert is_active(moved, "a", P0) is None and is_active(moved, "b", P0) == 4
    assert is_fenced(moved, P0, 3) and not is_fenced(moved, P0, 4)
    assert not is_fenced(moved, P1, 0)


def test_a_new_controller_fences_the_old_one() -> None:
    state = _with_controller("a")
    state, ok, _ = fold(state, 2, next_claim(state, "b", 2))
    assert ok and state.controller == "b" and state.controller_epoch == 2
    late = AssignmentDecision(1, 3, {P0: PartitionLeader("c", (), 9)})  # a, unaware
    state, ok, reason = fold(state, 3, late)
    assert not ok and "current epoch is 2 (b)" in reason


def test_a_rejected_record_still_counts_for_compare_and_append() -> None:
    state = _with_controller()
    state, ok, _ = fold(state, 2, ControllerClaim("c", 9, 2))  # rejected, but appended
    assert not ok
    assert fold(state, 3, ControllerClaim("b", 2, 2))[1] is False  # validated before it
    assert fold(state, 3, ControllerClaim("b", 2, 3))[1] is True


def test_offsets_may_skip_transaction_markers_but_never_go_back() -> None:
    state = _with_controller()
    assert fold(state, 9, ControllerClaim("b", 2, 5))[1] is True
    with pytest.raises(ValueError, match="offset order"):
        fold(state, 1, ControllerClaim("b", 2, 1))


def test_next_leader_epoch_builds_decisions_the_fold_accepts() -> None:
    state = _with_controller()
    assert next_leader_epoch(state, P0, "a") == 3
    assert next_leader_epoch(state, P0, "c") == 4
    assert next_leader_epoch(state, P1, "c") == 0
    entries = {
        P0: PartitionLeader("c", ("a",), next_leader_epoch(state, P0, "c")),
        P1: PartitionLeader("c", (), next_leader_epoch(state, P1, "c")),
    }
    assert fold(state, 2, AssignmentDecision(1, 2, entries))[1] is True


@pytest.mark.parametrize(
    ("controller", "live", "expected"),
    [("a", {"a", "b"}, "a"), ("a", {"c", "b"}, "b"), (None, {"c", "b"}, "b"), ("b", {"b"}, "b")],
)
def test_elect_keeps_a_live_controller_else_picks_the_smallest_live_id(
    controller: str | None, live: set[str], expected: str
) -> None:
    state = ControlState() if controller is None else _with_controller(controller)
    assert elect(state, live) == expected


def test_elect_needs_someone_alive() -> None:
    with pytest.raises(ValueError):
        elect(ControlState(), set())


# -- properties over generated control topics --------------------------------------------------


@st.composite
def control_topics(draw: st.DrawFn) -> list[tuple[int, ControlRecord]]:
    """A control topic written by honest, slow and stale writers alike (drawn against the fold,
    so that every rule is exercised, accepted and refused)."""
    state = ControlState()
    records: list[tuple[int, ControlRecord]] = []
    for _ in range(draw(st.integers(0, 20))):
        offset = state.last_record_offset + draw(st.integers(1, 2))
        late = st.integers(max(0, state.last_record_offset - 1), offset)
        validated = draw(st.one_of(st.just(offset), st.just(offset), late))  # mostly honest
        record: ControlRecord
        if draw(st.booleans()):
            epoch = state.controller_epoch + draw(st.integers(-1, 2))
            record = ControllerClaim(draw(st.sampled_from(SERVERS)), epoch, validated)
        else:
            entries: dict[PartitionId, PartitionLeader] = {}
            for partition in draw(st.sets(st.sampled_from((P0, P1)))):
                active = draw(st.sampled_from(SERVERS))
                others = [s for s in SERVERS if s != active] + [active]  # the last one is invalid
                standbys = tuple(draw(st.lists(st.sampled_from(others), max_size=2)))
                current = state.partitions.get(partition)
                base = current.leader_epoch if current is not None else 0
                bump = draw(st.sampled_from((0, 1, 1, 2, -1)))
                entries[partition] = PartitionLeader(active, standbys, base + bump)
            epoch = state.controller_epoch + draw(st.sampled_from((0, 0, 0, -1, 1)))
            record = AssignmentDecision(epoch, validated, entries)
        records.append((offset, record))
        state = fold(state, offset, record)[0]
    return records


PROPERTY = settings(max_examples=120, derandomize=True, database=None, deadline=None)


@PROPERTY
@given(topic=control_topics(), cut=st.integers(0, 20))
def test_servers_folding_the_same_topic_reach_the_same_state(
    topic: list[tuple[int, ControlRecord]], cut: int
) -> None:
    one = fold_all(topic)
    other = fold_all(list(topic))
    resumed = fold_all(topic[cut:], fold_all(topic[:cut]))  # from a snapshot, then the tail
    assert one == other == resumed


@PROPERTY
@given(topic=control_topics())
def test_a_stale_controller_never_changes_the_state(topic: list[tuple[int, ControlRecord]]) -> None:
    state = ControlState()
    for offset, record in topic:
        after, accepted, _ = fold(state, offset, record)
        stale = (
            record.controller_epoch <= state.controller_epoch
            if isinstance(record, ControllerClaim)
            else record.controller_epoch != state.controller_epoch or state.controller is None
        )
        if stale or not accepted:
            assert not accepted
            assert after == replace(state, last_record_offset=offset)
        state = after


@PROPERTY
@given(topic=control_topics())
def test_one_partition_and_leader_epoch_never_has_two_actives(
    topic: list[tuple[int, ControlRecord]],
) -> None:
    state = ControlState()
    seen: dict[tuple[PartitionId, int], str] = {}
    for offset, record in topic:
        before = dict(state.partitions)
        state = fold(state, offset, record)[0]
        for partition, leader in state.partitions.items():
            assert seen.setdefault((partition, leader.leader_epoch), leader.active) == leader.active
            if partition in before:
                assert leader.leader_epoch >= before[partition].leader_epoch
        actives = [s for s in SERVERS for p in (P0, P1) if is_active(state, s, p) is not None]
        assert len(actives) == len(state.partitions)  # exactly one active per assigned partition


@PROPERTY
@given(
    topic=control_topics(),
    racers=st.lists(st.sampled_from(SERVERS), min_size=2, max_size=3, unique=True),
    gaps=st.lists(st.integers(1, 2), min_size=3, max_size=3),
)
def test_of_claims_racing_from_the_same_end_exactly_one_wins(
    topic: list[tuple[int, ControlRecord]], racers: list[str], gaps: list[int]
) -> None:
    state = fold_all(topic)
    end = state.last_record_offset + 1  # every racer read to the same end
    claims = [next_claim(state, server, end) for server in racers]
    offset, winners = state.last_record_offset, []
    for claim, gap in zip(claims, gaps, strict=False):
        offset += gap
        state, accepted, _ = fold(state, offset, claim)
        if accepted:
            winners.append(claim.server_id)
    assert winners == [racers[0]]
    assert state.controller == racers[0]


def test_a_deposed_controller_waits_before_it_claims_again() -> None:
    from headwater.cluster.epochs import ControllerClaim, fold_all, may_claim

    state = fold_all([(0, ControllerClaim("a:1", 1, 0)), (1, ControllerClaim("b:1", 2, 1))])
    # a:1 was deposed by b:1's claim; in a:1's view b:1 is down (an asymmetric fault)
    assert not may_claim(
        state, "a:1", {"a:1", "c:1"}, deposed_ms=1_000, now_ms=3_000, backoff_ms=4_000
    )
    assert may_claim(state, "a:1", {"a:1", "c:1"}, deposed_ms=1_000, now_ms=5_000, backoff_ms=4_000)
    assert may_claim(state, "a:1", {"a:1", "c:1"}, deposed_ms=None, now_ms=0, backoff_ms=4_000)
    # never while the controller is alive in its view, nor when another server should claim
    assert not may_claim(state, "a:1", {"a:1", "b:1"}, None, 0, 4_000)
    assert not may_claim(state, "c:1", {"a:1", "c:1"}, None, 0, 4_000)
    assert not may_claim(state, "b:1", {"b:1"}, None, 0, 4_000)  # it holds the role already
