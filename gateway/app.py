"""The Starlette application: an explicit route list and one exception-handler table.

No decorators, no ``on_startup``, no globals: ``create_app`` takes the :class:`Services` (built by
the caller, or by ``lifespan`` when given) and stores it where ``services_of`` finds it. Each
package's root error becomes ksqlDB's error body, with HTTP status ``error_code // 100``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from headwater.engine.errors import EngineError
from headwater.gateway.auth import Authentication, BasicAuthMiddleware
from headwater.gateway.cluster_api import CLUSTER_ROUTES
from headwater.gateway.console_routes import CONSOLE_ROUTES
from headwater.gateway.errors import KsqlError, error_body
from headwater.gateway.info import healthcheck_endpoint, info_endpoint
from headwater.gateway.inserts import inserts_stream_endpoint
from headwater.gateway.jsonout import dumpb
from headwater.gateway.ksql import ksql_endpoint
from headwater.gateway.metrics import HttpMetricsMiddleware, metrics_endpoint, route_templates
from headwater.gateway.openapi import openapi_document
from headwater.gateway.queries import query_status_endpoint
from headwater.gateway.query import close_query_endpoint, query_endpoint, query_stream_endpoint
from headwater.gateway.schema_registry_api import ROUTES as REGISTRY_ROUTES
from headwater.gateway.services import Services
from headwater.gateway.status import command_status_endpoint, status_endpoint
from headwater.kafka.errors import KafkaEdgeError
from headwater.metastore.errors import MetastoreError
from headwater.sqlparse_ext.errors import ParseError
from headwater.store.errors import StoreError

log = logging.getLogger(__name__)


async def openapi_endpoint(_request: Request) -> Response:
    """``GET /openapi.json``: the API described for tools."""
    return JSONResponse(openapi_document())


ROUTES = [
    Route("/ksql", ksql_endpoint, methods=["POST"]),
    Route("/query", query_endpoint, methods=["POST"]),
    Route("/query-stream", query_stream_endpoint, methods=["POST"]),
    Route("/close-query", close_query_endpoint, methods=["POST"]),
    Route("/inserts-stream", inserts_stream_endpoint, methods=["POST"]),
    Route("/info", info_endpoint, methods=["GET"]),
    Route("/healthcheck", healthcheck_endpoint, methods=["GET"]),
    Route("/status", status_endpoint, methods=["GET"]),
    Route("/status/{command_id:path}", command_status_endpoint, methods=["GET"]),
    Route("/openapi.json", openapi_endpoint, methods=["GET"]),
    Route("/queryStatus", query_status_endpoint, methods=["GET"]),
    Route("/metrics", metrics_endpoint, methods=["GET"]),
    *CLUSTER_ROUTES,
    *REGISTRY_ROUTES,
    *CONSOLE_ROUTES,
]


def error_response(
    error_code: int,
    message: str,
    *,
    kind: str = "statement_error",
    statement_text: str = "",
    entities: tuple[dict[str, Any], ...] | list[dict[str, Any]] = (),
    line: int | None = None,
    column: int | None = None,
    retriable: bool = False,
) -> Response:
    """ksqlDB's error body, with HTTP status ``error_code // 100`` (500 if that is no status)."""
    body = error_body(
        error_code,
        message,
        kind=kind,
        statement_text=statement_text,
        entities=entities,
        line=line,
        column=column,
    )
    status = error_code // 100 if 400 <= error_code // 100 < 600 else 500
    headers = {"Retry-After": "1"} if retriable and status in (429, 503) else None
    # dumpb writes what JSONResponse cannot: a lone surrogate the client sent, echoed in a message
    return Response(dumpb(body), status_code=status, headers=headers, media_type="application/json")


async def _ksql_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, KsqlError)
    return error_response(
        exc.error_code,
        exc.message,
        kind=exc.kind,
        statement_text=exc.statement_text,
        entities=exc.entities,
        line=exc.line,
        column=exc.column,
        retriable=exc.retriable,
    )


async def _parse_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ParseError)
    return error_response(
        exc.error_code,
        exc.message,
        statement_text=exc.statement_text,
        line=exc.line,
        column=exc.column,
    )


async def _metastore_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, MetastoreError)
    return error_response(exc.error_code, exc.message, retriable=exc.retriable)


async def _kafka_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, KafkaEdgeError)
    return error_response(exc.error_code, str(exc), kind="generic_error", retriable=exc.retriable)


async def _engine_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, EngineError)
    return error_response(exc.error_code, exc.message, retriable=exc.retriable)


async def _store_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StoreError)
    return error_response(exc.error_code, str(exc), kind="generic_error", retriable=exc.retriable)


async def _http_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(exc.status_code * 100, exc.detail, kind="generic_error")


async def _server_error(request: Request, exc: Exception) -> Response:
    # a bug: the client gets its one-line reason, the log the traceback
    log.error(
        "internal error answering %s %s",
        request.method,
        request.url.path,
        exc_info=(type(exc), exc, exc.__traceback__),
    )
    return error_response(50000, f"internal error: {exc!r}", kind="generic_error")


ExceptionHandler = Callable[[Request, Exception], Awaitable[Response]]


def _counted(handler: ExceptionHandler) -> ExceptionHandler:
    """``handler``, counting its answer's error code in ``/metrics``' ``headwater_errors``."""

    async def counted(request: Request, exc: Exception) -> Response:
        response = await handler(request, exc)
        metrics = getattr(getattr(request.app.state, "services", None), "metrics", None)
        if metrics is not None:
            try:
                code = int(orjson.loads(response.body).get("error_code", 0))
            except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
                code = response.status_code * 100
            metrics.error(code)
        return response

    return counted


EXCEPTION_HANDLERS: dict[Any, ExceptionHandler] = {
    error: _counted(handler)
    for error, handler in {
        KsqlError: _ksql_error,
        ParseError: _parse_error,
        MetastoreError: _metastore_error,
        KafkaEdgeError: _kafka_error,
        EngineError: _engine_error,
        StoreError: _store_error,
        HTTPException: _http_error,
        Exception: _server_error,
    }.items()
}
"""Each package's root error (and the gateway's own) -> its ksqlDB error body."""


KSQL_V1 = "application/vnd.ksql.v1+json"


class KsqlMediaType:
    """JSON answers go out as ``application/vnd.ksql.v1+json`` when the request asks for that
    media type in Accept, as ksqlDB answers its clients (a pure ASGI middleware: a request that
    does not ask passes straight through)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not any(
            name == b"accept" and b"application/vnd.ksql.v1+json" in value
            for name, value in scope["headers"]
        ):
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {
                    **message,
                    "headers": [
                        (name, KSQL_V1.encode())
                        if name == b"content-type" and value.startswith(b"application/json")
                        else (name, value)
                        for name, value in message.get("headers", ())
                    ],
                }
            await send(message)

        await self.app(scope, receive, sending)


def create_app(
    services: Services,
    *,
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]] | None = None,
    authentication: Authentication | None = None,
    local_token: str | None = None,
) -> Starlette:
    """The HTTP API over ``services``.

    Args:
        services: what the handlers use.
        lifespan: an optional lifespan (e.g. one that stops the runner on shutdown).
        authentication: require ``Authorization: Basic`` of these users (``gateway.auth``);
            None: clients are not authenticated (``authentication.method=NONE``).
        local_token: lets this server's own processes (Spark's) reach its schema registry
            without a user (``gateway.auth.BasicAuthMiddleware``).
    """
    middleware = [
        # outermost: it sees every answer, the authentication's 401s included
        Middleware(
            HttpMetricsMiddleware, metrics=services.metrics, templates=route_templates(ROUTES)
        ),
        Middleware(KsqlMediaType),
    ]
    if authentication is not None:

        def secret() -> str | None:
            return services.cluster.settings.auth_secret if services.cluster is not None else None

        middleware.append(
            Middleware(
                BasicAuthMiddleware,
                settings=authentication,
                secret=secret,
                max_body_bytes=services.limits.max_body_bytes,
                local_token=local_token,
            )
        )
    app = Starlette(
        routes=ROUTES,
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=lifespan,
        middleware=middleware,
    )
    app.state.services = services
    app.state.push_queries = services.push
    services.metrics.watch(services)
    return app
