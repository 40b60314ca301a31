"""Shared fixtures: embedded Kafka brokers on free loopback ports, stopped by pid in finalizers.

- ``memory_broker``: one in-memory Tansu for the whole session (fast; use unique topic names).
- ``durable_broker``: one Tansu on SeaweedFS for the whole session, in a tmp_path_factory folder.
- ``broker_factory``: brokers a test starts, stops, kills and restarts itself; all stopped at teardown.
- ``kafka_settings``: client settings for each storage mode (parametrized: memory, durable).

A missing broker binary FAILS these fixtures with a clear message (never a skip: a skip would hide a gap).
"""

from __future__ import annotations

import gc
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import KafkaSettings
from headwater.kafka.errors import BinaryNotFound

BrokerFactory = Callable[[Path | None], EmbeddedBroker]


def _started(broker: EmbeddedBroker, request: pytest.FixtureRequest) -> EmbeddedBroker:
    """Start `broker` with its stop registered first, so it is stopped even if start fails half-way."""

    def stop() -> None:
        # Clients caught in reference cycles (an exception's traceback) keep their connections open
        # until collected, and Tansu waits ~5 s for open connections when it gets SIGTERM.
        gc.collect()
        broker.stop()

    request.addfinalizer(stop)
    try:
        broker.start()
    except BinaryNotFound as exc:
        pytest.fail(f"the embedded broker cannot run here: {exc}", pytrace=False)
    return broker


@pytest.fixture(scope="session")
def memory_broker(request: pytest.FixtureRequest) -> EmbeddedBroker:
    """An in-memory embedded broker shared by the session."""
    return _started(EmbeddedBroker(None), request)


@pytest.fixture(scope="session")
def durable_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> EmbeddedBroker:
    """A durable (SeaweedFS-backed) embedded broker shared by the session."""
    return _started(EmbeddedBroker(tmp_path_factory.mktemp("durable-broker")), request)


@pytest.fixture
def broker_factory(request: pytest.FixtureRequest) -> Iterator[BrokerFactory]:
    """Make brokers (`factory(data_dir_or_None)`, started); every one is stopped at teardown."""

    def make(data_dir: Path | None) -> EmbeddedBroker:
        return _started(EmbeddedBroker(data_dir), request)

    yield make


@pytest.fixture(
    params=[
        pytest.param("memory", marks=pytest.mark.kafka),
        pytest.param("durable", marks=[pytest.mark.kafka, pytest.mark.durable]),
    ]
)
def kafka_settings(request: pytest.FixtureRequest) -> KafkaSettings:
    """Client settings for the session broker of each storage mode."""
    broker: EmbeddedBroker = request.getfixturevalue(f"{request.param}_broker")
    return broker.settings()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses (the session brokers are shared)."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", f"t-{request.node.name[:40]}-{uuid.uuid4().hex[:8]}")
