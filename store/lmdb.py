"""The on-disk `PartitionStore`: one LMDB environment per table partition. Does I/O.

LMDB won the engine benchmark (`bench/store_engines.py`): fastest point gets, ranges, scans and
reopen, slower bulk ingest than RocksDB. One environment (a folder with `data.mdb` and `lock.mdb`)
holds two named databases: `rows` (the table's rows under encoded keys) and `meta` (`position`, the
next changelog offset, and `format`, this layout's version).

Atomicity: `apply` writes a batch's rows and its position in one LMDB write transaction. LMDB is
copy-on-write and commits by writing a new meta page last, so after a crash of the process or of the
machine the store is either before or after the whole batch, never in between.

Durability (measured in the benchmark; the changelog is the source of truth, so a lost batch is read
again from the recorded position):
- `Durability.SYNC_DATA` (default, LMDB's MDB_NOMETASYNC): each commit fsyncs the data pages, and the
  meta page is synced by the next commit. A machine crash may undo the last batch, rows and position
  together; a process crash loses nothing. It saves one of the two fsyncs per commit: 0-15% faster
  than SYNC_EACH_BATCH on the benchmark machine (a shared 2-core VM, so within noise at times).
- `Durability.SYNC_EACH_BATCH`: each commit fsyncs data and meta page; nothing committed is lost.
LMDB's MDB_NOSYNC (4x faster ingest) is not offered: after a machine crash it can leave a store
damaged, not merely behind.

Restoring: a batch is the unit of both atomicity and fsync, so a restorer far behind should apply
large batches (the benchmark: 500 rows/batch ~50-150k rows/s, 10,000 rows/batch several times more)
and small ones once caught up.

Reads run in any thread. Each `range` iterator reads one snapshot (an LMDB read transaction); `close`
waits for calls in flight (never for idle iterators, which then raise `StoreClosed`).
"""

from __future__ import annotations

import enum
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

import lmdb

from headwater.store.api import MAX_KEY_BYTES, StoreId, WriteBatch, check_key
from headwater.store.errors import PositionRegression, StoreClosed, StoreFormatError, StoreIOError

FORMAT_VERSION = b"1"
_ROWS, _META = b"rows", b"meta"
_POSITION, _FORMAT = b"position", b"format"
_FIRST_CHUNK_ROWS, _MAX_CHUNK_ROWS = 16, 1024  # rows a range iterator reads per call into LMDB


class Durability(enum.Enum):
    """When a committed batch reaches the disk (see the module docstring for the trade-off)."""

    SYNC_DATA = "sync_data"
    SYNC_EACH_BATCH = "sync_each_batch"


@dataclass(frozen=True, slots=True)
class LmdbSettings:
    """How LMDB stores are opened.

    Attributes:
        map_size_bytes: The most a store may hold. Address space reserved per open store, not disk
            (the file grows as written). A full store raises StoreIOError.
        max_readers: Concurrent read transactions (gets in flight plus live range iterators).
        durability: When commits are synced to disk.
    """

    map_size_bytes: int = 16 * 2**30
    max_readers: int = 512
    durability: Durability = Durability.SYNC_DATA


class _Gate:
    """Counts calls into LMDB in flight so that `close` never frees the environment under one."""

    def __init__(self, store_id: StoreId):
        self._id = store_id
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._active = 0
        self._closed = False

    def enter(self) -> None:
        with self._lock:
            if self._closed:
                raise StoreClosed(
                    "the store is closed", table=self._id.table, partition=self._id.partition
                )
            self._active += 1

    def leave(self) -> None:
        with self._lock:
            self._active -= 1
            if self._closed and not self._active:
                self._idle.notify_all()

    def close(self) -> bool:
        """Refuses new calls and waits for those in flight; False if it was already closed."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
            self._idle.wait_for(lambda: self._active == 0)
            return True


class LmdbStore:
    """A `PartitionStore` in an LMDB environment (the folder `path`, created if empty).

    Args:
        path: The store's folder; it must exist.
        store_id: The table partition, for error messages.
        settings: How to open it.

    Raises:
        StoreFormatError: If the store was written in an unknown format.
        StoreIOError: If LMDB cannot open it.
    """

    def __init__(self, path: str, store_id: StoreId, settings: LmdbSettings = LmdbSettings()):
        self._id = store_id
        self._gate = _Gate(store_id)
        self._write_lock = threading.Lock()
        try:
            self._env = lmdb.open(
                path,
                map_size=settings.map_size_bytes,
                max_dbs=2,
                max_readers=settings.max_readers,
                sync=True,
                metasync=settings.durability is Durability.SYNC_EACH_BATCH,
                readahead=False,
            )
            self._env.reader_check()  # forget readers of processes that died
            self._rows = self._env.open_db(_ROWS)
            self._meta = self._env.open_db(_META)
            with self._env.begin(write=True, db=self._meta) as txn:
                version = txn.get(_FORMAT)
                if version is None:
                    txn.put(_FORMAT, FORMAT_VERSION)
                raw_position = txn.get(_POSITION)
        except lmdb.Error as exc:
            raise self._io_error(f"cannot open the store in {path}", exc) from exc
        if version not in (None, FORMAT_VERSION):
            self._env.close()
            raise StoreFormatError(
                f"unknown store format {version!r} in {path} (this version writes {FORMAT_VERSION!r})",
                table=store_id.table,
                partition=store_id.partition,
            )
        self._position = None if raw_position is None else int.from_bytes(raw_position, "big")

    def __repr__(self) -> str:
        return f"LmdbStore({self._id!r}, {self._env.path()!r})"

    def get(self, key: bytes) -> bytes | None:
        if not 0 < len(key) <= MAX_KEY_BYTES:
            return None  # no such key can be stored
        self._gate.enter()
        try:
            with self._env.begin(db=self._rows) as txn:
                value: bytes | None = txn.get(key)
                return value
        except lmdb.Error as exc:
            raise self._io_error("get failed", exc) from exc
        finally:
            self._gate.leave()

    def range(
        self,
        low: bytes | None,
        high: bytes | None,
        *,
        low_inclusive: bool = True,
        high_inclusive: bool = True,
        reverse: bool = False,
    ) -> Iterator[tuple[bytes, bytes]]:
        self._gate.enter()
        try:
            txn = self._env.begin(db=self._rows)  # the snapshot: taken now, not at the first next()
        except lmdb.Error as exc:
            raise self._io_error("range failed", exc) from exc
        finally:
            self._gate.leave()
        return self._iterate(
            txn, _Bounds(low or None, high, low_inclusive, high_inclusive), reverse
        )

    def scan(self) -> Iterator[tuple[bytes, bytes]]:
        return self.range(None, None)

    def apply(self, batch: WriteBatch) -> None:
        for key, _ in batch.changes:
            check_key(key)
        self._gate.enter()
        try:
            with self._write_lock:
                if self._position is not None and batch.position < self._position:
                    raise PositionRegression(
                        f"batch position {batch.position} is below the store's {self._position}",
                        table=self._id.table,
                        partition=self._id.partition,
                        position=self._position,
                        batch_position=batch.position,
                    )
                with self._env.begin(write=True, db=self._rows) as txn:
                    for key, value in batch.changes:
                        if value is None:
                            txn.delete(key)
                        else:
                            txn.put(key, value)
                    txn.put(_POSITION, batch.position.to_bytes(8, "big"), db=self._meta)
                self._position = batch.position
        except lmdb.Error as exc:
            raise self._io_error("applying a batch failed", exc) from exc
        finally:
            self._gate.leave()

    def position(self) -> int | None:
        self._check_open()
        return self._position

    def approximate_count(self) -> int:
        self._gate.enter()
        try:
            with self._env.begin() as txn:
                entries: int = txn.stat(self._rows)["entries"]
                return entries
        except lmdb.Error as exc:
            raise self._io_error("counting rows failed", exc) from exc
        finally:
            self._gate.leave()

    def clear(self) -> None:
        self._gate.enter()
        try:
            with self._write_lock:
                with self._env.begin(write=True) as txn:
                    txn.drop(self._rows, delete=False)
                    txn.delete(_POSITION, db=self._meta)
                self._position = None
        except lmdb.Error as exc:
            raise self._io_error("clear failed", exc) from exc
        finally:
            self._gate.leave()

    def close(self) -> None:
        if self._gate.close():
            self._env.close()

    def _check_open(self) -> None:
        self._gate.enter()
        self._gate.leave()

    def _iterate(
        self, txn: lmdb.Transaction, bounds: _Bounds, reverse: bool
    ) -> Iterator[tuple[bytes, bytes]]:
        rows: Iterator[tuple[bytes, bytes]] | None = None
        size = _FIRST_CHUNK_ROWS  # small first: a LIMIT or a short range reads little
        try:
            while True:
                self._gate.enter()
                try:
                    if rows is None:
                        cursor = txn.cursor()
                        found = bounds.seek_last(cursor) if reverse else bounds.seek_first(cursor)
                        if not found:
                            return
                        walk = cursor.iterprev() if reverse else cursor.iternext()
                        rows = cast(Iterator[tuple[bytes, bytes]], walk)  # buffers=False
                    chunk, more = bounds.read_chunk(rows, reverse, size)
                except lmdb.Error as exc:
                    raise self._io_error("range failed", exc) from exc
                finally:
                    self._gate.leave()
                yield from chunk
                if not more:
                    return
                size = min(2 * size, _MAX_CHUNK_ROWS)
        finally:
            self._abort(txn)

    def _abort(self, txn: lmdb.Transaction) -> None:
        try:
            self._gate.enter()
        except StoreClosed:
            return  # closing the environment ended the transaction
        try:
            txn.abort()
        finally:
            self._gate.leave()

    def _io_error(self, message: str, exc: lmdb.Error) -> StoreIOError:
        return StoreIOError(f"{message}: {exc}", table=self._id.table, partition=self._id.partition)


@dataclass(frozen=True, slots=True)
class _Bounds:
    """A range's bounds and how a cursor finds and walks them."""

    low: bytes | None
    high: bytes | None
    low_inclusive: bool
    high_inclusive: bool

    def above_low(self, key: bytes) -> bool:
        return self.low is None or key > self.low or (key == self.low and self.low_inclusive)

    def below_high(self, key: bytes) -> bool:
        return self.high is None or key < self.high or (key == self.high and self.high_inclusive)

    def seek_first(self, cursor: lmdb.Cursor) -> bool:
        """Puts the cursor on the first key above `low`; False if there is none."""
        if self.low is None:
            return bool(cursor.first())
        # Stored keys are at most MAX_KEY_BYTES long; a longer bound is passed by its prefix.
        if not cursor.set_range(self.low[:MAX_KEY_BYTES]):
            return False
        while not self.above_low(cast(bytes, cursor.key())):
            if not cursor.next():
                return False
        return True

    def seek_last(self, cursor: lmdb.Cursor) -> bool:
        """Puts the cursor on the last key below `high`; False if there is none."""
        if self.high is None:
            return bool(cursor.last())
        if not self.high:
            return False  # every key is above b""
        if not cursor.set_range(self.high[:MAX_KEY_BYTES]):
            return bool(cursor.last())
        while not self.below_high(cast(bytes, cursor.key())):
            if not cursor.prev():
                return False
        return True

    def read_chunk(
        self, rows: Iterator[tuple[bytes, bytes]], reverse: bool, size: int
    ) -> tuple[list[tuple[bytes, bytes]], bool]:
        """Up to `size` rows within the bounds, and whether more may follow."""
        within = self.above_low if reverse else self.below_high
        chunk: list[tuple[bytes, bytes]] = []
        for key, value in rows:
            if not within(key):
                return chunk, False
            chunk.append((key, value))
            if len(chunk) == size:
                return chunk, True
        return chunk, False


class LmdbEngine:
    """A `StoreEngine` for `LocalStores` that keeps each store in LMDB files in its folder."""

    name = "lmdb"

    def __init__(self, settings: LmdbSettings = LmdbSettings()):
        self.settings = settings

    def open(self, path: str, store_id: StoreId) -> LmdbStore:
        return LmdbStore(path, store_id, self.settings)

    def destroy(self, path: str) -> None:
        for name in ("data.mdb", "lock.mdb"):
            try:
                os.remove(os.path.join(path, name))
            except FileNotFoundError:
                pass
