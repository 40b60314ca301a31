"""The byte format of the control topic's records: controller claims and assignment decisions.

No I/O. Every record is one JSON object carrying a format version (``"v"``), a record type
(``"type"``: ``"claim"`` or ``"assignment"``) and the fields of the record of ``cluster/epochs.py``.
Encoding is canonical (sorted keys, no blanks, partitions in order), so equal records give equal
bytes.

A record this version cannot read (not JSON, an unknown type, a format version newer than
:data:`FORMAT_VERSION`, a missing or mistyped field) raises :class:`UnreadableControlRecord`. The
follower must then stop folding and report why (DEGRADED): skipping a record would let servers
disagree on the control state, which is the one thing the control topic exists to prevent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeGuard

from headwater.cluster.assignment import PartitionId
from headwater.cluster.epochs import (
    AssignmentDecision,
    ControllerClaim,
    ControlRecord,
    PartitionLeader,
)

#: The newest record format this code writes and reads. Version 2 added an assignment's
#: ``removed`` partitions; a record without any is still written as version 1 (its bytes unchanged),
#: so a server of the previous release stops (DEGRADED) only at a record it would misread.
FORMAT_VERSION = 2

_CLAIM = "claim"
_ASSIGNMENT = "assignment"


class UnreadableControlRecord(ValueError):
    """A control-topic record this server cannot read; the follower stops at it (DEGRADED).

    Attributes:
        reason: what is wrong with the record, as a sentence.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def encode(record: ControlRecord) -> bytes:
    """The control-topic record value of a claim or a decision.

    Args:
        record: a :class:`ControllerClaim` or an :class:`AssignmentDecision`.

    Returns:
        Canonical UTF-8 JSON, tagged with :data:`FORMAT_VERSION`.
    """
    body: dict[str, Any]
    if isinstance(record, ControllerClaim):
        body = {
            "type": _CLAIM,
            "server": record.server_id,
            "controllerEpoch": record.controller_epoch,
            "validatedOffset": record.validated_offset,
        }
    else:
        body = {
            "type": _ASSIGNMENT,
            "controllerEpoch": record.controller_epoch,
            "validatedOffset": record.validated_offset,
            "partitions": [
                {
                    "table": p.table,
                    "partition": p.partition,
                    "active": leader.active,
                    "standbys": list(leader.standbys),
                    "leaderEpoch": leader.leader_epoch,
                }
                for p, leader in sorted(record.assignment.items())
            ],
        }
        if record.removed:
            body["removed"] = [
                {"table": p.table, "partition": p.partition} for p in sorted(record.removed)
            ]
    body["v"] = 2 if "removed" in body else 1
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")


def decode(data: bytes | None) -> ControlRecord:
    """A claim or a decision from its record value.

    Args:
        data: the record value (None for a record without one).

    Returns:
        The record.

    Raises:
        UnreadableControlRecord: the value is not a control record of a known format version.
    """
    if data is None:
        raise UnreadableControlRecord("control record has no value")
    try:
        body = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UnreadableControlRecord(f"control record is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise UnreadableControlRecord("control record is not a JSON object")
    version = body.get("v")
    if not _is_int(version):
        raise UnreadableControlRecord("control record has no format version")
    if version > FORMAT_VERSION or version < 1:
        raise UnreadableControlRecord(
            f"control record format {version} is unknown to this server (it reads up to "
            f"{FORMAT_VERSION}): upgrade this server to read it"
        )
    kind = body.get("type")
    epoch = _int(body, "controllerEpoch")
    validated = _int(body, "validatedOffset")
    if kind == _CLAIM:
        return ControllerClaim(_str(body, "server"), epoch, validated)
    if kind == _ASSIGNMENT:
        entries = body.get("partitions")
        if not isinstance(entries, list):
            raise UnreadableControlRecord("assignment record lacks its partitions list")
        assignment: dict[PartitionId, PartitionLeader] = {}
        for entry in entries:
            partition, leader = _entry(entry)
            if partition in assignment:
                raise UnreadableControlRecord(
                    f"assignment record names {partition.table}/{partition.partition} twice"
                )
            assignment[partition] = leader
        removed = body.get("removed", [])
        if not isinstance(removed, list) or not all(isinstance(e, dict) for e in removed):
            raise UnreadableControlRecord("assignment record has an invalid removed list")
        gone = frozenset(PartitionId(_str(e, "table"), _int(e, "partition")) for e in removed)
        return AssignmentDecision(epoch, validated, assignment, gone)
    raise UnreadableControlRecord(f"unknown control record type {kind!r}")


def _entry(entry: object) -> tuple[PartitionId, PartitionLeader]:
    if not isinstance(entry, dict):
        raise UnreadableControlRecord("an assignment entry is not a JSON object")
    number = _int(entry, "partition")
    if number < 0:
        raise UnreadableControlRecord(f"an assignment entry has partition {number}")
    standbys = entry.get("standbys")
    if not isinstance(standbys, list) or not all(isinstance(s, str) and s for s in standbys):
        raise UnreadableControlRecord("an assignment entry has invalid standbys")
    partition = PartitionId(_str(entry, "table"), number)
    return partition, PartitionLeader(
        _str(entry, "active"), tuple(standbys), _int(entry, "leaderEpoch")
    )


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(body: Mapping[str, Any], name: str) -> int:
    value = body.get(name)
    if not _is_int(value):
        raise UnreadableControlRecord(f"control record lacks integer field {name!r}")
    return int(value)


def _str(body: Mapping[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise UnreadableControlRecord(f"control record lacks string field {name!r}")
    return value
