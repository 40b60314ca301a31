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
def test_anything_altered_or_replayed_is_refused(
    secret: str, header_time: int, now: int, method: str, path: str, body: bytes, reason: str
) -> None:
    header = sign(secret, header_time, "POST", "/heartbeat", b"x")
    verdict = verify(SECRET, header, now, method, path, body, max_skew_ms=40_000)
    assert not verdict.ok and reason in verdict.reason


@pytest.mark.parametrize(
    "header", [None, "", "t=1", "sig=ab", "t=x,sig=" + "0" * 64, "Bearer s3cret"]
)
def test_missing_or_malformed_headers_are_refused(header: str | None) -> None:
    verdict = verify(SECRET, header, 0, "POST", "/heartbeat", b"")
    assert not verdict.ok and ("missing" in verdict.reason or "malformed" in verdict.reason)


# -- the generated secret: proposals on the secret topic, the first one wins --------------------

PROPOSAL_A, PROPOSAL_B = "a" * 64, "b" * 64


def test_the_first_readable_proposal_is_the_secret() -> None:
    from headwater.cluster.auth import encode_secret, first_secret

    assert first_secret([]) is None
    assert (
        first_secret([b"junk", encode_secret(PROPOSAL_A), encode_secret(PROPOSAL_B)]) == PROPOSAL_A
    )
    assert (
        first_secret([b'{"v": 2, "secret": "' + b"c" * 64 + b'"}', encode_secret(PROPOSAL_B)])
        == PROPOSAL_B
    )
    assert first_secret([b'{"v": 1, "secret": "short"}', None]) is None


@pytest.mark.kafka
def test_servers_of_a_service_agree_on_one_generated_secret(memory_broker) -> None:  # type: ignore[no-untyped-def]
    import threading
    import uuid

    from headwater.cluster._secret import agree_secret

    service = f"secret-{uuid.uuid4().hex[:8]}"
    settings = memory_broker.settings()
    found: list[str] = []
    proposals = iter([PROPOSAL_A, PROPOSAL_B, "c" * 64, "d" * 64])
    lock = threading.Lock()

    def propose() -> str:
        with lock:
            return next(proposals)

    def join() -> None:
        found.append(agree_secret(settings, service, make=propose))

    threads = [threading.Thread(target=join) for _ in range(3)]  # racing first servers
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    later = agree_secret(settings, service, make=lambda: "e" * 64)
    assert (
        len(found) == 3 and len(set(found)) == 1 and found[0] in (PROPOSAL_A, PROPOSAL_B, "c" * 64)
    )
    assert later == found[0]
    other = agree_secret(settings, f"{service}-other")
    assert other != found[0] and len(other) == 64
