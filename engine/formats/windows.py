"""Windowed record keys, as Kafka Streams writes a windowed table's keys (ksqlDB's format). Pure.

A time window's record key is the key's bytes followed by the window start; a session's, by the
session's end then start (8-byte big-endian milliseconds each). Records are placed by the key alone
(Kafka Streams' WindowedStreamPartitioner), so all windows of a key share its partition.
"""

from __future__ import annotations

import struct

from headwater.metastore.catalog import Source
from headwater.sqlparse_ext.statements import Duration

__all__ = ["split_windowed_key", "window_size_ms", "windowed_key"]


def windowed_key(key: bytes, window: tuple[int, int], session: bool) -> bytes:
    """A windowed table's record key as Kafka Streams writes it: the key, then the window start
    (time windows), or the window end and start (sessions), as 8-byte big-endian numbers."""
    if session:
        return key + struct.pack(">qq", window[1], window[0])
    return key + struct.pack(">q", window[0])


def split_windowed_key(data: bytes, session: bool, size_ms: int | None) -> tuple[bytes, int, int]:
    """The key and the window ``(start, end)`` of a windowed record key (`windowed_key`'s inverse;
    a time window's end is its start plus ``size_ms``)."""
    if session:
        end, start = struct.unpack(">qq", data[-16:])
        return data[:-16], start, end
    (start,) = struct.unpack(">q", data[-8:])
    return data[:-8], start, start + (size_ms or 0)


def window_size_ms(source: Source) -> int | None:
    """A time-windowed source's window size (its ``WINDOW_SIZE``, e.g. ``30 SECONDS``), or None."""
    text = source.property("WINDOW_SIZE")
    if text is None:
        return None
    amount, unit = str(text).split()
    return Duration(int(amount), unit.upper()).milliseconds
