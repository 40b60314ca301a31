"""Persistent queries as ksqlDB's REST entities: SHOW QUERIES [EXTENDED], EXPLAIN, DESCRIBE ... EXTENDED.

Which queries exist comes from the catalog (identical on every server); how a query is doing
(RUNNING, ERROR with the reason, PENDING while Spark starts, records written, records skipped and
the last error) from the query engine of the server that runs it: this one, or, in a cluster, the
controller, asked over ``GET /queryStatus`` (2 s at most). When no answer comes the state is
UNKNOWN, with the reason, rather than a guess.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from headwater.cluster.auth import HEADER, sign
from headwater.engine.persistent.analyzer import QueryDescription, describe_query
from headwater.engine.persistent.query_plan import QueryCompileError
from headwater.engine.persistent.query_run import parse_persistent
from headwater.gateway.errors import Entity, KsqlError
from headwater.gateway.push_registry import RunningPush
from headwater.gateway.schemas import type_schema
from headwater.gateway.services import Services, services_of
from headwater.metastore.catalog import Catalog, Query, Source
from headwater.sqlparse_ext import statements as ast

_REMOTE_TIMEOUT_S = 2.0


def status_of(
    services: Services, query_id: str, remote: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The query's status: from this server's engine, else from ``remote`` (`remote_statuses`)."""
    engine = services.queries
    found = engine.statuses().get(query_id) if engine is not None else None
    if found is None and remote is not None:
        found = remote.get(query_id)
    if found is not None:
        return found
    if services.control is not None:
        return {"state": "UNKNOWN", "message": "the controller, which runs it, did not answer"}
    return {"state": "UNKNOWN", "message": "this server does not run persistent queries"}


def remote_statuses(services: Services) -> dict[str, dict[str, Any]]:
    """In a cluster, the statuses of the queries the controller runs (empty when this server is
    the controller, is on its own, or the controller does not answer in time)."""
    control = services.control
    if control is None or control.is_controller():
        return {}
    controller = control.state().controller
    if not controller:
        return {}
    secret = services.cluster.settings.auth_secret if services.cluster is not None else None
    headers = (
        {HEADER: sign(secret, int(time.time() * 1000), "GET", "/queryStatus", b"")}
        if secret
        else {}
    )
    try:
        answer = services.forwarding.client(_REMOTE_TIMEOUT_S).get(
            f"{services.forwarding.scheme}://{controller}/queryStatus",
            headers=headers,
            timeout=_REMOTE_TIMEOUT_S,
        )
        queries = answer.json().get("queries", {}) if answer.status_code == 200 else {}
    except (httpx.HTTPError, ValueError):
        return {}
    return queries if isinstance(queries, dict) else {}


async def query_status_endpoint(request: Request) -> Response:
    """``GET /queryStatus``: the queries this server runs and their statuses."""
    services = services_of(request)
    engine = services.queries
    return JSONResponse(
        {
            "server": services.advertised,
            "spark": engine.spark_state if engine is not None else "DISABLED",
            "queries": engine.statuses() if engine is not None else {},
        }
    )


def query_summary(
    services: Services,
    query: Query,
    catalog: Catalog,
    remote: dict[str, dict[str, Any]] | None = None,
) -> Entity:
    """ksqlDB's ``RunningQuery`` (one item of SHOW QUERIES)."""
    status = status_of(services, query.id, remote)
    sink = catalog.sources.get(query.sink) if query.sink else None
    return {
        "queryString": query.statement_text,
        "sinks": [query.sink] if query.sink else [],
        "sinkKafkaTopics": [sink.topic] if sink else [],
        "id": query.id,
        "statusCount": {status["state"]: 1},
        "queryType": "PERSISTENT",
        "state": status["state"],
    }


def show_queries(services: Services, extended: bool) -> tuple[str, Entity]:
    """(@type, body) of SHOW QUERIES [EXTENDED]."""
    catalog = services.runner.catalog
    queries = sorted(catalog.queries.values(), key=lambda q: q.id)
    remote = remote_statuses(services) if queries else {}
    if extended:
        return "query_descriptions", {
            "queryDescriptions": [query_description(services, q, catalog, remote) for q in queries]
        }
    listed = [query_summary(services, q, catalog, remote) for q in queries]
    statuses = services.queries.statuses() if services.queries is not None else {}
    listed += [push_summary(p, statuses) for p in services.push.listed()]
    return "queries", {"queries": listed}


def push_state(push: RunningPush, statuses: Mapping[str, Mapping[str, Any]]) -> str:
    """A running push query's state: its transient Spark query's in ``statuses`` (the engine's;
    PENDING until Spark finished its first micro-batch, RUNNING, ERROR), or RUNNING when it reads
    its source's topic itself."""
    if push.engine_query_id is None:
        return "RUNNING"
    return str((statuses.get(push.engine_query_id) or {}).get("state") or "PENDING")


def push_summary(push: RunningPush, statuses: Mapping[str, Mapping[str, Any]]) -> Entity:
    """ksqlDB's ``RunningQuery`` of a push query this server runs (queryType PUSH)."""
    state = push_state(push, statuses)
    return {
        "queryString": push.statement_text,
        "sinks": [],
        "sinkKafkaTopics": [],
        "id": push.query_id,
        "statusCount": {state: 1},
        "queryType": "PUSH",
        "state": state,
    }


def query_description(
    services: Services,
    query: Query,
    catalog: Catalog,
    remote: dict[str, dict[str, Any]] | None = None,
) -> Entity:
    """ksqlDB's ``QueryDescription`` of a running query (EXPLAIN, SHOW QUERIES EXTENDED)."""
    status = status_of(services, query.id, remote)
    select, sink_name = parse_persistent(query.statement_text)
    sink = catalog.sources.get(sink_name)
    compiled = _describe(select, catalog, sink_name)
    errors = []
    if status.get("lastError"):
        errors.append(
            {
                "timestamp": status.get("lastErrorMs", 0),
                "errorMessage": status["lastError"],
                "type": "USER",
            }
        )
    if status["state"] == "ERROR" and status.get("message"):
        errors.append({"timestamp": 0, "errorMessage": status["message"], "type": "SYSTEM"})
    return {
        "id": query.id,
        "statementText": query.statement_text,
        "windowType": None,
        "fields": _fields(compiled),
        "sources": list(query.sources),
        "sinks": [sink_name],
        "topology": "",
        "executionPlan": "\n".join(compiled.steps),
        "overriddenProperties": {},
        "ksqlHostQueryStatus": {services.advertised: status["state"]},
        "queryType": "PERSISTENT",
        "queryErrors": errors,
        "tasksMetadata": [],
        "state": status["state"],
        "sinkKafkaTopics": [sink.topic] if sink else [],
        "statistics": _statistics(status),
    }


def explain(services: Services, statement: ast.Explain) -> Entity:
    """EXPLAIN <query id> or EXPLAIN <CREATE ... AS SELECT | INSERT INTO ... SELECT>."""
    catalog = services.runner.catalog
    if statement.query_id is not None:
        wanted = statement.query_id.upper()
        query = next((q for q in catalog.queries.values() if q.id.upper() == wanted), None)
        if query is None:
            raise KsqlError(
                f"Query with id:{statement.query_id} does not exist, use SHOW "
                "QUERIES to view the full set of running queries.",
                40001,
            )
        description = query_description(services, query, catalog, remote_statuses(services))
    else:
        inner = statement.statement
        if not isinstance(inner, (ast.CreateAsSelect, ast.InsertInto)):
            raise KsqlError(
                "EXPLAIN explains persistent queries (CREATE ... AS SELECT, INSERT "
                "INTO ... SELECT) and query ids.",
                40001,
            )
        sink_name = inner.name if isinstance(inner, ast.CreateAsSelect) else inner.target
        compiled = _describe(inner.query, catalog, sink_name)
        description = {
            "id": "",
            "statementText": inner.text.strip(),
            "windowType": None,
            "fields": _fields(compiled),
            "sources": [compiled.source],
            "sinks": [sink_name],
            "topology": "",
            "executionPlan": "\n".join(compiled.steps),
            "overriddenProperties": {},
            "ksqlHostQueryStatus": {},
            "queryType": "PERSISTENT",
            "queryErrors": [],
            "tasksMetadata": [],
            "state": "",
        }
    return {
        "@type": "queryDescription",
        "statementText": statement.text,
        "queryDescription": description,
        "warnings": [],
    }


def extended_source(
    services: Services, source: Source, catalog: Catalog, description: Entity
) -> Entity:
    """DESCRIBE ... EXTENDED: the description with the queries' statuses, statistics and errors."""
    writers = catalog.writers_of(source.name)
    readers = catalog.readers_of(source.name)
    remote = remote_statuses(services) if writers or readers else {}
    stats = [status_of(services, q.id, remote) for q in writers]
    records = sum(int(s.get("records", 0)) for s in stats)
    errors = sum(int(s.get("errors", 0)) for s in stats)
    last = max(stats, key=lambda s: int(s.get("lastErrorMs", 0)), default={})
    error_stats = ""
    if writers:
        error_stats = f"processing-errors: {errors}"
        if last.get("lastError"):
            error_stats += f" last-error: {last['lastError']} at {_when(last)}"
    description.update(
        extended=True,
        readQueries=[query_summary(services, q, catalog, remote) for q in readers],
        writeQueries=[query_summary(services, q, catalog, remote) for q in writers],
        statistics=f"messages-written: {records}" if writers else "",
        errorStats=error_stats,
    )
    return description


def _describe(select: ast.Query, catalog: Catalog, sink_name: str) -> QueryDescription:
    try:
        return describe_query(select, catalog, sink_name)
    except QueryCompileError as error:
        raise KsqlError(error.message, 40001) from error


def _fields(compiled: QueryDescription) -> list[Entity]:

    return [
        {"name": c.name, "schema": type_schema(c.type.sql()), **({"type": "KEY"} if c.key else {})}
        for c in compiled.columns
    ]


def _statistics(status: dict[str, Any]) -> str:
    if "records" not in status:
        return ""
    return (
        f"messages-written: {status['records']} batches: {status.get('batches', 0)} "
        f"processing-errors: {status.get('errors', 0)}"
    )


def _when(status: dict[str, Any]) -> str:
    ms = int(status.get("lastErrorMs", 0))
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds")
