"""The records and the verdicts of the hostile soak (bench/abuse.py), as pure functions. No I/O.

The soak writes numbered good records (a unique ``ID`` each, key ``k<ID mod keys>``) to one source
stream, interleaved with poison records of every kind (``poison``), and checks at the end:

- the CSAS output holds every good ID exactly once and nothing else (``check_output`` of the chaos
  soak: a poison record that came through is "unexpected");
- the CTAS counts per key equal the good records of that key (``count_mismatches``);
- each burst statement past the active-query limit was accepted or refused cleanly: a 400 naming
  the limit (``classify_burst``);
- every figure against its target (``verdicts``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Values of poison records that would still parse carry IDs from here on: were one to come
#: through the CSAS (whose WHERE keeps ID >= 0), the output check counts it as unexpected.
POISON_ID = 10**12
#: How deep the deeply nested poison is (the server refuses JSON nested deeper than 256).
DEEP = 5_000
#: The size of a huge record (the producer and the broker are set to take it).
HUGE_BYTES = 1_200_000

#: Every kind of poison record the soak writes, in the order it cycles through them.
POISON_KINDS = (
    "deep-nesting",  # {"ID": .., "X": [[[...]]]} 5,000 deep
    "huge-garbage",  # 1.2 MB of bytes that are not JSON
    "invalid-utf8",  # JSON with invalid UTF-8 inside a string
    "nul-bytes",  # raw NUL bytes between JSON tokens
    "wrong-type-string",  # {"ID": "not a number"}
    "wrong-type-object",  # {"ID": {"a": 1}}
    "wrong-type-array",  # {"ID": [1, 2]}
    "wrong-type-bool",  # {"ID": true}
    "tombstone",  # a null value
    "empty",  # a zero-length value
    "not-json",  # plain text
    "truncated",  # JSON cut short
    "json-array",  # a JSON array where an object is expected
)

#: Good records come in these shapes (all must come through, each exactly once).
GOOD_KINDS = ("plain", "escaped-nul", "unicode", "huge")


def key_of(good_id: int, keys: int) -> str:
    """The key of a good record."""
    return f"k{good_id % keys}"


def good_value(good_id: int, kind: str) -> bytes:
    """The JSON value of good record ``good_id`` of shape ``kind`` (see ``GOOD_KINDS``)."""
    pad = {
        "plain": "p",
        "escaped-nul": "a\u0000b\u0000",
        "unicode": "\u00e9\u6f22\U0001f600",
        "huge": "h" * HUGE_BYTES,
    }[kind]
    return json.dumps({"ID": good_id, "PAD": pad}, separators=(",", ":")).encode()


def poison(kind: str, n: int, keys: int) -> tuple[bytes, bytes | None]:
    """Poison record ``n`` of ``kind``: (key, value; None is a tombstone).

    Poison that must be skipped whole goes to the good keys (a record half read would change a
    count); tombstones and empty values to keys of their own (what a stream makes of them is a
    matter of semantics, not of robustness).
    """
    key = f"k{n % keys}".encode()
    pid = POISON_ID + n
    if kind == "deep-nesting":
        return key, b'{"ID":%d,"X":' % pid + b"[" * DEEP + b"]" * DEEP + b"}"
    if kind == "huge-garbage":
        return key, (b"garbage " * (HUGE_BYTES // 8 + 1))[:HUGE_BYTES]
    if kind == "invalid-utf8":
        return key, b'{"ID":%d,"PAD":"\xff\xfe\xc3\x28 \xed\xa0\x80"}' % pid
    if kind == "nul-bytes":
        return key, b'{"ID":%d,\x00"PAD":"a"\x00}' % pid
    if kind == "wrong-type-string":
        return key, b'{"ID":"not a number","PAD":"x"}'
    if kind == "wrong-type-object":
        return key, b'{"ID":{"a":1},"PAD":"x"}'
    if kind == "wrong-type-array":
        return key, b'{"ID":[1,2],"PAD":"x"}'
    if kind == "wrong-type-bool":
        return key, b'{"ID":true,"PAD":"x"}'
    if kind == "tombstone":
        return f"tombstone{n}".encode(), None
    if kind == "empty":
        return f"empty{n}".encode(), b""
    if kind == "not-json":
        return key, b"this is not JSON at all"
    if kind == "truncated":
        return key, b'{"ID":%d,"PAD":"ab' % pid
    if kind == "json-array":
        return key, b'[%d,"x"]' % pid
    raise ValueError(f"unknown poison kind {kind!r}")


def count_mismatches(good_ids: Iterable[int], keys: int, counts: Mapping[str, int]) -> list[str]:
    """The good keys whose count (the CTAS, read by a pull query) is not their good records."""
    expected: dict[str, int] = {}
    for good_id in good_ids:
        key = key_of(good_id, keys)
        expected[key] = expected.get(key, 0) + 1
    return [
        f"{key}: counted {counts.get(key)}, {want} good records written"
        for key, want in sorted(expected.items())
        if counts.get(key) != want
    ]


def classify_burst(status: int, body: Any, setting: str) -> str:
    """One answer to a CSAS of the burst: "accepted" (200), "refused" (a clean 400 whose message
    names ``setting``) or "unclean" (anything else: another status, no answer, another error)."""
    if status == 200:
        return "accepted"
    if status == 400 and isinstance(body, dict) and setting in str(body.get("message", "")):
        return "refused"
    return "unclean"


#: Causes of a query's ERROR that are Spark's, not a record's: its Python processes failing to
#: reach the JVM on a loaded machine (the engine retries such a query after 5 s).
NOT_A_RECORD = ("failed to connect back", "CANNOT_OPEN_SOCKET", "waiting for the Python worker")


def by_a_record(errors: Mapping[str, str]) -> dict[str, str]:
    """The queries (id: first ERROR message) whose ERROR may have been caused by a record: all
    but those whose message names a known cause of Spark's (``NOT_A_RECORD``)."""
    return {
        query_id: message
        for query_id, message in errors.items()
        if not any(cause in message for cause in NOT_A_RECORD)
    }


@dataclass(frozen=True, slots=True)
class Verdict:
    """One line of the report: a figure, its target and whether it was met."""

    figure: str
    value: str
    target: str
    met: bool


def verdicts(f: Mapping[str, Any]) -> list[Verdict]:
    """Every figure of a run (bench/abuse.py's figures) against its target."""
    out = f["output"]
    burst = f["burst"]
    return [
        Verdict("server exits", str(f["server_exits"]), "0", f["server_exits"] == 0),
        Verdict(
            "queries seen in ERROR by a record",
            str(len(by_a_record(f["errored_queries"]))),
            "0",
            not by_a_record(f["errored_queries"]),
        ),
        Verdict(
            "queries left in ERROR at the end",
            str(len(f["left_in_error"])),
            "0",
            not f["left_in_error"],
        ),
        Verdict(
            "good records lost (CSAS output)",
            str(out["missing"]),
            "0",
            out["missing"] == 0 and f["verified"],
        ),
        Verdict(
            "good records doubled (CSAS output)",
            str(out["duplicates"]),
            "0",
            out["duplicates"] == 0 and f["verified"],
        ),
        Verdict(
            "poison records in the CSAS output",
            str(out["unexpected"]),
            "0",
            out["unexpected"] == 0 and f["verified"],
        ),
        Verdict(
            "CTAS keys miscounted",
            str(len(f["count_mismatches"])),
            "0",
            not f["count_mismatches"] and f["verified"],
        ),
        Verdict(
            "burst past the limit: refused / unclean answers",
            f"{burst['refused']} / {burst['unclean']}",
            ">= 1 / 0",
            burst["refused"] >= 1 and burst["unclean"] == 0,
        ),
        Verdict(
            "most queries active at once",
            str(f["max_active"]),
            f"<= {f['limit']}",
            f["max_active"] <= f["limit"],
        ),
        Verdict(
            "DDL cycle statements failed",
            str(len(f["cycle_failures"])),
            "0",
            not f["cycle_failures"],
        ),
        Verdict(
            "peak memory (PSS) of the server's tree",
            f"{f['peak_rss_mb']:,.0f} MB",
            f"<= {f['rss_budget_mb']:,.0f} MB",
            f["peak_rss_mb"] <= f["rss_budget_mb"],
        ),
        Verdict(
            "/info p99",
            f"{f['info']['p99_ms']:,.0f} ms",
            f"<= {f['info_p99_target_ms']:,.0f} ms",
            f["info"]["p99_ms"] <= f["info_p99_target_ms"] and f["info"]["errors"] == 0,
        ),
        Verdict("processes left behind", str(len(f["left_behind"])), "0", not f["left_behind"]),
    ]


def latency_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50, p99 and max of durations in seconds, in milliseconds (nearest rank; 0 when none)."""
    values = sorted(seconds)
    if not values:
        return {"p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}

    def rank(q: float) -> float:
        return values[min(len(values) - 1, max(0, math.ceil(q / 100 * len(values)) - 1))]

    return {
        "p50_ms": round(rank(50) * 1000, 1),
        "p99_ms": round(rank(99) * 1000, 1),
        "max_ms": round(values[-1] * 1000, 1),
    }
