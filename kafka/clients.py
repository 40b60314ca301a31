"""The one factory for every confluent-kafka client in headwater, with each broker workaround named.

Every Producer, Consumer and AdminClient in the project is built here from a frozen
:class:`KafkaSettings`, so the behaviours measured on the embedded broker (Tansu 0.6.0, see
docs/embedded-broker.md) are handled in one place, and a real Kafka cluster needs only different
settings. Nothing here depends on a Tansu quirk: every workaround is also correct on Apache Kafka >= 3.

Building a client does no network I/O; ``create_topic`` and the transaction helpers do.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient

# NewTopic is documented under confluent_kafka.admin, which imports it from cimpl (its typed home)
# without re-exporting it explicitly: mypy --strict accepts only the defining module.
from confluent_kafka.cimpl import NewTopic

from headwater.kafka import readers
from headwater.kafka.errors import KafkaConfigError, TopicError, TransactionOutcomeUnknown
from headwater.kafka.readers import Reader

log = logging.getLogger(__name__)
#: After a deletion: how long peers get to see it and renew their readers (they look every 100 ms).
_PEER_RENEWAL_S = 0.5
_librdkafka_log = logging.getLogger("headwater.kafka.librdkafka")

# Keys the factory sets itself: a user value for one of them would undo a workaround or a per-client
# choice, so it is refused instead of silently winning or losing.
RESERVED_KEYS = frozenset(
    {
        "bootstrap.servers",
        "client.id",
        "group.id",
        "transactional.id",
        "isolation.level",
        "partitioner",
        "allow.auto.create.topics",
        "enable.partition.eof",
        "transaction.timeout.ms",
        "session.timeout.ms",
        "logger",
    }
)


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    """How headwater reaches Kafka. Read once at the entry point and passed down.

    Attributes:
        bootstrap_servers: "host:port[,host:port...]".
        client_id_prefix: prefix of every client.id (and of default group ids): "<prefix>-<purpose>".
        replication_factor: for topics headwater creates; -1 means the broker's default.
        init_transactions_timeout_ms: call timeout of ``init_transactions``.
        commit_transaction_timeout_ms: call timeout of ``commit_transaction``/``abort_transaction``.
        transaction_timeout_ms: ``transaction.timeout.ms``: after this a real broker aborts an open
            transaction (Tansu never does).
        session_timeout_ms: group consumers only (see ``consumer``).
        topic_operation_timeout_ms: how long ``create_topic`` waits for the broker's answer.
        client_config: further librdkafka keys given by the user (security.protocol, sasl.*, ssl.*,
            tuning), passed through to every client unchanged. Must not contain RESERVED_KEYS.
    """

    bootstrap_servers: str
    client_id_prefix: str = "headwater"
    replication_factor: int = -1
    init_transactions_timeout_ms: int = 5000
    commit_transaction_timeout_ms: int = 5000
    transaction_timeout_ms: int = 10000
    session_timeout_ms: int = 6000
    topic_operation_timeout_ms: int = 10000
    client_config: Mapping[str, str | int | float | bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.bootstrap_servers:
            raise KafkaConfigError("bootstrap_servers is empty")
        clash = sorted(RESERVED_KEYS & set(self.client_config))
        if clash:
            raise KafkaConfigError(
                f"client_config may not set {', '.join(clash)}: headwater sets these per client"
            )
        object.__setattr__(self, "client_config", MappingProxyType(dict(self.client_config)))


def _common(settings: KafkaSettings, purpose: str) -> dict[str, Any]:
    return {
        **settings.client_config,
        "bootstrap.servers": settings.bootstrap_servers,
        "client.id": f"{settings.client_id_prefix}-{purpose}",
        # librdkafka's own log lines go to Python logging instead of stderr.
        "logger": _librdkafka_log,
    }


def admin_config(settings: KafkaSettings, purpose: str = "admin") -> dict[str, Any]:
    """librdkafka configuration of an AdminClient (pure)."""
    return _common(settings, purpose)


def producer_config(
    settings: KafkaSettings, purpose: str, *, transactional_id: str | None = None
) -> dict[str, Any]:
    """librdkafka configuration of a Producer (pure); see ``producer``."""
    config = _common(settings, purpose)
    # Workaround "Java-compatible key placement": librdkafka's default partitioner (consistent_random,
    # CRC32) puts keys on other partitions than Java clients and Kafka Streams/ksqlDB do; murmur2_random
    # is Java's murmur2 for keyed records (checked on Tansu: 0 differences over 40 keys).
    config["partitioner"] = "murmur2_random"
    if transactional_id is not None:
        config["transactional.id"] = transactional_id
        # Workaround "transactions never time out" (Tansu): set explicitly and short, so a real broker
        # aborts a crashed submitter's transaction soon and read_committed readers are not blocked long.
        config["transaction.timeout.ms"] = settings.transaction_timeout_ms
        # Workaround "the transaction coordinator is looked up late with sparse connections" (only
        # once a broker connection is up, ~50 ms; librdkafka): connect to the brokers eagerly.
        # init_transactions then takes ~3 ms instead of ~55 ms (and 504 ms when the coordinator
        # lookup lost the race and waited for its 500 ms timer).
        config["enable.sparse.connections"] = False
    return config


def consumer_config(
    settings: KafkaSettings,
    purpose: str,
    *,
    group_id: str | None = None,
    read_committed: bool = False,
    partition_eof: bool = False,
    fetch_wait_max_ms: int | None = None,
    strict_offsets: bool = False,
) -> dict[str, Any]:
    """librdkafka configuration of a Consumer (pure); see ``consumer``."""
    config = _common(settings, purpose)
    # Workaround "slow group assignment": with subscribe() Tansu hands out the first assignment only
    # after ~session.timeout.ms/2 (23 s at librdkafka's default). headwater assigns partitions
    # explicitly (each server knows which partitions it holds); librdkafka still requires a group.id,
    # which an assign-only consumer uses for nothing as long as it does not commit.
    config["group.id"] = (
        group_id if group_id is not None else f"{settings.client_id_prefix}-{purpose}"
    )
    # Where a group is needed, a short session keeps that first assignment to a few seconds.
    config["session.timeout.ms"] = settings.session_timeout_ms
    config.setdefault("enable.auto.commit", False)
    # Workaround "producing to an unknown topic auto-creates it": headwater validates topics itself
    # and creates them with create_topic; a consumer must never create one as a side effect.
    config["allow.auto.create.topics"] = False
    config["isolation.level"] = "read_committed" if read_committed else "read_uncommitted"
    config["enable.partition.eof"] = partition_eof
    if fetch_wait_max_ms is not None:
        config["fetch.wait.max.ms"] = fetch_wait_max_ms
    if strict_offsets:
        # An offset out of range is an error event, never a jump: whatever the user's config says
        config["auto.offset.reset"] = "error"
    else:
        config.setdefault("auto.offset.reset", "earliest")
    return config


def admin_client(settings: KafkaSettings, purpose: str = "admin") -> AdminClient:
    """An AdminClient. Topics are created through ``create_topic``, never by producing."""
    return AdminClient(admin_config(settings, purpose))


def producer(
    settings: KafkaSettings, purpose: str, *, transactional_id: str | None = None
) -> Producer:
    """A Producer with Java-compatible key placement; transactional when `transactional_id` is given.

    A transactional producer must be started with ``init_transactions(producer, settings)`` and
    committed with ``commit_transaction(producer, settings)``, which apply the short call timeouts.
    """
    return Producer(producer_config(settings, purpose, transactional_id=transactional_id))


def consumer(
    settings: KafkaSettings,
    purpose: str,
    *,
    group_id: str | None = None,
    read_committed: bool = False,
    partition_eof: bool = False,
    fetch_wait_max_ms: int | None = None,
    strict_offsets: bool = False,
) -> Reader:
    """A Consumer meant for explicit partition assignment (``assign``): a ``readers.Reader``, so
    that no topic it reads is deleted while it fetches it (``delete_topics``).

    Args:
        settings: connection settings.
        purpose: names the client ("command-log", "lag-probe"); also the default group id suffix.
        group_id: give one only when the consumer really joins a group (``subscribe``) or commits
            offsets; the session timeout is then ``settings.session_timeout_ms``.
        read_committed: ``isolation.level=read_committed`` (default read_uncommitted).
        partition_eof: deliver a PARTITION_EOF event when the consumer reaches the partition's end.
        fetch_wait_max_ms: how long the broker may hold a fetch that has no data (librdkafka's
            default is 500 ms, which is also how long reaching end of partition takes).
        strict_offsets: an offset the broker says is out of range comes as an error event
            (``KafkaError._AUTO_OFFSET_RESET``) and fetching stops until the reader seeks,
            instead of librdkafka moving to the earliest or latest offset on its own: for a read
            of a planned offset range, where such a jump would read records twice or skip them
            (a restarting broker can answer so for offsets it holds).

    Returns:
        A consumer that commits nothing on its own (``enable.auto.commit=false`` unless the
        user's client_config says otherwise) and starts at the earliest offset when it has none.
    """
    return Reader(
        consumer_config(
            settings,
            purpose,
            group_id=group_id,
            read_committed=read_committed,
            partition_eof=partition_eof,
            fetch_wait_max_ms=fetch_wait_max_ms,
            strict_offsets=strict_offsets,
        )
    )


def consumer_from_config(config: Mapping[str, Any], *, follows_new_topics: bool = False) -> Reader:
    """A consumer from a configuration built with ``consumer_config`` (and adjusted by the caller):
    a ``readers.Reader`` like every consumer headwater makes. ``follows_new_topics``: it will be
    assigned topics made after it (see ``readers.Reader.needs_renewal``)."""
    return Reader(dict(config), follows_new_topics=follows_new_topics)


def delete_topics(
    admin: AdminClient, settings: KafkaSettings, names: list[str], *, names_reused: bool = True
) -> dict[str, str]:
    """Delete topics: the only way headwater deletes one.

    Workaround "a topic deleted under a fetching consumer kills the process" (``readers``): every
    reader of this process first stops fetching them (``readers.retire``, which also waits out the
    fetches in flight), and new assignments of them are held back until the deletion is answered.
    Servers of a cluster retire a topic themselves when they apply the DROP that deletes it.

    Args:
        names_reused: False for names never given to a topic again (a transient query's hidden
            topic): then no consumer needs renewing afterwards.

    Returns:
        The topics that could not be deleted, each with the broker's reason (empty: all deleted).
    """
    timeout_s = settings.topic_operation_timeout_ms / 1000
    failed: dict[str, str] = {}
    readers.retire(names)
    try:
        futures = admin.delete_topics(
            list(names), operation_timeout=timeout_s, request_timeout=timeout_s
        )
        for name, future in futures.items():
            try:
                future.result(timeout=timeout_s + 5)
            except KafkaException as exc:
                error = exc.args[0]
                if (
                    isinstance(error, KafkaError)
                    and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
                ):
                    continue  # already gone
                failed[name] = str(exc)
            except TimeoutError:
                failed[name] = f"no answer within {timeout_s:.0f} s"
            else:
                log.info("deleted topic %s", name)
    finally:
        readers.reinstate(names)
    gone = [name for name in names if name not in failed] if names_reused else []
    readers.note_deleted(gone)
    # This process's readers that may hold the old topics are renewed now, and peers that watch for
    # the deletion (metastore.topic_retirement) get a moment to renew theirs before the caller
    # answers and a topic of the same name can be created again.
    readers.wait_renewed(gone, timeout_s)
    time.sleep(_PEER_RENEWAL_S if gone else 0)
    return failed


def create_topic(
    admin: AdminClient,
    settings: KafkaSettings,
    name: str,
    partitions: int,
    config: Mapping[str, str] | None = None,
) -> bool:
    """Create a topic with its final partition count and wait for the broker's answer.

    Workaround "no CreatePartitions, no compaction or retention applied" (Tansu): topics are created
    explicitly, once, with the partition count they keep forever. A topic that already exists with
    that partition count counts as created as requested (its configs are not compared).

    Args:
        admin: from ``admin_client``.
        settings: gives the replication factor and the operation timeout.
        name: topic name.
        partitions: partition count (>= 1).
        config: topic configs ("cleanup.policy": "compact", ...).

    Returns:
        True if this call created the topic, False if it already existed as requested.

    Raises:
        TopicError: the broker refused, timed out, or the topic exists with another partition count.
    """
    timeout_s = settings.topic_operation_timeout_ms / 1000
    # Workaround "a client that knew a deleted topic dies when its name is created again" (readers):
    # consumers of this process that read a deleted topic of this name are renewed first.
    if not readers.wait_renewed([name], timeout_s):
        raise TopicError(
            name, "consumers that read a deleted topic of this name are still open", retriable=True
        )
    new = NewTopic(
        name,
        num_partitions=partitions,
        replication_factor=settings.replication_factor,
        config=dict(config or {}),
    )
    future = admin.create_topics([new], operation_timeout=timeout_s, request_timeout=timeout_s)[
        name
    ]
    try:
        future.result(timeout=timeout_s + 5)
    except KafkaException as exc:
        error = exc.args[0]
        if not isinstance(error, KafkaError) or error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
            retriable = isinstance(error, KafkaError) and error.retriable()
            raise TopicError(name, f"creation failed: {exc}", retriable=retriable) from exc
    except TimeoutError as exc:
        raise TopicError(name, f"no answer within {timeout_s:.0f} s", retriable=True) from exc
    else:
        log.info("created topic %s with %d partitions", name, partitions)
        return True
    existing = _partition_count(admin, name, timeout_s)
    if existing != partitions:
        raise TopicError(name, f"exists with {existing} partitions, not {partitions}")
    return False


def _partition_count(admin: AdminClient, name: str, timeout_s: float) -> int:
    try:
        metadata = admin.list_topics(topic=name, timeout=timeout_s)
    except KafkaException as exc:
        raise TopicError(name, f"cannot read its metadata: {exc}", retriable=True) from exc
    topic = metadata.topics.get(name)
    if topic is None or topic.error is not None:
        raise TopicError(name, "reported as existing but has no metadata", retriable=True)
    return len(topic.partitions)


def init_transactions(producer_: Producer, settings: KafkaSettings) -> None:
    """``init_transactions`` with the short configured timeout.

    Workaround "a crashed transactional producer blocks read_committed readers" (until its
    transactional.id calls init_transactions again): call this at start-up with the stable id.

    Raises:
        TransactionOutcomeUnknown: no answer in time.
        KafkaException: any other failure, as librdkafka reports it.
    """
    # Workaround "init_transactions right after creating a producer waits 500 ms": librdkafka looks
    # for the transaction coordinator at once, finds no broker connected yet, and tries again only
    # on its 500 ms coordinator timer (measured: every 2nd-4th call took 504 ms instead of 54 ms).
    # A metadata request first connects a broker, so the coordinator lookup succeeds immediately.
    try:
        producer_.list_topics(timeout=settings.init_transactions_timeout_ms / 1000)
    except KafkaException:
        pass  # init_transactions reports what is wrong, with its own timeout
    _with_timeout(
        producer_.init_transactions, "init_transactions", settings.init_transactions_timeout_ms
    )


def commit_transaction(producer_: Producer, settings: KafkaSettings) -> None:
    """``commit_transaction`` with the short configured timeout.

    Workaround "a fenced producer's commit does not fail fast" (Tansu drops the connection and the
    call runs to its timeout): a timeout means "outcome unknown", and the caller looks its command id
    up in the log before retrying or answering.

    Raises:
        TransactionOutcomeUnknown: no answer in time.
        KafkaException: any other failure, as librdkafka reports it.
    """
    _with_timeout(
        producer_.commit_transaction, "commit_transaction", settings.commit_transaction_timeout_ms
    )


def abort_transaction(producer_: Producer, settings: KafkaSettings) -> None:
    """``abort_transaction`` with the commit timeout. On Tansu aborted records stay visible.

    Raises:
        TransactionOutcomeUnknown: no answer in time.
        KafkaException: any other failure, as librdkafka reports it.
    """
    _with_timeout(
        producer_.abort_transaction, "abort_transaction", settings.commit_transaction_timeout_ms
    )


def close_producer(producer_: Producer, timeout_s: float) -> bool:
    """Release a producer (connections, threads, buffers) without waiting longer than ``timeout_s``,
    dropping what it has not delivered; for a transactional producer whose transaction failed.

    Workaround "closing a fenced transactional producer can block forever" (confluent-kafka's
    ``close()`` aborts the transaction and flushes with no time limit; seen here: a submitter whose
    commit failed with PRODUCER_FENCED never returned from it, and the server's DDL lock with it).
    What is still queued is purged first, so the close has nothing to wait for; if it still does not
    return in time it is left to finish on a daemon thread.

    Returns:
        False when the close was left unfinished.
    """
    try:
        producer_.purge()
        producer_.flush(0)  # serves the purged records' delivery reports
    except (KafkaException, RuntimeError) as exc:
        log.debug("purging a producer before closing it: %s", exc)

    def close() -> None:
        try:
            producer_.close()
        except (KafkaException, SystemError, RuntimeError) as exc:
            log.debug("closing a producer: %s", exc)

    closing = threading.Thread(target=close, name="producer-close", daemon=True)
    closing.start()
    closing.join(timeout_s)
    if closing.is_alive():
        log.warning(
            "a Kafka producer did not close within %g s; left to close in the background", timeout_s
        )
        return False
    return True


def _with_timeout(call: Any, operation: str, timeout_ms: int) -> None:
    try:
        call(timeout_ms / 1000)
    except KafkaException as exc:
        error = exc.args[0]
        if isinstance(error, KafkaError) and error.code() in (
            KafkaError._TIMED_OUT,
            KafkaError.REQUEST_TIMED_OUT,
        ):
            raise TransactionOutcomeUnknown(operation, timeout_ms, error.str()) from exc
        raise


def poll_batch(consumer_: Consumer, max_messages: int, timeout_s: float) -> list[Message]:
    """What has arrived, up to ``max_messages``: waits up to ``timeout_s`` for the first message
    (or event), then takes whatever else is already fetched without waiting.

    Workaround "consume(num_messages, timeout) waits the whole timeout unless the batch fills"
    (librdkafka): a command-log reader using it decided each new command ~70 ms late on average
    (bench/ddl_latency.py); polling for the first message returns as soon as one arrives.
    """
    first = consumer_.poll(timeout_s)
    if first is None:
        return []
    if max_messages <= 1:
        return [first]
    return [first, *consumer_.consume(max_messages - 1, 0)]
