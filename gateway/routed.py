"""Pull queries in a cluster: route each partition to a replica, forward, fan out, merge. Does I/O.

For each partition the query reads, ``cluster.routing.route`` orders the replicas that may serve it
(the active if alive and within the bounds, else live standbys by increasing lag), from the
controller's assignment, this server's view of who is alive and the lag reports. Partitions this
server should serve run here; the others are forwarded, grouped by host and in parallel, as a
``POST /query`` naming the partitions to read (``headwater.internal.partitions``), signed with
the cluster's secret. A host that fails is replaced by the partition's next replica within
the same request; a host its peers mark down while it is answering (a stopped process: no
heartbeats for ``heartbeat.missed.threshold`` checks) is given up at once instead of waited for
until the request timeout. The receiving server reads only those partitions, checks its own live
position against the bound (never trusting gossip alone), and answers with its ``servedBy``.

Read-your-writes: a request may carry ``headwater.read.after`` (the ``writtenOffsets`` an INSERT
answered); for those partitions only replicas that have applied the offsets may serve, and a local
replica waits up to ``READ_AFTER_WAIT_S`` for them.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from headwater.cluster.agent import replica_lags_in
from headwater.cluster.assignment import PartitionId
from headwater.cluster.auth import HEADER, sign
from headwater.cluster.routing import NoReplica, RoutePlan, RoutingBound, route
from headwater.engine.pull._keys import KeyLookup
from headwater.engine.pull.tables import key_partition
from headwater.gateway.errors import KsqlError
from headwater.gateway.forwarding import ExchangeFailed, RoutingInputs
from headwater.gateway.ksql import SUBSTITUTION
from headwater.gateway.services import Services

log = logging.getLogger(__name__)

INTERNAL_PARTITIONS = "headwater.internal.partitions"
"""Request property of a forwarded query: the partitions to read (and no further forwarding)."""
READ_AFTER = "headwater.read.after"
"""Request property: ``[{"topic", "partition", "offset"}]`` that the answer must reflect."""
MAX_STALENESS = "max.staleness.ms"
"""Request property: how old (ms) the newest applied record may be relative to the partition end."""
READ_AFTER_WAIT_S = 2.0
ASSIGNMENT_WAIT_S = 2.0
LOOKUP_FORWARD_TIMEOUT_S = 0.5
"""A forwarded key lookup normally answers in milliseconds; one that has not answered in this long
is served by the next replica (a server that stopped, not yet marked down, must not hold the query
for the full request timeout)."""
UNBOUNDED = 2**63 - 1
DOWN_CHECK_S = 0.05
"""How often a wait for a forwarded answer checks whether its host was marked down meanwhile."""

_pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="pull-forward")


@dataclass(frozen=True, slots=True)
class PartialAnswer:
    """What one host answered for some partitions: rows (JSON values) and its servedBy items."""

    host: str
    partitions: tuple[int, ...]
    rows: list[list[Any]]
    served_by: list[
        tuple[int, str, int, int | None]
    ]  # (partition, host, position, lag; None: unknown)


def forwarded_partitions(properties: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The partitions a forwarded query must read here, or None for a query from a client.

    Raises:
        KsqlError: 40000 for a malformed list.
    """
    value = properties.get(INTERNAL_PARTITIONS)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(p, int) and p >= 0 for p in value):
        raise KsqlError(f"{INTERNAL_PARTITIONS} must be a list of partition numbers", 40000)
    return tuple(value)


def read_after(properties: Mapping[str, Any], topic: str) -> dict[int, int]:
    """{partition: minimum position} from ``headwater.read.after`` for ``topic``.

    Raises:
        KsqlError: 40000 for a malformed token.
    """
    value = properties.get(READ_AFTER)
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise KsqlError(f"{READ_AFTER} must be a JSON list of written offsets", 40000) from None
    if not isinstance(value, list):
        raise KsqlError(f"{READ_AFTER} must be a list of {{topic, partition, offset}}", 40000)
    wanted: dict[int, int] = {}
    for item in value:
        if not (
            isinstance(item, Mapping)
            and isinstance(item.get("partition"), int)
            and isinstance(item.get("offset"), int)
        ):
            raise KsqlError(f"{READ_AFTER}: malformed entry {item!r}", 40000)
        if item.get("topic", topic) == topic:
            wanted[item["partition"]] = max(wanted.get(item["partition"], 0), item["offset"] + 1)
    return wanted


def max_staleness(properties: Mapping[str, Any]) -> int | None:
    """The ``max.staleness.ms`` bound, if given."""
    value = properties.get(MAX_STALENESS)
    if value is None:
        return None
    try:
        parsed = int(value)
    except (TypeError, ValueError):
        raise KsqlError(f"{MAX_STALENESS}: expected a non-negative integer", 40000) from None
    if parsed < 0 or isinstance(value, bool):
        raise KsqlError(f"{MAX_STALENESS}: expected a non-negative integer", 40000)
    return parsed


def needed_partitions(prepared: Any, catalog_types: Mapping[str, Any]) -> list[int]:
    """The partitions a table query reads: those of its keys for a lookup, else all."""
    source, access = prepared.source, prepared.plan.access
    if isinstance(access, KeyLookup):
        return sorted({key_partition(source, catalog_types, k) for k in access.keys})
    return list(range(source.partitions))


def plan_hosts(
    services: Services,
    prepared: Any,
    partitions: Sequence[int],
    properties: Mapping[str, Any],
    *,
    may_wait: bool = True,
) -> dict[int, list[str]]:
    """For each partition, the hosts to try in order.

    Raises:
        KsqlError: 50302 (retriable) when a partition has no assignment yet or no replica within the
            bounds, naming each replica's state and lag.
    """
    cluster, control = services.cluster, services.control
    assert cluster is not None and control is not None
    table = prepared.source.name
    wanted = [PartitionId(table, p) for p in partitions]
    inputs = services.forwarding.routing_inputs(lambda: _routing_inputs(services))
    if any(pid not in inputs.state.partitions for pid in wanted):
        # A table created a moment ago: the controller assigns it within a decide interval.
        control.wait_for(lambda s: all(pid in s.partitions for pid in wanted), ASSIGNMENT_WAIT_S)
        inputs = services.forwarding.routing_inputs(lambda: _routing_inputs(services), fresh=True)
    lag_bound = prepared.options.max_offset_lag
    staleness = max_staleness(properties)
    tokens = read_after(properties, prepared.source.topic)
    plans: dict[int, list[str]] = {}
    for partition in partitions:
        pid = PartitionId(table, partition)
        token = tokens.get(partition)
        decided = _decide(services, inputs, pid, lag_bound, staleness, token)
        if isinstance(decided, NoReplica):  # the inputs may be a few ms old: decide on today's
            inputs = services.forwarding.routing_inputs(
                lambda: _routing_inputs(services), fresh=True
            )
            decided = _decide(services, inputs, pid, lag_bound, staleness, token)
        if isinstance(decided, NoReplica) and token is not None and _holds(services, inputs, pid):
            # Read-your-writes: the write is on its way into this server's replica (a few ms,
            # usually); wait for it here, briefly and bounded, rather than answer 503 at once.
            if not may_wait:
                raise NeedsWait
            tables = services.tables
            assert tables is not None
            tables.restorer.wait_for_positions(table, {partition: token}, READ_AFTER_WAIT_S)
            inputs = services.forwarding.routing_inputs(
                lambda: _routing_inputs(services), fresh=True
            )
            decided = _decide(services, inputs, pid, lag_bound, staleness, token)
        if isinstance(decided, NoReplica):
            raise KsqlError(decided.message(), 50302, kind="generic_error", retriable=True)
        plans[partition] = list(decided.hosts)
    return plans


class NeedsWait(Exception):
    """Routing would wait (for a written offset to arrive here): not on the event loop."""


def _holds(services: Services, inputs: RoutingInputs, pid: PartitionId) -> bool:
    """Whether this server holds a replica of ``pid`` (and materializes tables at all)."""
    leader = inputs.state.partitions.get(pid)
    if leader is None or services.tables is None:
        return False
    return services.advertised in (leader.replicas.active, *leader.replicas.standbys)


def _decide(
    services: Services,
    inputs: RoutingInputs,
    pid: PartitionId,
    lag_bound: int,
    staleness: int | None,
    token: int | None,
) -> RoutePlan | NoReplica:
    """The routing decision for one partition, made once per inputs and bound."""
    key = (pid.table, pid.partition, lag_bound, staleness, token)
    decided = inputs.routes.get(key)
    if decided is None:
        leader = inputs.state.partitions.get(pid)
        if leader is None:
            raise KsqlError(
                f"{pid.table} partition {pid.partition} has no replica assigned yet; retry shortly",
                50302,
                kind="generic_error",
                retriable=True,
            )
        bound = RoutingBound(None if lag_bound >= UNBOUNDED else lag_bound, staleness, token)
        lags = inputs.replica_lags.get((pid.table, pid.partition))
        if lags is None:
            lags = inputs.replica_lags[(pid.table, pid.partition)] = replica_lags_in(
                inputs.host_lags, pid.table, pid.partition
            )
        decided = route(pid, leader.replicas, inputs.alive, lags, bound, services.advertised)
        inputs.routes[key] = decided
    return decided


def _routing_inputs(services: Services) -> RoutingInputs:
    cluster, control = services.cluster, services.control
    assert cluster is not None and control is not None
    return RoutingInputs(
        control.state(),
        {host: status.alive for host, status in cluster.statuses().items()},
        cluster.host_lag_tables(),
        time.monotonic(),
    )


def forward_request(
    services: Services, text: str, properties: Mapping[str, Any], partitions: Sequence[int]
) -> tuple[bytes, dict[str, str]]:
    """The body and headers that ask a peer to answer ``text`` for ``partitions`` (signed when
    the cluster has a secret)."""
    body = orjson.dumps(
        {
            "ksql": text,
            # the text was substituted and bound where the query arrived: never again
            "streamsProperties": {
                **properties,
                INTERNAL_PARTITIONS: list(partitions),
                SUBSTITUTION: False,
            },
        }
    )
    headers = {"Content-Type": "application/json"}
    cluster = services.cluster
    secret = cluster.settings.auth_secret if cluster is not None else None
    if secret:
        headers[HEADER] = sign(secret, int(time.time() * 1000), "POST", "/query", body)
    return body, headers


def partial_answer(
    host: str, partitions: Sequence[int], status: int, content: bytes
) -> PartialAnswer:
    """What a peer answered to :func:`forward_request`.

    Raises:
        KsqlError: the peer answered an error (kept as is: code and message).
        ValueError: the answer is not JSON.
    """
    items = orjson.loads(content)
    if status != 200:
        text = content.decode("utf-8", "replace")
        message = items.get("message", text) if isinstance(items, dict) else text
        code = items.get("error_code", status * 100) if isinstance(items, dict) else 50000
        raise KsqlError(
            f"{host}: {message}", int(code), kind="generic_error", retriable=status in (429, 503)
        )
    for item in items:  # an answer that failed midway (its time budget, its row bound)
        if isinstance(item, dict) and isinstance(error := item.get("errorMessage"), dict):
            raise KsqlError(
                f"{host}: {error.get('message', '')}",
                int(error.get("error_code", 50000)),
                kind="generic_error",
            )
    rows = [item["row"]["columns"] for item in items if "row" in item]
    reports = [s for item in items for s in _served_by_of(item)]
    served = [
        (
            int(s["partition"]),
            str(s.get("host", host)),
            int(s.get("position") or 0),
            None if s.get("lag") is None else int(s["lag"]),
        )
        for s in reports
    ]
    return PartialAnswer(host, tuple(partitions), rows, served)


def _served_by_of(item: Any) -> list[Any]:
    """An answer item's servedBy reports: in the header (or, from a server of an earlier
    version, an item of its own)."""
    if not isinstance(item, dict):
        return []
    header = item.get("header")
    if isinstance(header, dict) and isinstance(header.get("servedBy"), list):
        return list(header["servedBy"])
    served = item.get("servedBy")
    return list(served) if isinstance(served, list) else []


def forward(
    services: Services,
    host: str,
    text: str,
    properties: Mapping[str, Any],
    partitions: Sequence[int],
    timeout_s: float | None = None,
) -> PartialAnswer:
    """Ask ``host`` to answer the query for ``partitions`` (its own replicas only), from a worker
    thread.

    Raises:
        httpx.HTTPError: the host did not answer.
        KsqlError: the host answered an error (kept as is: code and message).
    """
    body, headers = forward_request(services, text, properties, partitions)
    extra: dict[str, Any] = {} if timeout_s is None else {"timeout": timeout_s}
    url = f"{services.forwarding.scheme}://{host}/query"
    response = _client(services).post(url, content=body, headers=headers, **extra)
    return partial_answer(host, partitions, response.status_code, response.content)


async def forward_async(
    services: Services,
    host: str,
    text: str,
    properties: Mapping[str, Any],
    partitions: Sequence[int],
    timeout_s: float,
) -> PartialAnswer:
    """:func:`forward` on the event loop, over the server's kept-alive peer connections.

    Raises:
        ExchangeFailed: the host did not answer.
        KsqlError: the host answered an error.
    """
    body, headers = forward_request(services, text, properties, partitions)
    status, content = await services.forwarding.exchange(host, "/query", body, headers, timeout_s)
    try:
        return partial_answer(host, partitions, status, content)
    except ValueError as error:
        raise ExchangeFailed(f"{host}: the answer is not JSON ({error})") from None


def _client(services: Services) -> httpx.Client:
    timeout_s = (
        services.cluster.settings.request_timeout_ms / 1000 if services.cluster is not None else 2.0
    )
    return services.forwarding.client(timeout_s)


def gather(
    services: Services,
    plans: dict[int, list[str]],
    run_local: Any,
    text: str,
    properties: Mapping[str, Any],
    *,
    forward_timeout_s: float | None = None,
) -> list[PartialAnswer]:
    """Run every partition on its first host (here or forwarded, in parallel); on a host's
    failure move its partitions to their next replica, until each is answered or none is left.

    Raises:
        KsqlError: a partition none of whose replicas answered (50302, retriable), or a
            non-retriable error a host answered.
    """
    pending = {p: list(hosts) for p, hosts in plans.items()}
    answers: list[PartialAnswer] = []
    failures: dict[int, list[str]] = {}
    while pending:
        groups: dict[str, list[int]] = {}
        for partition, hosts in sorted(pending.items()):
            groups.setdefault(hosts[0], []).append(partition)
        futures = {
            host: _pool.submit(forward, services, host, text, properties, parts, forward_timeout_s)
            for host, parts in groups.items()
            if host != services.advertised
        }
        outcomes: dict[str, PartialAnswer | Exception] = {}
        if services.advertised in groups:
            try:
                outcomes[services.advertised] = run_local(tuple(groups[services.advertised]))
            except KsqlError as exc:
                if not exc.retriable:
                    raise
                outcomes[services.advertised] = exc
        for host, future in futures.items():
            try:
                outcomes[host] = _answer_of(services, host, future)
            except KsqlError as exc:
                if not exc.retriable and exc.error_code // 100 == 400:
                    raise
                outcomes[host] = exc
            except (httpx.HTTPError, ValueError, ExchangeFailed) as exc:
                outcomes[host] = exc
        for host, outcome in outcomes.items():
            for partition in groups[host]:
                if isinstance(outcome, PartialAnswer):
                    pending.pop(partition)
                    continue
                log.info(
                    "pull: %s failed for partition %d (%s); trying the next replica",
                    host,
                    partition,
                    outcome,
                )
                failures.setdefault(partition, []).append(f"{host}: {outcome}")
                pending[partition].pop(0)
                if not pending[partition]:
                    raise KsqlError(
                        f"no replica answered for partition {partition}: "
                        + "; ".join(failures[partition]),
                        50302,
                        kind="generic_error",
                        retriable=True,
                    )
            if isinstance(outcome, PartialAnswer):
                answers.append(outcome)
    answers.sort(key=lambda a: min(a.partitions))
    return answers


def _answer_of(services: Services, host: str, future: Future[PartialAnswer]) -> PartialAnswer:
    """The forwarded answer, once it comes; given up when ``host`` is marked down meanwhile (the
    thread still waits out its request timeout, its answer unused).

    Raises:
        ExchangeFailed: ``host`` was marked down before it answered.
    """
    while True:
        try:
            return future.result(timeout=DOWN_CHECK_S)
        except TimeoutError:
            if services.cluster is not None and host not in services.cluster.live():
                future.cancel()
                raise ExchangeFailed(f"{host}: marked down while answering") from None
