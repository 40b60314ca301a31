"""KIP-535's local API over this server: where a key lives, how far behind each local store is, and
the stores themselves. No I/O of its own (it reads the control state and the local stores).

Kafka Streams users know these calls (``queryMetadataForKey``, ``allLocalStorePartitionLags``,
``store(StoreQueryParameters.enableStaleStores())``); the routing of pull queries is built on the
same facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from headwater.cluster.assignment import PartitionId
from headwater.engine.tables import StoredTable, key_partition
from headwater.gateway.errors import KsqlError
from headwater.gateway.services import Services
from headwater.store.lag import LagInfo


@dataclass(frozen=True, slots=True)
class KeyQueryMetadata:
    """Where a key of a table lives (Kafka Streams' ``KeyQueryMetadata``).

    Attributes:
        active: the server holding the partition's active replica ('' when unassigned).
        standbys: the servers holding standby replicas.
        partition: the partition the key belongs to (murmur2 of the serialized key).
    """

    active: str
    standbys: tuple[str, ...]
    partition: int


class LocalMetadata:
    """KIP-535's calls on one server's services."""

    def __init__(self, services: Services) -> None:
        self._services = services

    def _source(self, table: str) -> Any:
        source = self._services.runner.catalog.sources.get(table)
        if source is None:
            raise KsqlError(f"{table} does not exist.", 40001)
        return source

    def query_metadata_for_key(self, table: str, key: tuple[Any, ...]) -> KeyQueryMetadata:
        """The partition of ``key`` and the servers holding it (this server alone without a
        cluster).

        Raises:
            KsqlError: 40001 for an unknown table.
        """
        catalog = self._services.runner.catalog
        source = self._source(table)
        partition = key_partition(source, catalog.types, key)
        control = self._services.control
        if control is None:
            return KeyQueryMetadata(self._services.advertised, (), partition)
        leader = control.state().partitions.get(PartitionId(table, partition))
        if leader is None:
            return KeyQueryMetadata("", (), partition)
        return KeyQueryMetadata(leader.active, tuple(leader.standbys), partition)

    def all_local_store_partition_lags(self) -> dict[str, dict[int, LagInfo]]:
        """{table: {partition: LagInfo(current, end, lag)}} for every store partition held here."""
        tables = self._services.tables
        return {} if tables is None else tables.local_lags()

    def store(self, table: str, include_stale: bool = False) -> StoredTable:
        """The local rows of ``table``: only if this server is active for every partition it holds
        of it, unless ``include_stale`` (standbys too).

        Raises:
            KsqlError: 50302 (retriable) when the table is not held here, or only as a standby and
                ``include_stale`` is False.
        """
        tables = self._services.tables
        source = self._source(table)
        if tables is None:
            raise KsqlError(f"{table} is not materialized here", 50302, retriable=True)
        reader = tables.reader(source, self._services.runner.catalog)
        control = self._services.control
        if control is not None and not include_stale:
            held = tables.held().get(table, frozenset())
            state = control.state()
            standby = [
                p for p in held
                if (leader := state.partitions.get(PartitionId(table, p))) is None
                or leader.active != self._services.advertised
            ]  # fmt: skip
            if standby:
                raise KsqlError(
                    f"{table} partitions {sorted(standby)} are standbys here; pass "
                    "include_stale=True to read them", 50302, retriable=True,
                )  # fmt: skip
        return reader
