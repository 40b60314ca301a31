"""The stored value envelope, records to store changes, and partition status transitions (pure)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pytest

from headwater.store.api import MAX_KEY_BYTES
from headwater.store.errors import StoreFormatError
from headwater.store.lag import LagInfo
from headwater.store.records import (
    HEADER_BYTES,
    NO_TIMESTAMP,
    PartitionState,
    PartitionStatus,
    StoredValue,
    changes_of,
    header_of,
    pack_value,
    unpack_value,
)


@dataclass(frozen=True, slots=True)
class FakeRecord:
    """Stands in for a confluent_kafka.Message."""

    offset_: int
    key_: bytes | None
    value_: bytes | None
    timestamp_ms: int = 1_700_000_000_000
    timestamp_type: int = 1  # TIMESTAMP_CREATE_TIME; 0 is TIMESTAMP_NOT_AVAILABLE

    def key(self) -> bytes | None:
        return self.key_

    def value(self) -> bytes | None:
        return self.value_

    def offset(self) -> int | None:
        return self.offset_

    def timestamp(self) -> tuple[int, int]:
        return self.timestamp_type, self.timestamp_ms


def strict_key(key: bytes | None) -> bytes:
    if key is None or key.startswith(b"bad"):
        raise ValueError(f"cannot decode {key!r}")
    return b"K" + key


def test_pack_and_unpack_round_trip() -> None:
    packed = pack_value(1_700_000_000_123, 42, b'{"A": 1}')
    assert len(packed) == HEADER_BYTES + 8 == 25
    assert unpack_value(packed) == StoredValue(1_700_000_000_123, 42, b'{"A": 1}')
    assert header_of(packed) == (1_700_000_000_123, 42)
    assert unpack_value(pack_value(NO_TIMESTAMP, 0, b"")) == StoredValue(-1, 0, b"")


def test_the_header_is_versioned_and_big_endian() -> None:
    packed = pack_value(1, 2, b"v")
    assert packed[:HEADER_BYTES] == b"\x01" + (1).to_bytes(8, "big") + (2).to_bytes(8, "big")


@pytest.mark.parametrize(
    "data", [b"", b"\x01short", b"\x02" + bytes(16) + b"v"], ids=["empty", "short", "version-2"]
)
def test_unreadable_stored_values_raise_store_format_error(data: bytes) -> None:
    with pytest.raises(StoreFormatError):
        unpack_value(data)


def test_out_of_range_header_fields_are_refused() -> None:
    with pytest.raises(struct.error):
        pack_value(2**63, 0, b"v")


def test_changes_keep_offset_order_and_pack_values() -> None:
    records = [
        FakeRecord(10, b"a", b"1"),
        FakeRecord(11, b"b", b"2", timestamp_type=0),
        FakeRecord(12, b"a", None),
    ]
    run = changes_of(records, strict_key, 10)
    assert run.next_offset == 13
    assert run.skipped == ()
    (k1, v1), (k2, v2), (k3, v3) = run.changes
    assert (k1, k2, k3) == (b"Ka", b"Kb", b"Ka")
    assert v1 is not None and unpack_value(v1) == StoredValue(1_700_000_000_000, 10, b"1")
    assert v2 is not None and unpack_value(v2) == StoredValue(NO_TIMESTAMP, 11, b"2")
    assert v3 is None  # a tombstone deletes the key


def test_records_whose_keys_cannot_be_stored_are_skipped_but_passed() -> None:
    records = [
        FakeRecord(0, b"bad-1", b"x"),
        FakeRecord(1, None, b"x"),
        FakeRecord(2, b"ok", b"x"),
        FakeRecord(3, b"k" * MAX_KEY_BYTES, b"too long once prefixed"),
        FakeRecord(4, b"bad-2", None),
    ]
    run = changes_of(records, strict_key, 0)
    assert [key for key, _ in run.changes] == [b"Kok"]
    assert [s.offset for s in run.skipped] == [0, 1, 3, 4]
    assert "undecodable key" in run.skipped[0].reason and "cannot decode" in run.skipped[0].reason
    assert "512 bytes" in run.skipped[2].reason
    assert run.next_offset == 5  # the position moves past skipped records too


def test_an_empty_store_key_is_skipped() -> None:
    run = changes_of([FakeRecord(7, b"x", b"v")], lambda key: b"", 0)
    assert run.changes == () and [s.offset for s in run.skipped] == [7] and run.next_offset == 8


def test_records_below_the_start_are_ignored() -> None:
    records = [FakeRecord(o, b"k%d" % o, b"v") for o in range(5, 10)]
    run = changes_of(records, strict_key, 8)
    assert [key for key, _ in run.changes] == [b"Kk8", b"Kk9"] and run.next_offset == 10
    assert changes_of(records, strict_key, 10).next_offset is None
    assert changes_of([], strict_key, 0).changes == ()


def test_a_partition_becomes_ready_at_its_end_and_stays_ready() -> None:
    status = PartitionStatus("orders", 0, position=0)
    assert status.state is PartitionState.RESTORING and status.lag is None
    status = status.advanced(500, 1000)
    assert status.state is PartitionState.RESTORING
    assert status.lag == LagInfo(500, 1000, 500)
    status = status.advanced(1000, 1000, skipped=3)
    assert status.ready and status.skipped == 3 and status.lag == LagInfo(1000, 1000, 0)
    status = status.advanced(1000, 1500)
    assert status.ready and status.lag == LagInfo(1000, 1500, 500)  # READY for good; lag reported
    assert status.advanced(1200, 900).end_offset == 1500  # an end offset never goes back
    assert status.advanced(900, None).position == 1000  # nor does a position


def test_end_of_partition_makes_a_partition_ready_below_the_high_watermark() -> None:
    status = PartitionStatus("orders", 0, position=0).advanced(40, 50, at_end=True)
    assert status.ready and status.lag == LagInfo(40, 50, 10)


def test_a_failed_partition_stays_failed() -> None:
    status = PartitionStatus("orders", 1, position=5).failed("disk full")
    assert status.state is PartitionState.FAILED and status.error == "disk full"
    assert status.advanced(100, 100).state is PartitionState.FAILED


def test_caught_up_to_and_noted_errors() -> None:
    status = PartitionStatus("orders", 0, position=0).advanced(10, 10)
    assert status.caught_up_to(None) and status.caught_up_to(10) and not status.caught_up_to(11)
    assert not PartitionStatus("orders", 0, position=10).caught_up_to(None)
    noted = status.noted("broker down")
    assert noted.error == "broker down" and noted.noted("broker down") is noted
    assert noted.noted(None).error is None


def test_status_keeps_the_newest_record_timestamp_for_staleness() -> None:
    status = PartitionStatus("t", 0, 0)
    status = status.advanced(5, 10, last_record_ms=2_000)
    status = status.advanced(6, 10, last_record_ms=1_500)  # an older timestamp arrives later
    status = status.advanced(6, 12)  # a batch without records keeps it
    assert status.last_record_ms == 2_000
    assert status.lag == LagInfo(6, 12, 6, 2_000)
