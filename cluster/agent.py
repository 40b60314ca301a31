"""The cluster agent of one server: membership, heartbeats and lag reports (KLIP-12). Does I/O.

A driver around the pure decisions (``members.fold``, ``liveness.decide``, the lag merge of
``_lags``). Servers with the same service id form a cluster: each announces itself on the
service's members topic (``_membership``), and ``cluster.peers`` seeds are contacted before they
announce. Its threads, all daemons stopped by :meth:`ClusterAgent.stop`:

- ``cluster-members``: follows the members topic and re-announces this server every few seconds;
- ``cluster-heartbeat``: every ``heartbeat.send_interval_ms`` queues ``POST /heartbeat`` to
  every peer, alive or not (a down peer comes back only if we keep reaching it);
- ``cluster-check``: every ``heartbeat.check_interval_ms`` runs ``liveness.decide``;
- ``cluster-lag``: every ``lag_report_interval_ms`` queues ``POST /lag`` with ``local_lags()`` to
  every live peer;
- ``cluster-post-N``: a few workers sending the queued requests over one ``httpx.Client``. A peer
  has at most one request of each kind in flight, and a tick skips a peer whose previous request
  has not finished, so one dead or unreachable peer (connect timeout) holds at most two workers
  and never delays the others.

The HTTP side (``gateway/cluster_api.py``) hands received bodies to
:meth:`ClusterAgent.on_heartbeat` and :meth:`ClusterAgent.on_lag`. With ``auth_secret`` (always
set on a server: configured or generated, see ``cluster._secret``) every request carries
``cluster.auth.sign(...)`` in the ``X-Headwater-Auth`` header; with ``tls`` it goes over HTTPS.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from headwater.cluster import auth
from headwater.cluster._heartbeats import (
    BadClusterMessage,
    HeartbeatBook,
    heartbeat_body,
    parse_heartbeat,
)
from headwater.cluster._lags import LagBook, LagReport, TableLags, lag_body, parse_lag_body
from headwater.cluster._lags import replica_lags as merge_replica_lags
from headwater.cluster._membership import MembersFollower
from headwater.cluster.liveness import HostStatus, live_hosts
from headwater.cluster.members import Member
from headwater.cluster.routing import ReplicaLag
from headwater.cluster.settings import ClusterSettings, members_topic
from headwater.cluster.tls import PeerTls, client_context, peer_url
from headwater.kafka.clients import KafkaSettings
from headwater.store.lag import LagInfo

__all__ = [
    "HEARTBEAT_PATH",
    "LAG_PATH",
    "BadClusterMessage",
    "ClusterAgent",
    "LagReport",
    "normalize_peer",
    "wall_clock_ms",
]

log = logging.getLogger(__name__)

HEARTBEAT_PATH = "/heartbeat"
#: How long an agent started with ``accepting=False`` waits for :meth:`ClusterAgent.accepting`
#: before it heartbeats and decides its peers' liveness all the same.
ACCEPTING_WAIT_S = 30.0
LAG_PATH = "/lag"


def wall_clock_ms() -> int:
    """This machine's wall clock in ms (the agent's default clock)."""
    return time.time_ns() // 1_000_000


def normalize_peer(peer: str) -> str:
    """``host:port`` from a ``cluster.peers`` entry (an ``http://`` or ``https://`` prefix is
    allowed)."""
    text = peer.strip().removeprefix("http://").removeprefix("https://").rstrip("/")
    if ":" not in text:
        raise ValueError(f"a peer must be host:port, got {peer!r}")
    return text


def _repeat(
    stop: threading.Event, interval_ms: int, action: Callable[[], object], name: str
) -> threading.Thread:
    """A daemon thread running ``action`` every ``interval_ms`` until ``stop`` is set."""

    def run() -> None:
        interval = interval_ms / 1000
        due = time.monotonic()
        while not stop.is_set():
            try:
                action()
            except Exception:  # one failed round must not end the loop
                log.exception("%s: round failed", name)
            due += interval
            delay = due - time.monotonic()
            if delay < 0:  # fell behind (a pause): resume the rhythm instead of bursting
                due = time.monotonic() + interval
                delay = interval
            if stop.wait(delay):
                return

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


class _Poster:
    """Signed JSON POSTs to peers from daemon workers, at most one in flight per (peer, path)."""

    def __init__(
        self,
        secret: str | None,
        clock_ms: Callable[[], int],
        timeout_ms: int,
        workers: int,
        tls: PeerTls | None = None,
    ) -> None:
        self._secret = secret
        self._tls = tls
        self._clock_ms = clock_ms
        self._timeout_s = timeout_ms / 1000
        self._client: httpx.Client | None = None
        self._queue: queue.SimpleQueue[tuple[str, str, bytes] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._in_flight: set[tuple[str, str]] = set()
        self._workers = [
            threading.Thread(target=self._work, name=f"cluster-post-{i}", daemon=True)
            for i in range(workers)
        ]

    def start(self) -> None:
        timeout = self._timeout_s
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=min(timeout, 1.0)),
            verify=client_context(self._tls) or True,
        )
        for worker in self._workers:
            worker.start()

    def post(self, peer: str, path: str, body: Mapping[str, Any]) -> bool:
        """Queue a POST unless the previous one to the same peer and path is unfinished."""
        with self._lock:
            if (peer, path) in self._in_flight:
                return False
            self._in_flight.add((peer, path))
        self._queue.put((peer, path, json.dumps(body, separators=(",", ":")).encode()))
        return True

    def stop(self) -> None:
        for _ in self._workers:
            self._queue.put(None)
        for worker in self._workers:
            if worker.is_alive():
                worker.join(timeout=2)
        if self._client is not None:
            self._client.close()

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            peer, path, content = item
            try:
                self._send(peer, path, content)
            finally:
                with self._lock:
                    self._in_flight.discard((peer, path))

    def _send(self, peer: str, path: str, content: bytes) -> None:
        headers = {"Content-Type": "application/json"}
        if self._secret is not None:
            headers[auth.HEADER] = auth.sign(self._secret, self._clock_ms(), "POST", path, content)
        if self._client is None:
            return
        try:
            answer = self._client.post(
                peer_url(self._tls, peer, path), content=content, headers=headers
            )
        except httpx.HTTPError as exc:  # the peer is down or slow: liveness will tell
            log.debug("POST %s to %s failed: %r", path, peer, exc)
            return
        except Exception as exc:  # noqa: BLE001  (e.g. the client closed under a hung request at stop)
            log.debug("POST %s to %s abandoned: %r", path, peer, exc)
            return
        if answer.status_code != 200:
            log.warning(
                "POST %s to %s answered %d: %s", path, peer, answer.status_code, answer.text[:200]
            )


class ClusterAgent:
    """Membership, failure detection and lag exchange of one server.

    Args:
        kafka: how to reach Kafka (for the members topic).
        service_id: the service id; servers sharing it form one cluster.
        settings: this server's cluster settings (its id, tags, heartbeat settings, secret,
            seed peers, request timeout).
        local_lags: this server's ``all_local_store_partition_lags()``; called from the agent's
            threads and from request handlers, so it must be thread-safe and quick.
        clock_ms: this server's clock (ms); receipt times, decisions and signatures use it.
        announce_interval_ms: how often the announcement is appended to the members topic again.
        sender_threads: workers sending heartbeats and lag reports.
        accepting: whether this server's HTTP endpoint takes requests already. A server that
            starts its agent before it listens passes False and calls :meth:`accepting` once it
            does: until then no peer's heartbeat can reach it, so it decides nothing about its
            peers, and it sends no heartbeat, so they do not count it alive and route to it
            (after `ACCEPTING_WAIT_S` it goes on all the same, with a warning).
    """

    def __init__(
        self,
        kafka: KafkaSettings,
        service_id: str,
        settings: ClusterSettings,
        local_lags: Callable[[], TableLags],
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
        announce_interval_ms: int = 3000,
        sender_threads: int = 8,
        accepting: bool = True,
    ) -> None:
        self._kafka = kafka
        self._service_id = service_id
        self._settings = settings
        self._local_lags = local_lags
        self._clock_ms = clock_ms
        self._announce_interval_ms = announce_interval_ms
        self._seeds = frozenset(normalize_peer(p) for p in settings.peers) - {settings.self_id}
        self._heartbeats = HeartbeatBook(settings.heartbeat)
        self._lags = LagBook()
        self._poster = _Poster(
            settings.auth_secret,
            clock_ms,
            settings.request_timeout_ms,
            max(2, sender_threads),
            settings.tls,
        )
        self._start_ms = clock_ms()
        me = Member(settings.self_id, settings.tags, self._start_ms)
        self._follower = MembersFollower(
            kafka, members_topic(service_id), me, announce_interval_ms=announce_interval_ms
        )
        self._local_queries: Callable[[], Mapping[str, Mapping[str, Any]]] = dict
        self._view_ready = threading.Event()
        self._accepting = threading.Event()
        if accepting:
            self._accepting.set()
        self._accepting_by = time.monotonic() + ACCEPTING_WAIT_S
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started = False

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def settings(self) -> ClusterSettings:
        """This server's cluster settings."""
        return self._settings

    @property
    def self_id(self) -> str:
        """This server's ``host:port``."""
        return self._settings.self_id

    def start(self) -> None:
        """Create the members topic if missing, announce this server and start the threads.

        Raises:
            TopicError: the members topic cannot be created or checked.
            RuntimeError: the agent was started before.
        """
        if self._started:
            raise RuntimeError("a ClusterAgent starts once")
        self._started = True
        self._follower.start()
        self._poster.start()
        heartbeat = self._settings.heartbeat
        self._threads = [
            _repeat(
                self._stop, heartbeat.send_interval_ms, self._send_heartbeats, "cluster-heartbeat"
            ),
            _repeat(self._stop, heartbeat.check_interval_ms, self.check, "cluster-check"),
            _repeat(
                self._stop, self._settings.lag_report_interval_ms, self._send_lags, "cluster-lag"
            ),
        ]

    def stop(self) -> None:
        """Stop every thread (sending nothing more; peers will see this server go down)."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)
        self._follower.stop()
        self._poster.stop()

    # -- membership ------------------------------------------------------------------------------

    def members(self) -> dict[str, Member]:
        """Every server announced on the members topic, by id (always including this one)."""
        return self._follower.members()

    def peers(self) -> frozenset[str]:
        """The other servers this one heartbeats: members, seed peers and heartbeat senders."""
        known = set(self._follower.members()) | self._seeds | self._heartbeats.senders()
        return frozenset(known - {self.self_id})

    # -- heartbeats ------------------------------------------------------------------------------

    def on_heartbeat(self, body: Mapping[str, Any]) -> None:
        """Record a received ``POST /heartbeat`` body (arrival time on this server's clock).

        Raises:
            BadClusterMessage: the body is not a heartbeat.
        """
        sender, _ = parse_heartbeat(body)
        if sender != self.self_id:
            self._heartbeats.record(sender, self._clock_ms())

    def statuses(self) -> dict[str, HostStatus]:
        """Every known server's status at the last check, this server (always alive) included."""
        statuses = self._heartbeats.statuses()
        statuses[self.self_id] = HostStatus(True, self._clock_ms(), self._start_ms)
        return dict(sorted(statuses.items()))

    def live(self) -> frozenset[str]:
        """The servers alive at the last check, this one included (see :meth:`view_ready`)."""
        return live_hosts(self.statuses())

    def view_ready(self) -> bool:
        """Whether :meth:`live` is a view to act on: the members topic was read to its end and
        every member was decided after that.

        Before, a server just (re)started knows only itself: its peers are not down, they are not
        heard of yet. A member decided for the first time is alive until it misses its heartbeats
        (``liveness.decide``), so from then on a peer is down only once it had the time to be heard.
        """
        return self._view_ready.is_set()

    def wait_members_read(self, timeout_s: float) -> bool:
        """Block until the members topic has been read to its end once (False after
        ``timeout_s``)."""
        return self._follower.wait_read_to_end(timeout_s)

    def accepting(self) -> None:
        """This server's HTTP endpoint takes requests from now on: its peers' heartbeats reach it.

        Called by a server that started its agent with ``accepting=False`` (it starts the agent
        before it listens). The peers are decided at once: alive from now on until they miss
        their heartbeats, so a server does not find its peers dead for heartbeats that could not
        reach it while it was starting (it would then claim the controller and take every
        partition, without standbys, until they were heard: a CI failure).
        """
        if not self._accepting.is_set():
            self._accepting.set()
            self.check()

    def _listening(self) -> bool:
        """Whether this server takes requests (:meth:`accepting`), or has waited for it longer
        than `ACCEPTING_WAIT_S` (then it goes on all the same, with a warning)."""
        if self._accepting.is_set():
            return True
        if time.monotonic() < self._accepting_by:
            return False
        log.warning(
            "the server did not say it accepts requests within %g s of its cluster agent's "
            "start; heartbeating and deciding its peers' liveness all the same",
            ACCEPTING_WAIT_S,
        )
        self._accepting.set()
        return True

    def _send_heartbeats(self) -> None:
        if not self._listening():
            # A heartbeat says "alive, ask me": peers would route pull queries to (and place
            # partitions on) a server that refuses connections while it starts (CI47).
            return
        body = heartbeat_body(self.self_id, self._clock_ms())
        for peer in sorted(self.peers()):
            self._poster.post(peer, HEARTBEAT_PATH, body)

    def check(self) -> dict[str, HostStatus]:
        """Decide every peer's status now (the checker thread calls this every check interval).

        Returns:
            The new status of each peer (this server not included).
        """
        members_read = self._follower.read_to_end()  # before peers(): it then lists them all
        if not self._listening():
            return {}  # not listening yet: silence says nothing of the peers
        statuses = self._heartbeats.decide(self.peers(), self._clock_ms())
        if members_read:
            self._view_ready.set()
        return statuses

    # -- lags ------------------------------------------------------------------------------------

    def on_lag(self, body: Mapping[str, Any]) -> None:
        """Keep a received ``POST /lag`` body (unless a newer report of its sender is kept).

        Raises:
            BadClusterMessage: the body is not a lag report.
        """
        sender, report = parse_lag_body(body, self._clock_ms())
        if sender != self.self_id:
            self._lags.record(sender, report)

    def report_queries(self, statuses: Callable[[], Mapping[str, Mapping[str, Any]]]) -> None:
        """Report the persistent queries this server runs (their engine's ``statuses``) with its
        lags from now on (the engine starts after the agent)."""
        self._local_queries = statuses

    def lag_reports(self) -> dict[str, LagReport]:
        """Every server's newest lag report; this server's is read from ``local_lags()`` now."""
        now = self._clock_ms()
        reports = self._lags.reports()
        reports[self.self_id] = LagReport(self._local_lags(), now, now, self._local_queries())
        return dict(sorted(reports.items()))

    def host_lags(self) -> dict[str, dict[str, dict[int, LagInfo]]]:
        """``{host: {table: {partition: LagInfo}}}`` as last reported, this server's live."""
        return {
            host: {table: dict(parts) for table, parts in report.lags.items()}
            for host, report in self.lag_reports().items()
        }

    def host_lag_tables(self) -> dict[str, Any]:
        """``{host: {table: {partition: LagInfo}}}`` from the newest reports (this server's read
        now): what :func:`replica_lags_in` merges for routing."""
        return {host: report.lags for host, report in self.lag_reports().items()}

    def replica_lags(self, table: str, partition: int) -> dict[str, ReplicaLag]:
        """Each replica's position against the highest end offset any server reported.

        Args:
            table: the table.
            partition: the partition number.

        Returns:
            ``{host: ReplicaLag(position, end_offset)}`` for every server that reported the
            partition (reports of servers now down included: routing checks liveness).
        """
        lags = {host: report.lags for host, report in self.lag_reports().items()}
        return merge_replica_lags(lags, table, partition)

    def _send_lags(self) -> None:
        body = lag_body(self.self_id, self._local_lags(), self._clock_ms(), self._local_queries())
        for peer in sorted(live_hosts(self._heartbeats.statuses()) - {self.self_id}):
            self._poster.post(peer, LAG_PATH, body)


def replica_lags_in(
    host_lags: Mapping[str, Any], table: str, partition: int
) -> dict[str, ReplicaLag]:
    """Each replica's lag of ``table``'s ``partition`` in ``host_lags`` (see
    :meth:`ClusterAgent.host_lag_tables`; the merge :meth:`ClusterAgent.replica_lags` does)."""
    return merge_replica_lags(host_lags, table, partition)
