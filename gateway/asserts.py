"""ASSERT [NOT EXISTS] TOPIC / SCHEMA, as ksqlDB answers them. Does I/O (Kafka admin, the registry).

A script that creates sources over topics or schemas someone else provisions asserts them first:
the condition is checked every 100 ms until it holds or the statement's ``TIMEOUT`` (default:
``ksql.assert.topic.default.timeout.ms`` / ``ksql.assert.schema.default.timeout.ms``, 1 s) passes;
then the answer is ksqlDB's entity, or its assertion error (HTTP 417, error code 41700).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka import KafkaException

from headwater.engine.formats import schema_registry
from headwater.engine.formats.schema_registry import SchemaRegistryError
from headwater.gateway.errors import Entity, KsqlError
from headwater.gateway.services import Services
from headwater.sqlparse_ext import statements as ast

_RETRY_S = 0.1
_DEFAULT_TIMEOUT_MS = 1000


class AssertionFailed(Exception):
    """The asserted condition does not hold (yet)."""


def _retry(check: Callable[[], None], timeout_ms: int, statement: ast.Statement) -> None:
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        try:
            check()
            return
        except AssertionFailed as failed:
            if time.monotonic() >= deadline:
                raise KsqlError(str(failed), 41700, statement_text=statement.text) from failed
        time.sleep(_RETRY_S)


def _timeout_ms(
    services: Services, statement: ast.AssertTopic | ast.AssertSchema, setting: str
) -> int:
    if statement.timeout is not None:
        return statement.timeout.milliseconds
    try:
        return int(services.properties.get(setting, _DEFAULT_TIMEOUT_MS))
    except ValueError:
        return _DEFAULT_TIMEOUT_MS


def assert_topic(services: Services, asserted: ast.AssertTopic) -> Entity:
    """ASSERT [NOT EXISTS] TOPIC name [WITH (PARTITIONS=n, REPLICAS=m)] [TIMEOUT d]."""
    topic = asserted.topic

    def check() -> None:
        try:
            metadata = services.admin.list_topics(timeout=5)  # (naming it may create it)
        except KafkaException as exc:
            raise AssertionFailed(f"Cannot check topic existence: {exc}") from exc
        found = metadata.topics.get(topic)
        exists = found is not None and found.error is None and bool(found.partitions)
        if not asserted.exists:
            if exists:
                raise AssertionFailed(f"Topic {topic} exists")
            return
        if not exists:
            raise AssertionFailed(f"Topic {topic} does not exist")
        assert found is not None
        partitions = len(found.partitions)
        replicas = len(next(iter(found.partitions.values())).replicas)
        errors = []
        for name, wanted in asserted.properties.items():
            actual = {"PARTITIONS": partitions, "REPLICAS": replicas}.get(name.upper())
            if actual is None:
                errors.append(f"Cannot assert unknown topic property: {name}")
            elif not (isinstance(wanted, int) and wanted == actual):
                errors.append(
                    f"Mismatched configuration for topic {topic}: For config "
                    f"{name.lower()}, expected {wanted} got {actual}"
                )
        if errors:
            raise AssertionFailed("\n".join(errors))

    _retry(check, _timeout_ms(services, asserted, "ksql.assert.topic.default.timeout.ms"), asserted)
    return {
        "@type": "assert_topic",
        "statementText": asserted.text,
        "topicName": topic,
        "exists": asserted.exists,
        "warnings": [],
    }


def assert_schema(services: Services, asserted: ast.AssertSchema) -> Entity:
    """ASSERT [NOT EXISTS] SCHEMA [SUBJECT name] [ID n] [TIMEOUT d]."""
    subject, schema_id = asserted.subject, asserted.schema_id
    shown = (f" subject name {subject}" if subject else "") + (
        f" id {schema_id}" if schema_id is not None else ""
    )

    def check() -> None:
        registry = schema_registry.current()
        if registry is None:
            raise AssertionFailed(
                "Cannot check schema existence: no schema registry is "
                "configured (ksql.schema.registry.url)"
            )
        try:
            exists = True
            if subject is not None:
                exists = registry.latest(subject) is not None
        except SchemaRegistryError as exc:
            raise AssertionFailed(f"Cannot check schema existence: {exc}") from exc
        if exists and schema_id is not None:
            try:
                registry.schema(schema_id)
            except SchemaRegistryError:
                exists = False
        if asserted.exists and not exists:
            raise AssertionFailed(f"Schema with{shown} does not exist")
        if not asserted.exists and exists:
            raise AssertionFailed(f"Schema with{shown} exists")

    _retry(
        check, _timeout_ms(services, asserted, "ksql.assert.schema.default.timeout.ms"), asserted
    )
    return {
        "@type": "assert_schema",
        "statementText": asserted.text,
        "subject": subject,
        "id": schema_id,
        "exists": asserted.exists,
        "warnings": [],
    }
