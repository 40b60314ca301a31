"""The service's internal-auth secret when ``cluster.auth.secret`` is not set. Does I/O (Kafka).

The first server of a service generates a secret (``secrets.token_hex``) and appends it to the
service's secret topic (``settings.secret_topic``: one partition, never deleted by retention);
every server reads that topic before it sends or accepts internal traffic and takes the first
proposal in the log (``auth.first_secret``). Two servers starting at once may both propose one:
each reads the topic up to its own record, so both see the same first proposal and agree.

Anyone who can read the service's Kafka topics can read the secret (as they can read its data):
the secret keeps plain HTTP access to the servers from forging heartbeats, lag reports or
forwarded queries.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable

from confluent_kafka import KafkaError, TopicPartition

from headwater.cluster.auth import encode_secret, first_secret
from headwater.cluster.settings import secret_topic
from headwater.kafka.clients import KafkaSettings, admin_client, consumer, create_topic, producer
from headwater.kafka.errors import KafkaEdgeError

log = logging.getLogger(__name__)

# Never deleted by a real Kafka's retention default: servers started months apart must agree.
_TOPIC_CONFIG = {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}
_FETCH_WAIT_MS = 20


class SecretUnavailable(KafkaEdgeError):
    """The secret topic could not be read or written in time (Kafka unreachable or too slow);
    the server does not start (it must never serve internal traffic unauthenticated)."""

    error_code = 50302
    retriable = True


def generate() -> str:
    """A new random secret (256 bits, hex)."""
    return secrets.token_hex(32)


def agree_secret(
    kafka: KafkaSettings,
    service_id: str,
    *,
    timeout_s: float = 30.0,
    make: Callable[[], str] = generate,
) -> str:
    """The service's generated secret, proposing one first if the topic has none.

    Args:
        kafka: how to reach Kafka.
        service_id: the service whose secret topic is read.
        timeout_s: how long reading and writing the topic may take.
        make: makes the proposal (tests pass a fixed one).

    Raises:
        SecretUnavailable: the topic was not read (or the proposal not written) in time.
        TopicError: the topic cannot be created.
    """
    topic = secret_topic(service_id)
    create_topic(admin_client(kafka, "secret-admin"), kafka, topic, 1, _TOPIC_CONFIG)
    deadline = time.monotonic() + timeout_s
    found = _read_first(kafka, topic, None, deadline)
    if found is not None:
        return found
    offset = _propose(kafka, topic, make(), deadline)
    found = _read_first(kafka, topic, offset, deadline)
    if found is None:  # our own record is at `offset`: it cannot be missing
        raise SecretUnavailable(f"{topic}: the proposal at offset {offset} was not read back")
    log.info("internal-auth secret of service %s agreed on %s", service_id, topic)
    return found


def _read_first(kafka: KafkaSettings, topic: str, until: int | None, deadline: float) -> str | None:
    """The first proposal of the topic, read up to its end (``until`` None) or up to ``until``."""
    reader = consumer(kafka, "secret-read", partition_eof=True, fetch_wait_max_ms=_FETCH_WAIT_MS)
    values: list[bytes | None] = []
    try:
        reader.assign([TopicPartition(topic, 0, 0)])
        while time.monotonic() < deadline:
            message = reader.poll(0.1)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF and until is None:
                    return first_secret(values)
                if error.code() != KafkaError._PARTITION_EOF:
                    log.debug("secret topic %s: %s", topic, error.str())
                continue
            values.append(message.value())
            found = first_secret(values)
            if found is not None or (until is not None and (message.offset() or 0) >= until):
                return found
    finally:
        reader.close()
    raise SecretUnavailable(f"the secret topic {topic} was not read to its end in time")


def _propose(kafka: KafkaSettings, topic: str, secret: str, deadline: float) -> int:
    """Append a proposal; its offset."""
    writer = producer(kafka, "secret-propose")
    delivered: list[int] = []
    failed: list[str] = []

    def report(error: KafkaError | None, message: object) -> None:
        if error is not None:
            failed.append(error.str())
        else:
            delivered.append(message.offset())  # type: ignore[attr-defined]

    writer.produce(topic, key=b"secret", value=encode_secret(secret), on_delivery=report)
    while not delivered and not failed and time.monotonic() < deadline:
        writer.poll(0.1)
    writer.flush(1)
    if failed or not delivered:
        raise SecretUnavailable(
            f"the secret topic {topic}: proposal not written "
            f"({failed[0] if failed else 'timed out'})"
        )
    return delivered[0]
