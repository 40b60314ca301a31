"""``POST /query`` and ``POST /query-stream``: pull queries in ksqlDB's shapes. Parses and renders only.
(Push queries and PRINT, which ``/query`` also answers, stream from ``push.py``.)

``/query`` answers a JSON array: ``{"header": {"queryId", "schema", "servedBy"}}``, one
``{"row": {"columns"}}`` per row, for a stream ``{"finalMessage": "Query Completed"}`` as ksqlDB
ends a stream's pull query. ``servedBy`` (per partition: the serving host, its position and lag:
the staleness of the answer, never hidden) is an extra field of the header, where ksqlDB's clients
ignore it, as is ``writtenBy`` on a table written by persistent queries (each query's id, state and
lag behind its sources: ``gateway.writers``); every item is one of ksqlDB's kinds. With ``Accept: application/x-ndjson`` (or
``application/vnd.ksqlapi.delimited.v1``) the same items come one per line. ``/query-stream`` (the
body is ``{"sql", "properties", "sessionVariables"}``) answers a header object (``queryId``,
``columnNames``, ``columnTypes``, ``servedBy``) then one JSON array per row, one per line; with
``Accept: application/json`` one JSON array of the same items. With ``Accept:
application/vnd.ksql.v1+protobuf`` either endpoint answers a pull query as ksqlDB does, a JSON array
whose rows are protobuf messages (``gateway.protobuf_rows``); ``/query-stream`` with ``Accept:
application/vnd.ksql.v1+json`` answers ``/query``'s items, as ksqlDB's does.

Queries wait in a bounded queue (``Admission``): overload answers 429 at once; scans also take
one of ``ksql.query.pull.table.scan.max.concurrent`` slots, held until their answer is written.
A scan's answer is streamed: rows are read, rendered and sent in chunks from a worker thread, so
neither the event loop nor memory carries the whole answer; if it runs out of its time budget or
row bound midway, it ends with an ``errorMessage`` item (ksqlDB's item for an error mid-stream).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import orjson
from starlette.concurrency import iterate_in_threadpool, run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from headwater.gateway import push, routed
from headwater.gateway.cluster_api import check_internal_auth
from headwater.gateway.errors import KsqlError, bad_request
from headwater.gateway.forwarding import ExchangeFailed
from headwater.gateway.jsonout import dumpb
from headwater.gateway.ksql import (
    KsqlRequest,
    decode_parameters,
    decode_request,
    read_body,
    variables_text,
)
from headwater.gateway.plan_cache import Lookup
from headwater.gateway.protobuf_rows import MEDIA_TYPE as PROTOBUF
from headwater.gateway.protobuf_rows import protobuf_items
from headwater.gateway.pull import (
    NeedsForwarding,
    PreparedPull,
    PullAnswer,
    answer_of,
    execute_prepared,
    prepare_pull,
)
from headwater.gateway.services import Services, services_of
from headwater.sqlparse_ext import statements as ast
from headwater.sqlparse_ext.limits import ParseLimits

NDJSON = "application/x-ndjson"
KSQL_V1_JSON = "application/vnd.ksql.v1+json"
DELIMITED = "application/vnd.ksqlapi.delimited.v1"
JSON = "application/json"
TEXT = "text/plain; charset=utf-8"


def _one_statement(request: KsqlRequest, limits: ParseLimits) -> ast.Statement:
    statements = request.statements(limits)
    if len(statements) != 1:
        raise KsqlError(
            f"/query runs exactly one SELECT statement; this request has {len(statements)}",
            40001,
            statement_text=request.ksql,
        )
    return statements[0]


def _only_select(statement: ast.Statement) -> ast.Select:
    if not isinstance(statement, ast.Select):
        raise KsqlError(
            "only SELECT statements can be sent to the /query endpoint; use /ksql for others",
            40001,
            statement_text=statement.text,
            line=statement.line,
            column=statement.column,
        )
    return statement


def _wants(request: Request, *types: str) -> bool:
    accept = request.headers.get("accept", "")
    return any(t in accept for t in types)


async def query_endpoint(request: Request) -> Response:
    """``POST /query``: one pull query, answered as ksqlDB's JSON array (or one item per line)."""
    services = services_of(request)
    body = await read_body(
        request, services.limits.max_body_bytes, services.limits.body_read_timeout_s
    )
    decoded = decode_request(body)
    if routed.INTERNAL_PARTITIONS in decoded.streams_properties:
        _check_internal(services, request, body)
    lookup = services.plans.lookup(decoded, services)
    if lookup.prepared is not None:  # a pull query of a known shape: no parse, no planning
        answer = await _run(services, lookup.prepared, decoded.streams_properties)
        return await _pull_response(request, services, answer, _items_for(request, query_items))
    parsed = await run_in_threadpool(
        _one_statement, decoded, services.limits.parse
    )  # a big text must not stall the loop
    if isinstance(parsed, ast.Print):
        return await _print(request, services, parsed, decoded.streams_properties)
    statement = _only_select(parsed)
    if statement.query.emit == "CHANGES":
        _refuse_protobuf_push(request)
        return await _push(request, services, statement, decoded.streams_properties, "array")
    answer = await _answer(services, statement, decoded.streams_properties, lookup)
    return await _pull_response(request, services, answer, _items_for(request, query_items))


_Items = Callable[[PullAnswer], Iterator[Any]]
_BIG_ANSWER_ROWS = 200
"""Answers with more rows are rendered in a worker thread, not on the event loop."""


async def _pull_response(
    request: Request,
    services: Services,
    answer: PullAnswer,
    items: _Items,
    lines_type: str = NDJSON,
    lines: bool | None = None,
) -> Response:
    """The answer as a JSON array (or one item a line), streamed when the answer is."""
    if lines is None:
        lines = _wants(request, NDJSON, DELIMITED)
    if answer.stream is not None:
        chunks = _line_chunks(items(answer)) if lines else _array_chunks(items(answer))
        return StreamingResponse(
            _released(chunks, services), media_type=lines_type if lines else JSON
        )
    if lines:
        return StreamingResponse(_lines(items(answer)), media_type=lines_type)
    if len(answer.rows) > _BIG_ANSWER_ROWS:
        return Response(await run_in_threadpool(_array, items(answer)), media_type=JSON)
    return Response(_array(items(answer)), media_type=JSON)


async def _released(chunks: Iterator[bytes], services: Services) -> AsyncIterator[bytes]:
    """``chunks``, computed in worker threads; the scan's slot is released when they end (or the
    client goes away)."""
    try:
        async for chunk in iterate_in_threadpool(chunks):
            yield chunk
    finally:
        services.scans.release()


async def query_stream_endpoint(request: Request) -> Response:
    """``POST /query-stream``: a header object, then one JSON array per row."""
    services = services_of(request)
    body = await read_body(
        request, services.limits.max_body_bytes, services.limits.body_read_timeout_s
    )
    decoded = _decode_stream_request(body)
    properties = decoded.streams_properties
    lookup = services.plans.lookup(decoded, services)
    if lookup.prepared is not None:
        answer = await _run(services, lookup.prepared, properties)
    else:
        statement = _only_select(
            await run_in_threadpool(_one_statement, decoded, services.limits.parse)
        )
        if statement.query.emit == "CHANGES":
            _refuse_protobuf_push(request)
            return await _push(request, services, statement, properties, "lines")
        answer = await _answer(services, statement, properties, lookup)
    if _wants(request, PROTOBUF, KSQL_V1_JSON):  # ksqlDB's StreamedRow items, as /query's
        return await _pull_response(
            request, services, answer, _items_for(request, query_items), lines=False
        )
    array = _wants(request, JSON) and not _wants(request, DELIMITED, NDJSON)
    return await _pull_response(request, services, answer, stream_items, DELIMITED, not array)


def _items_for(request: Request, items: _Items) -> _Items:
    """``items``, or the protobuf rows' items when the request asks for them."""
    return protobuf_answer_items if _wants(request, PROTOBUF) else items


def _refuse_protobuf_push(request: Request) -> None:
    if _wants(request, PROTOBUF):
        raise KsqlError(
            f"{PROTOBUF} answers pull queries only; ask for push query rows as JSON",
            40600,
            kind="generic_error",
        )


async def _push(
    request: Request,
    services: Services,
    statement: ast.Select,
    properties: Mapping[str, Any],
    shape: str,
) -> Response:
    """A push query: its start is fixed (in a worker thread: it reads the ends from Kafka) before
    its header is sent."""
    registry = push.registry_of(request)
    started = time.perf_counter()
    try:
        query_id, plan, follower, stop = await run_in_threadpool(
            push.start_push, services, registry, statement, properties
        )
    except KsqlError as refused:
        services.metrics.push_refused.labels(str(refused.error_code)).inc()
        raise
    services.metrics.push_began(time.perf_counter() - started)
    body = push.stream_push(request, registry, query_id, plan, follower, stop, shape=shape)
    return StreamingResponse(body, media_type=JSON if shape == "array" else DELIMITED)


async def _print(
    request: Request, services: Services, statement: ast.Print, properties: Mapping[str, Any]
) -> Response:
    """PRINT: the topic's records as text lines, as they arrive."""
    registry = push.registry_of(request)
    query_id, printer, reader, stop = await run_in_threadpool(
        push.start_print, services, registry, statement, properties
    )
    body = push.stream_print(request, registry, query_id, printer, reader, stop)
    return StreamingResponse(body, media_type=TEXT, headers={"X-Query-Id": query_id})


async def close_query_endpoint(request: Request) -> Response:
    """``POST /close-query`` with ``{"queryId": ...}``: ends a push query (started on any
    connection to this server)."""
    services = services_of(request)
    body = await read_body(
        request, services.limits.max_body_bytes, services.limits.body_read_timeout_s
    )
    try:
        query_id = orjson.loads(body or b"{}").get("queryId")
    except (ValueError, AttributeError):  # orjson's JSONDecodeError is a ValueError
        raise bad_request("the body must be a JSON object with a queryId") from None
    if not isinstance(query_id, str) or not push.registry_of(request).close(query_id):
        raise KsqlError(f"No query with id {query_id} exists on this server", 40400)
    return Response(status_code=200)


async def _answer(
    services: Services, statement: ast.Select, properties: Mapping[str, Any], lookup: Lookup
) -> PullAnswer:
    """Plan (and teach the plan cache the statement's shape) in a worker thread, then run."""

    def planned() -> PreparedPull:
        prepared = prepare_pull(services, statement, properties)
        services.plans.learn(lookup, statement, prepared, services)
        return prepared

    return await _run(services, await run_in_threadpool(planned), properties)


async def _run(
    services: Services, prepared: PreparedPull, properties: Mapping[str, Any]
) -> PullAnswer:
    """Run the pull query (:func:`_run_pull`), counted and timed in ``/metrics``."""
    started = time.perf_counter()
    try:
        answer = await _run_pull(services, prepared, properties)
    except BaseException as failed:
        rejected = isinstance(failed, KsqlError) and failed.error_code == 42900
        services.metrics.pull_failed(time.perf_counter() - started, rejected)
        raise
    services.metrics.pull_answered(time.perf_counter() - started)
    return answer


async def _run_pull(
    services: Services, prepared: PreparedPull, properties: Mapping[str, Any]
) -> PullAnswer:
    """Run key lookups on the event loop (a few store reads: a thread hop would cost more than
    the query, bench/pull_qps.py; they never wait, so they need no admission), and forward
    there those that one other server answers; everything else runs in a worker thread,
    admitted by the bounded queue (429 when it is full), with replica failover."""
    skip: dict[str, str] = {}
    if prepared.point_lookup:
        try:
            return execute_prepared(services, prepared, properties, local_only=True)
        except NeedsForwarding as needs:
            skip = needs.skip
            hosts = {hosts[0] for hosts in (needs.plans or {}).values()}
            if len(hosts) == 1 and services.advertised not in hosts:
                host = hosts.pop()
                try:
                    partial = await routed.forward_async(
                        services,
                        host,
                        prepared.text,
                        needs.properties or properties,
                        sorted(needs.plans or ()),
                        routed.LOOKUP_FORWARD_TIMEOUT_S,
                    )
                    return dataclasses.replace(
                        answer_of(prepared, [partial]), written_by=needs.written_by
                    )
                except ExchangeFailed as failed:
                    skip[host] = str(failed).removeprefix(f"{host}: ")  # next replica, in a thread
                except KsqlError as error:
                    if not error.retriable and error.error_code // 100 == 400:
                        raise  # the query is wrong, wherever it runs
                    skip[host] = error.message
    if not prepared.scan:
        async with services.admission.slot():
            return await run_in_threadpool(
                execute_prepared, services, prepared, properties, skip=skip
            )
    async with services.admission.slot():
        await services.scans.acquire()
        try:
            answer = await run_in_threadpool(
                execute_prepared, services, prepared, properties, skip=skip
            )
        except BaseException:
            services.scans.release()
            raise
    if answer.stream is None:
        services.scans.release()
    return answer  # a streamed answer releases its scan slot when it is written (_released)


def _check_internal(services: Services, request: Request, body: bytes) -> None:
    """A forwarded query must be signed with the cluster's secret (401 otherwise)."""
    secret = services.cluster.settings.auth_secret if services.cluster is not None else None
    check_internal_auth(request, secret or None, body)


def _decode_stream_request(body: bytes) -> KsqlRequest:
    try:
        raw = orjson.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(f"the request body is not valid JSON: {exc}") from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("sql"), str):
        raise bad_request('the request body must be a JSON object with a "sql" string field')
    properties = raw.get("properties") or {}
    variables = raw.get("sessionVariables") or {}
    if not isinstance(properties, dict) or not isinstance(variables, dict):
        raise bad_request('"properties" and "sessionVariables" must be JSON objects')
    return KsqlRequest(
        raw["sql"],
        properties,
        variables_text(variables),
        parameters=decode_parameters(raw.get("parameters")),
    )


# -- rendering -------------------------------------------------------------------------------------


def query_items(answer: PullAnswer) -> Iterator[Any]:
    """The items of a ``/query`` answer (a streamed answer's error ends it as an item)."""
    header = {
        "queryId": answer.query_id,
        "schema": answer.schema_text(),
        "servedBy": [s.as_json() for s in answer.served_by],
    }
    if answer.written_by:
        header["writtenBy"] = [w.as_json() for w in answer.written_by]
    yield {"header": header}
    for row in answer.rows:
        yield {"row": {"columns": row}}
    if answer.stream is not None:
        try:
            for row in answer.stream:
                yield {"row": {"columns": row}}
        except KsqlError as exc:
            yield {"errorMessage": exc.body()}
            return
    if answer.final_message is not None:
        yield {"finalMessage": answer.final_message}


def protobuf_answer_items(answer: PullAnswer) -> Iterator[Any]:
    """The items of an answer in protobuf rows (``gateway.protobuf_rows``)."""
    rows = iter(answer.rows) if answer.stream is None else _chained(answer.rows, answer.stream)
    return protobuf_items(
        answer.query_id,
        [(c.name, c.type) for c in answer.columns],
        answer.schema_text(),
        rows,
        answer.final_message,
    )


def _chained(first: list[list[Any]], more: Iterator[list[Any]]) -> Iterator[list[Any]]:
    yield from first
    yield from more


def stream_items(answer: PullAnswer) -> Iterator[Any]:
    """The items of a ``/query-stream`` answer."""
    yield {
        "queryId": answer.query_id,
        "columnNames": [c.name for c in answer.columns],
        "columnTypes": [c.type for c in answer.columns],
        "servedBy": [s.as_json() for s in answer.served_by],
        **({"writtenBy": [w.as_json() for w in answer.written_by]} if answer.written_by else {}),
    }
    yield from answer.rows
    if answer.stream is not None:
        try:
            yield from answer.stream
        except KsqlError as exc:
            yield {"errorMessage": exc.body()}


def _array(items: Iterator[Any]) -> bytes:
    return b"[" + b",\n".join(dumpb(item) for item in items) + b"]\n"


def _lines(items: Iterator[Any]) -> Iterator[bytes]:
    for item in items:
        yield dumpb(item) + b"\n"


_CHUNK_ITEMS = 1000
"""Items rendered per chunk of a streamed answer (one worker-thread hop each)."""


def _line_chunks(items: Iterator[Any]) -> Iterator[bytes]:
    """The items, one a line, a chunk of many lines at a time; the first item (the header) alone,
    so that a client (or a forwarding peer) hears from the server before any row is computed."""
    first = next(items, None)
    if first is None:
        return
    yield dumpb(first) + b"\n"
    chunk: list[bytes] = []
    for item in items:
        chunk.append(dumpb(item))
        if len(chunk) >= _CHUNK_ITEMS:
            yield b"\n".join(chunk) + b"\n"
            chunk = []
    if chunk:
        yield b"\n".join(chunk) + b"\n"


def _array_chunks(items: Iterator[Any]) -> Iterator[bytes]:
    """A JSON array, written as its items come: ``[`` item ``,\\n`` item ... ``]``."""
    opened = False
    for chunk in _line_chunks(items):
        body = chunk[:-1].replace(b"\n", b",\n")  # items never hold a raw newline (JSON)
        yield (b",\n" if opened else b"[") + body
        opened = True
    yield b"]\n" if opened else b"[]\n"
