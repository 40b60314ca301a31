"""The command runner's decision for one record: apply, reject as a conflict, ignore, or stop.

No I/O. Every server folds the same log through :func:`step` and so reaches the same catalog and the
same outcome for every command, whatever the broker's fencing does (docs/architecture.md, "The command
log"). The rules, in order, for a record at offset ``o``:

1. A record this server cannot read (a format from the future, corrupt bytes) stops the runner:
   the server reports DEGRADED with the reason and applies nothing after it. Never skip.
2. A command id already decided is ignored: one command id is never applied twice.
3. Compare-and-append: the record is accepted only if no other record lies between the end offset
   its submitter validated against and ``o``; that is, iff ``validated_offset`` is greater than the
   offset of the last record seen before it. Transaction markers (real Kafka) occupy offsets but
   are not records, so the rule compares with records, not with ``o`` itself.
4. An accepted command whose application fails (it cannot on a log written by correct submitters,
   but the rule must not depend on that) is rejected with the error's message, identically
   everywhere, leaving the catalog unchanged.
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from dataclasses import dataclass

from headwater.metastore.apply import apply_command
from headwater.metastore.catalog import Catalog
from headwater.metastore.errors import MetastoreError, UnreadableRecord
from headwater.metastore.records import CommandRecord, decode


class CommandState(enum.Enum):
    """What became of a command (ksqlDB's command status names)."""

    SUCCESS = "SUCCESS"
    ERROR = "ERROR"


@dataclass(frozen=True, slots=True)
class Outcome:
    """The decision every server takes for one command id."""

    command_id: str
    offset: int
    state: CommandState
    message: str
    conflict: bool = False


@dataclass(frozen=True, slots=True)
class LogPosition:
    """How far a runner has folded the log.

    Attributes:
        next_offset: every record below this offset has been decided.
        last_record_offset: the offset of the last record decided (-1 before the first).
    """

    next_offset: int = 0
    last_record_offset: int = -1


@dataclass(frozen=True, slots=True)
class Step:
    """The result of deciding one record."""

    catalog: Catalog
    position: LogPosition
    outcome: Outcome | None
    record: CommandRecord | None


def step(
    catalog: Catalog,
    position: LogPosition,
    decided: Collection[str],
    offset: int,
    value: bytes | None,
) -> Step:
    """Decide the record at ``offset``.

    Args:
        catalog: the catalog after every record before ``offset``.
        position: the runner's position before this record.
        decided: ids of the commands already decided (applied or rejected).
        offset: the record's offset in the command topic.
        value: the record's bytes.

    Returns:
        The new catalog and position, and the outcome (None when the id was already decided).

    Raises:
        UnreadableRecord: the record cannot be read; the runner must stop here, position unchanged.
    """
    record = decode(value)  # raises UnreadableRecord: the caller stops, never skips
    moved = LogPosition(next_offset=offset + 1, last_record_offset=offset)
    if record.command_id in decided:
        return Step(catalog, moved, None, record)
    if record.validated_offset <= position.last_record_offset:
        message = (
            f"command {record.command_id} was validated at offset {record.validated_offset} but "
            f"the record at offset {position.last_record_offset} was appended in between"
        )
        outcome = Outcome(record.command_id, offset, CommandState.ERROR, message, conflict=True)
        return Step(catalog, moved, outcome, record)
    try:
        applied, message = apply_command(catalog, record, offset)
    except UnreadableRecord:
        raise  # not a decision: the runner stops
    except MetastoreError as exc:
        outcome = Outcome(record.command_id, offset, CommandState.ERROR, exc.message)
        return Step(catalog, moved, outcome, record)
    outcome = Outcome(record.command_id, offset, CommandState.SUCCESS, message)
    return Step(applied, moved, outcome, record)


class Fold:
    """The runner's pure state: the log folded so far. Not thread-safe; the runner owns it.

    ``catalog`` is replaced, never mutated, on every change, so readers may take it at any time.
    """

    def __init__(
        self,
        catalog: Catalog | None = None,
        position: LogPosition | None = None,
        outcomes: dict[str, Outcome] | None = None,
    ) -> None:
        self.catalog = catalog if catalog is not None else Catalog()
        self.position = position if position is not None else LogPosition()
        self.outcomes: dict[str, Outcome] = dict(outcomes or {})
        self.last_record: CommandRecord | None = None

    def skip_to(self, offset: int) -> None:
        """Record that the reader's position is ``offset`` with no record below it left undecided.

        Transaction markers occupy offsets but are not records: a reader's position can pass them.
        """
        if offset > self.position.next_offset:
            self.position = LogPosition(offset, self.position.last_record_offset)

    def feed(self, offset: int, value: bytes | None) -> Outcome | None:
        """Decide the record at ``offset`` (records must come in offset order, none skipped).

        Raises:
            UnreadableRecord: stop here; the fold is unchanged.
        """
        if offset < self.position.next_offset:
            return self.outcomes.get(decode(value).command_id)  # already folded (a re-read)
        result = step(self.catalog, self.position, self.outcomes.keys(), offset, value)
        self.catalog = result.catalog
        self.position = result.position
        self.last_record = result.record
        if result.outcome is not None:
            self.outcomes[result.outcome.command_id] = result.outcome
        return result.outcome
