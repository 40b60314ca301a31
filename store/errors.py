"""The store package's errors: one root, `StoreError`, with structured fields. Pure (no I/O).

Every error names the table and partition it concerns when known, and carries two class attributes:
`error_code`, a ksqlDB error code (HTTP status x 100 + n, see docs/architecture.md "REST conventions") that
the gateway's one error table turns into a response, and `retriable`, true when the same request may
succeed later or on another replica (the aiokafka convention).

Codes chosen:
- 50302 ("not ready") for a partition that cannot answer yet or any more: `StoreNotReady`, its
  subclasses `StoreRestoring` (still catching up from the changelog) and `StoreClosed` (closed, e.g.
  during a rebalance or shutdown). All retriable: a router tries another replica or backs off.
- 40000 ("bad request") for a key the user gave that cannot be encoded: `KeyEncodingError`, and for
  a key too large for the engine: `KeyTooLarge`.
- 50000 ("server error") for everything that is a bug or damage: positions going backwards, bytes
  that do not decode, an unknown on-disk format, an engine failure.
"""

from __future__ import annotations


class StoreError(Exception):
    """Root of the store package's errors.

    Args:
        message: What went wrong, for people.
        table: The table concerned, when known.
        partition: The partition concerned, when known.
    """

    error_code: int = 50000
    retriable: bool = False

    def __init__(self, message: str, *, table: str | None = None, partition: int | None = None):
        super().__init__(message)
        self.message = message
        self.table = table
        self.partition = partition

    def __str__(self) -> str:
        if self.table is None:
            return self.message
        where = self.table if self.partition is None else f"{self.table}/{self.partition}"
        return f"{self.message} (store {where})"


class StoreNotReady(StoreError):
    """The partition's store cannot serve reads now; another replica or a later retry may."""

    error_code = 50302
    retriable = True


class StoreRestoring(StoreNotReady):
    """The store is still catching up from its changelog.

    Args:
        position: The next changelog offset the store will read (None: nothing applied yet).
        end_offset: The changelog's end offset when the error was raised.
    """

    def __init__(
        self,
        message: str,
        *,
        table: str | None = None,
        partition: int | None = None,
        position: int | None = None,
        end_offset: int | None = None,
    ):
        super().__init__(message, table=table, partition=partition)
        self.position = position
        self.end_offset = end_offset


class StoreClosed(StoreNotReady):
    """The store was closed (rebalance, drop or shutdown) before or during the operation."""


class PositionRegression(StoreError):
    """A write batch would move the store's changelog position backwards (a restorer bug)."""

    def __init__(
        self,
        message: str,
        *,
        table: str | None = None,
        partition: int | None = None,
        position: int | None = None,
        batch_position: int | None = None,
    ):
        super().__init__(message, table=table, partition=partition)
        self.position = position
        self.batch_position = batch_position


class KeyEncodingError(StoreError, ValueError):
    """A key value does not fit its declared key type (wrong Python type, out of range, NaN decimal)."""

    error_code = 40000


class KeyDecodingError(StoreError, ValueError):
    """Bytes are not a valid encoded key for the given key types (damaged data or a wrong schema)."""


class KeyTooLarge(StoreError, ValueError):
    """An encoded key is empty or longer than the stores accept (`headwater.store.api.MAX_KEY_BYTES`)."""

    error_code = 40000


class StoreFormatError(StoreError):
    """A store on disk was written in a format this version does not know."""


class StoreIOError(StoreError):
    """The storage engine failed (disk full, I/O error, damaged files); the cause is chained."""


class TableNotMaterialized(StoreNotReady):
    """This server does not (or no longer) materialize the table; another server may."""
