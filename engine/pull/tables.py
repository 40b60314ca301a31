"""The tables this server materializes: which ones (from the catalog), how their rows are stored and read.

Does I/O through ``store.restorer.TableRestorer`` (Kafka) and ``store.local.LocalStores`` (disk).
The catalog decides: every TABLE source is materialized from its topic, every partition (one
server holds all of them until the cluster assigns replicas); a dropped table's stores are deleted.
The restorer stores each record under its order-preserving key (``store.keys.encode_key`` of the
key the serde decodes; a windowed table's key is followed by its window's start and end, so a
key's windows are stored together, in start order) with the raw value in the store envelope;
:class:`StoredTable` reads them back as ``engine.pull.query.Row`` values for the pull path.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from headwater.engine.errors import EngineError, SerdeError
from headwater.engine.formats.serde import serde_of
from headwater.engine.formats.windows import split_windowed_key, window_size_ms
from headwater.engine.partitioner import partition_for
from headwater.engine.persistent.source_columns import kafka_string_key
from headwater.engine.pull.query import Row
from headwater.engine.values import has_map, resolve_type
from headwater.kafka.clients import KafkaSettings
from headwater.kafka.errors import EndOffsetsUnavailable
from headwater.metastore.catalog import Catalog, Source, SourceKind
from headwater.sqlparse_ext.sqltypes import (
    ArrayType,
    DecimalType,
    PrimitiveType,
    SqlType,
    StructType,
)
from headwater.store.end_probe import EndProbe
from headwater.store.errors import StoreError
from headwater.store.keys import KeyType, decode_key, encode_key, encode_utf8_key, prefix_end
from headwater.store.lag import LagInfo
from headwater.store.local import LocalStores
from headwater.store.records import PartitionState, PartitionStatus, unpack_value
from headwater.store.restorer import TableRestorer

log = logging.getLogger(__name__)

_KEY_TYPES: dict[str, KeyType] = {
    "BOOLEAN": KeyType.BOOLEAN,
    "INTEGER": KeyType.INT,
    "BIGINT": KeyType.BIGINT,
    "DOUBLE": KeyType.DOUBLE,
    "STRING": KeyType.STRING,
    "BYTES": KeyType.BYTES,
    "DATE": KeyType.DATE,
    "TIME": KeyType.TIME,
    "TIMESTAMP": KeyType.TIMESTAMP,
}


class UnsupportedKey(EngineError):
    """A table whose key columns cannot be stored (MAP keys, as ksqlDB refuses them)."""

    error_code = 40001


def key_type_of(sql_type: SqlType) -> KeyType:
    """The store key type of a key column's SQL type.

    Raises:
        UnsupportedKey: for MAP key columns (and ARRAY or STRUCT ones holding a MAP).
    """
    if isinstance(sql_type, DecimalType):
        return KeyType.DECIMAL
    if isinstance(sql_type, PrimitiveType):
        return _KEY_TYPES[sql_type.name]
    if isinstance(sql_type, ArrayType | StructType) and not has_map(sql_type):
        return KeyType.CONTAINER
    raise UnsupportedKey(f"key columns of type {sql_type.sql()} cannot be materialized")


_READY = PartitionState.READY.value
_FAILED = PartitionState.FAILED.value


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """A table partition's freshness here, as the pull path checks it."""

    position: int
    end_offset: int | None
    state: str
    end_current: bool = True

    @property
    def known_lag(self) -> int | None:
        """The lag as an answer reports it: None while the topic's end is unknown (never yet
        seen, or its leader unreachable now: Kafka is down), never a stale 0."""
        return self.lag if self.end_offset is not None and self.end_current else None

    @property
    def lag(self) -> int:
        """Records behind the end offset seen (unknown end: treated as infinitely behind)."""
        if self.end_offset is None:
            return 2**63 - 1
        return max(0, self.end_offset - self.position)

    @property
    def ready(self) -> bool:
        """Whether the partition has caught up with its topic once (and follows it since)."""
        return self.state == _READY

    def servable(self, max_lag: int, bounded: bool) -> bool:
        """Whether an answer may read this partition under the offset-lag bound ``max_lag``.

        A partition still restoring is served only when the query states a bound (``bounded``)
        and the partition is within it; with no bound it must have caught up once.
        """
        if self.end_offset is None or self.state == _FAILED:
            return False
        if not self.end_current:  # the lag is unknown: only an answer with no bound may be given
            return self.ready and not bounded
        return self.lag <= max_lag and (self.ready or bounded)

    def describe(self) -> str:
        """For error messages: state, position, end and lag."""
        if not self.end_current:
            return (
                f"{self.state}, position {self.position}, lag unknown (its Kafka leader is "
                "unreachable, so the topic's end is not known)"
            )
        end = "unknown" if self.end_offset is None else str(self.end_offset)
        lag = "unknown" if self.end_offset is None else str(self.lag)
        return f"{self.state}, position {self.position} of {end}, lag {lag}"

    @classmethod
    def of(cls, status: PartitionStatus) -> PartitionLag:
        """From the restorer's status."""
        return cls(status.position, status.end_offset, status.state.value, status.end_current)


class StoredTable:
    """One table's rows in this server's stores, read as ``Row`` values (``engine.pull.query.TableReader``).

    A windowed table's keys carry ``WINDOWSTART`` and ``WINDOWEND`` after its key columns."""

    def __init__(self, source: Source, catalog: Catalog, stores: LocalStores) -> None:
        self.source = source
        self.serde = serde_of(source, catalog.types)
        self._custom_types = catalog.types
        self.key_types = tuple(
            key_type_of(resolve_type(c.type, catalog.types)) for c in source.key_columns
        ) + ((KeyType.BIGINT, KeyType.BIGINT) if source.windowed else ())
        self._key_width = len(source.key_columns)
        self._stores = stores

    @property
    def partitions(self) -> int:
        """The table's partition count (its topic's)."""
        return self.source.partitions

    def partition_of(self, key: tuple[Any, ...]) -> int:
        """Where Kafka (murmur2 of the serialized key, without its window) puts ``key``."""
        return key_partition(self.source, self._custom_types, key[: self._key_width])

    def _store(self, partition: int) -> Any:
        store = self._stores.get(self.source.name, partition)
        if store is None:
            raise NotMaterialized(
                f"partition {partition} of {self.source.name} is not held here (yet)"
            )
        return store

    def _row(self, partition: int, key: tuple[Any, ...], stored: bytes) -> Row | None:
        """The stored row, or None when its value cannot be read: the store holds the table's
        records as they came, and one that does not decode is no row (as ksqlDB, which skips such
        a record, logs it and keeps no row for it), so a key lookup finds nothing and a scan
        goes on with the next row."""
        envelope = unpack_value(stored)
        try:
            value = self.serde.deserialize_value(envelope.value) or {}
        except SerdeError as exc:
            log.warning(
                "pull query on %s skips the row at partition %d, offset %d: %s",
                self.source.name,
                partition,
                envelope.offset,
                exc.message,
                extra={"table": self.source.name, "partition": partition},
            )
            return None
        return Row(key, value, envelope.timestamp_ms, partition, envelope.offset)

    def get(self, partition: int, key: tuple[Any, ...]) -> Row | None:
        """The row of ``key`` in ``partition``, or None (also when its value cannot be read)."""
        if any(v is None for v in key):
            return None
        stored = self._store(partition).get(encode_key(key, self.key_types))
        return None if stored is None else self._row(partition, key, stored)

    def range(
        self,
        partition: int,
        low: tuple[Any, ...] | None,
        high: tuple[Any, ...] | None,
        low_inclusive: bool,
        high_inclusive: bool,
    ) -> Iterator[Row]:
        """Rows with low <= key <= high (bounds may be key prefixes), in key order."""
        low_bytes = None if low is None else encode_key(low, self.key_types[: len(low)])
        high_bytes = None if high is None else encode_key(high, self.key_types[: len(high)])
        # A prefix bound: every key starting with the prefix is <= it (and > it, exclusive).
        prefix_high = high is not None and len(high) < len(self.key_types)
        if high_bytes is not None and prefix_high and high_inclusive:
            high_bytes, high_inclusive = prefix_end(high_bytes), False
        prefix_low = low is not None and len(low) < len(self.key_types)
        if low_bytes is not None and prefix_low and not low_inclusive:
            low_bytes, low_inclusive = prefix_end(low_bytes), True
        for key_bytes, stored in self._store(partition).range(
            low_bytes, high_bytes, low_inclusive=low_inclusive, high_inclusive=high_inclusive
        ):
            row = self._row(partition, self._decode_key(key_bytes), stored)
            if row is not None:
                yield row

    def scan(self, partition: int) -> Iterator[Row]:
        """Every row of ``partition`` that can be read, in key order."""
        for key_bytes, stored in self._store(partition).scan():
            row = self._row(partition, self._decode_key(key_bytes), stored)
            if row is not None:
                yield row

    def _decode_key(self, data: bytes) -> tuple[Any, ...]:
        return decode_key(data, self.key_types)


def key_partition(source: Source, custom_types: Mapping[str, Any], key: tuple[Any, ...]) -> int:
    """The partition of ``source``'s topic that holds ``key``: murmur2 of the serialized key, as
    every Kafka client places it.

    The last few thousand answers are remembered (a pull query by key asks twice: to route, then
    to read), by the very Source and types objects they were computed for.
    """
    try:
        known = _placed.get((id(source), key))
    except TypeError:  # an ARRAY or MAP key: not hashable, computed every time
        known = None
    if known is not None and known[0] is source and known[1] is custom_types:
        return known[2]
    data = serde_of(source, custom_types).serialize_key(key)
    partition = partition_for(data or b"", source.partitions)
    try:
        if len(_placed) >= _PLACED_SIZE:
            _placed.clear()
        _placed[(id(source), key)] = (source, custom_types, partition)
    except TypeError:
        pass
    return partition


_PLACED_SIZE = 4096
_placed: dict[tuple[int, tuple[Any, ...]], tuple[Source, Mapping[str, Any], int]] = {}


def materialized(catalog: Catalog) -> dict[str, Source]:
    """The tables of ``catalog`` a server materializes (pure): every TABLE source."""
    return {
        name: source for name, source in catalog.sources.items() if source.kind is SourceKind.TABLE
    }


class MaterializedTables:
    """Keeps this server's stores in step with the catalog's tables, and reads them.

    Args:
        settings: how to reach Kafka.
        stores: the server's stores.
    """

    def __init__(self, settings: KafkaSettings, stores: LocalStores) -> None:
        self.stores = stores
        self.restorer = TableRestorer(settings, stores)
        self.probe = EndProbe(settings)
        self._lock = threading.Lock()
        self._held: dict[str, tuple[Source, frozenset[int]]] = {}
        self._readers: dict[tuple[str, int], StoredTable] = {}
        self._started = False
        self._catalog: Catalog | None = None
        self._assigned: Mapping[str, frozenset[int]] | None = None

    def start(self, catalog: Catalog) -> None:
        """Start restoring the tables of ``catalog``; stores of tables no longer in it are dropped.

        Stores of partitions this server is not (yet) assigned stay until an assignment says so.
        """
        self.restorer.start()
        self._started = True
        self.sync(catalog)
        wanted = materialized(catalog)
        for store_id in self.stores.on_disk():
            if store_id.table not in wanted:
                log.info("dropping the store of %s/%d: the table is gone", *store_id)
                self.stores.drop(store_id.table, store_id.partition)

    def stop(self) -> None:
        """Stop restoring (stores stay on disk)."""
        self.restorer.stop()
        self.probe.close()

    def listener(self, _record: object, _outcome: object, catalog: Catalog) -> None:
        """The command runner's listener: follow every catalog change. Never raises.

        Before :meth:`start` (while the server replays the command log at start-up) it does
        nothing: ``start`` syncs once with the caught-up catalog instead of once per command.
        """
        if not self._started:
            return
        try:
            self.sync(catalog)
        except Exception:  # the runner must not die for a table we cannot hold
            log.exception("could not follow the catalog's tables")

    def assign(self, assigned: Mapping[str, frozenset[int]] | None) -> None:
        """Hold exactly these partitions of each table (None: every partition of every table).

        The cluster calls this when its assignment changes; partitions no longer held are
        dropped from disk. Never raises (a table that cannot be held is logged).
        """
        with self._lock:
            self._assigned = None if assigned is None else dict(assigned)
            catalog = self._catalog
        if catalog is not None and self._started:
            try:
                self.sync(catalog)
            except Exception:
                log.exception("could not apply the assignment")

    def held(self) -> dict[str, frozenset[int]]:
        """The partitions of each table held here."""
        with self._lock:
            return {name: parts for name, (_source, parts) in self._held.items()}

    def sync(self, catalog: Catalog) -> None:
        """Hold the partitions of the catalog's tables this server is assigned; drop the rest."""
        wanted = materialized(catalog)
        with self._lock:
            self._catalog = catalog
            assigned = self._assigned
            for name, (source, parts) in list(self._held.items()):
                new_parts = self._partitions(wanted.get(name), assigned)
                same_table = name in wanted and wanted[name].created_offset == source.created_offset
                if same_table and new_parts == parts:
                    continue
                if same_table and new_parts:
                    # Only the changed partitions: the others keep their position and end offset.
                    table = self._readers[(name, source.created_offset)]
                    self.restorer.set_partitions(name, new_parts, _key_of(table))
                    self._held[name] = (source, new_parts)
                    continue
                self.restorer.remove_table(name, drop_stores=False)
                for partition in parts:
                    self.stores.drop(name, partition)
                del self._held[name]
                self._readers = {k: v for k, v in self._readers.items() if k[0] != name}
            for name, source in wanted.items():
                parts = self._partitions(source, assigned)
                if name in self._held or not parts:
                    continue
                try:
                    table = StoredTable(source, catalog, self.stores)
                except EngineError as exc:
                    log.warning("table %s is not materialized: %s", name, exc.message)
                    continue
                self.restorer.add_table(name, source.topic, sorted(parts), _key_of(table))
                self._held[name] = (source, parts)
                self._readers[(name, source.created_offset)] = table

    @staticmethod
    def _partitions(
        source: Source | None, assigned: Mapping[str, frozenset[int]] | None
    ) -> frozenset[int]:
        if source is None:
            return frozenset()
        every = frozenset(range(source.partitions))
        return every if assigned is None else assigned.get(source.name, frozenset()) & every

    def reader(self, source: Source, catalog: Catalog) -> StoredTable:
        """The rows of ``source`` held here.

        Raises:
            EngineError: the table is not materialized here (retriable: it may be about to be).
        """
        with self._lock:
            table = self._readers.get((source.name, source.created_offset))
        if table is None:
            raise NotMaterialized(f"table {source.name} is not materialized on this server yet")
        return table

    def lags(
        self, table: str, partitions: Collection[int] | None = None
    ) -> dict[int, PartitionLag]:
        """Each partition's freshness here (only ``partitions``, when given; empty when the table
        is not held here)."""
        try:
            statuses = self.restorer.status(table)
        except StoreError:  # dropped meanwhile, or never materialized
            return {}
        if partitions is not None:
            return {p: PartitionLag.of(statuses[p]) for p in partitions if p in statuses}
        return {p: PartitionLag.of(s) for p, s in statuses.items()}

    def fresh_lags(
        self,
        table: str,
        partitions: Collection[int] | None,
        max_lag: int,
        timeout_s: float,
        catch_up_s: float,
    ) -> dict[int, PartitionLag]:
        """:meth:`lags` against end offsets read by a fetch sent after this call began
        (``store.end_probe``), so a lag bound holds for every write acknowledged before the query
        arrived, not only for those the restorer had fetched. One whose end cannot be read within
        ``timeout_s`` has an unknown lag; one more than ``max_lag`` behind that end is given up to
        ``catch_up_s`` (within ``timeout_s``) to catch up to it."""
        lags = self.lags(table, partitions)
        known = {p: lag.end_offset for p, lag in lags.items() if lag.end_offset is not None}
        topic = self.restorer.tables().get(table)
        if topic is None or not known:
            return lags
        started = time.monotonic()
        try:
            ends = self.probe.ends(topic, known, timeout_s)
        except EndOffsetsUnavailable:
            return {
                p: dataclasses.replace(lag, end_current=False) if p in known else lag
                for p, lag in lags.items()
            }
        behind = {p: end - max_lag for p, end in ends.items() if end - max_lag > lags[p].position}
        if behind:
            left = min(catch_up_s, timeout_s - (time.monotonic() - started))
            try:
                self.restorer.wait_for_positions(table, behind, max(0.0, left))
            except StoreError:  # dropped meanwhile: the answer fails on reading it
                pass
        now = self.lags(table, partitions)
        return {
            p: dataclasses.replace(lag, end_offset=max(lag.end_offset, ends[p]))
            if p in ends and lag.end_offset is not None
            else lag
            for p, lag in now.items()
        }

    def local_lags(self) -> dict[str, dict[int, LagInfo]]:
        """KIP-535's ``all_local_store_partition_lags()``: {table: {partition: LagInfo}}."""
        return self.restorer.lags()


class NotMaterialized(EngineError):
    """A table this server does not (yet) hold."""

    error_code = 50302
    retriable = True


def _key_of(table: StoredTable) -> Any:
    deserialize, types = table.serde.deserialize_key, table.key_types
    windowed = table.source.windowed
    if windowed:
        session = windowed == "SESSION"
        size = window_size_ms(table.source)

        def windowed_key_of(data: bytes | None) -> bytes:
            key, start, end = split_windowed_key(data or b"", session, size)
            return encode_key((*deserialize(key), start, end), types)

        return windowed_key_of

    def key_of(data: bytes | None) -> bytes:
        return encode_key(deserialize(data), types)

    if not kafka_string_key(table.source):
        return key_of

    def string_key_of(data: bytes | None) -> bytes:
        # a KAFKA STRING key's bytes are its UTF-8: written as they are where they are UTF-8
        # (the restorer's largest per-record step was decoding them to encode them again);
        # what is not UTF-8, or NULL, takes the general way (decoded as Java replaces)
        if data is not None:
            try:
                return encode_utf8_key(data)
            except UnicodeDecodeError:
                pass
        return key_of(data)

    return string_key_of
