"""Who is in the cluster: the announcements servers write to the service's members topic. Pure.

Every server of a service appends one announcement when it starts (and again periodically, so a
compacted or truncated topic still lists it): its id (``host:port``, as peers reach it), its
``client.tag.*`` tags and its start time. Every server folds the topic into the same member list;
the newest announcement of an id wins (a restarted server replaces its old entry). Whether a member
is alive is not decided here but by heartbeats (``liveness``).
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
    """

    server_id: str
    tags: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    start_time_ms: int = 0

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
    return json.dumps(
        {"v": FORMAT_VERSION, "server": member.server_id, "tags": dict(member.tags),
         "start": member.start_time_ms},
        sort_keys=True, separators=(",", ":"),
    ).encode()  # fmt: skip


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
    if not isinstance(server, str) or ":" not in server or not isinstance(tags, dict) \
            or not isinstance(start, int):  # fmt: skip
        raise BadAnnouncement(f"malformed announcement: {str(raw)[:80]}")
    return Member(server, MappingProxyType({str(k): str(v) for k, v in tags.items()}), start)


def fold(members: Mapping[str, Member], member: Member) -> dict[str, Member]:
    """The member list after one announcement: the newest start time of each id wins."""
    current = members.get(member.server_id)
    updated = dict(members)
    if current is None or member.start_time_ms >= current.start_time_ms:
        updated[member.server_id] = member
    return updated
