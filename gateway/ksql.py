"""``POST /ksql``: statements that change or show the catalog, answered with ksqlDB's entities.

The endpoint reads and checks the body (size, JSON, fields), then hands the request to
:func:`execute` on a worker thread (submitting blocks on Kafka), then renders the entity list.
:func:`execute` waits for the request's ``commandSequenceNumber``, parses the script and runs its
statements in order. A statement that fails (a ``MetastoreError``/``KafkaEdgeError`` from the
domain, or a statement this endpoint does not run) raises :class:`KsqlError` carrying the code, the
statement's text and position, and the entities of the statements before it (ksqlDB's error body
keeps them). A ``ParseError`` already carries its statement and position and is not wrapped.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from confluent_kafka import KafkaException
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

import headwater
from headwater.engine.errors import EngineError, StatementPrepareError
from headwater.engine.formats.serde import serde_of
from headwater.engine.functions.catalog import all_functions, describe_function
from headwater.engine.insert_values import evaluate_insert_values
from headwater.engine.partitioner import partition_for
from headwater.gateway import queries
from headwater.gateway.asserts import assert_schema, assert_topic
from headwater.gateway.errors import Entity, KsqlError, bad_request
from headwater.gateway.jsonout import dumpb
from headwater.gateway.locate import line_column, located_message, offset_in_message
from headwater.gateway.schemas import type_schema
from headwater.gateway.services import Services, services_of
from headwater.kafka.errors import KafkaEdgeError
from headwater.metastore.catalog import Catalog, Column, Source, SourceKind
from headwater.metastore.errors import MetastoreError, TooManyPersistentQueries
from headwater.metastore.format_defaults import format_defaults
from headwater.metastore.offset_reset import offset_reset
from headwater.sqlparse_ext import parse
from headwater.sqlparse_ext import statements as ast
from headwater.sqlparse_ext.limits import ParseLimits
from headwater.sqlparse_ext.params import ParameterError, from_json

log = logging.getLogger(__name__)


WRITTEN_HEADER = "Headwater-Written-Offsets"
"""The response header of ``/ksql`` listing where its INSERT ... VALUES rows landed (a JSON list of
``{"topic", "partition", "offset"}``): what ``headwater.read.after`` takes for read-your-writes."""


# -- the request -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KsqlRequest:
    """A decoded ``/ksql`` body."""

    ksql: str
    streams_properties: Mapping[str, Any] = field(default_factory=dict)
    session_variables: Mapping[str, str] = field(default_factory=dict)
    command_sequence_number: int | None = None
    parameters: tuple[object, ...] | None = None

    def statements(self, limits: ParseLimits | None = None) -> list[ast.Statement]:
        """The request's statements: ``${name}`` substituted from its session variables (unless
        ``ksql.variable.substitution.enable`` is false), then its ``parameters`` bound.

        Args:
            limits: the server's bounds on statements (size, tokens, depth, count).

        Raises:
            ParseError: the text does not parse, or the parameters do not fit its placeholders,
                or it exceeds ``limits``.
        """
        return parse(
            self.ksql,
            self.session_variables,
            parameters=self.parameters,
            substitution=self.substitutes(),
            limits=limits,
        )

    def substitutes(self) -> bool:
        """Whether ``${name}`` is substituted (``ksql.variable.substitution.enable``)."""
        return str(self.streams_properties.get(SUBSTITUTION, "true")).lower() != "false"


#: ksqlDB's switch for ``${name}`` substitution (forwarded queries, already substituted, turn it off).
SUBSTITUTION = "ksql.variable.substitution.enable"


async def read_body(request: Request, limit: int, timeout_s: float = 30.0) -> bytes:
    """The request body, refused with 41300 when it is larger than ``limit`` bytes, and with
    40800 when it has not fully arrived within ``timeout_s`` (a client trickling its body must
    not hold a request slot and its buffer for ever)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise bad_request(f"the request body is larger than {limit} bytes", 41300)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise bad_request(f"the request body is larger than {limit} bytes", 41300)
                chunks.append(chunk)
    except TimeoutError:
        raise bad_request(
            f"the request body did not arrive within {timeout_s:g} s "
            "(ksql.server.request.body.timeout.ms)",
            40800,
        ) from None
    return b"".join(chunks)


def decode_request(body: bytes) -> KsqlRequest:
    """Check and decode a ``/ksql`` body (40000 for anything malformed)."""
    try:
        raw = orjson.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(f"the request body is not valid JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise bad_request("the request body must be a JSON object")
    ksql = raw.get("ksql")
    if not isinstance(ksql, str):
        raise bad_request('the request body must have a "ksql" string field')
    properties = raw.get("streamsProperties") or {}
    variables = raw.get("sessionVariables") or {}
    if not isinstance(properties, dict):
        raise bad_request('"streamsProperties" must be a JSON object')
    if not isinstance(variables, dict):
        raise bad_request('"sessionVariables" must be a JSON object')
    sequence = raw.get("commandSequenceNumber")
    if sequence is not None and (not isinstance(sequence, int) or isinstance(sequence, bool)):
        raise bad_request('"commandSequenceNumber" must be an integer')
    return KsqlRequest(
        ksql,
        properties,
        variables_text(variables),
        sequence,
        decode_parameters(raw.get("parameters")),
    )


def decode_parameters(raw: Any) -> tuple[object, ...] | None:
    """A request's ``parameters`` (headwater's extension: values for the statement's ``?``
    placeholders, bound as data after variable substitution), 40000 when malformed."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise bad_request("\"parameters\" must be a JSON array (one value per '?' placeholder)")
    try:
        return tuple(from_json(value) for value in raw)
    except ParameterError as exc:
        raise bad_request(f'"parameters": {exc}') from exc


def variables_text(variables: Mapping[str, Any]) -> dict[str, str]:
    """Session variables as the text ``${name}`` substitutes: strings as they are, other JSON
    values written as JSON."""
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in variables.items()}


async def ksql_endpoint(request: Request) -> Response:
    """``POST /ksql``: parse the body, run the statements, render the entities (with ``dumpb``:
    a client's text echoed back may hold what JSONResponse cannot write, a lone surrogate)."""
    services = services_of(request)
    decoded = decode_request(
        await read_body(
            request, services.limits.max_body_bytes, services.limits.body_read_timeout_s
        )
    )
    written: list[Entity] = []
    entities = await run_in_threadpool(execute, services, decoded, written)
    # ksqlDB answers INSERT ... VALUES with no entity; where the rows landed (the read-your-writes
    # token) goes in a header, which ksqlDB's clients ignore.
    headers = {WRITTEN_HEADER: dumpb(written).decode("utf-8")} if written else None
    return Response(dumpb(entities), media_type="application/json", headers=headers)


# -- running statements ----------------------------------------------------------------------------


def execute(
    services: Services, request: KsqlRequest, written: list[Entity] | None = None
) -> list[Entity]:
    """Run every statement of ``request`` in order; the entities, one per statement but
    ``INSERT ... VALUES``, which answers none (as ksqlDB); where its row landed goes to ``written``.

    Raises:
        KsqlError: the catch-up wait timed out, or a statement failed.
        ParseError: the script does not parse.
    """
    if request.command_sequence_number is not None:
        wanted = request.command_sequence_number + 1
        timeout = services.limits.catch_up_timeout_s
        if not services.runner.wait_for_position(wanted, timeout):
            raise KsqlError(
                f"timed out after {timeout:g} s waiting for command sequence number "
                f"{request.command_sequence_number} to be executed (this server is at "
                f"{services.runner.position - 1})",
                50301,
                kind="generic_error",
                retriable=True,
            )
    statements = request.statements(services.limits.parse)
    if not statements:
        raise bad_request("the request holds no statement")
    entities: list[Entity] = []
    defined = {name.upper(): value for name, value in request.session_variables.items()}
    for statement in statements:
        if isinstance(statement, ast.DefineVariable):  # the parser substituted it already
            defined[statement.name.upper()] = statement.value
            continue
        if isinstance(statement, ast.UndefineVariable):
            defined.pop(statement.name.upper(), None)
            continue
        if isinstance(statement, ast.Show) and statement.what.upper() == "VARIABLES":
            entities.append(
                {
                    "@type": "variables",
                    "statementText": statement.text,
                    "variables": [{"name": n, "value": v} for n, v in sorted(defined.items())],
                    "warnings": [],
                }
            )
            continue
        try:
            entity = run_statement(services, statement, request.streams_properties)
            if isinstance(statement, ast.InsertValues):
                if written is not None:
                    written.extend(entity["writtenOffsets"])
                continue
            entities.append(entity)
        except KsqlError as exc:
            exc.statement_text = exc.statement_text or statement.text
            exc.entities = tuple(entities)
            exc.line = exc.line if exc.line is not None else statement.line
            exc.column = exc.column if exc.column is not None else statement.column
            raise
        except (MetastoreError, KafkaEdgeError, EngineError) as exc:
            offset = getattr(exc, "offset", None)
            if offset is None:
                offset = offset_in_message(statement, getattr(exc, "message", None) or str(exc))
            line, column = line_column(statement, offset)
            raise KsqlError(
                located_message(statement, getattr(exc, "message", None) or str(exc), offset),
                exc.error_code,
                statement_text=statement.text,
                entities=tuple(entities),
                line=line,
                column=column,
                retriable=exc.retriable,
                # ksqlDB answers a request error (its query capacity) as a generic_error
                kind="generic_error"
                if isinstance(exc, TooManyPersistentQueries)
                else "statement_error",
            ) from exc
    return entities


def run_statement(
    services: Services, statement: ast.Statement, overrides: Mapping[str, Any] | None = None
) -> Entity:
    """The entity answering one statement (``overrides``: the request's session properties)."""
    match statement:
        case ast.CreateAsSelect() | ast.InsertInto() if services.no_spark:
            kind = (
                "CREATE ... AS SELECT"
                if isinstance(statement, ast.CreateAsSelect)
                else "INSERT INTO ... SELECT"
            )
            raise KsqlError(
                f"{kind} runs a persistent query on Spark, and this server cannot run "
                f"Spark: {services.no_spark}",
                40000,
            )
        case (
            ast.CreateSource()
            | ast.AlterSource()
            | ast.Drop()
            | ast.CreateType()
            | ast.DropType()
            | ast.CreateAsSelect()
            | ast.InsertInto()
            | ast.Terminate()
        ):
            # The statements that change the catalog go through the command log.
            return _submit(services, statement, overrides or {})
        case ast.Select() | ast.Print():
            kind = "SELECT" if isinstance(statement, ast.Select) else "PRINT"
            raise KsqlError(
                f"{kind} statements must be sent to the /query endpoint (ksqlDB: The "
                "following statement types should be issued to the websocket endpoint "
                "'/query': * PRINT * SELECT)",
                40002,
            )
        case ast.Show() if statement.what.upper() == "PROPERTIES":
            return show_properties(services, statement, overrides or {})
        case ast.Show():
            return _show(services, statement)
        case ast.Describe():
            return _describe(services, statement)
        case ast.InsertValues():
            return _insert_values(services, statement)
        case ast.Explain():
            return queries.explain(services, statement)
        case ast.AssertTopic():
            return assert_topic(services, statement)
        case ast.AssertSchema():
            return assert_schema(services, statement)
        case _:
            raise _unsupported(statement)


def _unsupported(statement: ast.Statement) -> KsqlError:
    words = " ".join(statement.text.split()[:2]).rstrip(";").upper()
    return KsqlError(f"{words} statements are not supported by headwater yet", 40001)


def _submit(services: Services, statement: ast.Statement, overrides: Mapping[str, Any]) -> Entity:
    """Submits a catalog statement; a persistent query starts where ``auto.offset.reset`` (the
    request's, else the server's) says."""
    submitted = services.submitter.submit(
        statement,
        offset_reset(overrides, services.properties),
        format_defaults(overrides, services.properties),
    )
    # For a statement that changed nothing (IF NOT EXISTS ...) the submitter answers the last
    # record decided, so a client waiting for this sequence number never waits for a future one.
    sequence = submitted.sequence_number
    return {
        "@type": "currentStatus",
        "statementText": statement.text,
        "commandId": submitted.command_id,
        "commandStatus": {"status": "SUCCESS", "message": submitted.message},
        "commandSequenceNumber": sequence,
        "warnings": [{"message": warning} for warning in submitted.warnings],
    }


def _show(services: Services, statement: ast.Show) -> Entity:
    what = statement.what.upper()
    if what == "QUERIES":
        kind, body = queries.show_queries(services, statement.extended)
        return {"@type": kind, "statementText": statement.text, **body, "warnings": []}
    if statement.extended and what in ("STREAMS", "TABLES"):  # as DESCRIBE STREAMS|TABLES EXTENDED
        of_kind = SourceKind.STREAM if what == "STREAMS" else SourceKind.TABLE
        return _source_descriptions(services, statement, of_kind, extended=True)
    if statement.extended and what in ("TOPICS", "ALL TOPICS"):
        return {
            "@type": "kafka_topics_extended",
            "statementText": statement.text,
            **_topics(services, internal=what == "ALL TOPICS", extended=True),
            "warnings": [],
        }
    if statement.extended or what not in _SHOWS:
        raise _unsupported(statement)
    return {
        "@type": _SHOWS[what][0],
        "statementText": statement.text,
        **_SHOWS[what][1](services),
        "warnings": [],
    }


def _sources(kind: SourceKind) -> Callable[[Services], Entity]:
    def render(services: Services) -> Entity:
        catalog = services.runner.catalog
        found = sorted(
            (s for s in catalog.sources.values() if s.kind is kind), key=lambda s: s.name
        )
        return {
            f"{kind.value.lower()}s": [
                {
                    "type": s.kind.value,
                    "name": s.name,
                    "topic": s.topic,
                    "keyFormat": s.key_format,
                    "valueFormat": s.value_format,
                    "isWindowed": s.windowed is not None,
                }
                for s in found
            ]
        }

    return render


def _types(services: Services) -> Entity:
    catalog = services.runner.catalog
    types = sorted(catalog.types.items())
    return {"types": {name: type_schema(t.type, catalog) for name, t in types}}


def _topics(services: Services, *, internal: bool, extended: bool = False) -> Entity:
    timeout = services.settings.topic_operation_timeout_ms / 1000
    try:
        metadata = services.admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise KsqlError(f"could not list Kafka topics: {exc}", 50000, retriable=True) from exc
    topics = sorted(
        (t for name, t in metadata.topics.items() if internal or not name.startswith("_")),
        key=lambda t: t.topic or "",
    )
    consumers = _consumers_by_topic(services, timeout) if extended else {}
    listed = []
    for t in topics:
        entry: dict[str, Any] = {
            "name": t.topic,
            "replicaInfo": [len(p.replicas) for _, p in sorted(t.partitions.items())],
        }
        if extended:
            members, groups = consumers.get(t.topic or "", (0, 0))
            entry.update(consumerCount=members, consumerGroupCount=groups)
        listed.append(entry)
    return {"topics": listed}


def _consumers_by_topic(services: Services, timeout: float) -> dict[str, tuple[int, int]]:
    """Topic -> (consumers assigned some of its partitions, their groups), from the broker's
    consumer groups (headwater's own readers use none); empty when the broker cannot say."""
    try:
        groups = services.admin.list_consumer_groups(request_timeout=timeout).result(timeout)
        ids = [g.group_id for g in groups.valid]
        if not ids:
            return {}
        described = services.admin.describe_consumer_groups(ids, request_timeout=timeout)
        found: dict[str, tuple[int, set[str]]] = {}
        for group_id, future in described.items():
            for member in future.result(timeout).members:
                assigned = {
                    tp.topic
                    for tp in (member.assignment.topic_partitions if member.assignment else [])
                }
                for topic in assigned:
                    count, owners = found.get(topic, (0, set()))
                    found[topic] = (count + 1, owners | {group_id})
        return {t: (count, len(owners)) for t, (count, owners) in found.items()}
    except Exception as exc:  # noqa: BLE001 - the counts are extra: the listing stands without them
        log.warning("could not describe consumer groups for SHOW TOPICS EXTENDED: %s", exc)
        return {}


def _functions(services: Services) -> Entity:
    return {
        "functions": [
            {"name": f.name, "type": f.kind, "category": f.category}
            | ({} if f.path == "internal" else {"source": f.path})
            for f in all_functions()
        ]
    }


def show_properties(
    services: Services, statement: ast.Statement, overrides: Mapping[str, Any]
) -> Entity:
    """SHOW PROPERTIES in ksqlDB's shape: the server's settings, then the session's overrides
    (which win), each with its scope; which were overridden, which are at their default."""
    values = {**services.properties, **{k: str(v) for k, v in overrides.items()}}
    return {
        "@type": "properties",
        "statementText": statement.text,
        "properties": [
            {
                "name": k,
                "scope": "KSQL" if k.startswith(("ksql.", "headwater.")) else "SERVER",
                "value": v,
            }
            for k, v in sorted(values.items())
        ],
        "overwrittenProperties": sorted(overrides),
        "defaultProperties": sorted(
            k
            for k, v in services.properties.items()
            if k not in overrides and services.defaults.get(k) == v
        ),
        "warnings": [],
    }


_SHOWS: dict[str, tuple[str, Callable[[Services], Entity]]] = {
    "FUNCTIONS": ("function_names", _functions),
    "STREAMS": ("streams", _sources(SourceKind.STREAM)),
    "TABLES": ("tables", _sources(SourceKind.TABLE)),
    "TYPES": ("type_list", _types),
    "TOPICS": ("kafka_topics", lambda s: _topics(s, internal=False)),
    "ALL TOPICS": ("kafka_topics", lambda s: _topics(s, internal=True)),
}


def _describe_function(statement: ast.Describe) -> Entity:
    """DESCRIBE FUNCTION in ksqlDB's shape; a generic function (types from its arguments) has no
    declared variants."""
    found = describe_function(statement.name or "")
    if found is None:
        raise KsqlError(f"Can't find any functions with the name '{statement.name}'", 40001)
    if found.variants:  # a Python function: its overloads as declared
        variants = [
            {
                "arguments": [
                    {"name": name, "type": t, "description": "", "isVariadic": variadic}
                    for name, t, variadic in variant.params
                ],
                "returnType": variant.returns,
                "description": variant.description,
                "argumentTypes": [t for _, t, _ in variant.params],
            }
            for variant in found.variants
        ]
    else:
        variants = [
            {
                "arguments": [
                    {"name": f"arg{i}", "type": t, "description": "", "isVariadic": False}
                    for i, t in enumerate(params, 1)
                ],
                "returnType": result,
                "description": "",
                "argumentTypes": list(params),
            }
            for params, result in found.signatures
        ]
    internal = found.path == "internal"
    return {
        "@type": "describe_function",
        "statementText": statement.text,
        "name": found.name,
        "description": found.description
        or ("" if variants else "its parameter and result types follow its arguments"),
        "author": "headwater" if internal else found.author,
        "version": headwater.__version__ if internal else found.version,
        "path": found.path,
        "functions": variants,
        "type": found.kind,
        "warnings": [],
    }


def _source_descriptions(
    services: Services, statement: ast.Statement, kind: SourceKind, extended: bool
) -> Entity:
    """DESCRIBE STREAMS|TABLES [EXTENDED], SHOW STREAMS|TABLES EXTENDED: every source's
    description, in ksqlDB's ``source_descriptions`` shape."""
    catalog = services.runner.catalog
    described = []
    for source in sorted(
        (s for s in catalog.sources.values() if s.kind is kind), key=lambda s: s.name
    ):
        description = source_description(source, catalog)
        if extended:
            description = queries.extended_source(services, source, catalog, description)
        described.append(description)
    return {
        "@type": "source_descriptions",
        "statementText": statement.text,
        "sourceDescriptions": described,
        "warnings": [],
    }


def _describe(services: Services, statement: ast.Describe) -> Entity:
    if statement.what == "FUNCTION":
        return _describe_function(statement)
    if statement.what in ("STREAMS", "TABLES"):
        kind = SourceKind.STREAM if statement.what == "STREAMS" else SourceKind.TABLE
        return _source_descriptions(services, statement, kind, statement.extended)
    if statement.what != "SOURCE" or statement.name is None:
        raise _unsupported(statement)
    catalog = services.runner.catalog
    source = catalog.source(statement.name)
    if source is None:
        raise KsqlError(f"Could not find STREAM/TABLE '{statement.name}' in the Metastore", 40001)
    description = source_description(source, catalog)
    if statement.extended:
        description = queries.extended_source(services, source, catalog, description)
    return {
        "@type": "sourceDescription",
        "statementText": statement.text,
        "sourceDescription": description,
        "warnings": [],
    }


def _insert_values(services: Services, statement: ast.InsertValues) -> Entity:
    """INSERT INTO ... VALUES: one record to the source's topic, in its formats, keyed as Kafka would.

    The entity carries where the row landed (``writtenOffsets``): the consistency token a later
    read-your-writes pull query may present. ``/ksql`` answers no entity for it (as ksqlDB: ``[]``)
    and sends the offsets in its ``Headwater-Written-Offsets`` header.
    """
    catalog = services.runner.catalog
    source = catalog.sources.get(statement.target)
    if source is None:
        raise KsqlError(
            f"Cannot insert values into an unknown stream/table: `{statement.target}`"
            + catalog.alternatives(statement.target),
            40001,
        )
    if services.writer is None:
        raise KsqlError("this server does not accept INSERT statements", 40001)
    try:
        record = evaluate_insert_values(statement, source, catalog.types)
        serde = serde_of(source, catalog.types)
        key = serde.serialize_key(record.key)
        value = serde.serialize_value(record.value)
    except StatementPrepareError as exc:
        line, column = line_column(statement, offset_in_message(statement, exc.message))
        raise KsqlError(
            f"Failed to prepare statement: {exc.message}", exc.error_code, line=line, column=column
        ) from exc
    except EngineError as exc:
        prefix = f"Failed to insert values into '{source.name}'. "
        message = exc.message if exc.message.startswith(prefix) else prefix + exc.message
        line, column = line_column(statement, offset_in_message(statement, exc.message))
        raise KsqlError(message, exc.error_code, line=line, column=column) from exc
    partition = partition_for(key, source.partitions) if key is not None else None
    written = services.writer.write(
        source.topic, key, value, partition=partition, timestamp_ms=record.rowtime
    )
    return {
        "@type": "currentStatus",
        "statementText": statement.text,
        "commandId": f"insert/{source.name}/{written.partition}/{written.offset}",
        "commandStatus": {
            "status": "SUCCESS",
            "message": f"Inserted 1 row into {source.name} (partition {written.partition}, "
            f"offset {written.offset})",
        },
        "writtenOffsets": [
            {"topic": written.topic, "partition": written.partition, "offset": written.offset}
        ],
        "warnings": [],
    }


# -- rendering catalog objects ---------------------------------------------------------------------


def source_description(source: Source, catalog: Catalog) -> Entity:
    """ksqlDB's ``SourceDescription`` of a stream or table."""
    return {
        "name": source.name,
        "windowType": source.windowed,
        "readQueries": [_query_ref(q.id) for q in catalog.readers_of(source.name)],
        "writeQueries": [_query_ref(q.id) for q in catalog.writers_of(source.name)],
        "fields": [_field(c, catalog) for c in source.columns],
        "type": source.kind.value,
        "timestamp": source.timestamp_column or "",
        "statistics": "",
        "errorStats": "",
        "extended": False,
        "keyFormat": source.key_format,
        "valueFormat": source.value_format,
        "topic": source.topic,
        "partitions": source.partitions,
        "replication": 1,
        "statement": source.statement_text,
        "queryOffsetSummaries": [],
        "sourceConstraints": [],
    }


def _query_ref(query_id: str) -> Entity:
    return {"queryString": "", "sinks": [], "sinkKafkaTopics": [], "id": query_id}


def _field(column: Column, catalog: Catalog) -> Entity:
    entry: Entity = {"name": column.name, "schema": type_schema(column.type, catalog)}
    if column.key:
        entry["type"] = "KEY"
    elif column.headers or column.header_key is not None:
        entry["type"] = "HEADER"
        if column.header_key is not None:
            entry["headerKey"] = column.header_key
    return entry


__all__ = [
    "KsqlError",
    "KsqlRequest",
    "decode_request",
    "execute",
    "ksql_endpoint",
    "read_body",
    "run_statement",
    "source_description",
]
