"""Membership: announce this server on the service's members topic and follow the topic. Does I/O.

The members topic (``settings.members_topic``, one partition) is created if missing. This server
appends its announcement (``members.encode``) when it starts and again every
``announce_interval_ms`` (so a topic that was truncated still lists it), and a background thread
reads the topic from offset 0, folding every announcement with ``members.fold``. A record that is
no announcement is logged and skipped: membership only says whom to heartbeat; whether a member is
alive is decided by heartbeats. On a clean stop this server announces that it left; members that
left, or have not announced themselves for ``expiry_ms`` (killed for good, moved), are no longer
listed (``members.current``).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time

from confluent_kafka import KafkaError, Producer, TopicPartition

from headwater.cluster.members import BadAnnouncement, Member, current, decode, encode, fold
from headwater.kafka.clients import (
    KafkaSettings,
    admin_client,
    consumer,
    create_topic,
    poll_batch,
    producer,
)

log = logging.getLogger(__name__)

# Workaround "Tansu holds every fetch for fetch.wait.max.ms" (docs/embedded-broker.md):
# a new member is seen within a few tens of ms instead of ~0.5 s.
_FETCH_WAIT_MS = 20


class MembersFollower:
    """Announces one server and keeps the member list folded from the members topic.

    Args:
        kafka: how to reach Kafka.
        topic: the members topic.
        me: this server's announcement (its start time orders restarts).
        announce_interval_ms: how often the announcement is appended again.
        expiry_ms: how long a member that stopped announcing itself is still listed.
    """

    def __init__(
        self,
        kafka: KafkaSettings,
        topic: str,
        me: Member,
        *,
        announce_interval_ms: int = 3000,
        expiry_ms: int = 60_000,
    ) -> None:
        if announce_interval_ms <= 0:
            raise ValueError("announce_interval_ms must be positive")
        if expiry_ms <= 2 * announce_interval_ms:
            raise ValueError("expiry_ms must be more than two announce intervals")
        self._expiry_ms = expiry_ms
        self._seen: dict[str, int] = {}
        self._kafka = kafka
        self._topic = topic
        self._me = me
        self._interval_s = announce_interval_ms / 1000
        self._lock = threading.Lock()
        self._members: dict[str, Member] = {me.server_id: me}
        self._position = 0
        self._read_to_end = threading.Event()
        self._stop = threading.Event()
        self._leave = False
        self._thread: threading.Thread | None = None

    @property
    def position(self) -> int:
        """The next offset of the members topic to fold."""
        with self._lock:
            return self._position

    def read_to_end(self) -> bool:
        """Whether the topic has been folded to its end once (before that, ``members`` may lack
        servers that announced themselves long ago)."""
        return self._read_to_end.is_set()

    def wait_read_to_end(self, timeout_s: float) -> bool:
        """Block until :meth:`read_to_end` (False after ``timeout_s``)."""
        return self._read_to_end.wait(timeout_s)

    def members(self) -> dict[str, Member]:
        """The members, by server id (always including this server): every one announced that
        has neither left nor stopped announcing itself for longer than the expiry."""
        with self._lock:
            return current(
                self._members,
                self._seen,
                int(time.time() * 1000),
                self._expiry_ms,
                self._me.server_id,
            )

    def start(self) -> None:
        """Create the topic if missing, announce this server, and start following the topic.

        Raises:
            TopicError: the topic cannot be created or checked.
        """
        admin = admin_client(self._kafka, "members-admin")
        create_topic(admin, self._kafka, self._topic, 1)
        self._thread = threading.Thread(target=self._run, name="cluster-members", daemon=True)
        self._thread.start()

    def stop(self, leave: bool = True) -> None:
        """Stop following and announcing (returns within about a second); with ``leave``, first
        announce that this server left, so the others stop heartbeating it at once."""
        self._leave = leave
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        writer = producer(self._kafka, "members-announce")
        reader = consumer(
            self._kafka, "members-follow", partition_eof=True, fetch_wait_max_ms=_FETCH_WAIT_MS
        )
        try:
            reader.assign([TopicPartition(self._topic, 0, 0)])
            next_announce = 0.0
            while not self._stop.is_set():
                if time.monotonic() >= next_announce:
                    self._announce(writer)
                    next_announce = time.monotonic() + self._interval_s
                for message in poll_batch(reader, 500, 0.1):
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            self._read_to_end.set()
                        else:
                            log.warning("members topic %s: %s", self._topic, error.str())
                        continue
                    self._fold(message.offset() or 0, message.value(), message.timestamp()[1])
                writer.poll(0)
            if self._leave:
                self._me = dataclasses.replace(self._me, left=True)
                self._announce(writer)
        except Exception:  # the thread must not die silently
            log.exception("members follower of %s stopped", self._topic)
        finally:
            writer.flush(1)
            reader.close()

    def _announce(self, writer: Producer) -> None:
        try:
            writer.produce(self._topic, key=self._me.server_id.encode(), value=encode(self._me))
        except BufferError:
            log.warning("members topic %s: producer queue full, announcement skipped", self._topic)

    def _fold(self, offset: int, value: bytes | None, timestamp_ms: int) -> None:
        try:
            member = decode(value)
        except BadAnnouncement as exc:
            log.warning("members topic %s offset %d skipped: %s", self._topic, offset, exc)
            member = None
        with self._lock:
            if member is not None:
                self._members = fold(self._members, member)
                if timestamp_ms > 0:
                    seen = self._seen.get(member.server_id, 0)
                    self._seen[member.server_id] = max(seen, timestamp_ms)
            self._position = offset + 1
