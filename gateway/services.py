"""The server's one typed bag of long-lived objects, and how to open and close it.

Does I/O (Kafka) in :func:`open_services` only. Handlers reach the object through
:func:`services_of`, never through bare ``request.state`` attributes. Tests build their own
:class:`Services` (a real runner and submitter on the embedded broker) and pass it to
``create_app``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient
from starlette.requests import Request

import headwater
from headwater.kafka.clients import KafkaSettings, admin_client, create_topic
from headwater.metastore.runner import CommandRunner
from headwater.metastore.snapshots import SnapshotStore
from headwater.metastore.submit import CommandSubmitter


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
    """

    settings: KafkaSettings
    service_id: str
    runner: CommandRunner
    submitter: CommandSubmitter
    admin: AdminClient
    info: ServerInfo
    limits: Limits = Limits()


def services_of(request: Request) -> Services:
    """The :class:`Services` of the app serving ``request``."""
    services: Services = request.app.state.services
    return services


def command_topic_name(service_id: str) -> str:
    """ksqlDB's command topic name for a service id."""
    return f"_confluent-ksql-{service_id}_command_topic"


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
    limits: Limits = Limits(),
) -> Iterator[Services]:
    """Create the command topic if needed, start the runner, and stop it on exit.

    Args:
        settings: how to reach Kafka.
        service_id: the service id.
        data_dir: where catalog snapshots go (``data_dir / "catalog"``); None for none.
        command_topic: the command topic (default: ksqlDB's name for the service id).
        limits: request bounds.
    """
    topic = command_topic or command_topic_name(service_id)
    admin = admin_client(settings)
    create_topic(admin, settings, topic, 1)
    snapshots = SnapshotStore(data_dir / "catalog") if data_dir is not None else None
    runner = CommandRunner(settings, topic, snapshots)
    runner.start()
    try:
        submitter = CommandSubmitter(settings, service_id, topic, runner, admin)
        info = ServerInfo(headwater.__version__, kafka_cluster_id(admin), service_id)
        yield Services(settings, service_id, runner, submitter, admin, info, limits)
    finally:
        runner.stop()
