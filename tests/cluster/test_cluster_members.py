"""cluster.members: announcements and the member list every server folds identically."""

from __future__ import annotations

import pytest

from headwater.cluster.members import BadAnnouncement, Member, current, decode, encode, fold


def test_round_trip_and_parts() -> None:
    member = Member("10.0.0.5:8088", {"zone": "z1"}, 1234)
    again = decode(encode(member))
    assert again.server_id == "10.0.0.5:8088" and dict(again.tags) == {"zone": "z1"}
    assert again.start_time_ms == 1234 and (again.host, again.port) == ("10.0.0.5", 8088)


def test_newest_start_wins_whatever_the_order() -> None:
    old, new = Member("a:1", {"zone": "z1"}, 10), Member("a:1", {"zone": "z2"}, 20)
    other = Member("b:1", {}, 5)
    forward = fold(fold(fold({}, old), other), new)
    backward = fold(fold(fold({}, new), other), old)
    assert forward == backward
    assert dict(forward["a:1"].tags) == {"zone": "z2"} and set(forward) == {"a:1", "b:1"}


@pytest.mark.parametrize(
    "data",
    [
        None,
        b"",
        b"nope",
        b"[]",
        b'{"v": 2, "server": "a:1"}',
        b'{"v": 1, "server": "a"}',
        b'{"v": 1, "server": "a:1", "tags": []}',
        b'{"v": 1, "server": "a:1", "start": "x"}',
    ],
)
def test_bad_announcements_are_refused(data: bytes | None) -> None:
    with pytest.raises(BadAnnouncement):
        decode(data)


def test_a_leave_replaces_its_server_and_a_restart_replaces_the_leave() -> None:
    running = Member("a:1", {}, 10)
    left = decode(encode(Member("a:1", {}, 10, left=True)))
    assert left.left and b'"left"' not in encode(running)  # first-release readers see no change
    members = fold(fold({}, running), left)
    assert members["a:1"].left
    restarted = fold(members, Member("a:1", {}, 20))
    assert not restarted["a:1"].left


def test_current_members_leave_out_the_departed_and_the_long_silent() -> None:
    members = {
        "me:1": Member("me:1", {}, 1),
        "a:1": Member("a:1", {}, 1),
        "b:1": Member("b:1", {}, 1, left=True),
        "c:1": Member("c:1", {}, 1),
    }
    seen = {"a:1": 95_000, "b:1": 99_000, "c:1": 30_000, "me:1": 0}
    assert set(current(members, seen, 100_000, 60_000, "me:1")) == {"me:1", "a:1"}
    assert set(current(members, seen, 100_000, 80_000, "me:1")) == {"me:1", "a:1", "c:1"}


def test_a_stopping_server_leaves_and_a_killed_one_expires(memory_broker) -> None:  # type: ignore[no-untyped-def]
    import time
    import uuid

    from headwater.cluster._membership import MembersFollower

    topic = f"members-{uuid.uuid4().hex[:8]}"
    settings = memory_broker.settings()
    watcher = MembersFollower(
        settings, topic, Member("w:1", {}, 1), announce_interval_ms=100, expiry_ms=1000
    )
    leaver = MembersFollower(
        settings, topic, Member("l:1", {}, 1), announce_interval_ms=100, expiry_ms=1000
    )
    silent = MembersFollower(
        settings, topic, Member("s:1", {}, 1), announce_interval_ms=100, expiry_ms=1000
    )
    for follower in (watcher, leaver, silent):
        follower.start()
    try:
        deadline = time.monotonic() + 10
        while set(watcher.members()) != {"w:1", "l:1", "s:1"}:
            assert time.monotonic() < deadline, watcher.members()
            time.sleep(0.05)
        leaver.stop()  # a clean stop: gone at once
        silent.stop(leave=False)  # as if killed: gone once its announcements are too old
        left_at = time.monotonic()
        while "l:1" in watcher.members():
            assert time.monotonic() - left_at < 3, "the leave was not seen"
            time.sleep(0.05)
        assert "s:1" in watcher.members()
        while "s:1" in watcher.members():
            assert time.monotonic() - left_at < 5, "a silent member never expired"
            time.sleep(0.05)
        assert time.monotonic() - left_at > 0.7  # not before its expiry
    finally:
        for follower in (watcher, leaver, silent):
            follower.stop(leave=False)
