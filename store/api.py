"""The seam between materialized-table stores and their users: a narrow `Protocol` and its values.

Pure (no I/O): implementations live in `memory.py` (in memory, for every package's tests) and
`lmdb.py` (on disk); `local.py` keeps one store per (table, partition) under a state folder.

A `PartitionStore` holds one partition of one table: rows as bytes under order-preserving encoded keys
(`headwater.store.keys`), plus the changelog position they reflect. A restorer feeds it `WriteBatch`es
read from the table's changelog topic; each batch carries the offset it brings the store to, and the
rows and the offset are applied atomically, so after a crash the store is exactly the changelog's
prefix up to `position()`, and restoring resumes there. Pull queries read it with `get`, `range` and
`scan`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

from headwater.store.errors import KeyTooLarge

MAX_KEY_BYTES = 511
"""Longest key any store accepts (LMDB's limit). Longer keys raise `KeyTooLarge` in every store."""


class StoreId(NamedTuple):
    """Which store: a table and one of its partitions."""

    table: str
    partition: int


@dataclass(frozen=True, slots=True)
class WriteBatch:
    """Changes read from a changelog, and the offset they bring the store to.

    Attributes:
        changes: (key, value) pairs applied in order; a value of None is a tombstone (delete). A later
            change of the same key wins.
        position: The next changelog offset to read after this batch (last record's offset + 1).
    """

    changes: tuple[tuple[bytes, bytes | None], ...]
    position: int

    def __post_init__(self) -> None:
        if self.position < 0:
            raise ValueError(f"position must be >= 0, not {self.position}")

    @classmethod
    def of(cls, changes: Iterable[tuple[bytes, bytes | None]], position: int) -> WriteBatch:
        """Builds a batch from any iterable of (key, value-or-None), checking keys and values.

        Raises:
            KeyTooLarge: If a key is empty or longer than MAX_KEY_BYTES.
            TypeError: If a key or value is not bytes.
        """
        items = tuple(changes)
        for key, value in items:
            check_key(key)
            if value is not None and not isinstance(value, bytes):
                raise TypeError(f"values are bytes or None, not {type(value).__name__}")
        return cls(items, position)

    def puts(self) -> dict[bytes, bytes]:
        """The batch's net effect: the keys it leaves with a value, and those values."""
        net = self.net()
        return {k: v for k, v in net.items() if v is not None}

    def deletes(self) -> set[bytes]:
        """The batch's net effect: the keys it leaves deleted."""
        return {k for k, v in self.net().items() if v is None}

    def net(self) -> dict[bytes, bytes | None]:
        """The last change of each key (what applying the batch amounts to)."""
        return dict(self.changes)


def check_key(key: bytes) -> None:
    """Checks that `key` is a key every store accepts.

    Raises:
        TypeError: If the key is not bytes.
        KeyTooLarge: If it is empty or longer than MAX_KEY_BYTES.
    """
    if not isinstance(key, bytes):
        raise TypeError(f"keys are bytes, not {type(key).__name__}")
    if not 0 < len(key) <= MAX_KEY_BYTES:
        raise KeyTooLarge(f"keys must be 1..{MAX_KEY_BYTES} bytes, this one has {len(key)}")


@runtime_checkable
class PartitionStore(Protocol):
    """One table partition's rows and changelog position.

    Reads (`get`, `range`, `scan`) may run in any thread while one restorer thread applies batches;
    a `range` iterator reads one consistent snapshot. After `close()` every call raises `StoreClosed`.
    """

    def get(self, key: bytes) -> bytes | None:
        """The value under `key`, or None."""
        ...

    def range(
        self,
        low: bytes | None,
        high: bytes | None,
        *,
        low_inclusive: bool = True,
        high_inclusive: bool = True,
        reverse: bool = False,
    ) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) pairs with low <= key <= high (bounds None are open), in key order.

        Args:
            low: Lower bound, or None for no lower bound.
            high: Upper bound, or None for no upper bound.
            low_inclusive: Whether a key equal to `low` is included.
            high_inclusive: Whether a key equal to `high` is included.
            reverse: Descending key order instead.

        Returns:
            A lazy iterator over one snapshot; exhaust or close it promptly (it may pin the snapshot).
        """
        ...

    def scan(self) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value), in key order (`range(None, None)`)."""
        ...

    def apply(self, batch: WriteBatch) -> None:
        """Applies the batch's changes and sets the position to `batch.position`, atomically.

        After a crash the store holds either the batch's changes and its position, or neither.

        Raises:
            PositionRegression: If batch.position is below the current position.
        """
        ...

    def position(self) -> int | None:
        """The next changelog offset to read (None: no batch was ever applied)."""
        ...

    def approximate_count(self) -> int:
        """About how many rows the store holds (exact in both current implementations)."""
        ...

    def clear(self) -> None:
        """Deletes every row and the position, atomically (restore starts again from the beginning)."""
        ...

    def close(self) -> None:
        """Releases the store; idempotent. Committed batches stay (for disk stores, on disk)."""
        ...


class StoreEngine(Protocol):
    """Opens and destroys the stores kept in folders (used by `LocalStores`)."""

    name: str

    def open(self, path: str, store_id: StoreId) -> PartitionStore:
        """Opens the store in folder `path` (which exists), creating it when empty."""
        ...

    def destroy(self, path: str) -> None:
        """Deletes the closed store kept in folder `path`, if any (not the folder itself)."""
        ...
