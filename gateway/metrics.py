"""``GET /metrics``: what the server does, in Prometheus' text format (prometheus-client).

Two kinds of figures, kept apart:

- **Traffic** is counted as it happens, in :class:`ServerMetrics` (one registry per app, never
  prometheus-client's global one: a process may hold several apps, as the tests do): HTTP requests
  by route and status (:class:`HttpMetricsMiddleware`), pull queries and their latency, errors by
  ksqlDB error code. The route label is the route's path template, never the raw path, so a client
  cannot grow the series without bound by asking for made-up paths.
- **State** is read when Prometheus scrapes, by ``gateway.metrics_state``, from the objects that
  already keep it (the query engine's statuses, the restorer's lags, the command runner, the cluster
  agent and control plane): nothing is counted twice and a scrape costs no Kafka round trip.

Rates come from PromQL over counters (``rate(headwater_query_records_written_total[1m])``), as
Prometheus wants them; the README maps ksqlDB's JMX metrics to these names.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import choose_encoder, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from headwater.gateway.exposition import text_lines
from headwater.gateway.metrics_state import StateCollector

if TYPE_CHECKING:
    from headwater.gateway.services import Services

#: Pull-query latency buckets (seconds): a key lookup answers in ~2 ms, a scan in seconds.
_PULL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_PUSH_START_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120)
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
            "Pull queries answered (outcome ok), turned away by a full queue (outcome rejected: "
            "429) or refused otherwise (outcome error).",
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
        self.push_refused = Counter(
            "headwater_push_queries_refused",
            "Push queries that did not start, by ksqlDB error code (42900: this server runs "
            "its most already).",
            ("code",),
            registry=self.registry,
        )
        self.push_start_seconds = Histogram(
            "headwater_push_query_start_duration_seconds",
            "Time from a push query's request to its start (its header): a stateful one waits "
            "for its transient Spark query.",
            buckets=_PUSH_START_BUCKETS,
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

    def pull_failed(self, seconds: float, rejected: bool = False) -> None:
        self.pull_queries.labels("rejected" if rejected else "error").inc()
        self.pull_seconds.observe(seconds)

    def push_began(self, seconds: float) -> None:
        self.push_started.inc()
        self.push_start_seconds.observe(seconds)

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
        state = self._collector.families() if self._collector is not None else ()
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
