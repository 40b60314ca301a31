"""cluster/control_codec.py: the versioned JSON format of controller claims and decisions."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.cluster.assignment import PartitionId
from headwater.cluster.control_codec import (
    FORMAT_VERSION,
    UnreadableControlRecord,
    decode,
    encode,
)
from headwater.cluster.epochs import (
    AssignmentDecision,
    ControllerClaim,
    ControlRecord,
    PartitionLeader,
)

P0 = PartitionId("ORDERS", 0)
P1 = PartitionId("ORDERS", 1)

_servers = st.sampled_from(["a:1", "b:1", "c:1", "d:1"])
_leaders = st.builds(
    PartitionLeader,
    active=_servers,
    standbys=st.lists(_servers, max_size=3, unique=True).map(tuple),
    leader_epoch=st.integers(0, 2**40),
)
_partitions = st.builds(PartitionId, st.sampled_from(["T", "ORDERS", "ü ☃"]), st.integers(0, 64))
_claims = st.builds(ControllerClaim, _servers, st.integers(0, 2**40), st.integers(0, 2**40))
_decisions = st.builds(
    AssignmentDecision,
    st.integers(0, 2**40),
    st.integers(0, 2**40),
    st.dictionaries(_partitions, _leaders, max_size=8),
)


def _body(record: ControlRecord, **changes: object) -> bytes:
    body = json.loads(encode(record))
    body.update(changes)
    return json.dumps(body).encode()


def test_cluster_codec_claim_round_trips_and_is_canonical() -> None:
    claim = ControllerClaim("b:1", 3, 17)
    data = encode(claim)
    assert decode(data) == claim
    assert json.loads(data) == {
        "v": 1,  # the format of the first release: a record it can read keeps its bytes
        "type": "claim",
        "server": "b:1",
        "controllerEpoch": 3,
        "validatedOffset": 17,
    }
    assert b" " not in data


def test_cluster_codec_decision_round_trips_with_partitions_in_order() -> None:
    decision = AssignmentDecision(
        2, 9, {P1: PartitionLeader("a:1", ("c:1", "b:1"), 4), P0: PartitionLeader("b:1", (), 0)}
    )
    data = encode(decision)
    back = decode(data)
    assert back == decision
    assert isinstance(back, AssignmentDecision)
    assert back.assignment[P1].standbys == ("c:1", "b:1")  # the standbys' order is kept
    assert [e["partition"] for e in json.loads(data)["partitions"]] == [0, 1]


def test_cluster_codec_removed_partitions_round_trip_in_format_2() -> None:
    decision = AssignmentDecision(2, 9, {P0: PartitionLeader("b:1", (), 0)}, frozenset({P1}))
    data = encode(decision)
    assert json.loads(data)["v"] == 2 == FORMAT_VERSION  # a first-release server must stop here
    assert json.loads(data)["removed"] == [{"table": P1.table, "partition": P1.partition}]
    assert decode(data) == decision
    for bad in ([1], {"table": "t"}, [{"table": "t"}], [{"table": "t", "partition": "x"}]):
        with pytest.raises(UnreadableControlRecord):
            decode(_body(decision, removed=bad))


def test_cluster_codec_empty_decision_round_trips() -> None:
    decision = AssignmentDecision(1, 0, {})
    assert decode(encode(decision)) == decision


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.one_of(_claims, _decisions))
def test_cluster_codec_round_trip_property(record: ControlRecord) -> None:
    data = encode(record)
    assert decode(data) == record
    assert encode(decode(data)) == data


@pytest.mark.parametrize("version", [FORMAT_VERSION + 1, 99])
def test_cluster_codec_newer_format_is_a_clear_error(version: int) -> None:
    with pytest.raises(UnreadableControlRecord, match=rf"format {version} is unknown.*upgrade"):
        decode(_body(ControllerClaim("a:1", 1, 0), v=version))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (None, "has no value"),
        (b"\xff", "not JSON"),
        (b"{not json", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"type": "claim"}', "no format version"),
        (b'{"v": true, "type": "claim"}', "no format version"),
        (b'{"v": 0, "type": "claim"}', "format 0 is unknown"),
        (_body(ControllerClaim("a:1", 1, 0), type="resign"), "unknown control record type"),
        (_body(ControllerClaim("a:1", 1, 0), server=""), "'server'"),
        (_body(ControllerClaim("a:1", 1, 0), controllerEpoch="1"), "'controllerEpoch'"),
        (_body(ControllerClaim("a:1", 1, 0), validatedOffset=None), "'validatedOffset'"),
        (_body(AssignmentDecision(1, 0, {}), partitions={}), "partitions list"),
        (_body(AssignmentDecision(1, 0, {}), partitions=[1]), "not a JSON object"),
    ],
)
def test_cluster_codec_unreadable_records_raise(data: bytes | None, message: str) -> None:
    with pytest.raises(UnreadableControlRecord, match=message) as caught:
        decode(data)
    assert caught.value.reason == str(caught.value)


def _entry(**changes: object) -> bytes:
    decision = AssignmentDecision(1, 0, {P0: PartitionLeader("a:1", ("b:1",), 2)})
    body = json.loads(encode(decision))
    body["partitions"][0].update(changes)
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"partition": -1}, "partition -1"),
        ({"partition": 1.5}, "'partition'"),
        ({"table": 3}, "'table'"),
        ({"active": None}, "'active'"),
        ({"standbys": "b:1"}, "invalid standbys"),
        ({"standbys": [""]}, "invalid standbys"),
        ({"leaderEpoch": False}, "'leaderEpoch'"),
    ],
)
def test_cluster_codec_malformed_entries_raise(changes: dict[str, object], message: str) -> None:
    with pytest.raises(UnreadableControlRecord, match=message):
        decode(_entry(**changes))


def test_cluster_codec_a_partition_named_twice_is_unreadable() -> None:
    body = json.loads(_entry())
    body["partitions"].append(dict(body["partitions"][0]))
    with pytest.raises(UnreadableControlRecord, match="twice"):
        decode(json.dumps(body).encode())
