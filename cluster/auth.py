"""Authenticating traffic between servers: an HMAC over the request, checked in constant time. Pure.

Every internal request (``/heartbeat``, ``/lag``, controller
traffic, forwarded pull queries) carries ``X-Headwater-Auth: t=<ms>,sig=<hex>``, where ``sig`` is
HMAC-SHA256 over ``t``, the method, the path and the body. A receiver accepts it only if the
signature matches and ``t`` is within ``max_skew_ms`` of its own clock (so a captured request cannot
be replayed later). Anything else is refused with 401 and changes nothing. The secret is never sent.

The secret is ``cluster.auth.secret`` when set; otherwise the servers of a service agree on a
generated one through the service's secret topic (``cluster._secret``): its records are
:func:`encode_secret` values, and the first readable one in the log is the service's secret
(:func:`first_secret`), so every server picks the same one whatever the order they start in.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Iterable
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


SECRET_FORMAT_VERSION = 1


def encode_secret(secret: str) -> bytes:
    """The secret-topic record value proposing ``secret``."""
    return json.dumps(
        {"v": SECRET_FORMAT_VERSION, "secret": secret}, sort_keys=True, separators=(",", ":")
    ).encode()


def decode_secret(data: bytes | None) -> str | None:
    """The secret a secret-topic record proposes (None: not a record this version reads)."""
    try:
        raw = json.loads(data or b"")
    except ValueError:
        return None
    if not isinstance(raw, dict) or raw.get("v") != SECRET_FORMAT_VERSION:
        return None
    secret = raw.get("secret")
    return secret if isinstance(secret, str) and len(secret) >= 32 else None


def first_secret(values: Iterable[bytes | None]) -> str | None:
    """The service's secret: the first readable proposal among the topic's record values, in
    offset order (None: there is none yet)."""
    for value in values:
        secret = decode_secret(value)
        if secret is not None:
            return secret
    return None
