"""The cluster's HTTP endpoints: ``POST /heartbeat``, ``POST /lag`` and ``GET /clusterStatus``.

Handlers parse, hand the body to the server's :class:`~headwater.cluster.agent.ClusterAgent` and
render ksqlDB's shapes (``HeartbeatResponse``/``LagReportingResponse``: ``{"isOk": true}``;
``ClusterStatusResponse``). They find the agent as ``services_of(request).cluster`` and the
controller's view as ``services_of(request).control`` (an object with ``state()`` returning
``cluster.epochs.ControlState``); either may be absent or None. Internal requests are checked by
:func:`require_internal_auth` before anything else, so an unauthenticated one gets 401 and changes
nothing. Does no I/O besides the request itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from headwater.cluster import auth
from headwater.cluster.agent import BadClusterMessage, ClusterAgent, LagReport, wall_clock_ms
from headwater.cluster.epochs import ControlState
from headwater.gateway.errors import KsqlError, bad_request
from headwater.gateway.ksql import read_body
from headwater.gateway.services import Limits, services_of

UNAUTHORIZED = 40100


def _agent(request: Request) -> ClusterAgent:
    agent: ClusterAgent | None = getattr(services_of(request), "cluster", None)
    if agent is None:
        raise KsqlError(
            "this server does not run as part of a cluster", 40400, kind="generic_error"
        )
    return agent


def _control_state(request: Request) -> ControlState | None:
    control = getattr(services_of(request), "control", None)
    if control is None:
        return None
    state: ControlState | None = control.state()
    return state


async def require_internal_auth(
    request: Request, secret: str | None, *, now_ms: int | None = None
) -> None:
    """Refuse an internal request whose ``X-Headwater-Auth`` signature is missing or wrong.

    The signature covers the method, the path and the raw body (``cluster.auth.verify``). With no
    secret configured every request passes.

    Args:
        request: the incoming request (its body is read; Starlette keeps it for the handler).
        secret: ``cluster.auth.secret``, or None when internal auth is off.
        now_ms: this server's clock (default: the wall clock).

    Raises:
        KsqlError: 40100 (HTTP 401) with the reason.
    """
    if secret is None:
        return
    check_internal_auth(request, secret, await request.body(), now_ms=now_ms)


def check_internal_auth(
    request: Request, secret: str | None, body: bytes, *, now_ms: int | None = None
) -> None:
    """:func:`require_internal_auth` for a handler that has read the raw body itself.

    Raises:
        KsqlError: 40100 (HTTP 401) with the reason.
    """
    if secret is None:
        return
    verdict = auth.verify(
        secret,
        request.headers.get(auth.HEADER),
        wall_clock_ms() if now_ms is None else now_ms,
        request.method,
        request.url.path,
        body,
    )
    if not verdict.ok:
        raise KsqlError(
            f"unauthorized internal request: {verdict.reason}", UNAUTHORIZED, kind="generic_error"
        )


async def _bounded(request: Request) -> None:
    """Read the body once, refusing one larger than the server's body limit (413) before it is
    buffered whole; Starlette then hands the same bytes to ``request.body()``."""
    if not hasattr(request, "_body"):
        limits = getattr(services_of(request), "limits", None) or Limits()
        limit = limits.max_body_bytes
        request._body = await read_body(request, limit, limits.body_read_timeout_s)


async def _json_object(request: Request) -> Mapping[str, Any]:
    try:
        body = json.loads(await request.body())
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise bad_request(f"the request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    return body


async def heartbeat_endpoint(request: Request) -> Response:
    """``POST /heartbeat``: a peer's heartbeat (ksqlDB's ``HeartbeatMessage``)."""
    agent = _agent(request)
    await _bounded(request)
    await require_internal_auth(request, agent.settings.auth_secret)
    body = await _json_object(request)
    try:
        agent.on_heartbeat(body)
    except BadClusterMessage as exc:
        raise bad_request(f"bad heartbeat: {exc}") from exc
    return JSONResponse({"isOk": True})


async def lag_endpoint(request: Request) -> Response:
    """``POST /lag``: a peer's store lags."""
    agent = _agent(request)
    await _bounded(request)
    await require_internal_auth(request, agent.settings.auth_secret)
    body = await _json_object(request)
    try:
        agent.on_lag(body)
    except BadClusterMessage as exc:
        raise bad_request(f"bad lag report: {exc}") from exc
    return JSONResponse({"isOk": True})


def host_store_lags(report: LagReport | None) -> dict[str, Any]:
    """ksqlDB's ``HostStoreLags`` of one server's report (empty when it sent none)."""
    if report is None:
        return {"stateStoreLags": {}, "updateTimeMs": 0}
    return {
        "stateStoreLags": {
            table: {
                "lagByPartition": {
                    str(partition): {
                        "currentOffsetPosition": info.current_offset_position,
                        "endOffsetPosition": info.end_offset_position,
                        "offsetLag": info.offset_lag,
                    }
                    for partition, info in sorted(parts.items())
                },
                "size": len(parts),
            }
            for table, parts in sorted(report.lags.items())
        },
        "updateTimeMs": report.received_ms,
    }


def active_standby_per_query(state: ControlState | None) -> dict[str, dict[str, dict[str, Any]]]:
    """ksqlDB's ``activeStandbyPerQuery`` of every server, keyed by server id, then table.

    headwater materializes one store per table, so the table names the "query" and its store,
    and its partitions are listed with the table as topic.
    """
    hosts: dict[str, dict[str, dict[str, Any]]] = {}
    if state is None:
        return hosts

    def entry(host: str, table: str) -> dict[str, Any]:
        return hosts.setdefault(host, {}).setdefault(
            table,
            {
                "activeStores": [],
                "activePartitions": [],
                "standByStores": [],
                "standByPartitions": [],
            },
        )

    for partition, leader in sorted(state.partitions.items()):
        where = {"topic": partition.table, "partition": partition.partition}
        active = entry(leader.active, partition.table)
        active["activeStores"] = [partition.table]
        active["activePartitions"].append(where)
        for standby in leader.standbys:
            row = entry(standby, partition.table)
            row["standByStores"] = [partition.table]
            row["standByPartitions"].append(where)
    return hosts


async def cluster_status_endpoint(request: Request) -> Response:
    """``GET /clusterStatus``: this server's view of every server (ksqlDB's shape)."""
    agent = _agent(request)
    statuses = agent.statuses()
    reports = agent.lag_reports()
    state = _control_state(request)
    per_query = active_standby_per_query(state)
    cluster = {
        host: {
            "hostAlive": status.alive,
            "lastStatusUpdateMs": status.last_heartbeat_ms or 0,
            "activeStandbyPerQuery": per_query.get(host, {}),
            "hostStoreLags": host_store_lags(reports.get(host)),
        }
        for host, status in statuses.items()
    }
    body: dict[str, Any] = {"clusterStatus": cluster}
    if state is not None:  # headwater's addition: who decides, and under which epoch
        body["controller"] = state.controller
        body["controllerEpoch"] = state.controller_epoch
    return JSONResponse(body)


CLUSTER_ROUTES = [
    Route("/heartbeat", heartbeat_endpoint, methods=["POST"]),
    Route("/lag", lag_endpoint, methods=["POST"]),
    Route("/clusterStatus", cluster_status_endpoint, methods=["GET"]),
]
"""To be added to ``gateway.app.ROUTES``."""
