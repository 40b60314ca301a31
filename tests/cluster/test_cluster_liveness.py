"""cluster/liveness.py: KLIP-12 failure detection, as table cases and a simulated cluster clock."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.cluster.liveness import (
    DEFAULT_SETTINGS,
    HeartbeatSettings,
    HostStatus,
    decide,
    live_hosts,
    missed_slots,
    worst_case_detection_ms,
)

UP = HostStatus(alive=True, last_heartbeat_ms=1000, since_ms=0)
DOWN = HostStatus(alive=False, last_heartbeat_ms=1000, since_ms=1400)


def test_defaults_detect_a_dead_host_within_one_second() -> None:
    assert worst_case_detection_ms(DEFAULT_SETTINGS) == 3 * 100 + 200
    assert worst_case_detection_ms() <= 1000


@pytest.mark.parametrize(
    ("since", "now", "expected"),
    [
        (1000, 1000, 0),
        (1000, 1100, 0),
        (1000, 1101, 1),
        (1000, 1200, 1),
        (1000, 1301, 3),
        (5, 0, 0),
    ],
)
def test_missed_slots_counts_whole_intervals_like_ksqldb(
    since: int, now: int, expected: int
) -> None:
    assert missed_slots(since, now) == expected


@pytest.mark.parametrize(
    ("now", "alive", "missed"),
    [(1100, True, 0), (1250, True, 2), (1300, True, 2), (1301, False, 3), (1900, False, 8)],
)
def test_a_silent_host_is_down_after_missed_threshold_slots_and_no_sooner(
    now: int, alive: bool, missed: int
) -> None:
    status = decide({"b": UP}, {"b": [900, 1000]}, now)["b"]
    assert (status.alive, status.missed, status.last_heartbeat_ms) == (alive, missed, 1000)


def test_the_status_change_time_moves_only_on_a_flip() -> None:
    assert decide({"b": UP}, {}, 1200)["b"].since_ms == 0
    assert decide({"b": UP}, {}, 1400)["b"].since_ms == 1400
    assert decide({"b": DOWN}, {}, 1600)["b"].since_ms == 1400


def test_a_host_stopping_is_marked_down_at_the_first_check_past_the_threshold() -> None:
    statuses: dict[str, HostStatus] = {}
    sent = list(range(0, 1001, 100))  # the last heartbeat arrives at 1000, then the host dies
    down_at = None
    for now in range(50, 3000, 200):  # checks every 200 ms
        statuses = decide(statuses, {"b": [t for t in sent if t <= now]}, now)
        if not statuses["b"].alive and down_at is None:
            down_at = now
    assert down_at == 1450  # 1250 is within 300 ms of 1000; 1450 is the first check past it
    assert down_at - 1000 <= worst_case_detection_ms()


@pytest.mark.parametrize(
    ("times", "now", "alive"),
    [
        ([2000], 2010, False),  # one stray heartbeat is not enough
        ([1900, 2000], 2010, True),  # two in a row
        ([1800, 2000], 2010, True),  # the second one interval late still counts as in a row
        ([1799, 2000], 2010, False),  # two missed slots between them: not in a row
        ([1500, 1799, 2000], 2010, False),
        ([1000, 1100], 1500, False),  # in a row, but already silent for too long
        ([1900, 1900, 2000], 2010, True),  # a duplicate arrival time counts once
        ([1900, 2000, 2100], 2050, True),  # a time after now is ignored
    ],
)
def test_a_down_host_comes_back_after_received_threshold_heartbeats_in_a_row(
    times: list[int], now: int, alive: bool
) -> None:
    assert decide({"b": DOWN}, {"b": times}, now)["b"].alive is alive


def test_heartbeats_outside_the_window_do_not_count_towards_recovery() -> None:
    tight = HeartbeatSettings(window_ms=400)
    assert decide({"b": DOWN}, {"b": [1580, 1700]}, 1990, tight)["b"].alive is False
    assert decide({"b": DOWN}, {"b": [1600, 1700]}, 1990, tight)["b"].alive is True


def test_a_heartbeat_late_by_less_than_one_interval_never_flips_status() -> None:
    statuses = {"b": HostStatus(alive=True, last_heartbeat_ms=0, since_ms=0)}
    times = [i * 100 + (99 if i % 2 else 0) for i in range(1, 40)]  # every other one 99 ms late
    for now in range(0, 3900, 37):
        statuses = decide(statuses, {"b": [t for t in times if t <= now]}, now)
        assert statuses["b"].alive, now


def test_a_newly_seen_host_is_alive() -> None:
    status = decide({}, {"c": [500]}, 520)["c"]
    assert status == HostStatus(alive=True, last_heartbeat_ms=500, since_ms=520, missed=0)


def test_a_new_member_never_heard_from_gets_the_same_grace_as_a_heartbeat() -> None:
    first = decide({}, {}, 1000, members=["c"])
    assert first["c"] == HostStatus(alive=True, last_heartbeat_ms=None, since_ms=1000)
    assert decide(first, {}, 1300, members=["c"])["c"].alive is True
    assert decide(first, {}, 1301, members=["c"])["c"].alive is False


def test_a_host_left_out_of_members_is_removed_and_the_rest_kept_in_id_order() -> None:
    previous = {"b": UP, "a": UP, "gone": UP}
    result = decide(previous, {"gone": [1050]}, 1100, members=["b", "a"])
    assert list(result) == ["a", "b"]
    assert list(decide(previous, {"z": [1090]}, 1100)) == ["a", "b", "gone", "z"]


def test_live_hosts_lists_the_alive_ones() -> None:
    assert live_hosts({"a": UP, "b": DOWN}) == frozenset({"a"})


@pytest.mark.parametrize(
    "kwargs",
    [
        {"send_interval_ms": 0},
        {"check_interval_ms": -1},
        {"missed_threshold": 1},
        {"received_threshold": 0},
        {"window_ms": 300},  # the window would decide before the missed threshold
        {"received_threshold": 20},  # twenty heartbeats in a row do not fit in 2 s
    ],
)
def test_settings_out_of_range_are_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        HeartbeatSettings(**kwargs)


@settings(max_examples=150, derandomize=True, database=None, deadline=None)
@given(
    start=st.integers(0, 10_000),
    jitters=st.lists(st.integers(0, 99), min_size=60, max_size=60),
    delays=st.lists(st.integers(0, 50), min_size=60, max_size=60),
    kill_after=st.integers(500, 5000),
    phase=st.integers(0, 199),
)
def test_measured_a_killed_host_is_down_within_one_second_and_never_before(
    start: int, jitters: list[int], delays: list[int], kill_after: int, phase: int
) -> None:
    """Simulate one peer: heartbeats each up to 99 ms late, delivered up to 50 ms later, checks
    every 200 ms at an arbitrary phase; the peer dies at ``killed``."""
    send = DEFAULT_SETTINGS.send_interval_ms
    killed = start + kill_after
    sends = [start + i * send + j for i, j in enumerate(jitters)]
    arrivals = [s + d for s, d in zip(sends, delays, strict=True) if s <= killed]
    statuses: dict[str, HostStatus] = {}
    down_at = None
    now = start + phase
    while down_at is None and now < killed + 2000:
        statuses = decide(statuses, {"b": [a for a in arrivals if a <= now]}, now)
        if not statuses["b"].alive:
            down_at = now
        now += DEFAULT_SETTINGS.check_interval_ms
    assert down_at is not None and down_at > killed  # never a false alarm while it was running
    assert down_at - max(arrivals) <= worst_case_detection_ms()
    assert down_at - killed <= 1000


@settings(max_examples=100, derandomize=True, database=None, deadline=None)
@given(
    times=st.lists(st.integers(0, 3000), max_size=30),
    alive=st.booleans(),
    now=st.integers(0, 3500),
)
def test_the_decision_ignores_the_order_heartbeats_are_listed_in(
    times: list[int], alive: bool, now: int
) -> None:
    previous = {"b": HostStatus(alive=alive, last_heartbeat_ms=None, since_ms=0)}
    forward = decide(previous, {"b": times}, now)
    assert decide(previous, {"b": list(reversed(times))}, now) == forward
    assert decide(previous, {"b": sorted(times)}, now) == forward
