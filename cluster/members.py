"""Who is in the cluster: the announcements servers write to the service's members topic. Pure.

Every server of a service appends one announcement when it starts (and again periodically, so a
compacted or truncated topic still lists it): its id (``host:port``, as peers reach it), its
``client.tag.*`` tags and its start time. Every server folds the topic into the same member list;
the newest announcement of an id wins (a restarted server replaces its old entry). Whether a member
is alive is not decided here but by heartbeats (``liveness``).

Members leave: a server that stops appends a last announcement marked ``left`` (with its start
time, so it replaces its own entry and a later restart replaces it again), and a member that has
not announced itself for ``expiry_ms`` (it was killed, or moved) is gone too: ``current`` leaves
both out, so nobody heartbeats, lists or assigns to a server that is not coming back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

FORMAT_VERSION = 1


class BadAnnouncement(ValueError):
    """A members-topic record that is not an announcement this version can read."""


@dataclass(frozen=True, slots=True)
class Member:
    """A server of the cluster, as it announced itself.

    Attributes:
        server_id: ``host:port`` where peers reach its HTTP API.
        tags: its ``client.tag.<name>`` values (rack awareness, KIP-708).
        start_time_ms: when it started (a newer start replaces an older announcement).
        left: it announced that it stopped.
    """

    server_id: str
    tags: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    start_time_ms: int = 0
    left: bool = False

    @property
    def host(self) -> str:
        """The host part of the id."""
        return self.server_id.rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        """The port part of the id."""
        return int(self.server_id.rsplit(":", 1)[1])


def encode(member: Member) -> bytes:
    """The members-topic record value of an announcement."""
    body: dict[str, object] = {
        "v": FORMAT_VERSION,
        "server": member.server_id,
        "tags": dict(member.tags),
        "start": member.start_time_ms,
    }
    if member.left:  # absent otherwise: a server of the first release reads every other record
        body["left"] = True
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def decode(data: bytes | None) -> Member:
    """An announcement from its record value.

    Raises:
        BadAnnouncement: the value is not an announcement of a known format version.
    """
    try:
        raw = json.loads(data or b"")
    except ValueError as exc:
        raise BadAnnouncement(f"not JSON: {exc}") from None
    if not isinstance(raw, dict) or raw.get("v") != FORMAT_VERSION:
        raise BadAnnouncement(f"unknown announcement format: {str(raw)[:80]}")
    server, tags, start = raw.get("server"), raw.get("tags", {}), raw.get("start", 0)
    left = raw.get("left", False)
    if (
        not isinstance(server, str)
        or ":" not in server
        or not isinstance(tags, dict)
        or not isinstance(start, int)
        or not isinstance(left, bool)
    ):
        raise BadAnnouncement(f"malformed announcement: {str(raw)[:80]}")
    return Member(server, MappingProxyType({str(k): str(v) for k, v in tags.items()}), start, left)


def current(
    members: Mapping[str, Member], seen_ms: Mapping[str, int], now_ms: int, expiry_ms: int, me: str
) -> dict[str, Member]:
    """The members still in the cluster: not left, and announced within ``expiry_ms`` of
    ``now_ms`` (``seen_ms``: when each id last announced itself); ``me`` always."""
    return {
        sid: m
        for sid, m in members.items()
        if sid == me or (not m.left and now_ms - seen_ms.get(sid, now_ms) <= expiry_ms)
    }


def fold(members: Mapping[str, Member], member: Member) -> dict[str, Member]:
    """The member list after one announcement: the newest start time of each id wins (a leave
    carries its server's start time, so it replaces that server's entry)."""
    current = members.get(member.server_id)
    updated = dict(members)
    if current is None or member.start_time_ms >= current.start_time_ms:
        updated[member.server_id] = member
    return updated
