"""cluster._heartbeats and cluster._lags: message bodies, the books, and the lag merge (no I/O)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.cluster._heartbeats import (
    BadClusterMessage,
    HeartbeatBook,
    heartbeat_body,
    parse_heartbeat,
)
from headwater.cluster._lags import LagBook, LagReport, lag_body, parse_lag_body, replica_lags
from headwater.cluster.agent import normalize_peer
from headwater.cluster.liveness import HeartbeatSettings
from headwater.cluster.routing import ReplicaLag
from headwater.store.lag import LagInfo


def test_heartbeat_body_round_trip() -> None:
    body = heartbeat_body("10.0.0.1:8088", 42)
    assert body == {"hostInfo": {"host": "10.0.0.1", "port": 8088}, "timestamp": 42}
    assert parse_heartbeat(body) == ("10.0.0.1:8088", 42)


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"hostInfo": "h:1", "timestamp": 1},
        {"hostInfo": {"host": "", "port": 1}, "timestamp": 1},
        {"hostInfo": {"host": "h", "port": True}, "timestamp": 1},
        {"hostInfo": {"host": "h", "port": 70000}, "timestamp": 1},
        {"hostInfo": {"host": "h", "port": 1}, "timestamp": "1"},
    ],
)
def test_bad_heartbeats_are_refused(body: dict[str, object]) -> None:
    with pytest.raises(BadClusterMessage):
        parse_heartbeat(body)


def test_lag_body_round_trip() -> None:
    lags = {"T": {1: LagInfo(3, 9, 6), 0: LagInfo(0, 0, 0)}, "U": {}}
    body = lag_body("h:1", lags, 77)
    assert body["lagInfo"]["T"] == {
        "0": {"current": 0, "end": 0, "lag": 0},
        "1": {"current": 3, "end": 9, "lag": 6},
    }
    sender, report = parse_lag_body(body, 80)
    assert sender == "h:1" and (report.timestamp_ms, report.received_ms) == (77, 80)
    assert report.lags == {"T": {0: LagInfo(0, 0, 0), 1: LagInfo(3, 9, 6)}, "U": {}}


def test_replica_lags_use_the_highest_end_any_server_saw() -> None:
    host_lags = {
        "a:1": {"T": {0: LagInfo(5, 10, 5)}},
        "b:1": {"T": {0: LagInfo(12, 12, 0), 1: LagInfo(1, 1, 0)}},
        "c:1": {"T": {0: LagInfo(8, 8, 0)}},  # an older view of the end
    }
    assert replica_lags(host_lags, "T", 0) == {
        "a:1": ReplicaLag(5, 12),
        "b:1": ReplicaLag(12, 12, 0),
        "c:1": ReplicaLag(8, 12),
    }
    assert replica_lags(host_lags, "T", 1) == {"b:1": ReplicaLag(1, 1, 0)}
    assert replica_lags(host_lags, "T", 2) == {} and replica_lags(host_lags, "X", 0) == {}


def test_staleness_is_measured_from_the_record_timestamps_replicas_report() -> None:
    host_lags = {
        "a:1": {"T": {0: LagInfo(5, 10, 5, 1_000)}},
        "b:1": {"T": {0: LagInfo(12, 12, 0, 4_500)}},  # at the end: its newest record is the end's
        "c:1": {"T": {0: LagInfo(8, 8, 0)}},  # no timestamp reported: unknown
    }
    assert {h: r.staleness_ms for h, r in replica_lags(host_lags, "T", 0).items()} == {
        "a:1": 3_500,
        "b:1": 0,
        "c:1": None,
    }
    body = lag_body("a:1", host_lags["a:1"], 7)
    assert body["lagInfo"]["T"]["0"]["lastRecordMs"] == 1_000
    assert parse_lag_body(body, 8)[1].lags["T"][0].last_record_ms == 1_000


@settings(max_examples=200, derandomize=True)
@given(
    st.dictionaries(
        st.sampled_from(["a:1", "b:1", "c:1"]),
        st.tuples(st.integers(0, 100), st.integers(0, 100)),
        min_size=1,
    )
)
def test_replica_lags_share_the_highest_end(views: dict[str, tuple[int, int]]) -> None:
    host_lags = {h: {"T": {0: LagInfo.of(pos, end)}} for h, (pos, end) in views.items()}
    lags = replica_lags(host_lags, "T", 0)
    ends = {lag.end_offset for lag in lags.values()}
    assert set(lags) == set(views) and ends == {max(end for _, end in views.values())}


def test_lag_book_keeps_the_newest_report() -> None:
    book = LagBook()
    assert book.record("a:1", LagReport({"T": {0: LagInfo(1, 1, 0)}}, 10, 100))
    assert not book.record("a:1", LagReport({"T": {0: LagInfo(0, 0, 0)}}, 9, 101))
    assert book.record("a:1", LagReport({"T": {0: LagInfo(2, 2, 0)}}, 11, 102))
    assert book.reports()["a:1"].lags["T"][0] == LagInfo(2, 2, 0)


def test_heartbeat_book_decides_members_only_and_prunes_the_window() -> None:
    book = HeartbeatBook(HeartbeatSettings())
    for t in (0, 100, 200):
        book.record("a:1", t)
    book.record("stray:1", 200)
    statuses = book.decide({"a:1", "b:1"}, 250)
    assert set(statuses) == {"a:1", "b:1"} and statuses["a:1"].last_heartbeat_ms == 200
    assert statuses["b:1"].alive  # new: optimistically alive
    assert not book.decide({"a:1", "b:1"}, 501)["a:1"].alive
    assert book.senders() == {"a:1", "stray:1"}
    assert not book.decide({"a:1"}, 5000)["a:1"].alive  # old heartbeats left the window


@pytest.mark.parametrize(("peer", "expected"), [("h:1", "h:1"), ("http://h:2/", "h:2")])
def test_normalize_peer(peer: str, expected: str) -> None:
    assert normalize_peer(peer) == expected


def test_normalize_peer_needs_a_port() -> None:
    with pytest.raises(ValueError, match="host:port"):
        normalize_peer("h")


def test_a_stalled_checker_decides_nothing_on_waking() -> None:
    from headwater.cluster._heartbeats import HeartbeatBook
    from headwater.cluster.liveness import DEFAULT_SETTINGS

    book = HeartbeatBook(DEFAULT_SETTINGS)
    for at in (0, 100, 200):
        book.record("peer:1", at)
    assert book.decide({"peer:1"}, 250)["peer:1"].alive
    # SIGSTOP for 5 s: on waking, the missed heartbeats were never read, so nobody is marked down
    # until peers have had the time to be heard (missed threshold + 1 send intervals).
    assert book.decide({"peer:1"}, 5250)["peer:1"].alive
    assert book.decide({"peer:1"}, 5251)["peer:1"].alive  # a second round right away
    book.record("peer:1", 5260)  # the queued heartbeats arrive
    assert book.decide({"peer:1"}, 5450)["peer:1"].alive
    assert book.decide({"peer:1"}, 5650)["peer:1"].alive
    # A peer that really stopped is still marked down on the following rounds.
    assert not book.decide({"peer:1"}, 5850)["peer:1"].alive
