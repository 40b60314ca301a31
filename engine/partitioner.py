"""Kafka's Java-compatible key partitioning: ``murmur2`` and the partition of a key. Pure (no I/O).

Java producers, Kafka Streams and ksqlDB place a keyed record on partition
``toPositive(Utils.murmur2(keyBytes)) % numPartitions``; librdkafka does the same with
``partitioner=murmur2_random`` (headwater's producers set it). headwater uses :func:`partition_for`
to know, without asking Kafka, which partition (and so which store replica) holds a key: for
INSERT VALUES and for routing pull queries by key. The key bytes are the serialized record key
(:meth:`headwater.engine.formats.serde.RowSerde.serialize_key`).
"""

from __future__ import annotations

from struct import Struct

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_WORDS = {n: Struct(f"<{n}I") for n in range(65)}


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` of ``data``: the 32-bit MurmurHash2 Java computes, signed.

    Args:
        data: the bytes to hash (a serialized record key).

    Returns:
        The hash as Java's ``int``: -2**31 <= h < 2**31.
    """
    length = len(data)
    nwords = length >> 2
    words = _WORDS.get(nwords)
    unpacked = (words or Struct(f"<{nwords}I")).unpack_from(data)
    m = _M
    mask = _MASK
    h = _SEED ^ length
    for k in unpacked:
        k = (k * m) & mask
        k ^= k >> 24
        h = ((h * m) & mask) ^ ((k * m) & mask)
    tail = length & 3
    if tail:
        base = length & ~3
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Java's ``Utils.toPositive``: the number with its sign bit cleared (not ``abs``)."""
    return number & 0x7FFFFFFF


def partition_for(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner gives a record with key bytes ``key``.

    Args:
        key: the serialized record key (not None: keyless records are spread, not hashed).
        partitions: the topic's partition count.

    Returns:
        ``toPositive(murmur2(key)) % partitions``.

    Raises:
        ValueError: If ``partitions`` is not positive.
    """
    if partitions <= 0:
        raise ValueError(f"a topic has at least one partition, got {partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class PartitionMemo:
    """`partition_for` of one topic, remembering the keys it was asked: an aggregation asks it for
    every update of a group, and a group's key repeats from record to record. Bounded: keys
    longer than ``longest`` bytes are hashed every time, and the memory is emptied once it holds
    ``most`` keys (so it holds at most ``most * longest`` bytes of keys)."""

    def __init__(self, partitions: int, most: int = 65_536, longest: int = 256) -> None:
        self.partitions = partitions  # checked by `partition_for` when a key is first asked
        self._most, self._longest = most, longest
        self._known: dict[bytes, int] = {}

    def __call__(self, key: bytes) -> int:
        found = self._known.get(key)
        if found is None:
            found = partition_for(key, self.partitions)
            if len(key) <= self._longest:
                if len(self._known) >= self._most:
                    self._known.clear()
                self._known[key] = found
        return found
