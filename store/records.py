"""What a restorer writes into a table store, and how it tracks each partition. Pure (no I/O).

Owns three things the changelog restorer (`restorer.py`) and the pull path share:

- The stored value envelope: a store value is a fixed 17-byte header, then the Kafka record's value
  bytes unchanged. The header is a format version byte (1), the record's timestamp in milliseconds
  (signed 64-bit, big-endian; -1 when the record had none) and its offset (signed 64-bit,
  big-endian), so a pull query can answer ROWTIME and ROWOFFSET and decode the value only for the
  rows it returns. `pack_value` / `unpack_value` (or `header_of` for the header alone).
- Turning a run of consumed records of one partition into store changes (`changes_of`): the hot loop
  of restoring. A record whose value is None (a tombstone) deletes its key. A record whose key the
  table's `key_of` cannot turn into a store key (it raises), or whose store key is empty or longer
  than `MAX_KEY_BYTES`, is skipped and reported; the position still moves past it.
- A partition's restore status (`PartitionStatus`) and its transitions: RESTORING until the position
  reaches the end offset the restorer saw, READY from then on (lag is still reported), FAILED when
  the store refused a batch.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from headwater.store.api import MAX_KEY_BYTES
from headwater.store.errors import StoreFormatError
from headwater.store.lag import LagInfo

ENVELOPE_VERSION = 1
_HEADER = struct.Struct(">Bqq")
HEADER_BYTES = _HEADER.size
"""Bytes before the Kafka value in every stored value (17)."""
NO_TIMESTAMP = -1
"""The timestamp stored for a record that has none."""

KeyOf = Callable[[bytes | None], bytes]
"""Turns a Kafka record key into the table's store key; may raise any Exception for a bad key."""


@dataclass(frozen=True, slots=True)
class StoredValue:
    """A stored value, unpacked.

    Attributes:
        timestamp_ms: The Kafka record's timestamp (ms since the epoch; -1 if it had none): ROWTIME.
        offset: The Kafka record's offset in its partition: ROWOFFSET.
        value: The Kafka record's value bytes, as produced (decoded by the engine's serde).
    """

    timestamp_ms: int
    offset: int
    value: bytes


def pack_value(timestamp_ms: int, offset: int, value: bytes) -> bytes:
    """The stored form of a Kafka record's value: the header, then `value`.

    Args:
        timestamp_ms: The record's timestamp in ms (NO_TIMESTAMP when it has none).
        offset: The record's offset (>= 0).
        value: The record's value bytes.

    Returns:
        HEADER_BYTES + len(value) bytes.

    Raises:
        struct.error: If the timestamp or offset does not fit a signed 64-bit integer.
    """
    return _HEADER.pack(ENVELOPE_VERSION, timestamp_ms, offset) + value


def unpack_value(data: bytes) -> StoredValue:
    """The timestamp, offset and Kafka value kept in a stored value.

    Raises:
        StoreFormatError: If `data` is shorter than the header or has an unknown version.
    """
    timestamp_ms, offset = header_of(data)
    return StoredValue(timestamp_ms, offset, data[HEADER_BYTES:])


def header_of(data: bytes) -> tuple[int, int]:
    """(timestamp_ms, offset) of a stored value, without copying its Kafka value.

    Raises:
        StoreFormatError: If `data` is shorter than the header or has an unknown version.
    """
    if len(data) < HEADER_BYTES:
        raise StoreFormatError(f"a stored value has {len(data)} bytes, fewer than its header")
    version, timestamp_ms, offset = _HEADER.unpack_from(data)
    if version != ENVELOPE_VERSION:
        raise StoreFormatError(
            f"unknown stored value version {version} (this version writes {ENVELOPE_VERSION})"
        )
    return timestamp_ms, offset


class ChangelogRecord(Protocol):
    """What `changes_of` reads of a consumed record (`confluent_kafka.Message` has these)."""

    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def offset(self) -> int | None: ...
    def timestamp(self) -> tuple[int, int]: ...


@dataclass(frozen=True, slots=True)
class SkippedRecord:
    """A record left out of the store: its offset and why."""

    offset: int
    reason: str


@dataclass(frozen=True, slots=True)
class ChangeRun:
    """The store changes made from a run of one partition's records.

    Attributes:
        changes: (store key, packed value or None for a delete), in offset order.
        next_offset: The offset after the last record considered (None: none was).
        skipped: The records whose keys could not be stored.
    """

    changes: tuple[tuple[bytes, bytes | None], ...]
    next_offset: int | None
    skipped: tuple[SkippedRecord, ...]


def changes_of(records: Sequence[ChangelogRecord], key_of: KeyOf, start: int) -> ChangeRun:
    """Turns consumed records of one partition, in offset order, into store changes.

    Records below `start` (already in the store: a shared topic partition is read from the
    lowest position of the tables on it) are ignored.

    Args:
        records: One partition's records, offsets increasing.
        key_of: The table's key decoder; any Exception it raises skips the record.
        start: The store's position; records with a lower offset are ignored.

    Returns:
        The changes, the offset after the last record at or above `start`, and the skipped records.
    """
    if records and (records[0].offset() or 0) < start:
        records = [r for r in records if (r.offset() or 0) >= start]
    if not records:
        return ChangeRun((), None, ())
    changes: list[tuple[bytes, bytes | None]] = []
    append = changes.append
    skipped: list[SkippedRecord] = []
    pack = _HEADER.pack
    version = ENVELOPE_VERSION
    offset = 0
    for record in records:
        offset = record.offset() or 0
        try:
            key = key_of(record.key())
        except Exception as exc:  # noqa: BLE001 - key_of is the table's; any failure skips
            skipped.append(SkippedRecord(offset, f"undecodable key: {exc!r}"))
            continue
        if not 0 < len(key) <= MAX_KEY_BYTES:
            reason = f"store key of {len(key)} bytes (1..{MAX_KEY_BYTES})"
            skipped.append(SkippedRecord(offset, reason))
            continue
        value = record.value()
        if value is None:
            append((key, None))
        else:
            kind, timestamp = record.timestamp()
            append((key, pack(version, timestamp if kind else NO_TIMESTAMP, offset) + value))
    return ChangeRun(tuple(changes), offset + 1, tuple(skipped))


class PartitionState(enum.Enum):
    """Where a table partition's store is in its restore."""

    RESTORING = "RESTORING"
    """Still reading towards the end offset it saw; pull queries may answer StoreRestoring."""
    READY = "READY"
    """Reached the end offset it saw once; stays READY while it follows the changelog."""
    FAILED = "FAILED"
    """The store refused a batch (see `error`); the partition is no longer read."""


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    """A table partition's restore status, as `TableRestorer.status` reports it.

    Attributes:
        topic: The changelog topic.
        partition: The partition number (of the topic and of the table).
        position: The store's position: the next changelog offset it will read.
        end_offset: The highest end offset seen in fetch responses (None: none yet).
        state: RESTORING, READY or FAILED.
        skipped: Records left out since the restorer began reading this partition.
        error: Why the partition FAILED, or the last consumer error reported for it.
        last_record_ms: The newest timestamp among the records applied since the restorer began
            reading this partition (None: none yet); how stale the store is, in time.
        end_current: Whether the consumer can reach the partition's leader now, so `end_offset`
            is current; while it cannot (the broker is down), the lag is unknown.
    """

    topic: str
    partition: int
    position: int
    end_offset: int | None = None
    state: PartitionState = PartitionState.RESTORING
    skipped: int = 0
    error: str | None = None
    last_record_ms: int | None = None
    end_current: bool = True

    @property
    def lag(self) -> LagInfo | None:
        """KIP-535's LagInfo against `end_offset` (None until an end offset is known, and while
        the partition's leader cannot be reached)."""
        if self.end_offset is None or not self.end_current:
            return None
        return LagInfo.of(self.position, self.end_offset, self.last_record_ms)

    @property
    def ready(self) -> bool:
        """Whether the partition has reached the end offset it saw."""
        return self.state is PartitionState.READY

    def advanced(
        self,
        position: int,
        end_offset: int | None,
        skipped: int = 0,
        at_end: bool = False,
        last_record_ms: int | None = None,
    ) -> PartitionStatus:
        """The status after applying a batch up to `position` and seeing `end_offset`.

        The end offset only grows (a fetch may report an older one), and a partition whose position
        reaches its end offset becomes READY for good. A FAILED partition stays FAILED.

        Args:
            position: The store's position after the batch.
            end_offset: The end offset a fetch reported, if any.
            skipped: Records the batch left out.
            at_end: The consumer reached end of partition at `position` (READY even when the end
                offset is higher: under read_committed, records of open transactions are beyond it).
            last_record_ms: The newest record timestamp of the batch, if it had records.
        """
        end = self.end_offset
        if end_offset is not None and (end is None or end_offset > end):
            end = end_offset
        state = self.state
        if state is PartitionState.RESTORING and (at_end or (end is not None and position >= end)):
            state = PartitionState.READY
        newest = self.last_record_ms
        if last_record_ms is not None and (newest is None or last_record_ms > newest):
            newest = last_record_ms
        return replace(
            self,
            position=max(position, self.position),
            end_offset=end,
            state=state,
            skipped=self.skipped + skipped,
            last_record_ms=newest,
        )

    def failed(self, reason: str) -> PartitionStatus:
        """The status of a partition whose store refused a batch."""
        return replace(self, state=PartitionState.FAILED, error=reason)

    def reachable(self, current: bool) -> PartitionStatus:
        """The status once the consumer can (or cannot) reach the partition's leader."""
        return self if current == self.end_current else replace(self, end_current=current)

    def noted(self, error: str | None) -> PartitionStatus:
        """The status with the latest consumer error (None clears it) noted."""
        return self if error == self.error else replace(self, error=error)

    def caught_up_to(self, end_offset: int | None) -> bool:
        """Whether the partition is READY and at or past `end_offset` (None: its own end offset)."""
        target = self.end_offset if end_offset is None else end_offset
        return self.ready and (target is None or self.position >= target)
