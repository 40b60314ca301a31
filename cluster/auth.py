"""Authenticating traffic between servers: an HMAC over the request, checked in constant time. Pure.

When ``cluster.auth.secret`` is set, every internal request (``/heartbeat``, ``/lag``, controller
traffic, forwarded pull queries) carries ``X-Headwater-Auth: t=<ms>,sig=<hex>``, where ``sig`` is
HMAC-SHA256 over ``t``, the method, the path and the body. A receiver accepts it only if the
signature matches and ``t`` is within ``max_skew_ms`` of its own clock (so a captured request cannot
be replayed later). Anything else is refused with 401 and changes nothing. The secret is never sent.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

HEADER = "X-Headwater-Auth"
"""The request header that carries the signature."""

_VALUE = re.compile(r"t=(\d{1,20}),sig=([0-9a-f]{64})")


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a request is authentic, and if not, why (for the 401 message and the log)."""

    ok: bool
    reason: str = ""


def _mac(secret: str, timestamp_ms: int, method: str, path: str, body: bytes) -> str:
    message = b"\n".join(
        (str(timestamp_ms).encode(), method.upper().encode(), path.encode("utf-8"), body)
    )
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def sign(secret: str, now_ms: int, method: str, path: str, body: bytes) -> str:
    """The header value for a request sent at ``now_ms``."""
    return f"t={now_ms},sig={_mac(secret, now_ms, method, path, body)}"


def verify(
    secret: str,
    header: str | None,
    now_ms: int,
    method: str,
    path: str,
    body: bytes,
    *,
    max_skew_ms: int = 30_000,
) -> Verdict:
    """Check a request's header value.

    Args:
        secret: the cluster's shared secret.
        header: the ``X-Headwater-Auth`` value received (None if absent).
        now_ms: the receiver's clock.
        method, path, body: the request as received.
        max_skew_ms: how far the sender's timestamp may be from ``now_ms``.
    """
    if not header:
        return Verdict(False, f"missing {HEADER} header")
    match = _VALUE.fullmatch(header.strip())
    if match is None:
        return Verdict(False, f"malformed {HEADER} header")
    timestamp = int(match.group(1))
    if abs(now_ms - timestamp) > max_skew_ms:
        return Verdict(False, "signature timestamp too far from this server's clock")
    expected = _mac(secret, timestamp, method, path, body)
    if not hmac.compare_digest(expected, match.group(2)):
        return Verdict(False, "bad signature")
    return Verdict(True)
