"""The command-log record: a versioned envelope around one catalog command, and its byte codec.

No I/O. A record is what one server appends to the command topic after validating a statement
(docs/architecture.md, "The command log"). It carries everything an executor needs to apply it
deterministically, without re-parsing SQL or looking at the outside world:

- ``command_id``: unique per submission; executors never apply one id twice, and a submitter whose
  commit failed or timed out looks it up to learn whether the command landed;
- ``format_version``: a server that reads a version newer than it knows stops (DEGRADED), never skips;
- ``validated_offset``: the command topic's end offset the submitter had fully applied when it
  validated; the compare-and-append rule accepts the record only if no other record lies between;
- ``statement_text``: the statement as the user wrote it (after variable substitution), for
  SHOW QUERIES, DESCRIBE EXTENDED and audit;
- ``command``: the planned change, a JSON-able mapping produced by the metastore's planner.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from headwater.metastore.errors import UnreadableRecord

#: The record format this code writes, and the newest it can read.
FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class CommandRecord:
    """One record of the command log."""

    command_id: str
    validated_offset: int
    statement_text: str
    command: Mapping[str, Any]
    format_version: int = FORMAT_VERSION
    submitted_by: str = ""

    @property
    def kind(self) -> str:
        """The command's type, e.g. ``create_source``."""
        return str(self.command.get("type", ""))


def new_command_id() -> str:
    """A fresh, globally unique command id."""
    return uuid.uuid4().hex


def encode(record: CommandRecord) -> bytes:
    """Serialize a record to the bytes stored in the command topic."""
    body = {
        "format": record.format_version,
        "id": record.command_id,
        "validatedOffset": record.validated_offset,
        "statementText": record.statement_text,
        "submittedBy": record.submitted_by,
        "command": record.command,
    }
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode("utf-8")


def decode(data: bytes | None) -> CommandRecord:
    """Parse the bytes of a command-topic record.

    Raises:
        UnreadableRecord: the bytes are not a record, or its format is newer than this server knows.
    """
    if data is None:
        raise UnreadableRecord("command record has no value")
    try:
        body = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UnreadableRecord(f"command record is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise UnreadableRecord("command record is not a JSON object")
    version = body.get("format")
    if not isinstance(version, int) or isinstance(version, bool):
        raise UnreadableRecord("command record has no format version")
    if version > FORMAT_VERSION:
        raise UnreadableRecord(
            f"command record format {version} is newer than this server's {FORMAT_VERSION}: "
            "upgrade this server to read it"
        )
    try:
        command_id = body["id"]
        offset = body["validatedOffset"]
        command = body["command"]
    except KeyError as exc:
        raise UnreadableRecord(f"command record lacks field {exc.args[0]!r}") from exc
    if not isinstance(command_id, str) or not command_id:
        raise UnreadableRecord("command record has an invalid id")
    if not isinstance(offset, int) or isinstance(offset, bool):
        raise UnreadableRecord("command record has an invalid validatedOffset")
    if not isinstance(command, dict) or not isinstance(command.get("type"), str):
        raise UnreadableRecord("command record has no command type")
    return CommandRecord(
        command_id=command_id,
        validated_offset=offset,
        statement_text=str(body.get("statementText", "")),
        command=command,
        format_version=version,
        submitted_by=str(body.get("submittedBy", "")),
    )
