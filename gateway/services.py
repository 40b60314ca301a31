"""The server's one typed bag of long-lived objects (``gateway.startup`` opens and closes it). No I/O.

Handlers reach the object through
:func:`services_of`, never through bare ``request.state`` attributes. Tests build their own
:class:`Services` (a real runner and submitter on the embedded broker) and pass it to
``create_app``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from confluent_kafka.admin import AdminClient
from starlette.requests import Request

from headwater.cluster.agent import ClusterAgent
from headwater.cluster.controller import ControlPlane
from headwater.engine.pull.tables import MaterializedTables
from headwater.engine.spark.host import QueryEngine
from headwater.gateway.admission import Admission
from headwater.gateway.forwarding import Forwarding
from headwater.gateway.metrics import ServerMetrics
from headwater.gateway.push_registry import PushQueries
from headwater.gateway.writer import RowWriter
from headwater.kafka.clients import KafkaSettings
from headwater.metastore.plan import NO_ACTIVE_LIMIT
from headwater.metastore.runner import CommandRunner
from headwater.metastore.submit import CommandSubmitter
from headwater.registry.log import RegistryLog
from headwater.registry.operations import Limits as RegistryLimits
from headwater.sqlparse_ext.limits import ParseLimits

if TYPE_CHECKING:
    from headwater.gateway.plan_cache import PlanCache

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What ``GET /info`` reports besides live state."""

    version: str
    kafka_cluster_id: str
    service_id: str


@dataclass(frozen=True, slots=True)
class Limits:
    """Request bounds of the HTTP API."""

    max_body_bytes: int = 1 << 20
    catch_up_timeout_s: float = 10.0
    kafka_probe_timeout_s: float = 2.0
    pull_max_concurrent: int = 8
    pull_queue_size: int = 256
    startup_catch_up_timeout_s: float = 60.0
    parse: ParseLimits = field(default_factory=ParseLimits)
    body_read_timeout_s: float = 30.0
    scan_max_concurrent: int = 2
    #: ``ksql.query.persistent.active.limit`` (unbounded unless the server's settings say).
    persistent_query_limit: int = NO_ACTIVE_LIMIT


@dataclass(frozen=True, slots=True)
class PullSettings:
    """Server-wide pull-query settings (requests and sessions may only tighten them).

    Attributes:
        table_scan_enabled: ``ksql.query.pull.table.scan.enabled``.
        range_scan_enabled: ``ksql.query.pull.range.scan.enabled``.
        limit_clause_enabled: ``ksql.query.pull.limit.clause.enabled``.
        max_allowed_offset_lag: ``ksql.query.pull.max.allowed.offset.lag``: no answer lags more.
        timeout_ms: ``ksql.query.pull.timeout.ms``: a query's time budget.
        scan_max_rows: ``ksql.query.pull.table.scan.max.rows``: most rows of a scan (0: no bound).
    """

    table_scan_enabled: bool = True
    range_scan_enabled: bool = True
    limit_clause_enabled: bool = True
    max_allowed_offset_lag: int = 2**63 - 1
    timeout_ms: int = 60_000
    scan_max_rows: int = 0


@dataclass(frozen=True, slots=True)
class Services:
    """Everything a request handler may use.

    Attributes:
        settings: how to reach Kafka.
        service_id: the ksqlDB service id (names the command topic and the transactional id).
        runner: the command runner (catalog, position, state).
        submitter: submits catalog statements through the command log.
        admin: a Kafka admin client (topic listings, health probe).
        info: version, cluster id and service id.
        limits: request bounds.
        pull: server-wide pull-query settings.
        advertised: this server's host:port, as answers name it in ``servedBy``.
        admission: the bounded queue of pull queries.
        scans: how many of them may be scans at once (they wait in the same queue).
        tables: the materialized tables (None: this server materializes none).
        writer: produces INSERT VALUES rows (None: INSERT is refused).
        cluster: membership, liveness and lag reports (None: a server on its own).
        control: the controller's assignment (None: this server holds every partition).
        queries: runs this server's persistent queries on Spark (None: it runs none).
        no_spark: why this server cannot run Spark (no Java): it refuses persistent queries and
            push queries with state, saying so; None: nothing is missing.
        properties: the server's settings as text, by key (what SHOW PROPERTIES lists).
        defaults: the settings' defaults as text, by key.
        plans: the pull-plan cache (``gateway.plan_cache``).
        forwarding: the peers' HTTP client and the routing inputs (``gateway.forwarding``).
        push: the push queries and PRINTs this server runs (``gateway.push_registry``).
        schema_registry: the schema registry this server serves under ``/registry``
            (``gateway.schema_registry_api``); None: it serves none.
        schema_registry_limits: what one client may make that registry hold.
        metrics: the traffic counters ``GET /metrics`` reports (``gateway.metrics``).
    """

    settings: KafkaSettings
    service_id: str
    runner: CommandRunner
    submitter: CommandSubmitter
    admin: AdminClient
    info: ServerInfo
    limits: Limits = Limits()
    pull: PullSettings = PullSettings()
    advertised: str = "127.0.0.1:8088"
    admission: Admission = field(default_factory=lambda: Admission(8, 256))
    tables: MaterializedTables | None = None
    writer: RowWriter | None = None
    cluster: ClusterAgent | None = None
    control: ControlPlane | None = None
    queries: QueryEngine | None = None
    no_spark: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    defaults: Mapping[str, str] = field(default_factory=dict)
    forwarding: Forwarding = field(default_factory=Forwarding)
    scans: Admission = field(default_factory=lambda: Admission(2, 256, "table scans"))
    plans: PlanCache = field(kw_only=True)
    push: PushQueries = field(default_factory=PushQueries)
    schema_registry: RegistryLog | None = None
    schema_registry_limits: RegistryLimits = field(default_factory=RegistryLimits)
    metrics: ServerMetrics = field(default_factory=ServerMetrics)


def services_of(request: Request) -> Services:
    """The :class:`Services` of the app serving ``request``."""
    services: Services = request.app.state.services
    return services


def command_topic_name(service_id: str) -> str:
    """ksqlDB's command topic name for a service id."""
    return f"_confluent-ksql-{service_id}_command_topic"
