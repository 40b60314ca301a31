"""``GET /metrics``: what the server does, in Prometheus' text format (prometheus-client).

Two kinds of figures, kept apart:

- **Traffic** is counted as it happens, in :class:`ServerMetrics` (one registry per app, never
  prometheus-client's global one: a process may hold several apps, as the tests do): HTTP requests
  by route and status (:class:`HttpMetricsMiddleware`), pull queries and their latency, errors by
  ksqlDB error code. The route label is the route's path template, never the raw path, so a client
  cannot grow the series without bound by asking for made-up paths.
- **State** is read when Prometheus scrapes, by :class:`StateCollector`, from the objects that
  already keep it (the query engine's statuses, the restorer's lags, the command runner, the cluster
  agent and control plane): nothing is counted twice and a scrape costs no Kafka round trip.

Rates come from PromQL over counters (``rate(headwater_query_records_written_total[1m])``), as
Prometheus wants them; the README maps ksqlDB's JMX metrics to these names.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder, generate_latest
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString as _go_float
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from headwater.gateway.services import Services

log = logging.getLogger(__name__)

#: Pull-query latency buckets (seconds): a key lookup answers in ~2 ms, a scan in seconds.
_PULL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_HTTP_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60)
#: The route label of a request no route matched (a made-up path adds no series).
UNMATCHED = "unmatched"


class ServerMetrics:
    """The traffic counters of one server, in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.http_requests = Counter(
            "headwater_http_requests",
            "HTTP requests answered, by route (its path template), method and status.",
            ("route", "method", "status"),
            registry=self.registry,
        )
        self.http_seconds = Histogram(
            "headwater_http_request_duration_seconds",
            "Time to the end of the response's first part (streamed answers: to their start).",
            ("route",),
            buckets=_HTTP_BUCKETS,
            registry=self.registry,
        )
        self.pull_queries = Counter(
            "headwater_pull_queries",
            "Pull queries answered (outcome ok) or refused (outcome error).",
            ("outcome",),
            registry=self.registry,
        )
        self.pull_seconds = Histogram(
            "headwater_pull_query_duration_seconds",
            "Time from a pull query's plan to its answer (a scan: to its first rows).",
            buckets=_PULL_BUCKETS,
            registry=self.registry,
        )
        self.errors = Counter(
            "headwater_errors",
            "Error answers by ksqlDB error code (42900: a request refused by a full queue).",
            ("code",),
            registry=self.registry,
        )
        self.push_started = Counter(
            "headwater_push_queries_started",
            "Push queries started on this server.",
            registry=self.registry,
        )
        self._collector: StateCollector | None = None
        # OpenMetrics answers (and the differential test) take both parts from one registry
        self.everything = CollectorRegistry(auto_describe=False)
        self.everything.register(self.registry)

    def watch(self, services: Services) -> None:
        """Report ``services``' state at every scrape (once; later calls change nothing)."""
        if self._collector is None:
            self._collector = StateCollector(services)
            self.everything.register(self._collector)

    def pull_answered(self, seconds: float) -> None:
        self.pull_queries.labels("ok").inc()
        self.pull_seconds.observe(seconds)

    def pull_failed(self, seconds: float) -> None:
        self.pull_queries.labels("error").inc()
        self.pull_seconds.observe(seconds)

    def error(self, code: int) -> None:
        self.errors.labels(str(code)).inc()

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """Every metric and the media type, in the format ``accept`` asks for (Prometheus' text
        format 0.0.4 unless it asks for OpenMetrics).

        In the text format the state's families (gauges and counters, many series: ~26 a query)
        are written by :func:`text_lines`, the same bytes prometheus-client's ``generate_latest``
        writes (``tests/gateway/test_metrics.py`` compares them) in a third of its time: its
        per-sample checks of names that are fixed here took 36 ms of a scrape with 100 queries.
        """
        encode, media_type = choose_encoder(accept)
        if encode is not generate_latest:
            return encode(self.everything), media_type
        state = self._collector.collect() if self._collector is not None else ()
        return generate_latest(self.registry) + text_lines(state).encode(), media_type


async def metrics_endpoint(request: Request) -> Response:
    """``GET /metrics``: Prometheus' text format (``authentication.skip.paths=/metrics`` opens it
    to scrapers when the server requires BASIC authentication)."""
    services: Services = request.app.state.services  # (services_of: services imports this)
    services.metrics.watch(services)
    body, media_type = await run_in_threadpool(
        services.metrics.exposition, request.headers.get("accept", "")
    )
    return Response(body, headers={"Content-Type": media_type})


def _float(value: float) -> str:
    """Go's spelling of a float, as Prometheus writes it (``+Inf``, ``1e+20``)."""
    spelled: str = _go_float(value)  # type: ignore[no-untyped-call]
    return spelled


_LABEL_VALUE = str.maketrans({"\\": "\\\\", "\n": "\\n", '"': '\\"'})


def text_lines(families: Iterable[Metric]) -> str:
    """Gauge and counter families in Prometheus' text format 0.0.4, as ``generate_latest`` writes
    them (label names sorted, values escaped, Go's float spelling); the names must be valid
    Prometheus names, as every name of :class:`StateCollector` is.

    Raises:
        ValueError: a family of another type (histograms carry ``_created`` series, which only
            ``generate_latest`` places).
    """
    out: list[str] = []
    for family in families:
        if family.type not in ("gauge", "counter"):
            raise ValueError(f"text_lines writes gauges and counters, not {family.type}")
        name = family.name + "_total" if family.type == "counter" else family.name
        doc = family.documentation.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {name} {doc}\n# TYPE {name} {family.type}\n")
        for sample in family.samples:
            if sample.labels:
                labels = ",".join(
                    f'{k}="{str(v).translate(_LABEL_VALUE)}"'
                    for k, v in sorted(sample.labels.items())
                )
                out.append(f"{sample.name}{{{labels}}} {_float(sample.value)}\n")
            else:
                out.append(f"{sample.name} {_float(sample.value)}\n")
    return "".join(out)


# -- HTTP traffic ------------------------------------------------------------------------------


def route_templates(routes: Iterable[BaseRoute], prefix: str = "") -> dict[int, str]:
    """The ``id`` of each endpoint (or mounted app, some of which are unhashable) -> its path
    template, for the route label. The routes live as long as the app, so their ids stay theirs."""
    found: dict[int, str] = {}
    for route in routes:
        if isinstance(route, Route):
            found.setdefault(id(route.endpoint), prefix + route.path)
        elif isinstance(route, Mount):
            found.setdefault(id(route.app), prefix + route.path + "/*")
            found.update(
                {
                    k: v
                    for k, v in route_templates(route.routes, prefix + route.path).items()
                    if k not in found
                }
            )
    return found


class HttpMetricsMiddleware:
    """Counts every HTTP request by its route's template, method and status (pure ASGI).

    The router writes the matched endpoint into the request's scope; its template comes from
    ``templates`` (:func:`route_templates` of the app's routes). A request that matched nothing
    (404, or one refused before routing: 401) is labelled ``unmatched``.
    """

    def __init__(self, app: ASGIApp, metrics: ServerMetrics, templates: Mapping[int, str]) -> None:
        self.app = app
        self.metrics = metrics
        self.templates = templates

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        timed = False

        async def sending(message: Message) -> None:
            nonlocal status, timed
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body" and not timed:
                timed = True
                self.metrics.http_seconds.labels(self._route(scope)).observe(
                    time.perf_counter() - started
                )
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = self._route(scope)
            if not timed:
                self.metrics.http_seconds.labels(route).observe(time.perf_counter() - started)
            self.metrics.http_requests.labels(route, scope.get("method", ""), str(status)).inc()

    def _route(self, scope: Scope) -> str:
        endpoint = scope.get("endpoint")
        template = self.templates.get(id(endpoint)) if endpoint is not None else None
        return template or UNMATCHED


# -- state, read at scrape time ----------------------------------------------------------------


class StateCollector(Collector):
    """Reads the server's state when Prometheus scrapes (see the module docstring).

    Each part is read on its own: one that fails (a component stopping) is logged and left out of
    that scrape, and the others are still reported.
    """

    def __init__(self, services: Services) -> None:
        self.services = services
        self._started = time.time()

    def collect(self) -> Iterator[Metric]:
        parts = (
            self._server,
            self._queries,
            self._tables,
            self._command_log,
            self._cluster,
            self._spark,
            self._serving,
        )
        for part in parts:
            try:
                yield from part()
            except Exception:  # a scrape must answer; the part is missing from this one
                log.warning("metrics: %s could not be read", part.__name__, exc_info=True)

    def _server(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "headwater_server_start_time_seconds",
            "When this server started (Unix time).",
            value=self._started,
        )

    def _queries(self) -> Iterator[Metric]:
        engine = self.services.queries
        statuses = engine.statuses() if engine is not None else {}
        state = GaugeMetricFamily(
            "headwater_query_state",
            "1, labelled with the state each persistent query run by this server is in "
            "(PENDING, RUNNING, ERROR, UNKNOWN): one series a query, not one a state.",
            labels=("query_id", "state"),
        )
        written = CounterMetricFamily(
            "headwater_query_records_written",
            "Records a persistent query wrote to its sink.",
            labels=("query_id",),
        )
        failed = CounterMetricFamily(
            "headwater_query_records_failed",
            "Records a persistent query could not process (logged to its processing log, skipped).",
            labels=("query_id",),
        )
        batches = CounterMetricFamily(
            "headwater_query_batches", "Micro-batches a query completed.", labels=("query_id",)
        )
        restarts = CounterMetricFamily(
            "headwater_query_restarts", "Restarts of a query after a failure.", labels=("query_id",)
        )
        last_error = GaugeMetricFamily(
            "headwater_query_last_error_time_seconds",
            "When a query last failed to process a record (Unix time; absent: never).",
            labels=("query_id",),
        )
        batch_seconds = GaugeMetricFamily(
            "headwater_query_last_batch_duration_seconds",
            "How long the query's last micro-batch took (Spark's trigger execution).",
            labels=("query_id",),
        )
        offset = GaugeMetricFamily(
            "headwater_query_source_offset",
            "The next offset a query reads of each source partition (its rate: records read/s).",
            labels=("query_id", "topic", "partition"),
        )
        lag = GaugeMetricFamily(
            "headwater_query_source_lag_records",
            "Records of each source partition the query has yet to read (end minus offset).",
            labels=("query_id", "topic", "partition"),
        )
        for query_id, status in sorted(statuses.items()):
            state.add_metric((query_id, str(status.get("state", "UNKNOWN"))), 1.0)
            written.add_metric((query_id,), float(status.get("records", 0)))
            failed.add_metric((query_id,), float(status.get("errors", 0)))
            batches.add_metric((query_id,), float(status.get("batches", 0)))
            restarts.add_metric((query_id,), float(status.get("restarts", 0)))
            if status.get("lastErrorMs"):
                last_error.add_metric((query_id,), int(status["lastErrorMs"]) / 1000)
            if status.get("lastBatchMs") is not None:
                batch_seconds.add_metric((query_id,), int(status["lastBatchMs"]) / 1000)
            ends: Mapping[str, Mapping[Any, int]] = status.get("ends") or {}
            for topic, partitions in sorted((status.get("processed") or {}).items()):
                topic_ends = ends.get(topic, {})
                for partition, position in sorted(partitions.items(), key=lambda i: int(i[0])):
                    labels = (query_id, str(topic), str(partition))
                    offset.add_metric(labels, float(position))
                    end = topic_ends.get(partition, topic_ends.get(str(partition)))
                    if end is not None:
                        lag.add_metric(labels, float(max(0, int(end) - int(position))))
        by_state = GaugeMetricFamily(
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
            by_state.add_metric((name,), float(count))
        yield by_state
        yield from (state, written, failed, batches, restarts, last_error, batch_seconds)
        yield from (offset, lag)

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

    def _tables(self) -> Iterator[Metric]:
        tables = self.services.tables
        if tables is None:
            return
        roles = self._roles()
        on_its_own = self.services.control is None
        labels = ("table", "partition", "role")
        position = GaugeMetricFamily(
            "headwater_table_partition_offset",
            "The next changelog offset a table partition held here applies (its rate: restore "
            "or update rate).",
            labels=labels,
        )
        end = GaugeMetricFamily(
            "headwater_table_partition_end_offset",
            "The changelog's end offset as this server's fetches last saw it.",
            labels=labels,
        )
        lag = GaugeMetricFamily(
            "headwater_table_partition_lag_records",
            "Changelog records a table partition held here has yet to apply.",
            labels=labels,
        )
        for table, partitions in sorted(tables.local_lags().items()):
            for partition, info in sorted(partitions.items()):
                role = "active" if on_its_own else roles.get((table, partition), "unassigned")
                key = (table, str(partition), role)
                position.add_metric(key, float(info.current_offset_position))
                end.add_metric(key, float(info.end_offset_position))
                lag.add_metric(key, float(info.offset_lag))
        yield from (position, end, lag)

    def _command_log(self) -> Iterator[Metric]:
        runner = self.services.runner
        yield GaugeMetricFamily(
            "headwater_command_log_offset",
            "The next command-log offset this server's catalog applies.",
            value=float(runner.position),
        )
        end = runner.end_seen()
        if end is not None:
            yield GaugeMetricFamily(
                "headwater_command_log_lag_records",
                "Commands this server has yet to apply (end as its fetches last saw it).",
                value=float(max(0, end - runner.position)),
            )
        yield GaugeMetricFamily(
            "headwater_catalog_sources",
            "Streams and tables in the catalog.",
            value=float(len(runner.catalog.sources)),
        )
        yield GaugeMetricFamily(
            "headwater_catalog_queries",
            "Persistent queries in the catalog (run by this server or another).",
            value=float(len(runner.catalog.queries)),
        )

    def _cluster(self) -> Iterator[Metric]:
        cluster, control = self.services.cluster, self.services.control
        if cluster is None:
            return
        up = GaugeMetricFamily(
            "headwater_cluster_server_up",
            "1 for each server this one sees alive (by heartbeats), 0 for those it sees down.",
            labels=("server",),
        )
        statuses = cluster.statuses()
        for server, status in sorted(statuses.items()):
            up.add_metric((server,), 1.0 if status.alive else 0.0)
        yield up
        yield GaugeMetricFamily(
            "headwater_cluster_members",
            "Servers announced on the members topic (this one included).",
            value=float(len(cluster.members())),
        )
        if control is not None:
            state = control.state()
            yield GaugeMetricFamily(
                "headwater_cluster_controller_epoch",
                "The controller epoch of the latest accepted claim.",
                value=float(state.controller_epoch),
            )
            yield GaugeMetricFamily(
                "headwater_cluster_is_controller",
                "1 when this server is the controller.",
                value=1.0 if control.is_controller() else 0.0,
            )

    def _spark(self) -> Iterator[Metric]:
        engine = self.services.queries
        if engine is None:
            return
        health = engine.health()
        yield GaugeMetricFamily(
            "headwater_spark_up",
            "1 while the Spark engine process answers.",
            value=1.0 if health.state == "UP" else 0.0,
        )
        if health.started_at is not None:
            yield GaugeMetricFamily(
                "headwater_spark_start_time_seconds",
                "When the Spark engine process started (Unix time).",
                value=health.started_at,
            )
        if health.pid is not None:
            memory = GaugeMetricFamily(
                "headwater_spark_memory_bytes",
                "Resident memory of the Spark engine's processes, by kind.",
                labels=("process",),
            )
            for kind, size in sorted(tree_rss(health.pid).items()):
                memory.add_metric((kind,), float(size))
            yield memory

    def _serving(self) -> Iterator[Metric]:
        services = self.services
        queue = GaugeMetricFamily(
            "headwater_pull_queue_depth",
            "Pull queries waiting for a slot, by kind.",
            labels=("kind",),
        )
        queue.add_metric(("any",), float(services.admission.queued))
        queue.add_metric(("scan",), float(services.scans.queued))
        yield queue
        yield GaugeMetricFamily(
            "headwater_push_queries_running",
            "Push queries (and PRINTs) this server streams now.",
            value=float(len(services.push.running())),
        )


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
