"""When to send a request again, and where: a pure decision over the failure and the attempt
count. No I/O, no clock: `_http.py` measures, calls `plan_retry`, sleeps and sends.

Rules:
- The request never reached a server (connection refused, connect timeout) or the server said
  503 (catch-up timeout, not ready, shutting down): try the next server. Between full rounds over
  the server list, wait `backoff_s` (doubling, capped at `max_backoff_s`, and for a 503 at most
  its Retry-After).
- The request was sent but no answer came (read timeout, dropped connection): the same, but only
  for idempotent requests (pull queries, GET); a statement sent to `/ksql` may have run.
- 429: wait the server's Retry-After (or the backoff), then try the same server again; give up at
  once when Retry-After is longer than `max_retry_after_s`.
- At most `(retries + 1) * len(servers)` attempts in all.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Failure", "FailureKind", "RetryPolicy", "Step", "plan_retry"]


class FailureKind(enum.Enum):
    """How an attempt failed."""

    CONNECT = "connect"  # never reached the server
    NO_ANSWER = "no_answer"  # sent, but the answer did not come (timeout, dropped connection)
    UNAVAILABLE = "unavailable"  # HTTP 503
    THROTTLED = "throttled"  # HTTP 429


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed attempt: its kind and the server's Retry-After in seconds, if it sent one."""

    kind: FailureKind
    retry_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How persistent the driver is. `retries` counts extra rounds over the server list."""

    retries: int = 2
    backoff_s: float = 0.1
    max_backoff_s: float = 2.0
    max_retry_after_s: float = 10.0


@dataclass(frozen=True, slots=True)
class Step:
    """What to do next: wait `delay_s`, then send to the next server (`failover`) or the same."""

    delay_s: float
    failover: bool


def _backoff(policy: RetryPolicy, rounds: int) -> float:
    return float(min(policy.backoff_s * (2 ** max(rounds - 1, 0)), policy.max_backoff_s))


def plan_retry(
    failure: Failure, *, attempts: int, servers: int, idempotent: bool, policy: RetryPolicy
) -> Step | None:
    """Decide whether and how to retry after a failed attempt.

    Args:
        failure: how the last attempt failed.
        attempts: attempts made so far, the failed one included (>= 1).
        servers: how many server URLs the connection knows (>= 1).
        idempotent: whether sending the request twice is harmless.
        policy: the limits.

    Returns:
        The next step, or None to give up.
    """
    if attempts >= (policy.retries + 1) * servers:
        return None
    if failure.kind is FailureKind.NO_ANSWER and not idempotent:
        return None
    hinted = failure.retry_after_s
    if hinted is not None and hinted > policy.max_retry_after_s:
        return None
    if failure.kind is FailureKind.THROTTLED:
        return Step(hinted if hinted is not None else _backoff(policy, attempts), failover=False)
    if attempts % servers:  # servers left to try in this round: go on at once
        return Step(0.0, failover=True)
    delay = _backoff(policy, attempts // servers)
    if hinted is not None and failure.kind is not FailureKind.UNAVAILABLE:
        delay = hinted
    elif hinted is not None:
        # a 503's Retry-After (whole seconds) is an upper bound: a replica catching up, a write
        # on its way in, is usually a matter of milliseconds; back off from 0.1 s up to it
        delay = min(delay, hinted)
    return Step(delay, failover=True)
