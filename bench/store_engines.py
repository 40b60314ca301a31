"""Benchmark: which embedded key-value engine backs a materialized table partition.

Runs the workload headwater's store has (docs/architecture.md, "The path of a statement") on RocksDB
(rocksdict), SQLite (sqlite3, WAL, a WITHOUT ROWID table) and LMDB (the `lmdb` binding, when installed):

  (a) restore/ingest: N rows of ~100-byte JSON values under 16-byte random keys, applied in batches of
      500, each batch committing its rows and the changelog offset atomically (rows/s);
  (b) point gets by random existing key, one thread (gets/s, p50/p99 latency in microseconds);
  (c) range reads of 100 consecutive keys from a random start key (ranges/s);
  (d) a full scan in key order (rows/s);
  (e) reopen time of the N-row store: open, read the offset, first get (ms);
  (f) size on disk (MiB);
then the ingest rate of each engine under its durability settings (sync per batch or not), on fewer
rows. This module does I/O (temporary folders under --dir); it is never collected by pytest.

Run from the repository root: `python -m bench.store_engines [--rows N]` or
`python bench/store_engines.py`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Protocol

import rocksdict

try:
    import lmdb
except ImportError:  # reported in the output; the other engines still run
    lmdb = None  # type: ignore[assignment]

BATCH_ROWS = 500
RANGE_ROWS = 100
OFFSET_KEY = b"\x00offset"  # RocksDB keeps the offset in the row keyspace, under a reserved prefix


class Engine(Protocol):
    """What the benchmark drives: one partition store of one engine."""

    name: str

    def apply(self, rows: list[tuple[bytes, bytes]], offset: int) -> None: ...
    def get(self, key: bytes) -> bytes | None: ...
    def range100(self, start: bytes) -> int: ...
    def scan(self) -> int: ...
    def offset(self) -> int | None: ...
    def close(self) -> None: ...


class RocksEngine:
    name = "rocksdb"

    def __init__(self, path: Path, *, sync: bool = False, tuned: bool = False) -> None:
        opts = rocksdict.Options(raw_mode=True)
        opts.create_if_missing(True)
        if (
            tuned
        ):  # the usual point-lookup tuning: bloom filters, a bigger block cache, no compression
            table = rocksdict.BlockBasedOptions()
            table.set_bloom_filter(10, False)
            table.set_block_cache(rocksdict.Cache(64 * 2**20))
            opts.set_block_based_table_factory(table)
            opts.set_compression_type(rocksdict.DBCompressionType.none())
        self._db = rocksdict.Rdict(str(path), opts)
        self._write_opts = rocksdict.WriteOptions()
        self._write_opts.sync = sync

    def apply(self, rows: list[tuple[bytes, bytes]], offset: int) -> None:
        batch = rocksdict.WriteBatch(raw_mode=True)
        for key, value in rows:
            batch.put(b"\x01" + key, value)
        batch.put(OFFSET_KEY, offset.to_bytes(8, "big"))
        self._db.write(batch, self._write_opts)

    def get(self, key: bytes) -> bytes | None:
        return self._db.get(b"\x01" + key)

    def range100(self, start: bytes) -> int:
        it = self._db.iter()
        it.seek(b"\x01" + start)
        n = 0
        while n < RANGE_ROWS and it.valid():
            it.key(), it.value()
            it.next()
            n += 1
        return n

    def scan(self) -> int:
        return sum(1 for _ in self._db.items(from_key=b"\x01"))

    def offset(self) -> int | None:
        raw = self._db.get(OFFSET_KEY)
        return None if raw is None else int.from_bytes(raw, "big")

    def close(self) -> None:
        self._db.flush()
        self._db.close()


class SqliteEngine:
    name = "sqlite"

    def __init__(self, path: Path, *, synchronous: str = "NORMAL") -> None:
        path.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path / "store.db", isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(f"PRAGMA synchronous={synchronous}")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS rows (k BLOB PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID"
        )
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER) WITHOUT ROWID"
        )

    def apply(self, rows: list[tuple[bytes, bytes]], offset: int) -> None:
        c = self._conn
        c.execute("BEGIN")
        c.executemany("INSERT OR REPLACE INTO rows (k, v) VALUES (?, ?)", rows)
        c.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('offset', ?)", (offset,))
        c.execute("COMMIT")

    def get(self, key: bytes) -> bytes | None:
        row = self._conn.execute("SELECT v FROM rows WHERE k = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def range100(self, start: bytes) -> int:
        cur = self._conn.execute(
            "SELECT k, v FROM rows WHERE k >= ? ORDER BY k LIMIT ?", (start, RANGE_ROWS)
        )
        return len(cur.fetchall())

    def scan(self) -> int:
        return sum(1 for _ in self._conn.execute("SELECT k, v FROM rows ORDER BY k"))

    def offset(self) -> int | None:
        row = self._conn.execute("SELECT value FROM meta WHERE name = 'offset'").fetchone()
        return None if row is None else int(row[0])

    def close(self) -> None:
        self._conn.close()


class LmdbEngine:
    name = "lmdb"

    def __init__(self, path: Path, *, sync: bool = True, metasync: bool = True) -> None:
        assert lmdb is not None
        path.mkdir(parents=True, exist_ok=True)
        self._env = lmdb.open(
            str(path), map_size=1 << 34, max_dbs=2, sync=sync, metasync=metasync, readahead=False
        )
        self._rows = self._env.open_db(b"rows")
        self._meta = self._env.open_db(b"meta")

    def apply(self, rows: list[tuple[bytes, bytes]], offset: int) -> None:
        with self._env.begin(write=True) as txn:
            cur = txn.cursor(self._rows)
            cur.putmulti(rows)
            txn.put(b"offset", offset.to_bytes(8, "big"), db=self._meta)

    def get(self, key: bytes) -> bytes | None:
        with self._env.begin(db=self._rows, buffers=False) as txn:
            return txn.get(key)

    def range100(self, start: bytes) -> int:
        with self._env.begin(db=self._rows) as txn:
            cur = txn.cursor()
            n = 0
            if cur.set_range(start):
                for _ in cur.iternext():
                    n += 1
                    if n == RANGE_ROWS:
                        break
            return n

    def scan(self) -> int:
        with self._env.begin(db=self._rows) as txn:
            return sum(1 for _ in txn.cursor().iternext())

    def offset(self) -> int | None:
        with self._env.begin(db=self._meta) as txn:
            raw = txn.get(b"offset")
        return None if raw is None else int.from_bytes(raw, "big")

    def close(self) -> None:
        self._env.close()


class HeadwaterLmdb:
    """headwater's own `LmdbStore` (store/lmdb.py), to show what its wrapper costs over raw LMDB."""

    name = "headwater"

    def __init__(self, path: Path) -> None:
        from headwater.store.api import StoreId  # imported here: only this row needs headwater
        from headwater.store.lmdb import LmdbStore

        path.mkdir(parents=True, exist_ok=True)
        self._store = LmdbStore(str(path), StoreId("BENCH", 0))

    def apply(self, rows: list[tuple[bytes, bytes]], offset: int) -> None:
        from headwater.store.api import WriteBatch

        self._store.apply(WriteBatch(tuple(rows), offset))

    def get(self, key: bytes) -> bytes | None:
        return self._store.get(key)

    def range100(self, start: bytes) -> int:
        return sum(1 for _ in itertools.islice(self._store.range(start, None), RANGE_ROWS))

    def scan(self) -> int:
        return sum(1 for _ in self._store.scan())

    def offset(self) -> int | None:
        return self._store.position()

    def close(self) -> None:
        self._store.close()


def _workload(rows: int, seed: int) -> list[tuple[bytes, bytes]]:
    """`rows` distinct 16-byte random keys (changelog order is hash order) and ~100-byte JSON values."""
    rng = random.Random(seed)
    keys = {rng.randbytes(16) for _ in range(rows)}
    while len(keys) < rows:
        keys.add(rng.randbytes(16))
    out = []
    for i, key in enumerate(keys):
        value = json.dumps(
            {
                "id": i,
                "name": f"user-{i:08d}",
                "region": "eu-west",
                "amount": round(rng.random() * 1e4, 2),
                "ts": 1_700_000_000_000 + i,
                "tier": "gold",
            },
            separators=(",", ":"),
        ).encode()
        out.append((key, value))
    return out


def _batches(
    data: list[tuple[bytes, bytes]], size: int
) -> Iterator[tuple[list[tuple[bytes, bytes]], int]]:
    for start in range(0, len(data), size):
        chunk = data[start : start + size]
        yield chunk, start + len(chunk)


def _ingest(engine: Engine, data: list[tuple[bytes, bytes]], batch_rows: int = BATCH_ROWS) -> float:
    t0 = time.perf_counter()
    for chunk, offset in _batches(data, batch_rows):
        engine.apply(chunk, offset)
    return len(data) / (time.perf_counter() - t0)


def _disk_mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def _measure(
    make: Callable[[Path], Engine],
    root: Path,
    data: list[tuple[bytes, bytes]],
    gets: int,
    seed: int,
) -> dict[str, float]:
    path = root / "store"
    engine = make(path)
    res: dict[str, float] = {"ingest": _ingest(engine, data)}
    engine.close()

    t0 = time.perf_counter()
    engine = make(path)
    assert engine.offset() == len(data)
    assert engine.get(data[0][0]) == data[0][1]
    res["reopen_ms"] = (time.perf_counter() - t0) * 1e3

    rng = random.Random(seed + 1)
    probe = [data[rng.randrange(len(data))][0] for _ in range(gets)]
    t0 = time.perf_counter()
    for key in probe:
        engine.get(key)
    res["gets"] = gets / (time.perf_counter() - t0)
    lat = []
    clock = time.perf_counter_ns
    for key in probe[: gets // 2]:
        t = clock()
        engine.get(key)
        lat.append(clock() - t)
    q = statistics.quantiles(lat, n=100)
    res["p50_us"], res["p99_us"] = q[49] / 1e3, q[98] / 1e3

    starts = probe[: max(1, gets // 40)]
    t0 = time.perf_counter()
    for key in starts:
        engine.range100(key)
    res["ranges"] = len(starts) / (time.perf_counter() - t0)

    t0 = time.perf_counter()
    assert engine.scan() == len(data)
    res["scan"] = len(data) / (time.perf_counter() - t0)
    engine.close()
    res["disk_mib"] = _disk_mib(path)
    shutil.rmtree(path)
    return res


def _engines() -> dict[str, Callable[[Path], Engine]]:
    makers: dict[str, Callable[[Path], Engine]] = {
        "rocksdb (WAL, no fsync)": lambda p: RocksEngine(p),
        "rocksdb tuned (bloom, 64M)": lambda p: RocksEngine(p, tuned=True),
        "sqlite (WAL, sync=NORMAL)": lambda p: SqliteEngine(p),
    }
    if lmdb is not None:
        makers["lmdb (fsync per txn)"] = lambda p: LmdbEngine(p)
        makers["headwater LmdbStore"] = HeadwaterLmdb
    return makers


def _sync_variants() -> dict[str, tuple[Callable[[Path], Engine], int]]:
    """Durability settings, and for LMDB bigger batches (fewer commits and fsyncs per row)."""
    makers: dict[str, tuple[Callable[[Path], Engine], int]] = {
        "rocksdb WAL, no fsync": (lambda p: RocksEngine(p), BATCH_ROWS),
        "rocksdb WAL, fsync/batch": (lambda p: RocksEngine(p, sync=True), BATCH_ROWS),
        "sqlite WAL, sync=NORMAL": (lambda p: SqliteEngine(p), BATCH_ROWS),
        "sqlite WAL, sync=FULL": (lambda p: SqliteEngine(p, synchronous="FULL"), BATCH_ROWS),
        "sqlite WAL, sync=OFF": (lambda p: SqliteEngine(p, synchronous="OFF"), BATCH_ROWS),
    }
    if lmdb is not None:
        makers["lmdb fsync/txn"] = (lambda p: LmdbEngine(p), BATCH_ROWS)
        makers["lmdb metasync off"] = (lambda p: LmdbEngine(p, metasync=False), BATCH_ROWS)
        makers["lmdb no sync"] = (lambda p: LmdbEngine(p, sync=False), BATCH_ROWS)
        for rows in (2_000, 10_000):
            makers[f"lmdb metasync off, {rows}/batch"] = (
                lambda p: LmdbEngine(p, metasync=False),
                rows,
            )
    return makers


def _versions() -> str:
    parts = [
        f"Python {platform.python_version()}",
        f"rocksdict {metadata.version('rocksdict')}",
        f"SQLite {sqlite3.sqlite_version}",
    ]
    if lmdb is not None:
        parts.append(f"lmdb {lmdb.__version__} (LMDB {'.'.join(map(str, lmdb.version()))})")
    else:
        parts.append("lmdb: not installed (pip install lmdb)")
    return ", ".join(parts) + f"; {os.cpu_count()} CPUs, {platform.machine()}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in the store (1,000,000)")
    parser.add_argument("--gets", type=int, default=200_000, help="random point gets (200,000)")
    parser.add_argument("--sync-rows", type=int, default=100_000, help="rows per durability run")
    parser.add_argument("--dir", type=Path, default=None, help="where temporary stores go")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    print(_versions())
    print(
        f"workload: {args.rows:,} rows, 16-byte keys, ~100-byte JSON values, "
        f"batches of {BATCH_ROWS} with the offset committed atomically"
    )
    t_start = time.perf_counter()
    data = _workload(args.rows, args.seed)
    print(f"mean value size {sum(len(v) for _, v in data) / len(data):.0f} bytes")

    header = (
        f"{'engine':<28}{'ingest rows/s':>14}{'gets/s':>10}{'p50 us':>8}{'p99 us':>8}"
        f"{'ranges/s':>10}{'scan rows/s':>13}{'reopen ms':>11}{'disk MiB':>10}"
    )
    print("\n" + header + "\n" + "-" * len(header))
    for name, make in _engines().items():
        root = Path(tempfile.mkdtemp(prefix="hw-bench-", dir=args.dir))
        try:
            r = _measure(make, root, data, args.gets, args.seed)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(
            f"{name:<28}{r['ingest']:>14,.0f}{r['gets']:>10,.0f}{r['p50_us']:>8.1f}"
            f"{r['p99_us']:>8.1f}{r['ranges']:>10,.0f}{r['scan']:>13,.0f}{r['reopen_ms']:>11.1f}"
            f"{r['disk_mib']:>10.1f}",
            flush=True,
        )

    sample = data[: args.sync_rows]
    print(
        f"\ndurability settings: ingest of {len(sample):,} rows (batches of {BATCH_ROWS} unless said)"
    )
    for name, (make, batch_rows) in _sync_variants().items():
        root = Path(tempfile.mkdtemp(prefix="hw-bench-", dir=args.dir))
        try:
            engine = make(root / "store")
            rate = _ingest(engine, sample, batch_rows)
            engine.close()
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(f"  {name:<32}{rate:>12,.0f} rows/s", flush=True)
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
