"""The restorer's book-keeping: which table partitions each topic partition feeds, how far each is.

No I/O (the restorer, `restorer.py`, makes the consumer calls).

`StatusBoard` holds every table partition's `PartitionStatus` for readers in any thread (pull
queries, lag reports) and lets them wait for progress. `Routes` is the consumer thread's routing
table: the restorer asks it what to assign and unassign.

Usually one topic partition feeds one table partition, but two tables may be declared on one topic
(two CREATE TABLE ... WITH (KAFKA_TOPIC='t')), each with its own store and position. One consumer
reads a topic partition from one offset only, so a shared one is read from the lowest position of
its tables, and each table ignores the records below its own position (`records.changes_of(...,
start)`). A table added below the offset a shared partition is read at makes it be read again from
there (`Routes.attach` reports it as moved).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping

from headwater.store.api import PartitionStore
from headwater.store.errors import TableNotMaterialized
from headwater.store.lag import LagInfo
from headwater.store.records import KeyOf, PartitionState, PartitionStatus

TopicPartitionKey = tuple[str, int]
"""(topic, partition)."""
Start = tuple[str, int, int]
"""(topic, partition, offset to read from)."""


class TableTarget:
    """One table partition fed from one topic partition, and how far it has read.

    Mutable, owned by the restorer's consumer thread: `position` is the store's position after the
    last batch applied (read from the store when the target is made).

    Args:
        table: The table.
        partition: The partition (of the table and of its topic).
        store: The table partition's store.
        key_of: The table's key decoder.
    """

    __slots__ = ("key_of", "partition", "position", "store", "table")

    def __init__(self, table: str, partition: int, store: PartitionStore, key_of: KeyOf):
        self.table = table
        self.partition = partition
        self.store = store
        self.key_of = key_of
        self.position: int = store.position() or 0

    def __repr__(self) -> str:
        return f"TableTarget({self.table!r}, {self.partition}, position={self.position})"


class Routes:
    """The table partitions fed by each topic partition the restorer reads."""

    def __init__(self) -> None:
        self._by_partition: dict[TopicPartitionKey, list[TableTarget]] = {}

    def __len__(self) -> int:
        return len(self._by_partition)

    def targets(self, key: TopicPartitionKey) -> list[TableTarget]:
        """The table partitions fed by a topic partition (empty if it is not read)."""
        return self._by_partition.get(key, [])

    def partitions(self) -> list[TopicPartitionKey]:
        """Every topic partition read."""
        return list(self._by_partition)

    def starts(self) -> list[Start]:
        """Where to read each topic partition from: the lowest position of the tables it feeds."""
        return [
            (topic, partition, min(t.position for t in targets))
            for (topic, partition), targets in self._by_partition.items()
        ]

    def attach(self, topic: str, targets: Iterable[TableTarget]) -> tuple[list[Start], list[Start]]:
        """Adds a table's partitions, all read from `topic`.

        Returns:
            (new, moved): topic partitions to assign, and already assigned ones to read again from
            a lower offset (unassign, then assign at that offset).
        """
        new: list[Start] = []
        moved: list[Start] = []
        for target in targets:
            routed = self._by_partition.setdefault((topic, target.partition), [])
            start = (topic, target.partition, target.position)
            if not routed:
                new.append(start)
            elif target.position < min(t.position for t in routed):
                moved.append(start)
            routed.append(target)
        return new, moved

    def detach(self, table: str) -> list[TopicPartitionKey]:
        """Removes a table's partitions.

        Returns:
            The topic partitions no table needs any more (to unassign).
        """
        idle: list[TopicPartitionKey] = []
        for key, routed in list(self._by_partition.items()):
            routed[:] = [t for t in routed if t.table != table]
            if not routed:
                del self._by_partition[key]
                idle.append(key)
        return idle

    def detach_partitions(self, table: str, partitions: Iterable[int]) -> list[TopicPartitionKey]:
        """Removes some of a table's partitions.

        Returns:
            The topic partitions no table needs any more (to unassign).
        """
        gone = set(partitions)
        idle: list[TopicPartitionKey] = []
        for key, routed in list(self._by_partition.items()):
            routed[:] = [t for t in routed if not (t.table == table and t.partition in gone)]
            if not routed:
                del self._by_partition[key]
                idle.append(key)
        return idle

    def remove(self, key: TopicPartitionKey, target: TableTarget) -> bool:
        """Removes one table partition (its store failed).

        Returns:
            Whether the topic partition is no longer needed (to unassign).
        """
        routed = self._by_partition.get(key)
        if routed is None or target not in routed:
            return False
        routed.remove(target)
        if routed:
            return False
        del self._by_partition[key]
        return True


class StatusBoard:
    """Each materialized table's topic and partition statuses. Thread-safe; waits on changes."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._topics: dict[str, str] = {}
        self._status: dict[str, dict[int, PartitionStatus]] = {}

    def claim(self, table: str) -> None:
        """Reserves a table name while its stores open (`status` still raises for it).

        Raises:
            ValueError: If the table is already on the board.
        """
        with self._changed:
            if table in self._status:
                raise ValueError(f"table {table} is already materialized here")
            self._status[table] = {}

    def publish(self, table: str, topic: str, statuses: Iterable[PartitionStatus]) -> None:
        """Puts a claimed table's partitions on the board."""
        with self._changed:
            self._topics[table] = topic
            self._status[table] = {s.partition: s for s in statuses}
            self._changed.notify_all()

    def add_partitions(self, table: str, statuses: Iterable[PartitionStatus]) -> None:
        """Puts more partitions of a table already on the board."""
        with self._changed:
            self._status.setdefault(table, {}).update({s.partition: s for s in statuses})
            self._changed.notify_all()

    def forget_partitions(self, table: str, partitions: Iterable[int]) -> None:
        """Takes some partitions of a table off the board."""
        with self._changed:
            statuses = self._status.get(table, {})
            for partition in partitions:
                statuses.pop(partition, None)
            self._changed.notify_all()

    def discard(self, table: str) -> None:
        """Takes a table off the board (waiters on it raise TableNotMaterialized)."""
        with self._changed:
            self._status.pop(table, None)
            self._topics.pop(table, None)
            self._changed.notify_all()

    def topics(self) -> dict[str, str]:
        """The tables on the board, with their topics."""
        with self._changed:
            return dict(self._topics)

    def status(self, table: str) -> dict[int, PartitionStatus]:
        """A table's partition statuses.

        Raises:
            TableNotMaterialized: If the table is not on the board.
        """
        with self._changed:
            return dict(self._status_of(table))

    def lags(self) -> dict[str, dict[int, LagInfo]]:
        """Every table's partitions with a known end offset, and their lags."""
        with self._changed:
            return {
                table: {p: lag for p, s in parts.items() if (lag := s.lag) is not None}
                for table, parts in self._status.items()
            }

    def update(
        self, table: str, partition: int, change: Callable[[PartitionStatus], PartitionStatus]
    ) -> None:
        """Replaces a partition's status by `change(status)`, if the table is still on the board."""
        with self._changed:
            current = self._status.get(table, {}).get(partition)
            if current is not None:
                self._status[table][partition] = change(current)
                self._changed.notify_all()

    def fail_all(self, reason: str) -> None:
        """Marks every partition not yet FAILED as FAILED (the restorer itself failed)."""
        with self._changed:
            for statuses in self._status.values():
                for partition, current in statuses.items():
                    if current.state is not PartitionState.FAILED:
                        statuses[partition] = current.failed(reason)
            self._changed.notify_all()

    def wait_until_caught_up(self, table: str, timeout_s: float) -> bool:
        """Waits until every partition is READY and at the end offset known when called.

        Returns:
            True when caught up; False on timeout or when a partition FAILED.

        Raises:
            TableNotMaterialized: If the table is not (or no longer) on the board.
        """
        with self._changed:
            ends = {p: s.end_offset for p, s in self._status_of(table).items()}
            return self._wait(table, timeout_s, lambda s: s.caught_up_to(ends.get(s.partition)))

    def wait_for_positions(
        self, table: str, positions: Mapping[int, int], timeout_s: float
    ) -> bool:
        """Waits until each given partition's position is at least the given offset.

        Returns:
            True when reached; False on timeout or when one of those partitions FAILED.

        Raises:
            TableNotMaterialized: If the table is not (or no longer) on the board.
        """
        with self._changed:
            return self._wait(
                table, timeout_s, lambda s: s.position >= positions[s.partition], positions.keys()
            )

    def _status_of(self, table: str) -> dict[int, PartitionStatus]:
        statuses = self._status.get(table)
        if not statuses:
            raise TableNotMaterialized(f"table {table} is not materialized here", table=table)
        return statuses

    def _wait(
        self,
        table: str,
        timeout_s: float,
        done: Callable[[PartitionStatus], bool],
        partitions: Iterable[int] | None = None,
    ) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            statuses = self._status_of(table)
            wanted = [s for p, s in statuses.items() if partitions is None or p in partitions]
            if any(s.state is PartitionState.FAILED for s in wanted):
                return False
            if all(done(s) for s in wanted):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._changed.wait(remaining)
