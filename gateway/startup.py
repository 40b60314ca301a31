"""Opening a server's services: the command topic and runner, the stores, the cluster, the engine.

Does I/O (Kafka, the state folder, Spark's child process). :func:`open_services` yields the
:class:`~headwater.gateway.services.Services` the handlers use, once the catalog has caught up, and
stops everything on exit.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path

from confluent_kafka.admin import AdminClient

import headwater
from headwater.cluster._secret import agree_secret
from headwater.cluster.agent import ClusterAgent
from headwater.cluster.assignment import PartitionId
from headwater.cluster.controller import ControlPlane
from headwater.cluster.epochs import ControlState
from headwater.cluster.settings import ClusterSettings
from headwater.cluster.tls import client_context
from headwater.engine.formats.schema_inference import schema_facts
from headwater.engine.formats.schema_registry import SchemaRegistry
from headwater.engine.persistent import QUERY_ANALYZER
from headwater.engine.pull.tables import MaterializedTables, materialized
from headwater.engine.spark.host import QueryEngine
from headwater.engine.spark.settings import EngineSettings
from headwater.gateway import peers_applied
from headwater.gateway.admission import Admission
from headwater.gateway.forwarding import Forwarding
from headwater.gateway.plan_cache import PlanCache
from headwater.gateway.services import (
    Limits,
    PullSettings,
    ServerInfo,
    Services,
    command_topic_name,
)
from headwater.gateway.writer import RowWriter
from headwater.kafka.clients import KafkaSettings, admin_client, create_topic
from headwater.kafka.errors import KafkaEdgeError
from headwater.metastore.catalog import Catalog
from headwater.metastore.runner import CommandRunner
from headwater.metastore.snapshots import SnapshotStore
from headwater.metastore.submit import CommandSubmitter, SubmitSettings
from headwater.metastore.topic_retirement import retiring
from headwater.registry.log import RegistryLog
from headwater.registry.operations import Limits as RegistryLimits
from headwater.store.lmdb import LmdbEngine
from headwater.store.local import LocalStores
from headwater.store.memory import MemoryEngine

log = logging.getLogger(__name__)

_LIMITS, _PULL = Limits(), PullSettings()  # the defaults (frozen values)
_REGISTRY_LIMITS = RegistryLimits()


class CatalogNotReady(KafkaEdgeError):
    """The catalog did not catch up with the command topic at start-up."""

    error_code = 50302
    retriable = True


def kafka_cluster_id(admin: AdminClient, timeout_s: float = 5.0) -> str:
    """The Kafka cluster id ('' when the broker does not report one)."""
    return admin.list_topics(timeout=timeout_s).cluster_id or ""


@contextmanager
def open_services(
    settings: KafkaSettings,
    service_id: str,
    data_dir: Path | None,
    *,
    command_topic: str | None = None,
    limits: Limits = _LIMITS,
    pull: PullSettings = _PULL,
    stores_dir: Path | None = None,
    stores_in_memory: bool = False,
    advertised: str = "127.0.0.1:8088",
    cluster: ClusterSettings | None = None,
    engine: EngineSettings | None = None,
    registry: SchemaRegistry | None = None,
    schema_registry: RegistryLog | None = None,
    schema_registry_limits: RegistryLimits = _REGISTRY_LIMITS,
    properties: Mapping[str, str] | None = None,
    defaults: Mapping[str, str] | None = None,
    no_spark: str | None = None,
) -> Iterator[Services]:
    """Create the command topic if needed, load the catalog, start materializing its tables.

    Returns once the catalog has caught up with the command topic's end (snapshot + tail), so
    the server reports ready with every committed statement applied; stops everything on exit.

    Args:
        settings: how to reach Kafka.
        service_id: the service id.
        data_dir: where catalog snapshots go (``data_dir / "catalog"``); None for none.
        command_topic: the command topic (default: ksqlDB's name for the service id).
        limits: request bounds.
        pull: server-wide pull-query settings.
        stores_dir: the folder holding table stores (``stores_dir / "stores"``); None: no tables
            are materialized (pull queries on tables answer an error).
        stores_in_memory: keep table stores in memory (a throwaway node, tests).
        advertised: this server's host:port, as answers name it.
        cluster: join the service's cluster (membership, heartbeats, lag reports, the controller's
            assignment); None: this server holds every partition of every table itself.
        engine: run persistent queries on Spark with these settings (a child process, started
            with the first query); None: this server runs no persistent queries.
        registry: the schema registry of the AVRO and JSON_SR formats (None: they are refused).
        schema_registry: the registry this server serves under /registry (None: none), with
            ``schema_registry_limits``.
        properties: the server's settings as text (SHOW PROPERTIES), and ``defaults`` theirs.
        no_spark: why this server cannot run Spark (then ``engine`` is None), or None.

    Raises:
        KafkaEdgeError: Kafka is unreachable, or the catalog did not catch up in time.
    """
    topic = command_topic or command_topic_name(service_id)
    admin = admin_client(settings)
    create_topic(admin, settings, topic, 1)
    snapshots = SnapshotStore(data_dir / "catalog") if data_dir is not None else None
    with ExitStack() as stack:
        tables: MaterializedTables | None = None
        if stores_dir is not None:
            store_engine = MemoryEngine() if stores_in_memory else LmdbEngine()
            stores = LocalStores(stores_dir, store_engine)
            stack.callback(stores.close_all)
            tables = MaterializedTables(settings, stores)
            stack.callback(tables.stop)
        runner = CommandRunner(
            settings,
            topic,
            snapshots,
            listener=retiring(settings, tables.listener if tables else None),
        )
        runner.start()
        stack.callback(runner.stop)
        _catch_up(topic, runner, limits.startup_catch_up_timeout_s)
        agent: ClusterAgent | None = None
        control: ControlPlane | None = None
        if tables is not None and cluster is not None:
            tables.assign({})  # nothing until the controller's assignment says what
        if tables is not None:
            tables.start(runner.catalog)
        if tables is not None and cluster is not None:
            agent, control = _join_cluster(settings, service_id, cluster, runner, tables, stack)
        writer = RowWriter(settings)
        stack.callback(writer.close)
        forwarding = Forwarding(tls=client_context(cluster.tls if cluster is not None else None))
        stack.callback(forwarding.close)
        submitter = CommandSubmitter(
            settings,
            service_id,
            topic,
            runner,
            admin,
            analyze=QUERY_ANALYZER,
            limits=SubmitSettings(active_query_limit=limits.persistent_query_limit),
            schema_facts=lambda s: schema_facts(s, registry),
            peers_applied=None
            if agent is None
            else peers_applied.waiter(agent, forwarding, limits.catch_up_timeout_s / 2),
        )
        queries: QueryEngine | None = None
        if engine is not None:
            if engine.processing_log_topic:
                create_topic(admin, settings, engine.processing_log_topic, 1)
            queries = QueryEngine(engine, settings, lambda: runner.catalog, _queries_owned(control))
            queries.start()
            stack.callback(queries.close)
            if agent is not None:
                agent.report_queries(queries.statuses)
        info = ServerInfo(headwater.__version__, kafka_cluster_id(admin), service_id)
        yield Services(
            settings,
            service_id,
            runner,
            submitter,
            admin,
            info,
            limits,
            pull,
            advertised,
            Admission(limits.pull_max_concurrent, limits.pull_queue_size),
            tables,
            writer,
            agent,
            control,
            queries,
            no_spark,
            dict(properties or {}),
            dict(defaults or {}),
            forwarding=forwarding,
            scans=Admission(limits.scan_max_concurrent, limits.pull_queue_size, "table scans"),
            plans=PlanCache(),
            schema_registry=schema_registry,
            schema_registry_limits=schema_registry_limits,
        )


def _queries_owned(control: ControlPlane | None) -> Callable[[Catalog], set[str]]:
    """Which queries this server runs: all of them on its own; in a cluster, all of them on the
    controller and none elsewhere (one runner per query; a new controller takes them over)."""

    def owned(catalog: Catalog) -> set[str]:
        if control is None or control.is_controller():
            return set(catalog.queries)
        return set()

    return owned


_CONTROL_CATCH_UP_S = 30.0


def _join_cluster(
    settings: KafkaSettings,
    service_id: str,
    cluster: ClusterSettings,
    runner: CommandRunner,
    tables: MaterializedTables,
    stack: ExitStack,
) -> tuple[ClusterAgent, ControlPlane]:
    """Start membership/heartbeats/lag reports and the control plane; hold what it assigns.

    Without ``cluster.auth.secret`` the service's generated secret is agreed on first
    (``cluster._secret``): internal requests are signed, and checked, from the first one on.
    """
    if cluster.auth_secret is None:
        cluster = dataclasses.replace(cluster, auth_secret=agree_secret(settings, service_id))
    # started before the HTTP server listens: its peers' heartbeats cannot reach it until the
    # server calls `accepting` (headwater.server, once its socket listens)
    agent = ClusterAgent(settings, service_id, cluster, tables.local_lags, accepting=False)
    agent.start()
    stack.callback(agent.stop)
    me = cluster.self_id

    def partitions() -> frozenset[PartitionId]:
        return frozenset(
            PartitionId(name, p)
            for name, source in materialized(runner.catalog).items()
            for p in range(source.partitions)
        )

    def lags() -> dict[tuple[PartitionId, str], int]:
        # Each replica against the highest end offset any server reported for the partition.
        found: dict[tuple[PartitionId, str], int] = {}
        for pid in partitions():
            for host, lag in agent.replica_lags(pid.table, pid.partition).items():
                found[(pid, host)] = max(0, lag.end_offset - lag.position)
        return found

    def on_change(state: ControlState) -> None:
        held: dict[str, set[int]] = {}
        for pid, leader in state.partitions.items():
            if me in (leader.active, *leader.standbys):
                held.setdefault(pid.table, set()).add(pid.partition)
        tables.assign({name: frozenset(parts) for name, parts in held.items()})

    control = ControlPlane(
        settings,
        service_id,
        cluster,
        live=agent.live,
        members=agent.members,
        partitions=partitions,
        lags=lags,
        on_change=on_change,
        live_ready=agent.view_ready,
    )
    control.start()
    stack.callback(control.stop)
    if not control.wait_caught_up(_CONTROL_CATCH_UP_S):
        log.warning(
            "the control topic was not read to its end within %g s (%s); serving anyway",
            _CONTROL_CATCH_UP_S,
            control.reason() or control.status().value,
        )
    # Routing on a view that knows no peer would send every pull query to this server alone:
    # the members are known before it serves, and decided alive the moment it listens.
    if not agent.wait_members_read(_CONTROL_CATCH_UP_S):
        log.warning(
            "the members topic was not read to its end within %g s; serving anyway, and taking "
            "no part in the controller's decisions until it is",
            _CONTROL_CATCH_UP_S,
        )
    return agent, control


def _catch_up(topic: str, runner: CommandRunner, timeout_s: float) -> None:
    """Wait until the runner has read the command topic to its end once: every statement that took
    effect before this server started is in its catalog.

    The runner's own end-of-partition is the end (no separate probe reads the log a second time):
    on a broker slow to answer at start-up (one restarting, or busy with restores) the probe and the
    runner used to crawl over the same one-record batches side by side, and a restarted server gave
    up after the start-up limit (bench/chaos.py)."""
    if not runner.wait_until_read_to_end(timeout_s):
        end = runner.end_seen()
        raise CatalogNotReady(
            f"the catalog did not catch up with the command topic {topic!r} within {timeout_s:g} s "
            f"(at offset {runner.position} of {'an unknown end' if end is None else end}; runner "
            f"{runner.state.value}" + (f": {runner.reason})" if runner.reason else ")")
        )
