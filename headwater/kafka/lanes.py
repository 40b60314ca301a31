"""Which of a reader's two consumers reads a topic partition: the one with short fetch waits or
the one with long ones. Pure.

Workaround "a short fetch wait crawls over one-record batches" (notes/kafka-and-spark-here.md):
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
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Lane", "next_lane"]


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
