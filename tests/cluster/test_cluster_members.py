"""cluster.members: announcements and the member list every server folds identically."""

from __future__ import annotations

import pytest

from headwater.cluster.members import BadAnnouncement, Member, decode, encode, fold


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
    [None, b"", b"nope", b"[]", b'{"v": 2, "server": "a:1"}', b'{"v": 1, "server": "a"}',
     b'{"v": 1, "server": "a:1", "tags": []}', b'{"v": 1, "server": "a:1", "start": "x"}'],
)
def test_bad_announcements_are_refused(data: bytes | None) -> None:
    with pytest.raises(BadAnnouncement):
        decode(data)
