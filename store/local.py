"""The stores one server keeps: one per (table, partition), in folders under its state folder. Does I/O.

Layout: `<state_dir>/stores/<table>/<partition>/`, the store's files inside (whatever the engine
writes). The table folder's name is the table name with every character outside `[A-Za-z0-9_-]`
written `%XX` (its UTF-8 bytes), so any SQL identifier is a safe, reversible folder name; the partition
folder is the partition number in decimal.

After a restart `on_disk()` lists the stores found there with their positions, so the server knows
where each restore resumes. Dropping a store lets the engine destroy it, renames its folder to
`.drop-<partition>-<random>`, then deletes that: a drop interrupted by a crash leaves at most an empty
store behind, and the next `LocalStores` on that folder removes the remains.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
import uuid
from pathlib import Path
from urllib.parse import unquote

from headwater.store.api import PartitionStore, StoreEngine, StoreId

log = logging.getLogger(__name__)

_SAFE = re.compile(r"[A-Za-z0-9_-]")
_PARTITION = re.compile(r"0|[1-9][0-9]*")
_DROPPED_PREFIX = ".drop-"


def table_folder_name(table: str) -> str:
    """The folder name of a table: `table` with unsafe characters written %XX.

    Raises:
        ValueError: If `table` is empty.
    """
    if not table:
        raise ValueError("a table name is not empty")
    return "".join(
        ch if _SAFE.fullmatch(ch) else "".join(f"%{b:02X}" for b in ch.encode("utf-8"))
        for ch in table
    )


def table_from_folder_name(name: str) -> str:
    """The table a folder name stands for (the inverse of `table_folder_name`)."""
    return unquote(name, errors="strict")


class LocalStores:
    """Opens, lists, closes and drops the stores under one state folder.

    Thread-safe. A store is open at most once: `open` of an open store returns the same object.

    Args:
        state_dir: The server's state folder (created if missing).
        engine: Opens and destroys the stores (`LmdbEngine` in a server, `MemoryEngine` in tests).
    """

    def __init__(self, state_dir: str | os.PathLike[str], engine: StoreEngine):
        self.root = Path(state_dir) / "stores"
        self.engine = engine
        self._open: dict[StoreId, PartitionStore] = {}
        self._lock = threading.Lock()
        self.root.mkdir(parents=True, exist_ok=True)
        self._remove_dropped_remains()

    def path_of(self, table: str, partition: int) -> Path:
        """The folder of a table partition's store."""
        if partition < 0:
            raise ValueError(f"a partition is >= 0, not {partition}")
        return self.root / table_folder_name(table) / str(partition)

    def open(self, table: str, partition: int) -> PartitionStore:
        """The store of a table partition, opened (and created) if it is not open yet.

        Raises:
            StoreError: If the engine cannot open it (StoreIOError, StoreFormatError).
        """
        store_id = StoreId(table, partition)
        with self._lock:
            store = self._open.get(store_id)
            if store is None:
                path = self.path_of(table, partition)
                path.mkdir(parents=True, exist_ok=True)
                store = self.engine.open(str(path), store_id)
                self._open[store_id] = store
            return store

    def get(self, table: str, partition: int) -> PartitionStore | None:
        """The store of a table partition if it is open, else None."""
        with self._lock:
            return self._open.get(StoreId(table, partition))

    def opened(self) -> dict[StoreId, PartitionStore]:
        """The stores open now."""
        with self._lock:
            return dict(self._open)

    def on_disk(self) -> dict[StoreId, int | None]:
        """Every store in the state folder, with its position (None: nothing applied yet).

        Stores that are not open are opened briefly to read their position.
        """
        found: dict[StoreId, int | None] = {}
        for table_dir in sorted(self.root.iterdir()):
            if not table_dir.is_dir():
                continue
            table = table_from_folder_name(table_dir.name)
            for part_dir in sorted(table_dir.iterdir()):
                if part_dir.is_dir() and _PARTITION.fullmatch(part_dir.name):
                    store_id = StoreId(table, int(part_dir.name))
                    found[store_id] = self._position_of(store_id, part_dir)
        return found

    def close(self, table: str, partition: int) -> None:
        """Closes a table partition's store if it is open; its data stays on disk."""
        with self._lock:
            store = self._open.pop(StoreId(table, partition), None)
        if store is not None:
            store.close()

    def close_all(self) -> None:
        """Closes every open store."""
        with self._lock:
            stores = list(self._open.values())
            self._open.clear()
        for store in stores:
            store.close()

    def drop(self, table: str, partition: int) -> bool:
        """Closes and deletes a table partition's store.

        Returns:
            Whether there was a store to delete.
        """
        self.close(table, partition)
        path = self.path_of(table, partition)
        if not path.is_dir():
            return False
        self.engine.destroy(str(path))
        doomed = path.with_name(f"{_DROPPED_PREFIX}{partition}-{uuid.uuid4().hex}")
        os.replace(path, doomed)
        self._delete(doomed)
        try:
            path.parent.rmdir()  # the table's last partition: remove its folder too
        except OSError:
            pass
        return True

    def _position_of(self, store_id: StoreId, path: Path) -> int | None:
        with self._lock:
            store = self._open.get(store_id)
        if store is not None:
            return store.position()
        store = self.engine.open(str(path), store_id)
        try:
            return store.position()
        finally:
            store.close()

    def _delete(self, path: Path) -> None:
        self.engine.destroy(str(path))
        shutil.rmtree(path)

    def _remove_dropped_remains(self) -> None:
        for doomed in self.root.glob(f"*/{_DROPPED_PREFIX}*"):
            log.info("removing the remains of a dropped store: %s", doomed)
            self._delete(doomed)
