"""The changelog restorer: reads table topics and keeps their local stores up to date. Does I/O.

One `TableRestorer` owns one background thread and one confluent-kafka consumer, assigned (never
subscribed, never committing: positions live in the stores) to every partition of every table it
materializes. Each record becomes a store change (`records.changes_of`: the value packed with its
timestamp and offset, tombstones as deletes, undecodable keys skipped), and each partition's share
of one consume batch is applied as one `WriteBatch` whose position is the offset after its last
record: rows and position atomically. A partition starts at its store's `position()` (0 when
None), so a restarted server resumes where its stores stopped.

Two consumers (`kafka.lanes`): a partition is read by the live one (short fetch waits) while it is
caught up or nearly so, and by the catch-up one (long fetch waits) while it is far behind, because
on Tansu short waits crawl over a backlog of one-record batches. A partition moves between them at
the lowest position of its stores.

Batching: the thread blocks in `poll` for the first record, then takes whatever librdkafka has
already fetched (`consume(timeout=0)`, up to `max_batch_records`). Far behind, that is thousands of
records per partition per batch (LMDB ingest is bound by commits); caught up, it is the few new
records, applied at once, so freshness is the fetch latency (about `fetch_wait_max_ms` on Tansu).
With partitions on both consumers, it blocks on neither for longer than `_SHARED_POLL_S`.

End offsets and READY come only from fetch responses, never ListOffsets (wrong on Tansu, see
docs/embedded-broker.md): the high watermark librdkafka caches from the latest fetch
(`get_watermark_offsets(cached=True)`), and end-of-partition events (`enable.partition.eof`), whose
offset is the end and also moves the position past transaction markers after the last record. A
partition is READY once its position reaches the end offset it saw, and stays READY.

Isolation: read_uncommitted by default. A table changelog is a sequence of upserts, so duplicates
(an at-least-once replay) are harmless, and Tansu shows aborted records to read_committed readers
anyway; there read_committed would only add that a crashed transactional writer stalls every table
on its topic until it restarts, and that the cached high watermark is no longer the reader's end.
`RestorerSettings.read_committed` is there for real Kafka with exactly-once writers.

Thread safety: only the thread touches the consumers. `add_table` / `remove_table` while running
hand an action to the thread (a command queue) and wait for it; stopped, they act directly. Status
reads (`status`, `lags`, the waits) go to a `tables.StatusBoard` and never block on Kafka.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaError, Message, TopicPartition

from headwater.kafka.clients import KafkaSettings, consumer_config, consumer_from_config
from headwater.kafka.lanes import Lane, next_lane
from headwater.kafka.offsets import cached_end_offsets
from headwater.kafka.readers import Reader
from headwater.store.api import WriteBatch
from headwater.store.errors import StoreError
from headwater.store.lag import LagInfo
from headwater.store.local import LocalStores
from headwater.store.reachability import reachable_partitions, verdicts_to_apply
from headwater.store.records import KeyOf, PartitionStatus, changes_of
from headwater.store.tables import Routes, Start, StatusBoard, TableTarget, TopicPartitionKey

log = logging.getLogger(__name__)

_MAX_SKIP_LOGS = 5  # skipped records logged one by one per batch and partition; the rest summed up
_SHARED_POLL_S = 0.01  # longest block on one consumer while the other also has partitions
_REVIEW_S = 0.1  # how often live partitions are checked for having fallen far behind
# How long a consumer that has not fetched a partition yet may be connecting before its statistics'
# "unreachable" counts (`store.reachability.verdicts_to_apply`).
_FIRST_FETCH_GRACE_S = 3.0
_Action = Callable[[], None]


@dataclass(frozen=True, slots=True)
class RestorerSettings:
    """How a `TableRestorer` reads.

    Attributes:
        max_batch_records: Most records taken from the consumer per batch (over all partitions).
        poll_timeout_ms: Longest wait for a record; also bounds how long add/remove/stop wait.
        fetch_wait_max_ms: How long the broker may hold an empty fetch of the live consumer. Tansu
            answers a fetch only after this long even when records arrive meanwhile, so it bounds
            freshness there.
        catch_up_fetch_wait_max_ms: The same for the catch-up consumer, which reads partitions
            far behind (long waits let Tansu fill a fetch; short ones crawl, see `kafka.lanes`).
        catch_up_after_records: A live partition more records behind its end than this is moved to
            the catch-up consumer until it reaches its end.
        max_partition_fetch_bytes: Most bytes one fetch returns per partition.
        end_refresh_interval_ms: How often the end offsets of idle partitions are re-read from the
            consumer's fetch cache.
        read_committed: Read with isolation.level=read_committed (see the module docstring).
        statistics_interval_ms: How often librdkafka's statistics tell which partitions' leaders
            are reachable (``store.reachability``); 0: never (end offsets are always trusted).
    """

    max_batch_records: int = 50_000
    poll_timeout_ms: int = 100
    fetch_wait_max_ms: int = 20
    catch_up_fetch_wait_max_ms: int = 500
    catch_up_after_records: int = 20
    max_partition_fetch_bytes: int = 8 * 2**20
    end_refresh_interval_ms: int = 1000
    read_committed: bool = False
    statistics_interval_ms: int = 1000


class _Pending:
    """An action handed to the consumer thread, and its outcome."""

    def __init__(self, action: _Action):
        self.action = action
        self.done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.action()
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            self.error = exc
        finally:
            self.done.set()


class TableRestorer:
    """Materializes table topics into `LocalStores`, one background thread and consumer for all.

    Args:
        kafka: How to reach Kafka.
        stores: Where the tables' stores are (opened here, one per table partition).
        settings: How to read.
        purpose: Names the consumer (its client.id suffix).
    """

    def __init__(
        self,
        kafka: KafkaSettings,
        stores: LocalStores,
        settings: RestorerSettings = RestorerSettings(),
        *,
        purpose: str = "table-restorer",
    ):
        self._kafka, self._stores, self._settings, self._purpose = kafka, stores, settings, purpose
        self._board = StatusBoard()
        self._lock = threading.Lock()  # guards _thread; stopped, commands run under it
        self._routes = Routes()  # the consumer thread's
        self._readers: dict[Lane, Reader] = {}  # the consumer thread's; empty while stopped
        self._lanes: dict[TopicPartitionKey, Lane] = {}  # which reader reads each topic partition
        self._assigned_at: dict[TopicPartitionKey, float] = {}  # when its reader got it (monotonic)
        self._fetched: set[TopicPartitionKey] = set()  # fetched by its reader since then
        self._commands: queue.SimpleQueue[_Pending] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- tables ----------------------------------------------------------------------------------

    def add_table(self, table: str, topic: str, partitions: Iterable[int], key_of: KeyOf) -> None:
        """Starts materializing `table` from `topic`, resuming at its stores' positions.

        Args:
            table: The table's name (its stores' name in `LocalStores`).
            topic: The changelog topic.
            partitions: The partitions to materialize here.
            key_of: Turns a record key into the store key; any Exception skips the record.

        Raises:
            ValueError: If the table is already materialized here, or no partition is given.
            StoreError: If a store cannot be opened.
        """
        wanted = sorted(set(partitions))
        if not wanted:
            raise ValueError(f"no partitions given for table {table}")
        self._board.claim(table)
        try:
            targets = [TableTarget(table, p, self._stores.open(table, p), key_of) for p in wanted]
        except BaseException:
            self._board.discard(table)
            raise
        starts = {t.partition: t.position for t in targets}
        self._board.publish(table, topic, (PartitionStatus(topic, p, o) for p, o in starts.items()))
        log.info("materializing %s from %s at %s", table, topic, starts)
        self._submit(lambda: self._attach(topic, targets))

    def remove_table(self, table: str, drop_stores: bool) -> None:
        """Stops materializing `table`; closes its stores, or deletes them (DROP TABLE).

        Raises:
            TableNotMaterialized: If the table is not materialized here.
        """
        partitions = list(self._board.status(table))
        self._submit(lambda: self._detach(table))
        self._board.discard(table)
        for partition in partitions:
            if drop_stores:
                self._stores.drop(table, partition)
            else:
                self._stores.close(table, partition)
        log.info("stopped materializing %s%s", table, ", stores dropped" if drop_stores else "")

    def set_partitions(
        self, table: str, partitions: Iterable[int], key_of: KeyOf, *, drop_removed: bool = True
    ) -> None:
        """Changes which partitions of a materialized table are held, leaving the others untouched
        (their positions, end offsets and READY state stay: queries on them never see a gap).

        Args:
            table: a table materialized here.
            partitions: the partitions to hold from now on (at least one).
            key_of: the table's key decoder (for the added partitions).
            drop_removed: delete the stores of partitions no longer held (else close them).

        Raises:
            TableNotMaterialized: If the table is not materialized here.
            ValueError: If no partition is given.
            StoreError: If a store cannot be opened.
        """
        wanted = set(partitions)
        if not wanted:
            raise ValueError(f"no partitions given for table {table}")
        current = set(self._board.status(table))
        topic = self._board.topics()[table]
        added, removed = sorted(wanted - current), sorted(current - wanted)
        if removed:
            self._submit(lambda: self._detach_partitions(table, removed))
            self._board.forget_partitions(table, removed)
            for partition in removed:
                if drop_removed:
                    self._stores.drop(table, partition)
                else:
                    self._stores.close(table, partition)
        if added:
            targets = [TableTarget(table, p, self._stores.open(table, p), key_of) for p in added]
            self._board.add_partitions(
                table, (PartitionStatus(topic, t.partition, t.position) for t in targets)
            )
            self._submit(lambda: self._attach(topic, targets))
        if added or removed:
            log.info(
                "table %s: now holding partitions %s (added %s, removed %s)",
                table,
                sorted(wanted),
                added,
                removed,
            )

    # -- status (any thread; never blocks on Kafka) ----------------------------------------------

    def tables(self) -> dict[str, str]:
        """The tables materialized here, with their topics."""
        return self._board.topics()

    def status(self, table: str) -> dict[int, PartitionStatus]:
        """Each partition's position, end offset, lag, state, skipped count and last error.

        Raises:
            TableNotMaterialized: If the table is not materialized here.
        """
        return self._board.status(table)

    def lags(self) -> dict[str, dict[int, LagInfo]]:
        """KIP-535's `all_local_store_partition_lags()`: partitions with a known end offset only."""
        return self._board.lags()

    def wait_until_caught_up(self, table: str, timeout_s: float) -> bool:
        """Waits until every partition is READY and at the end offset known when called.

        Returns:
            True when caught up; False on timeout or when a partition FAILED.

        Raises:
            TableNotMaterialized: If the table is not (or no longer) materialized here.
        """
        return self._board.wait_until_caught_up(table, timeout_s)

    def wait_for_positions(
        self, table: str, positions: Mapping[int, int], timeout_s: float
    ) -> bool:
        """Waits until each given partition's store position is at least the given offset.

        Returns:
            True when reached; False on timeout or when one of those partitions FAILED.

        Raises:
            TableNotMaterialized: If the table is not (or no longer) materialized here.
        """
        return self._board.wait_for_positions(table, positions, timeout_s)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Creates the consumers and starts the thread (again after `stop`).

        Raises:
            KafkaException: If a consumer cannot be created (bad configuration).
        """
        with self._lock:
            if self._thread is not None:
                raise RuntimeError("the restorer is running")
            readers = {
                lane: consumer_from_config(self._consumer_config(lane), follows_new_topics=True)
                for lane in Lane
            }
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._run, args=(readers,), name=self._purpose, daemon=True
            )
            self._thread.start()

    def _consumer_config(self, lane: Lane) -> dict[str, object]:
        live = lane is Lane.LIVE
        config = consumer_config(
            self._kafka,
            self._purpose if live else f"{self._purpose}-{lane.value}",
            read_committed=self._settings.read_committed,
            partition_eof=True,
            fetch_wait_max_ms=self._settings.fetch_wait_max_ms
            if live
            else self._settings.catch_up_fetch_wait_max_ms,
        )
        config.setdefault("max.partition.fetch.bytes", self._settings.max_partition_fetch_bytes)
        config.setdefault("enable.auto.offset.store", False)  # nothing is ever committed
        if self._settings.statistics_interval_ms > 0:
            config["statistics.interval.ms"] = self._settings.statistics_interval_ms
            # called by poll(), on the restorer's thread
            config["stats_cb"] = lambda stats: self._on_statistics(lane, stats)
        return config

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stops the thread and closes the consumer; the stores stay open. Idempotent."""
        self._stop.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
            if thread.is_alive():
                log.warning("the restorer thread did not stop within %.0f s", timeout_s)

    # -- the thread ------------------------------------------------------------------------------

    def _run(self, readers: dict[Lane, Reader]) -> None:
        refresh_s = self._settings.end_refresh_interval_ms / 1000
        next_refresh = next_review = time.monotonic() + refresh_s
        self._readers = readers
        try:
            if len(self._routes):
                self._assign(self._routes.starts())
            while not self._stop.is_set():
                self._run_commands()
                if any(reader.needs_renewal() for reader in self._readers.values()):
                    readers = self._renew()
                self._read()
                now = time.monotonic()
                if now >= next_review:
                    self._review(self._live_partitions())
                    next_review = now + _REVIEW_S
                if now >= next_refresh:
                    self._refresh_ends()
                    next_refresh = now + refresh_s
        except Exception as exc:  # the thread must not die silently
            log.exception("the table restorer failed")
            self._board.fail_all(f"the restorer failed: {exc!r}")
        finally:
            self._readers = {}
            self._lanes.clear()
            self._assigned_at.clear()
            self._fetched.clear()
            for reader in readers.values():
                reader.close()
            with self._lock:
                self._thread = None
                self._run_commands()  # anything submitted while it stopped

    def _renew(self) -> dict[Lane, Reader]:
        """New consumers in place of ones that knew a topic that was deleted (``kafka.readers``:
        such a consumer dies once a topic of that name is created again); every partition is read
        again from its stores' position."""
        log.info("renewing the restorer's consumers: a topic they read was deleted")
        for reader in self._readers.values():
            reader.close()
        self._readers = {
            lane: consumer_from_config(self._consumer_config(lane), follows_new_topics=True)
            for lane in Lane
        }
        self._lanes.clear()
        self._assigned_at.clear()
        self._fetched.clear()
        if len(self._routes):
            self._assign(self._routes.starts())
        return self._readers

    def _read(self) -> None:
        """Reads one batch from each consumer that has partitions, blocking on one at most."""
        present = set(self._lanes.values())
        held = [lane for lane in (Lane.LIVE, Lane.CATCH_UP) if lane in present]
        block_s = self._settings.poll_timeout_ms / 1000
        if len(held) > 1:
            block_s = min(block_s, _SHARED_POLL_S)
        more = self._settings.max_batch_records - 1
        for lane in held or [Lane.LIVE]:  # with no partitions: waits (and serves statistics)
            reader = self._readers[lane]
            first = reader.poll(block_s)
            block_s = 0
            if first is not None:
                messages = [first]
                if more > 0:
                    messages += reader.consume(more, 0)
                self._process(lane, messages)

    def _run_commands(self) -> None:
        while True:
            try:
                pending = self._commands.get_nowait()
            except queue.Empty:
                return
            pending.run()

    def _submit(self, action: _Action) -> None:
        with self._lock:
            if self._thread is None:
                action()
                return
            pending = _Pending(action)
            self._commands.put(pending)
        pending.done.wait()
        if pending.error is not None:
            raise pending.error

    # -- the consumers' assignments (the thread's; no-ops while stopped) --------------------------

    def _attach(self, topic: str, targets: list[TableTarget]) -> None:
        new, moved = self._routes.attach(topic, targets)
        self._unassign([(t, p) for t, p, _offset in moved])  # shared, read again from lower
        self._assign(new + moved)

    def _detach(self, table: str) -> None:
        self._unassign(self._routes.detach(table))

    def _detach_partitions(self, table: str, partitions: list[int]) -> None:
        self._unassign(self._routes.detach_partitions(table, partitions))

    def _assign(self, starts: list[Start], lane: Lane = Lane.LIVE) -> None:
        if self._readers and starts:
            now = time.monotonic()
            for topic, partition, _offset in starts:
                self._lanes[(topic, partition)] = lane
                self._assigned_at[(topic, partition)] = now
                self._fetched.discard((topic, partition))
            self._readers[lane].incremental_assign(_partitions(starts))

    def _unassign(self, keys: list[TopicPartitionKey]) -> None:
        for key in keys:
            lane = self._lanes.pop(key, None)
            self._assigned_at.pop(key, None)
            self._fetched.discard(key)
            if lane is not None:
                self._readers[lane].incremental_unassign([TopicPartition(*key)])

    def _live_partitions(self) -> list[TopicPartitionKey]:
        return [key for key, lane in self._lanes.items() if lane is Lane.LIVE]

    def _review(
        self, keys: Iterable[TopicPartitionKey], eofs: Mapping[TopicPartitionKey, int] | None = None
    ) -> None:
        """Moves each partition to the consumer that should read it now (`kafka.lanes`)."""
        eofs = eofs or {}
        for key in keys:
            lane, routed = self._lanes.get(key), self._routes.targets(key)
            if lane is None or not routed:
                continue
            position = min(t.position for t in routed)
            end = self._cached_end(lane, key)
            eof = eofs.get(key)
            wanted = next_lane(
                lane,
                position,
                end,
                eof is not None and position >= eof,
                self._settings.catch_up_after_records,
            )
            if wanted is not lane:
                log.debug(
                    "%s[%d]: reading from the %s consumer at %d (end %s)",
                    key[0],
                    key[1],
                    wanted.value,
                    position,
                    end,
                )
                self._unassign([key])
                self._assign([(key[0], key[1], position)], wanted)

    def _process(self, lane: Lane, messages: list[Message]) -> None:
        runs: dict[TopicPartitionKey, list[Message]] = {}
        eofs: dict[TopicPartitionKey, int] = {}
        last_key: TopicPartitionKey | None = None
        run: list[Message] = []
        for message in messages:
            error = message.error()
            if error is None:
                key = (message.topic() or "", message.partition() or 0)
                if key != last_key:
                    run = runs.setdefault(key, [])
                    last_key = key
                run.append(message)
            elif error.code() == KafkaError._PARTITION_EOF:
                eofs[(message.topic() or "", message.partition() or 0)] = message.offset() or 0
            else:
                self._note_error(message, error)
        for key in runs.keys() | eofs.keys():
            routed = self._routes.targets(key)
            if not routed or self._lanes.get(key) is not lane:
                continue  # unassigned (or moved to the other consumer) since it was fetched
            self._fetched.add(key)
            records = runs.get(key, [])
            end = eofs.get(key)
            if records:
                high = self._cached_end(lane, key)
                if high is not None and (end is None or high > end):
                    end = high
            for target in list(routed):
                self._apply(key, target, records, end, eofs.get(key))
        self._review(runs.keys() | eofs.keys(), eofs)

    def _apply(
        self,
        key: TopicPartitionKey,
        target: TableTarget,
        records: list[Message],
        end: int | None,
        eof: int | None,
    ) -> None:
        run = changes_of(records, target.key_of, target.position)
        position = target.position
        if run.next_offset is not None and run.next_offset > position:
            position = run.next_offset
        if eof is not None and eof > position:
            position = eof  # past transaction markers after the last record
        try:
            if run.changes or position > target.position:
                target.store.apply(WriteBatch(run.changes, position))
        except StoreError as exc:
            reason = f"the store refused a batch: {exc}"
            log.error(
                "store %s/%d: %s; no longer restoring it",
                target.table,
                target.partition,
                reason,
                extra={"table": target.table, "partition": target.partition},
            )
            self._update(target, lambda s: s.failed(reason))
            if self._routes.remove(key, target):
                self._unassign([key])
            return
        target.position = position
        for skipped in run.skipped[:_MAX_SKIP_LOGS]:
            log.warning(
                "table %s skipped the record at %s[%d]@%d: %s",
                target.table,
                key[0],
                key[1],
                skipped.offset,
                skipped.reason,
                extra={"table": target.table, "topic": key[0], "partition": key[1]},
            )
        if len(run.skipped) > _MAX_SKIP_LOGS:
            log.warning(
                "table %s skipped %d more records of %s[%d] below offset %d",
                target.table,
                len(run.skipped) - _MAX_SKIP_LOGS,
                key[0],
                key[1],
                position,
            )
        at_end = eof is not None and position >= eof
        cleared = bool(records)
        newest = max((r.timestamp()[1] for r in records if r.timestamp()[0]), default=None)
        self._update(
            target,
            lambda s: (
                s.advanced(position, end, len(run.skipped), at_end, newest)
                .noted(None if cleared else s.error)
                .reachable(True)
            ),
        )  # a fetch came back

    def _refresh_ends(self) -> None:
        for key, lane in list(self._lanes.items()):
            high = self._cached_end(lane, key)
            if high is not None:
                for target in self._routes.targets(key):
                    position = target.position
                    self._update(target, lambda s: s.advanced(position, high))  # noqa: B023

    def _cached_end(self, lane: Lane, key: TopicPartitionKey) -> int | None:
        """The high watermark of `key` in its consumer's latest fetch response (None: none yet)."""
        return cached_end_offsets(self._readers[lane], key[0], [key[1]]).get(key[1])

    def _on_statistics(self, lane: Lane, stats_json: str) -> None:
        """While a partition's leader is unreachable its end offset is not current: say so."""
        held = [key for key, held_by in self._lanes.items() if held_by is lane]
        if not held:
            return  # an idle consumer may hold no connection: it says nothing of the others'
        verdicts = reachable_partitions(stats_json, held)
        applied = verdicts_to_apply(
            verdicts, self._fetched, self._assigned_at, time.monotonic(), _FIRST_FETCH_GRACE_S
        )
        for key, reachable in applied.items():
            for target in self._routes.targets(key):
                self._update(target, lambda s: s.reachable(reachable))  # noqa: B023

    def _note_error(self, message: Message, error: KafkaError) -> None:
        topic, partition = message.topic(), message.partition()
        log.warning(
            "table restorer: %s[%s]: %s",
            topic,
            partition,
            error.str(),
            extra={"topic": topic, "partition": partition},
        )
        if topic is not None and partition is not None:
            for target in self._routes.targets((topic, partition)):
                self._update(target, lambda s: s.noted(error.str()))

    def _update(
        self, target: TableTarget, change: Callable[[PartitionStatus], PartitionStatus]
    ) -> None:
        self._board.update(target.table, target.partition, change)


def _partitions(starts: list[Start]) -> list[TopicPartition]:
    return [TopicPartition(topic, partition, offset) for topic, partition, offset in starts]
