"""The verdicts of the chaos soak (``tests/support/chaos_check.py``): pure functions, no broker, no server."""

from __future__ import annotations

from tests.support.chaos_check import (
    Ack,
    DdlOp,
    Log,
    LogRecord,
    Read,
    Served,
    check_output,
    ddl_mismatches,
    digests_agree,
    lag_underestimates,
    lost_writes,
    stale_answers,
)

# Partition 0 holds a=1, b=2, a=3, b=4, a=5 at offsets 0..4; partition 1 holds c=6 at offset 0.
RECORDS = [
    LogRecord(0, 0, "a", 1),
    LogRecord(0, 1, "b", 2),
    LogRecord(0, 2, "a", 3),
    LogRecord(0, 3, "b", 4),
    LogRecord(0, 4, "a", 5),
    LogRecord(1, 0, "c", 6),
]
LOG = Log(RECORDS)


def ack(key: str, value: int, partition: int, offset: int, at: float) -> Ack:
    return Ack(key, value, partition, offset, sent=at - 0.01, acked=at)


ACKS = [ack(r.key, r.value, r.partition, r.offset, at=float(r.value)) for r in RECORDS]


def test_no_write_lost_when_the_topic_and_every_table_hold_them() -> None:
    final = {"a": 5, "b": 4, "c": 6}
    assert lost_writes(ACKS, LOG, {"s1": final, "s2": final}) == []


def test_a_write_missing_from_the_topic_is_lost() -> None:
    lost = lost_writes([ack("d", 7, 1, 1, at=7.0)], LOG, {})
    assert lost == ["d=7 acknowledged at 1/1: no such record, not in the topic"]


def test_an_offset_holding_another_record_is_a_lost_write() -> None:
    (why,) = lost_writes([ack("c", 9, 1, 0, at=7.0)], LOG, {})
    assert why.startswith("c=9 acknowledged at 1/0: that offset holds")


def test_a_table_holding_an_older_value_or_none_loses_the_write() -> None:
    lost = lost_writes(ACKS, LOG, {"s1": {"a": 3, "b": 4}})
    assert lost == [
        "a=5 (offset 4): the table on s1 holds 3 (offset 2)",
        "c=6 (offset 0): the table on s1 holds None (offset None)",
    ]


def test_a_table_holding_a_newer_unacknowledged_value_loses_nothing() -> None:
    log = Log([*RECORDS, LogRecord(0, 5, "a", 8)])  # written, its acknowledgement never came
    assert lost_writes(ACKS, log, {"s1": {"a": 8, "b": 4, "c": 6}}) == []


def read(key: str, value: int | None, at: float, position: int, lag: int = 0) -> Read:
    partition = 1 if key == "c" else 0
    return Read(key, at, at + 0.01, (Served(partition, "h1", position, lag),), value)


def test_the_latest_row_is_never_stale() -> None:
    assert stale_answers([read("a", 5, at=10.0, position=5)], ACKS, LOG, bound=0) == []


def test_a_reported_lag_beyond_the_bound_is_stale() -> None:
    (why,) = stale_answers([read("a", 5, at=10.0, position=5, lag=3)], ACKS, LOG, bound=2)
    assert why == "a: h1 reported partition 0 lag 3 > 2"


def test_an_old_row_within_the_bound_is_not_stale() -> None:
    # a=3 (offset 2) while a=5 (offset 4) exists: the replica had not applied offset 4; 5 records
    # were acknowledged, so it lagged by at least 1.
    assert stale_answers([read("a", 3, at=10.0, position=4)], ACKS, LOG, bound=1) == []


def test_an_old_row_beyond_the_bound_is_stale() -> None:
    # a=1 (offset 0) while offset 2 holds a newer a: lag >= 5 - 2 = 3 > 2.
    (why,) = stale_answers([read("a", 1, at=10.0, position=1)], ACKS, LOG, bound=2)
    assert "lag >= 3 > 2" in why


def test_only_writes_acknowledged_before_the_query_count() -> None:
    # Sent at 3.5: offsets 0..2 were acknowledged (end >= 3); a=1 misses offset 2: lag >= 1.
    assert stale_answers([read("a", 1, at=3.5, position=1)], ACKS, LOG, bound=1) == []
    assert len(stale_answers([read("a", 1, at=3.5, position=1)], ACKS, LOG, bound=0)) == 1


def test_no_row_while_the_key_had_acknowledged_writes_is_stale() -> None:
    (why,) = stale_answers([read("c", None, at=10.0, position=0)], ACKS, LOG, bound=0)
    assert "lag >= 1 > 0" in why


def test_a_row_older_than_its_reported_position_is_counted() -> None:
    (why,) = stale_answers([read("a", 3, at=10.0, position=5)], ACKS, LOG, bound=100)
    assert "includes the newer record at offset 4" in why


def test_a_value_never_written_to_the_key_is_counted() -> None:
    (why,) = stale_answers([read("a", 2, at=10.0, position=5)], ACKS, LOG, bound=100)
    assert why == "a: answered 2, which was never written to that key"


def test_ddl_acknowledged_creates_and_drops_must_show_in_every_catalog() -> None:
    ops = [
        DdlOp("S1", "CREATE", "ok"),
        DdlOp("S2", "CREATE", "ok"),
        DdlOp("S2", "DROP", "ok"),
        DdlOp("S3", "CREATE", "unknown"),
        DdlOp("S1", "DROP", "refused"),
    ]
    assert ddl_mismatches(ops, {"s1": {"S1"}, "s2": {"S1", "S3"}}) == []
    assert ddl_mismatches(ops, {"s1": {"S2"}}) == [
        "s1: S1 missing after an acknowledged CREATE",
        "s1: S2 still there after an acknowledged DROP",
    ]


def test_output_check_counts_duplicates_missing_and_unexpected() -> None:
    assert check_output([1, 2, 3], [3, 1, 2]).ok
    found = check_output([1, 2, 3], [1, 1, 1, 2, 9])
    assert (found.duplicates, found.missing, found.unexpected) == (2, 1, 1)
    assert found.examples == ("duplicate 1 (x3)", "missing 3", "unexpected 9")
    assert not found.ok


def test_digests_agree_only_when_all_answered_the_same() -> None:
    assert digests_agree({"s1": "x", "s2": "x"})
    assert not digests_agree({"s1": "x", "s2": "y"})
    assert not digests_agree({"s1": "x", "s2": None})


def test_lag_underestimates_compare_reported_lags_with_acknowledged_ends() -> None:
    # Sent at 10: partition 0 has 5 acknowledged records. Position 5 lag 0: exact; position 3
    # reporting lag 1: 1 short. Sent at 2.5: 2 acknowledged, position 3 is ahead: 0.
    reads = [
        read("a", 5, at=10.0, position=5),
        read("a", 3, at=10.0, position=3, lag=1),
        read("a", 1, at=2.5, position=3),
    ]
    assert lag_underestimates(reads, ACKS) == [0, 1, 0]
