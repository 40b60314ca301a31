"""An in-memory `PartitionStore` (a SortedDict) and its `StoreEngine`. Pure (no I/O).

Every package tests with these instead of disk stores. They behave like `LmdbStore` in everything the
`PartitionStore` contract says (one test suite runs against both): key limits, bounds, order,
atomic batches with positions, snapshots for ranges, `StoreClosed` after close. `MemoryEngine` keeps
each store's contents by folder, so closing and reopening a store in the same process finds its rows
and position, as a disk store would after a restart.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from sortedcontainers import SortedDict

from headwater.store.api import StoreId, WriteBatch, check_key
from headwater.store.errors import PositionRegression, StoreClosed


@dataclass(slots=True)
class _Contents:
    """A store's mutable state, shared by the successive opens of one folder."""

    rows: SortedDict = field(default_factory=SortedDict)
    position: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    readers: int = 0
    """Live range iterators over `rows`: while there are any, writers replace `rows` by a changed
    copy instead of changing it, so each iterator reads a snapshot lazily."""

    def writable_rows(self) -> SortedDict:
        """`rows`, copied first if an iterator reads it (call with `lock` held)."""
        if self.readers:
            self.rows = self.rows.copy()
            self.readers = 0
        return self.rows


class MemoryStore:
    """A `PartitionStore` in a SortedDict.

    Args:
        store_id: Which table partition this is (for error messages), if any.
    """

    def __init__(self, store_id: StoreId | None = None, *, contents: _Contents | None = None):
        self._id = store_id
        self._table = None if store_id is None else store_id.table
        self._partition = None if store_id is None else store_id.partition
        self._contents: _Contents | None = _Contents() if contents is None else contents

    def __repr__(self) -> str:
        return f"MemoryStore({self._id!r})"

    def get(self, key: bytes) -> bytes | None:
        contents = self._open()
        with contents.lock:
            value: bytes | None = contents.rows.get(key)
        return value

    def range(
        self,
        low: bytes | None,
        high: bytes | None,
        *,
        low_inclusive: bool = True,
        high_inclusive: bool = True,
        reverse: bool = False,
    ) -> Iterator[tuple[bytes, bytes]]:
        contents = self._open()
        with contents.lock:
            rows = contents.rows
            contents.readers += 1
        keys = rows.irange(low, high, inclusive=(low_inclusive, high_inclusive), reverse=reverse)
        return self._iterate(contents, rows, keys)

    def _iterate(
        self, contents: _Contents, rows: SortedDict, keys: Iterator[bytes]
    ) -> Iterator[tuple[bytes, bytes]]:
        try:
            for key in keys:
                self._open()  # like a disk store: a closed store's iterators stop
                yield key, rows[key]
        finally:
            with contents.lock:
                if contents.rows is rows:
                    contents.readers -= 1

    def scan(self) -> Iterator[tuple[bytes, bytes]]:
        return self.range(None, None)

    def apply(self, batch: WriteBatch) -> None:
        contents = self._open()
        for key, _ in batch.changes:
            check_key(key)
        with contents.lock:
            if contents.position is not None and batch.position < contents.position:
                raise PositionRegression(
                    f"batch position {batch.position} is below the store's {contents.position}",
                    table=self._table,
                    partition=self._partition,
                    position=contents.position,
                    batch_position=batch.position,
                )
            rows = contents.writable_rows()
            for key, value in batch.changes:
                if value is None:
                    rows.pop(key, None)
                else:
                    rows[key] = value
            contents.position = batch.position

    def position(self) -> int | None:
        return self._open().position

    def approximate_count(self) -> int:
        return len(self._open().rows)

    def clear(self) -> None:
        contents = self._open()
        with contents.lock:
            contents.rows = SortedDict()
            contents.readers = 0
            contents.position = None

    def close(self) -> None:
        self._contents = None

    def _open(self) -> _Contents:
        if self._contents is None:
            raise StoreClosed("the store is closed", table=self._table, partition=self._partition)
        return self._contents


class MemoryEngine:
    """A `StoreEngine` whose stores live in this object, keyed by folder (nothing is written)."""

    name = "memory"

    def __init__(self) -> None:
        self._by_path: dict[str, _Contents] = {}

    def open(self, path: str, store_id: StoreId) -> MemoryStore:
        """Opens the store of folder `path`, with the contents it had when last closed."""
        contents = self._by_path.setdefault(path, _Contents())
        return MemoryStore(store_id, contents=contents)

    def destroy(self, path: str) -> None:
        """Forgets the store of folder `path`."""
        self._by_path.pop(path, None)
