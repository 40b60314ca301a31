"""Kafka's murmur2 partitioner over a column of keys at once (numpy, uint32 arithmetic). Pure.

`engine.partitioner.murmur2` hashes one key in Python; this does the same arithmetic for every key of
a batch together: keys of one length are one matrix of bytes, hashed word by word down its columns
with numpy's wrapping uint32 multiplication (Java's int arithmetic, bit for bit).
tests/engine/test_columnar_json.py holds it equal to `murmur2` on random keys.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_SEED = np.uint32(0x9747B28C)
_M = np.uint32(0x5BD1E995)


def murmur2_many(keys: Sequence[bytes]) -> np.ndarray:
    """Kafka's ``Utils.murmur2`` of each key, as uint32 (its bits; `murmur2` gives them signed)."""
    out = np.empty(len(keys), dtype=np.uint32)
    by_length: dict[int, list[int]] = {}
    for i, key in enumerate(keys):
        by_length.setdefault(len(key), []).append(i)
    with np.errstate(over="ignore"):
        for length, rows in by_length.items():
            data = np.frombuffer(b"".join(keys[i] for i in rows), dtype=np.uint8)
            out[rows] = _hash(data.reshape(len(rows), length), length)
    return out


def partitions_of(keys: Sequence[bytes], partitions: int) -> list[int]:
    """The partition of each key: ``toPositive(murmur2(key)) % partitions``, as Kafka's producers."""
    hashes = murmur2_many(keys) & np.uint32(0x7FFFFFFF)
    return (hashes % np.uint32(partitions)).astype(np.int64).tolist()  # type: ignore[no-any-return]


def _hash(matrix: np.ndarray, length: int) -> np.ndarray:
    rows = matrix.shape[0]
    h = np.full(rows, _SEED ^ np.uint32(length), dtype=np.uint32)
    words = length // 4
    if words:
        packed = np.ascontiguousarray(matrix[:, : words * 4]).view("<u4").reshape(rows, words)
        for w in range(words):
            k = packed[:, w].astype(np.uint32) * _M
            k ^= k >> np.uint32(24)
            k *= _M
            h *= _M
            h ^= k
    tail = length & 3
    if tail:
        base = words * 4
        if tail == 3:
            h ^= matrix[:, base + 2].astype(np.uint32) << np.uint32(16)
        if tail >= 2:
            h ^= matrix[:, base + 1].astype(np.uint32) << np.uint32(8)
        h ^= matrix[:, base].astype(np.uint32)
        h *= _M
    h ^= h >> np.uint32(13)
    h *= _M
    h ^= h >> np.uint32(15)
    return h
