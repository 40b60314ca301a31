"""A disk store killed with SIGKILL mid-restore holds exactly the batches up to its recorded position.

The test runs this file as a child process that applies batches to an LMDB store as fast as it can,
kills it at a random moment (fixed seed), reopens the store and checks it against the batches the
recorded position says were applied: all of them, and nothing of the next. The child resumes from the
recorded position, as a restorer does, for the next round.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from headwater.store.api import StoreId, WriteBatch
from headwater.store.keys import KeyType, encode_key
from headwater.store.lmdb import LmdbSettings, LmdbStore

ID = StoreId("CRASHY", 0)
RECORDS_PER_BATCH = 50
KEYS = 500
SETTINGS = LmdbSettings(map_size_bytes=256 * 2**20)


def k(n: int) -> bytes:
    return encode_key((n,), (KeyType.INT,))


def batch(number: int) -> WriteBatch:
    """Batch `number` of the changelog: overwrites spread over the key space and one tombstone."""
    changes: list[tuple[bytes, bytes | None]] = [
        (k((number * 7 + j * 11) % KEYS), b"%d:%d" % (number, j))
        for j in range(RECORDS_PER_BATCH - 1)
    ]
    changes.append((k((number * 13) % KEYS), None))
    return WriteBatch.of(changes, (number + 1) * RECORDS_PER_BATCH)


def expected_rows(batches: int) -> list[tuple[bytes, bytes]]:
    rows: dict[bytes, bytes] = {}
    for number in range(batches):
        for key, value in batch(number).changes:
            if value is None:
                rows.pop(key, None)
            else:
                rows[key] = value
    return sorted(rows.items())


def write_forever(folder: str) -> None:
    """The child: resume at the recorded position and apply batches until killed."""
    store = LmdbStore(folder, ID, SETTINGS)
    number = (store.position() or 0) // RECORDS_PER_BATCH
    while True:
        store.apply(batch(number))
        if number % 20 == 0:
            print(number, flush=True)
        number += 1


def test_sigkill_leaves_rows_and_position_consistent(tmp_path: Path) -> None:
    rng = random.Random(20240501)
    last_position = 0
    for _ in range(8):
        child = subprocess.Popen(
            [sys.executable, __file__, str(tmp_path)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline(), "the writer died before its first batch"
            time.sleep(rng.uniform(0.0, 0.15))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
            if child.stdout is not None:
                child.stdout.close()
        assert child.returncode == -signal.SIGKILL

        store = LmdbStore(str(tmp_path), ID, SETTINGS)
        try:
            position = store.position()
            assert position is not None and position % RECORDS_PER_BATCH == 0
            assert position > last_position
            assert list(store.scan()) == expected_rows(position // RECORDS_PER_BATCH)
            last_position = position
        finally:
            store.close()


if __name__ == "__main__":
    write_forever(sys.argv[1])
