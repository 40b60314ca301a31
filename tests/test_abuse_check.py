"""The records and verdicts of the hostile soak (``tests/support/abuse_check.py``): pure, no broker, no server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.abuse_check import (
    DEEP,
    GOOD_KINDS,
    HUGE_BYTES,
    POISON_ID,
    POISON_KINDS,
    by_a_record,
    classify_burst,
    count_mismatches,
    good_value,
    key_of,
    latency_ms,
    poison,
    verdicts,
)

SETTING = "ksql.query.persistent.active.limit"


@pytest.mark.parametrize("kind", GOOD_KINDS)
def test_every_good_record_is_json_with_its_id(kind: str) -> None:
    value = json.loads(good_value(7, kind))
    assert value["ID"] == 7 and isinstance(value["PAD"], str)


def test_the_huge_good_record_is_over_a_megabyte() -> None:
    assert len(good_value(1, "huge")) > HUGE_BYTES > 1_000_000


@pytest.mark.parametrize("kind", [k for k in POISON_KINDS if k != "tombstone"])
def test_no_poison_reads_as_an_object_with_an_integer_id(kind: str) -> None:
    _key, value = poison(kind, 3, keys=16)
    assert value is not None
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return  # not JSON at all (or too deep for Python's own parser)
    assert not (isinstance(parsed, dict) and type(parsed.get("ID")) is int)


def test_poison_that_parses_carries_an_id_no_good_record_has() -> None:
    assert json.loads(poison("json-array", 5, keys=16)[1] or b"")[0] == POISON_ID + 5


def test_deep_nesting_is_as_deep_as_announced() -> None:
    _key, value = poison("deep-nesting", 0, keys=16)
    assert value is not None and value.count(b"[") == DEEP == value.count(b"]")


def test_tombstones_and_empty_values_go_to_keys_of_their_own() -> None:
    assert poison("tombstone", 2, keys=16) == (b"tombstone2", None)
    assert poison("empty", 2, keys=16) == (b"empty2", b"")
    assert poison("not-json", 18, keys=16)[0] == key_of(2, 16).encode()


def test_an_unknown_poison_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown poison kind"):
        poison("nope", 0, keys=16)


def test_counts_equal_to_the_good_records_per_key_are_right() -> None:
    assert count_mismatches([0, 1, 2, 4], keys=2, counts={"k0": 3, "k1": 1, "other": 9}) == []


def test_a_count_off_by_one_or_missing_is_reported() -> None:
    wrong = count_mismatches([0, 1, 2, 4], keys=2, counts={"k0": 4})
    assert wrong == [
        "k0: counted 4, 3 good records written",
        "k1: counted None, 1 good records written",
    ]


@pytest.mark.parametrize(
    ("status", "body", "verdict"),
    [
        (200, [{"commandStatus": {}}], "accepted"),
        (400, {"error_code": 40000, "message": f"... limit set by {SETTING} (8) ..."}, "refused"),
        (400, {"error_code": 40000, "message": "line 1:1: mismatched input"}, "unclean"),
        (500, {"message": SETTING}, "unclean"),
        (0, "ReadTimeout()", "unclean"),
    ],
)
def test_a_burst_answer_is_accepted_cleanly_refused_or_unclean(
    status: int, body: Any, verdict: str
) -> None:
    assert classify_burst(status, body, SETTING) == verdict


def test_latency_is_nearest_rank_in_milliseconds() -> None:
    assert latency_ms([0.001 * i for i in range(1, 101)]) == {
        "p50_ms": 50.0,
        "p99_ms": 99.0,
        "max_ms": 100.0,
    }
    assert latency_ms([]) == {"p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}


def figures(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "server_exits": 0,
        "errored_queries": {},
        "left_in_error": [],
        "verified": True,
        "output": {"missing": 0, "duplicates": 0, "unexpected": 0},
        "count_mismatches": [],
        "burst": {"refused": 3, "unclean": 0},
        "max_active": 8,
        "limit": 8,
        "cycle_failures": [],
        "peak_rss_mb": 2000.0,
        "rss_budget_mb": 3136.0,
        "info": {"p99_ms": 40.0, "errors": 0},
        "info_p99_target_ms": 1000.0,
        "left_behind": [],
    }
    return {**base, **changes}


def test_an_error_of_spark_under_load_is_not_a_record_s() -> None:
    errors = {
        "CSAS_B6_52": "Python worker failed to connect back.",
        "CSAS_GOOD_1": "Failed to deserialize value from topic: abuse_src",
    }
    assert by_a_record(errors) == {
        "CSAS_GOOD_1": "Failed to deserialize value from topic: abuse_src"
    }
    spark_only = figures(errored_queries={"CSAS_B6_52": "Python worker failed to connect back."})
    assert all(v.met for v in verdicts(spark_only))


def test_a_clean_run_meets_every_target() -> None:
    assert all(v.met for v in verdicts(figures()))


@pytest.mark.parametrize(
    ("change", "figure"),
    [
        ({"server_exits": 1}, "server exits"),
        ({"errored_queries": {"CSAS_GOOD_1": "boom"}}, "queries seen in ERROR by a record"),
        ({"left_in_error": ["CSAS_B6_52"]}, "queries left in ERROR at the end"),
        (
            {"output": {"missing": 1, "duplicates": 0, "unexpected": 0}},
            "good records lost (CSAS output)",
        ),
        (
            {"output": {"missing": 0, "duplicates": 2, "unexpected": 0}},
            "good records doubled (CSAS output)",
        ),
        (
            {"output": {"missing": 0, "duplicates": 0, "unexpected": 1}},
            "poison records in the CSAS output",
        ),
        ({"count_mismatches": ["k1: ..."]}, "CTAS keys miscounted"),
        (
            {"burst": {"refused": 0, "unclean": 0}},
            "burst past the limit: refused / unclean answers",
        ),
        (
            {"burst": {"refused": 2, "unclean": 1}},
            "burst past the limit: refused / unclean answers",
        ),
        ({"max_active": 9}, "most queries active at once"),
        ({"cycle_failures": ["DROP ..."]}, "DDL cycle statements failed"),
        ({"peak_rss_mb": 4000.0}, "peak memory (PSS) of the server's tree"),
        ({"info": {"p99_ms": 1500.0, "errors": 0}}, "/info p99"),
        ({"info": {"p99_ms": 10.0, "errors": 1}}, "/info p99"),
        ({"left_behind": ["pid 1: java"]}, "processes left behind"),
    ],
)
def test_each_missed_target_is_reported(change: dict[str, Any], figure: str) -> None:
    missed = [v.figure for v in verdicts(figures(**change)) if not v.met]
    assert missed == [figure]


def test_an_output_not_read_back_meets_no_output_target() -> None:
    missed = {v.figure for v in verdicts(figures(verified=False)) if not v.met}
    assert missed == {
        "good records lost (CSAS output)",
        "good records doubled (CSAS output)",
        "poison records in the CSAS output",
        "CTAS keys miscounted",
    }
