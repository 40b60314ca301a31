"""Push queries (``EMIT CHANGES``) over ``POST /query`` and ``POST /query-stream``, PRINT over
``POST /query``, and ``POST /close-query``. Parses, streams and renders; the engine follows the
topic (PRINT's consumer is here: ``TopicReader``; its text comes from ``printtopic``).

PRINT answers plain text, as ksqlDB does: one line per record, ``Key format: ...`` / ``Value
format: ...`` lines whenever the guessed formats change, and an empty line after each second without
records (so a client that went is noticed).

A push query's answer is streamed as it runs: on ``/query`` a JSON array (the header, then one
``{"row": ...}`` per row, then ``{"finalMessage": "Limit Reached"}`` when a LIMIT ends it); on
``/query-stream`` a header line then one JSON array per row. It ends with its LIMIT, when the client
closes the connection, or with ``/close-query``. Each server runs at most
``PushQueries.max_running`` at once (429 beyond); a slow client holds only its own consumer, which
stops fetching while its rows wait to be sent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from headwater.engine.errors import EngineError, SourceDropped
from headwater.engine.formats import schema_registry
from headwater.engine.push import TopicFollower, plan_push, push_rows, stateful_clauses
from headwater.engine.values import to_json_output
from headwater.gateway.errors import KsqlError
from headwater.gateway.jsonout import dumps
from headwater.gateway.printtopic import TopicPrint, TopicRecord
from headwater.gateway.push_registry import PushQueries
from headwater.gateway.scalable_push import PREFIX as SCALABLE_PREFIX
from headwater.gateway.scalable_push import is_scalable
from headwater.gateway.services import Services
from headwater.gateway.transient import start_transient
from headwater.kafka.clients import consumer, poll_batch
from headwater.kafka.offsets import start_positions
from headwater.metastore.errors import ValidationError
from headwater.metastore.offset_reset import EARLIEST, offset_reset
from headwater.sqlparse_ext import statements as ast

_POLL_S = 0.2
_KEEPALIVE_S = 1.0
log = logging.getLogger(__name__)


def _from_beginning(services: Services, properties: Mapping[str, Any]) -> bool:
    """Whether a push query reads from the beginning: ``auto.offset.reset`` is ``earliest`` in
    the request's properties, else in the server's settings; else it reads from the end."""
    try:
        return offset_reset(properties, services.properties) == EARLIEST
    except ValidationError as exc:
        raise KsqlError(exc.message, 40000) from exc


def start_push(
    services: Services, registry: PushQueries, statement: ast.Select, properties: Mapping[str, Any]
) -> tuple[str, Any, Any, threading.Event]:
    """Plans the push query and starts following its topic: (query id, plan, follower, stop).

    Raises:
        KsqlError: what ksqlDB (or headwater, for push queries needing state) refuses.
    """
    catalog = services.runner.catalog
    source = catalog.source(statement.query.source.name)
    if source is None:
        raise KsqlError(
            f"{statement.query.source.name} does not exist.", 40001, statement_text=statement.text
        )
    from_beginning = _from_beginning(services, properties)
    follower: Any
    if stateful_clauses(statement.query):  # a transient Spark query, its result followed
        query_id, stop = registry.start(statement.text)
        try:
            plan, follower = start_transient(services, statement, properties, from_beginning)
        except Exception:
            registry.end(query_id)
            raise
        registry.computed_by(query_id, follower.query_id)
        return query_id, plan, follower, stop
    try:
        plan = plan_push(statement, source, catalog.types)
    except EngineError as exc:
        raise KsqlError(exc.message, exc.error_code, statement_text=statement.text) from exc
    scalable = is_scalable(statement, catalog, properties, services.properties)
    query_id, stop = registry.start(statement.text, SCALABLE_PREFIX if scalable else "transient_")
    try:
        follower = TopicFollower(
            services.settings, source, catalog.types, from_beginning=from_beginning
        )
    except Exception:
        registry.end(query_id)
        raise
    return query_id, plan, follower, stop


async def stream_push(
    request: Request,
    registry: PushQueries,
    query_id: str,
    plan: Any,
    follower: Any,
    stop: threading.Event,
    *,
    shape: str,
) -> AsyncIterator[bytes]:
    """The bytes of a push query's answer, as rows arrive; ends with the LIMIT, the client's
    going, or ``/close-query``. ``shape``: ``array`` (/query) or ``lines`` (/query-stream)."""
    types = [c.type for c in plan.schema]
    columns = [c.name for c in plan.schema]
    schema = ", ".join(
        f"`{c.name}` {c.type.sql()}" + (" KEY" if c.key else "") for c in plan.schema
    )
    sent = 0
    try:
        if shape == "array":  # each item is followed by ",\n" as soon as it is sent (ksqlDB's)
            yield (
                "[" + dumps({"header": {"queryId": query_id, "schema": schema}}) + ",\n"
            ).encode()
        else:
            yield (
                dumps(
                    {
                        "queryId": query_id,
                        "columnNames": columns,
                        "columnTypes": [t.sql() for t in types],
                    }
                )
                + "\n"
            ).encode()
        reached = plan.limit == 0
        while not reached and not stop.is_set():
            try:
                batch = await run_in_threadpool(follower.poll, _POLL_S)
                rows, reached = push_rows(plan, batch, sent)
            except Exception as exc:  # reported in the stream, which then ends
                log.exception("push query %s failed", query_id)
                error = {
                    "@type": "generic_error",
                    "error_code": 50000,
                    "message": f"the push query failed: {exc}",
                }
                yield (
                    (dumps({"errorMessage": error}) + "]\n")
                    if shape == "array"
                    else dumps({"errorMessage": error}) + "\n"
                ).encode()
                return
            if await request.is_disconnected():
                return
            sent += len(rows)
            chunk = []
            for row, tombstone in rows:
                values = [to_json_output(v, t) for v, t in zip(row, types, strict=True)]
                item: dict[str, Any] = {"columns": values}
                if tombstone:
                    item["tombstone"] = True
                chunk.append(
                    dumps({"row": item}) + ",\n" if shape == "array" else dumps(values) + "\n"
                )
            if chunk:
                yield "".join(chunk).encode()
        if shape == "array":
            final = "Limit Reached" if reached else "Query Completed"
            yield (dumps({"finalMessage": final}) + "]\n").encode()
    finally:  # also when the client went (the stream is cancelled)
        registry.end(query_id)
        follower.close()


def registry_of(request: Request) -> PushQueries:
    """The app's push queries."""
    registry: PushQueries = request.app.state.push_queries
    return registry


# -- PRINT -----------------------------------------------------------------------------------------


class TopicReader:
    """A consumer of every partition of a topic, from its end or its beginning: raw records. Its
    start is fixed when the constructor returns (see ``start_positions``)."""

    def __init__(
        self, services: Services, topic: str, partitions: int, *, from_beginning: bool
    ) -> None:
        self.topic = topic
        starts = start_positions(
            services.settings, topic, range(partitions), from_beginning=from_beginning
        )
        self._consumer = consumer(services.settings, "print-topic", fetch_wait_max_ms=20)
        self._consumer.assign(starts)

    def poll(self, timeout_s: float) -> list[TopicRecord]:
        if self._consumer.retired():
            raise SourceDropped(f"the topic {self.topic} was deleted: PRINT ends")
        records = []
        for message in poll_batch(self._consumer, 500, timeout_s):
            if message.error() is not None:
                continue
            kind, timestamp = message.timestamp()
            records.append(
                TopicRecord(
                    int(timestamp) if kind else None,
                    message.key(),
                    message.value(),
                    int(message.partition() or 0),
                )
            )
        return records

    def close(self) -> None:
        self._consumer.close()


def topic_partitions(services: Services, topic: str) -> int:
    """The partition count of ``topic`` (blocks on Kafka).

    Raises:
        KsqlError: 40000 with ksqlDB's message when there is no such topic (and the topics whose
            names differ only in case, as ksqlDB suggests them).
    """
    metadata = services.admin.list_topics(timeout=services.limits.kafka_probe_timeout_s)
    found = metadata.topics.get(topic)
    if found is None or found.error is not None or not found.partitions:
        similar = sorted(t for t in metadata.topics if t.lower() == topic.lower() and t != topic)
        hint = "".join(f"\n\tprint {t};" for t in similar)
        raise KsqlError(
            f"Could not find topic '{topic}', or the KSQL user does not have "
            "permissions to list the topic. Topic names are case-sensitive."
            + (f"\nDid you mean:{hint}" if hint else ""),
            40000,
        )
    return len(found.partitions)


def start_print(
    services: Services, registry: PushQueries, statement: ast.Print, properties: Mapping[str, Any]
) -> tuple[str, TopicPrint, TopicReader, threading.Event]:
    """Checks the topic and starts reading it: (query id, printer, reader, stop). Blocks on Kafka.

    Raises:
        KsqlError: no such topic, a bad INTERVAL, or too many push queries running.
    """
    try:
        interval = 1 if statement.interval is None else statement.interval
        printer = TopicPrint(schema_registry.current(), interval, statement.limit)
    except ValueError as exc:
        raise KsqlError(str(exc), 40000, statement_text=statement.text) from exc
    partitions = topic_partitions(services, statement.topic)
    from_beginning = statement.from_beginning or _from_beginning(services, properties)
    query_id, stop = registry.start()
    try:
        reader = TopicReader(services, statement.topic, partitions, from_beginning=from_beginning)
    except Exception:
        registry.end(query_id)
        raise
    log.info("Printing topic '%s' (%s)", statement.topic, query_id)
    return query_id, printer, reader, stop


def _print_lines(reader: TopicReader, printer: TopicPrint) -> list[str]:
    return printer.lines(reader.poll(_POLL_S))


async def stream_print(
    request: Request,
    registry: PushQueries,
    query_id: str,
    printer: TopicPrint,
    reader: TopicReader,
    stop: threading.Event,
) -> AsyncIterator[bytes]:
    """PRINT's text as records arrive; ends with the LIMIT, the client's going, or
    ``/close-query``."""
    quiet_since = time.monotonic()
    try:
        while not printer.done and not stop.is_set():
            try:
                # in a worker thread: formatting may ask the schema registry
                lines = await run_in_threadpool(_print_lines, reader, printer)
            except Exception as exc:  # reported in the stream, which then ends (as ksqlDB does)
                log.exception("PRINT %s failed", reader.topic)
                yield f"{exc}\n".encode()
                return
            if await request.is_disconnected():
                return
            if lines:
                quiet_since = time.monotonic()
                yield ("\n".join(lines) + "\n").encode()
            elif time.monotonic() - quiet_since >= _KEEPALIVE_S:
                quiet_since = time.monotonic()
                yield b"\n"
    finally:  # also when the client went (the stream is cancelled)
        registry.end(query_id)
        reader.close()
