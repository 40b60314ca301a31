"""Which partitions' end offsets a consumer can still see, from librdkafka's statistics. Pure.

A store's lag is its topic's end offset minus its position. The end offset comes from fetch
responses; when the partition's leader cannot be reached (the broker died, the network split) no
fetch comes back, the last end offset stays where it was, and the lag would read 0 while the topic
may be moving on. librdkafka's statistics (``statistics.interval.ms``) say, per broker, whether its
connection is up and, per partition, which broker leads it: a partition whose leader's connection is
not up has an unknown end offset until it is up again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

__all__ = ["reachable_partitions"]

_UP = "UP"


def reachable_partitions(
    stats_json: str | bytes, assigned: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], bool]:
    """Of the ``assigned`` (topic, partition)s, whether each one's leader's connection is up.

    When no broker's connection is up (Kafka is down: librdkafka then lists only its bootstrap
    entries, and no partitions), every assigned partition is unreachable. Otherwise a partition
    whose leader is not known yet (``-1``: no metadata, e.g. just assigned) is left out: nothing is
    concluded about it. Malformed statistics give an empty answer.
    """
    try:
        stats: Any = orjson.loads(stats_json)
        brokers = stats.get("brokers") or {}
        up = {int(b["nodeid"]) for b in brokers.values()
              if b.get("state") == _UP and int(b.get("nodeid", -1)) >= 0}  # fmt: skip
        if not up:
            return dict.fromkeys(assigned, False)
        leaders: dict[tuple[str, int], int] = {}
        for topic, entry in (stats.get("topics") or {}).items():
            for key, partition in (entry.get("partitions") or {}).items():
                leaders[(topic, int(key))] = int(partition.get("leader", -1))
        return {key: leaders[key] in up for key in assigned if leaders.get(key, -1) >= 0}
    except (ValueError, TypeError, AttributeError, KeyError):
        return {}
