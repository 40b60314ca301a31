"""The server's state as metric families, read when Prometheus scrapes (``GET /metrics``).

:class:`StateCollector` reads the objects that already keep the state (the query engine's
statuses, the restorer's lags, the command runner, the cluster agent and control plane, the
admission queues): nothing is counted twice, and a scrape costs no Kafka round trip (Kafka's
reachability is asked in the background, at most every 5 s: ``gateway.broker_probe``). Traffic,
counted as it happens, is ``gateway.metrics``'.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from headwater.gateway.broker_probe import BrokerProbe
from headwater.gateway.exposition import Family, counter, gauge, single

if TYPE_CHECKING:
    from headwater.gateway.services import Services

log = logging.getLogger(__name__)


class StateCollector(Collector):
    """Reads the server's state when Prometheus scrapes (see the module docstring).

    Each part is read on its own: one that fails (a component stopping) is logged and left out of
    that scrape, and the others are still reported.
    """

    def __init__(self, services: Services) -> None:
        self.services = services
        self._started = time.time()
        self.broker = BrokerProbe(lambda: _brokers(services))

    def collect(self) -> Iterator[Metric]:
        """The families as prometheus-client's (registered beside the traffic: OpenMetrics)."""
        for family in self.families():
            yield family.metric()

    def families(self) -> Iterator[Family]:
        """Every state family, read now (the text format writes these: `text_lines`)."""
        parts = (
            self._server,
            self._queries,
            self._tables,
            self._command_log,
            self._kafka,
            self._cluster,
            self._spark,
            self._serving,
        )
        for part in parts:
            try:
                yield from part()
            except Exception:  # a scrape must answer; the part is missing from this one
                log.warning("metrics: %s could not be read", part.__name__, exc_info=True)

    def _server(self) -> Iterator[Family]:
        yield single(
            "headwater_server_start_time_seconds",
            "When this server started (Unix time).",
            self._started,
        )

    def _queries(self) -> Iterator[Family]:
        engine = self.services.queries
        statuses = engine.statuses() if engine is not None else {}
        state = gauge(
            "headwater_query_state",
            "1, labelled with the state each persistent query run by this server is in "
            "(PENDING, RUNNING, ERROR, UNKNOWN): one series a query, not one a state.",
            labels=("query_id", "state"),
        )
        written = counter(
            "headwater_query_records_written",
            "Records a persistent query wrote to its sink.",
            labels=("query_id",),
        )
        failed = counter(
            "headwater_query_records_failed",
            "Records a persistent query could not process (logged to its processing log, skipped).",
            labels=("query_id",),
        )
        batches = counter(
            "headwater_query_batches", "Micro-batches a query completed.", labels=("query_id",)
        )
        restarts = counter(
            "headwater_query_restarts", "Restarts of a query after a failure.", labels=("query_id",)
        )
        last_error = gauge(
            "headwater_query_last_error_time_seconds",
            "When a query last failed to process a record (Unix time; absent: never).",
            labels=("query_id",),
        )
        batch_seconds = gauge(
            "headwater_query_last_batch_duration_seconds",
            "How long the query's last micro-batch took (Spark's trigger execution).",
            labels=("query_id",),
        )
        offset = gauge(
            "headwater_query_source_offset",
            "The next offset a query reads of each source partition (its rate: records read/s).",
            labels=("query_id", "topic", "partition"),
        )
        lag = gauge(
            "headwater_query_source_lag_records",
            "Records of each source partition the query has yet to read (end minus offset).",
            labels=("query_id", "topic", "partition"),
        )
        time_lag = gauge(
            "headwater_query_source_lag_seconds",
            "How far behind each source partition a query is in event time (record timestamps): "
            "the newest record's minus that of the first record it has yet to read, estimated "
            "from the engine's samples (never under-stated; absent while unknown).",
            labels=("query_id", "topic", "partition"),
        )
        for query_id, status in sorted(statuses.items()):
            state.add((query_id, str(status.get("state", "UNKNOWN"))), 1.0)
            written.add((query_id,), float(status.get("records", 0)))
            failed.add((query_id,), float(status.get("errors", 0)))
            batches.add((query_id,), float(status.get("batches", 0)))
            restarts.add((query_id,), float(status.get("restarts", 0)))
            if status.get("lastErrorMs"):
                last_error.add((query_id,), int(status["lastErrorMs"]) / 1000)
            if status.get("lastBatchMs") is not None:
                batch_seconds.add((query_id,), int(status["lastBatchMs"]) / 1000)
            ends: Mapping[str, Mapping[Any, int]] = status.get("ends") or {}
            for topic, partitions in sorted((status.get("processed") or {}).items()):
                topic_ends = ends.get(topic, {})
                for partition, position in sorted(partitions.items(), key=lambda i: int(i[0])):
                    labels = (query_id, str(topic), str(partition))
                    offset.add(labels, float(position))
                    end = topic_ends.get(partition, topic_ends.get(str(partition)))
                    if end is not None:
                        lag.add(labels, float(max(0, int(end) - int(position))))
            lags_ms: Mapping[str, Mapping[str, int]] = status.get("lagMs") or {}
            for topic, partitions in sorted(lags_ms.items()):
                for partition, ms in sorted(partitions.items(), key=lambda i: int(i[0])):
                    time_lag.add((query_id, str(topic), str(partition)), int(ms) / 1000)
        by_state = gauge(
            "headwater_queries",
            "Persistent queries this server runs, by state (ksqlDB's num-persistent-queries, "
            "num-active-queries and num-error-queries in one).",
            labels=("state",),
        )
        counted: dict[str, int] = dict.fromkeys(("PENDING", "RUNNING", "ERROR"), 0)
        for status in statuses.values():
            name = str(status.get("state", "UNKNOWN"))
            counted[name] = counted.get(name, 0) + 1
        for name, count in sorted(counted.items()):
            by_state.add((name,), float(count))
        yield by_state
        yield from (state, written, failed, batches, restarts, last_error, batch_seconds)
        yield from (offset, lag, time_lag)

    def _roles(self) -> dict[tuple[str, int], str]:
        control, me = self.services.control, self.services.advertised
        if control is None:
            return {}
        roles = {}
        for pid, leader in control.state().partitions.items():
            if leader.active == me:
                roles[(pid.table, pid.partition)] = "active"
            elif me in leader.standbys:
                roles[(pid.table, pid.partition)] = "standby"
        return roles

    def _tables(self) -> Iterator[Family]:
        tables = self.services.tables
        if tables is None:
            return
        roles = self._roles()
        on_its_own = self.services.control is None
        labels = ("table", "partition", "role")
        position = gauge(
            "headwater_table_partition_offset",
            "The next changelog offset a table partition held here applies (its rate: restore "
            "or update rate).",
            labels=labels,
        )
        end = gauge(
            "headwater_table_partition_end_offset",
            "The changelog's end offset as this server's fetches last saw it.",
            labels=labels,
        )
        lag = gauge(
            "headwater_table_partition_lag_records",
            "Changelog records a table partition held here has yet to apply.",
            labels=labels,
        )
        for table, partitions in sorted(tables.local_lags().items()):
            for partition, info in sorted(partitions.items()):
                role = "active" if on_its_own else roles.get((table, partition), "unassigned")
                key = (table, str(partition), role)
                position.add(key, float(info.current_offset_position))
                end.add(key, float(info.end_offset_position))
                lag.add(key, float(info.offset_lag))
        yield from (position, end, lag)

    def _command_log(self) -> Iterator[Family]:
        runner = self.services.runner
        yield single(
            "headwater_command_log_offset",
            "The next command-log offset this server's catalog applies.",
            float(runner.position),
        )
        end = runner.end_seen()
        if end is not None:
            yield single(
                "headwater_command_log_lag_records",
                "Commands this server has yet to apply (end as its fetches last saw it).",
                float(max(0, end - runner.position)),
            )
        latency = runner.apply_latency()
        applied = counter(
            "headwater_commands_applied",
            "Commands decided here since the command log was first read to its end.",
        )
        applied.add((), latency.commands)
        took = counter(
            "headwater_command_apply_seconds",
            "Summed time from each of those commands' writing to its decision here (the mean: "
            "rate of this over rate of headwater_commands_applied_total).",
        )
        took.add((), latency.seconds)
        yield from (applied, took)
        if latency.last_s is not None:
            yield single(
                "headwater_command_last_apply_seconds",
                "How long the last command took from the log to this server's catalog.",
                latency.last_s,
            )
        yield single(
            "headwater_catalog_sources",
            "Streams and tables in the catalog.",
            float(len(runner.catalog.sources)),
        )
        yield single(
            "headwater_catalog_queries",
            "Persistent queries in the catalog (run by this server or another).",
            float(len(runner.catalog.queries)),
        )

    def _kafka(self) -> Iterator[Family]:
        seen = self.broker.latest()
        if seen is None:  # the first probe has not answered in time: nothing to say yet
            return
        yield single(
            "headwater_kafka_up",
            "1 when Kafka answered this server's last metadata request (asked at most every 5 s, "
            "in the background), 0 when it did not answer in time.",
            1.0 if seen.up else 0.0,
        )
        yield single(
            "headwater_kafka_brokers", "Brokers in Kafka's last metadata answer.", seen.brokers
        )
        yield single(
            "headwater_kafka_last_probe_time_seconds",
            "When that request was sent (Unix time).",
            seen.at,
        )
        yield single(
            "headwater_kafka_probe_duration_seconds",
            "How long Kafka took to answer it (or to fail).",
            seen.seconds,
        )

    def _cluster(self) -> Iterator[Family]:
        cluster, control = self.services.cluster, self.services.control
        if cluster is None:
            return
        up = gauge(
            "headwater_cluster_server_up",
            "1 for each server this one sees alive (by heartbeats), 0 for those it sees down.",
            labels=("server",),
        )
        statuses = cluster.statuses()
        for server, status in sorted(statuses.items()):
            up.add((server,), 1.0 if status.alive else 0.0)
        yield up
        yield single(
            "headwater_cluster_members",
            "Servers announced on the members topic (this one included).",
            float(len(cluster.members())),
        )
        if control is not None:
            state = control.state()
            yield single(
                "headwater_cluster_controller_epoch",
                "The controller epoch of the latest accepted claim.",
                float(state.controller_epoch),
            )
            yield single(
                "headwater_cluster_is_controller",
                "1 when this server is the controller.",
                1.0 if control.is_controller() else 0.0,
            )

    def _spark(self) -> Iterator[Family]:
        engine = self.services.queries
        if engine is None:
            return
        health = engine.health()
        yield single(
            "headwater_spark_up",
            "1 while the Spark engine process answers.",
            1.0 if health.state == "UP" else 0.0,
        )
        if health.started_at is not None:
            yield single(
                "headwater_spark_start_time_seconds",
                "When the Spark engine process started (Unix time).",
                health.started_at,
            )
        if health.pid is not None:
            memory = gauge(
                "headwater_spark_memory_bytes",
                "Resident memory of the Spark engine's processes, by kind.",
                labels=("process",),
            )
            for kind, size in sorted(tree_rss(health.pid).items()):
                memory.add((kind,), float(size))
            yield memory

    def _serving(self) -> Iterator[Family]:
        services = self.services
        queue = gauge(
            "headwater_pull_queue_depth",
            "Pull queries waiting for a slot, by kind.",
            labels=("kind",),
        )
        queue.add(("any",), float(services.admission.queued))
        queue.add(("scan",), float(services.scans.queued))
        yield queue
        yield single(
            "headwater_push_queries_running",
            "Push queries (and PRINTs) this server streams now.",
            float(len(services.push.running())),
        )


def _brokers(services: Services) -> int:
    """Kafka's brokers, from a metadata request (raises when Kafka does not answer in time)."""
    metadata = services.admin.list_topics(timeout=services.limits.kafka_probe_timeout_s)
    return len(metadata.brokers)


# -- processes ---------------------------------------------------------------------------------

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def tree_rss(pid: int, proc: Path = Path("/proc")) -> dict[str, int]:
    """Resident bytes of ``pid`` and its descendants, by kind: ``jvm`` (java), ``python``
    (everything else). Empty where /proc is missing; a process that ends meanwhile is skipped.

    Descendants come from each thread's ``children`` file (Linux 3.5+), so a scrape reads a few
    files per process of the tree, not two per process of the machine."""
    found: dict[str, int] = {}
    todo, seen = [pid], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        folder = proc / str(current)
        try:
            stat = (folder / "stat").read_text()
            resident = int((folder / "statm").read_text().split()[1]) * _PAGE
            tasks = list((folder / "task").iterdir())
        except (OSError, IndexError, ValueError):
            continue
        name = stat[stat.find("(") + 1 : stat.rfind(")")]
        kind = "jvm" if name == "java" else "python"
        found[kind] = found.get(kind, 0) + resident
        for task in tasks:
            try:
                todo.extend(int(c) for c in (task / "children").read_text().split())
            except (OSError, ValueError):
                continue
    return found
