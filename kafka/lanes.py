"""Which of a reader's two consumers reads a topic partition: the one with short fetch waits or
the one with long ones. Pure.

Workaround "a short fetch wait crawls over one-record batches" (docs/embedded-broker.md):
Tansu answers a fetch only after `fetch.wait.max.ms`, so a reader at its end wants a short wait (a
new record arrives within tens of ms); but with a short wait and many one-record batches behind the
position (what INSERT ... VALUES writes, and every command of the command log), Tansu answers empty
fetches again and again. Measured on the durable broker, 3,000 one-record batches: 110 s at a 20 ms
wait (27 records/s), 4.1 s at 100 ms, 2.9 s at 500 ms. A replica moved to a server, rebuilt from
offset 0 while the cluster is busy, never caught up within minutes.

So the readers that must be both fresh and able to catch up (the table restorer, the command
runner) read with two consumers, each partition with one of them:
- `Lane.LIVE` (short wait): every partition starts here (a reader at its end is current within a
  fetch), and stays while it is at most `behind_limit` records behind the end it sees;
- `Lane.CATCH_UP` (long wait: each fetch brings as much as the broker has): a partition further
  behind, until it reaches the end of its partition (an end-of-partition event), then back to LIVE.

On a real Kafka cluster a fetch is answered as soon as records arrive, so the catch-up lane's long
wait costs nothing there either.

Workaround "a short fetch wait finds nothing at the end of a long log" (durable broker): how long Tansu
takes to find a position grows with the number of batches before it; past ~1,300 one-record batches
a 20 ms wait expires before Tansu finds the record at the end, every time, so a live consumer at its
end never sees a new record, although its fetches report the new end (40 ms still worked at 2,000).
`live_wait_after_stall` lengthens the live consumer's wait when that happens.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Lane", "behind_since", "live_wait_after_stall", "next_lane"]


class Lane(Enum):
    """A reader's consumer: the one with long fetch waits, or the one with short ones."""

    CATCH_UP = "catch-up"
    LIVE = "live"


def next_lane(lane: Lane, position: int, end: int | None, at_end: bool, behind_limit: int) -> Lane:
    """Where a topic partition should be read from now.

    Args:
        lane: Where it is read now.
        position: The lowest position of the stores it feeds.
        end: Its end offset as its reader last saw it (None: not known yet).
        at_end: Whether its reader just reached the end of the partition at `position`.
        behind_limit: Most records a partition may be behind and still be read live.
    """
    if lane is Lane.CATCH_UP:
        return Lane.LIVE if at_end else Lane.CATCH_UP
    if end is not None and end - position > behind_limit:
        return Lane.CATCH_UP
    return Lane.LIVE


def behind_since(since: float | None, position: int, end: int | None, now: float) -> float | None:
    """Since when a consumer has seen its end beyond its position with no record: `since` while it
    still is (`now` when it just became so), None once it is not (at its end, or end not known).
    A record received resets it (the caller passes None)."""
    if end is None or end <= position:
        return None
    return now if since is None else since


def live_wait_after_stall(
    wait_ms: int, position: int, end: int | None, behind_s: float, stall_s: float, cap_ms: int
) -> int | None:
    """The longer fetch wait a live consumer needs, or None while it is not stalled.

    Stalled: the end its fetches report has lain beyond its position for `stall_s` (`behind_s`, see
    :func:`behind_since`) without a record coming. (An open transaction looks the same to a
    read_committed reader for as long as it stays open: the wait then grows too, which costs
    freshness, never a record.)

    Args:
        wait_ms: The live consumer's fetch wait now.
        position: Where it reads.
        end: The end its latest fetch reported (None: not known yet).
        behind_s: How long the end has been beyond `position` with no record received.
        stall_s: How long that may last before the wait is lengthened.
        cap_ms: The longest wait (the catch-up consumer's).
    """
    if end is None or end <= position or behind_s < stall_s or wait_ms >= cap_ms:
        return None
    return min(wait_ms * 2, cap_ms)
