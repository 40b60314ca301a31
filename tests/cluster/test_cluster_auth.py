"""cluster.auth: HMAC-signed internal requests."""

from __future__ import annotations

import pytest

from headwater.cluster.auth import sign, verify

SECRET = "s3cret"


def test_a_signed_request_verifies() -> None:
    header = sign(SECRET, 1_000_000, "post", "/heartbeat", b'{"a":1}')
    assert verify(SECRET, header, 1_000_500, "POST", "/heartbeat", b'{"a":1}').ok


@pytest.mark.parametrize(
    ("secret", "header_time", "now", "method", "path", "body", "reason"),
    [
        ("other", 1_000_000, 1_000_000, "POST", "/heartbeat", b"x", "bad signature"),
        (SECRET, 1_000_000, 1_000_000, "POST", "/lag", b"x", "bad signature"),
        (SECRET, 1_000_000, 1_000_000, "POST", "/heartbeat", b"y", "bad signature"),
        (SECRET, 1_000_000, 1_000_000, "GET", "/heartbeat", b"x", "bad signature"),
        (SECRET, 1_000_000, 1_040_001, "POST", "/heartbeat", b"x", "too far"),
        (SECRET, 1_040_001, 1_000_000, "POST", "/heartbeat", b"x", "too far"),
    ],
)
def test_anything_altered_or_replayed_is_refused(secret: str, header_time: int, now: int,
                                                 method: str, path: str, body: bytes,
                                                 reason: str) -> None:  # fmt: skip
    header = sign(secret, header_time, "POST", "/heartbeat", b"x")
    verdict = verify(SECRET, header, now, method, path, body, max_skew_ms=40_000)
    assert not verdict.ok and reason in verdict.reason


@pytest.mark.parametrize("header", [None, "", "t=1", "sig=ab", "t=x,sig=" + "0" * 64, "Bearer s3cret"])
def test_missing_or_malformed_headers_are_refused(header: str | None) -> None:
    verdict = verify(SECRET, header, 0, "POST", "/heartbeat", b"")
    assert not verdict.ok and ("missing" in verdict.reason or "malformed" in verdict.reason)
