"""Confluent Schema Registry's REST API (v1), served under ``/registry`` by every server. Does I/O
(through ``registry.log``: writes go to the registry's topic, reads come from this server's fold).

Clients take ``http://<server>/registry`` as their registry's URL (confluent-kafka's
``SchemaRegistryClient``, Confluent's Java serdes, curl): they join their paths to it. The routes,
bodies, media type (``application/vnd.schemaregistry.v1+json``), HTTP statuses and error codes are
Confluent's (``registry.errors``). Behind the server's authentication like every other route.

Writes block on Kafka, and what parses a client's schema (look-ups, compatibility checks, the
``serialized`` format) can take a while for a large one: those run in a worker thread, never on the
event loop. Plain reads answer from the fold at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route

from headwater.gateway.services import services_of
from headwater.registry import operations as ops
from headwater.registry.compatibility import KINDS
from headwater.registry.errors import (
    InvalidRequest,
    InvalidSchema,
    RegistryError,
    SchemaNotFound,
    SchemaTooLarge,
    SubjectLevelNotConfigured,
    SubjectNotFound,
)
from headwater.registry.log import RegistryLog
from headwater.registry.records import SchemaValue, UnreadableRecord, references_of
from headwater.registry.state import RegistryState

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
#: The path prefix clients use as their registry's URL.
PREFIX = "/registry"


def _answer(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type=MEDIA_TYPE)


def _error(exc: RegistryError) -> Response:
    return _answer({"error_code": exc.code, "message": exc.message}, exc.status)


Handler = Callable[[Request, RegistryLog], Awaitable[Any]]


def _route(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        registry: RegistryLog | None = services_of(request).schema_registry
        if registry is None:
            return _answer(
                {
                    "error_code": 40401,
                    "message": "This server serves no schema registry: "
                    "'ksql.schema.registry.url' names another one, or "
                    "'headwater.schema.registry.enabled' is false",
                },
                404,
            )
        try:
            answer = await handler(request, registry)
        except RegistryError as exc:
            return _error(exc)
        if isinstance(answer, Response):
            return answer
        return _answer(answer)

    return endpoint


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").strip().lower() == "true"


async def _body(request: Request) -> Mapping[str, Any]:
    """The request's JSON object, read within the server's body timeout and at most twice the
    largest schema the registry takes (JSON escaping) plus room for the rest."""
    services = services_of(request)
    limit = 2 * services.schema_registry_limits.max_schema_bytes + 65_536
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(services.limits.body_read_timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise SchemaTooLarge(
                        "Register operation failed because schema is too large: the request "
                        f"body is larger than {limit} bytes"
                    )
                chunks.append(chunk)
    except TimeoutError:
        raise InvalidRequest(
            f"The request body did not arrive within {services.limits.body_read_timeout_s:g} s"
        ) from None
    raw = b"".join(chunks)
    try:
        parsed = orjson.loads(raw) if raw.strip() else {}
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"The request body is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise InvalidRequest("The request body must be a JSON object")
    return parsed


def _registration(request: Request, subject: str, body: Mapping[str, Any]) -> ops.Registration:
    text = body.get("schema")
    if not isinstance(text, str) or not text.strip():
        raise InvalidSchema("Invalid schema: the request has no schema (a string in 'schema')")
    kind = str(body.get("schemaType") or "AVRO").upper()
    if kind not in KINDS:
        raise InvalidSchema(f"Invalid schema type {kind}: one of {', '.join(KINDS)} expected")
    try:
        references = references_of(body.get("references"))
    except UnreadableRecord as exc:
        raise InvalidSchema(f"Invalid schema: {exc}") from None
    schema_id = body.get("id")
    version = body.get("version")
    return ops.Registration(
        subject=subject,
        kind=kind,
        text=text,
        references=references,
        metadata=body.get("metadata"),
        rule_set=body.get("ruleSet"),
        schema_id=schema_id if isinstance(schema_id, int) and schema_id > 0 else None,
        version=version if isinstance(version, int) and version > 0 else None,
        normalize=_flag(request, "normalize"),
    )


def _version_json(value: SchemaValue) -> dict[str, Any]:
    out: dict[str, Any] = {"subject": value.subject, "version": value.version, "id": value.id}
    out.update(_schema_json(value))
    return out


def _schema_json(value: SchemaValue, text: str | None = None) -> dict[str, Any]:
    """A schema's fields as Confluent answers them (``text``: the schema in the format the
    client asked for; default the stored text)."""
    out: dict[str, Any] = {}
    if value.kind != "AVRO":
        out["schemaType"] = value.kind
    if value.references:
        out["references"] = [r.to_json() for r in value.references]
    if value.metadata is not None:
        out["metadata"] = value.metadata
    if value.rule_set is not None:
        out["ruleSet"] = value.rule_set
    out["schema"] = value.text if text is None else text
    return out


def _schema_id(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise SchemaNotFound(raw) from None


def _settings_of(request: Request) -> ops.Limits:
    limits: ops.Limits = services_of(request).schema_registry_limits
    return limits


# -- root, types ---------------------------------------------------------------------------------


async def root(request: Request, registry: RegistryLog) -> Any:
    return {}


async def schema_types(request: Request, registry: RegistryLog) -> Any:
    return sorted(KINDS)


async def contexts(request: Request, registry: RegistryLog) -> Any:
    return ["."]


# -- subjects ------------------------------------------------------------------------------------


async def list_subjects(request: Request, registry: RegistryLog) -> Any:
    prefix = request.query_params.get("subjectPrefix", "")
    deleted = _flag(request, "deleted")
    names = registry.read(lambda s: s.subject_names(deleted))
    return [n for n in names if n.startswith(prefix)]


async def list_versions(request: Request, registry: RegistryLog) -> Any:
    subject = request.path_params["subject"]
    deleted = _flag(request, "deleted")
    found = registry.read(lambda s: s.versions(subject, deleted))
    if not found:
        raise SubjectNotFound(subject)
    return [v.version for v in found]


async def register(request: Request, registry: RegistryLog) -> Any:
    subject = request.path_params["subject"]
    wanted = _registration(request, subject, await _body(request))
    limits = _settings_of(request)
    value: SchemaValue = await run_in_threadpool(
        registry.write, lambda state: ops.register(state, wanted, limits)
    )
    return {"id": value.id, "version": value.version, **_schema_json(value)}


async def get_version(request: Request, registry: RegistryLog) -> Any:
    subject, spec = request.path_params["subject"], request.path_params["version"]
    deleted = _flag(request, "deleted")
    fmt = request.query_params.get("format", "")

    def read(state: RegistryState) -> dict[str, Any]:
        value = ops.resolve_version(state, subject, spec, deleted)
        out: dict[str, Any] = {"subject": value.subject, "version": value.version, "id": value.id}
        return out | _schema_json(value, ops.formatted(state, value, fmt))

    found: dict[str, Any] = await run_in_threadpool(registry.read, read)  # format: a parse
    return found


async def get_version_schema(request: Request, registry: RegistryLog) -> Any:
    subject, spec = request.path_params["subject"], request.path_params["version"]
    deleted = _flag(request, "deleted")
    value = registry.read(lambda s: ops.resolve_version(s, subject, spec, deleted))
    return Response(value.text, media_type=MEDIA_TYPE)


async def referenced_by(request: Request, registry: RegistryLog) -> Any:
    subject, spec = request.path_params["subject"], request.path_params["version"]

    def read(state: RegistryState) -> list[int]:
        value = ops.resolve_version(state, subject, spec)
        return state.referenced_by(subject, value.version)

    found: list[int] = registry.read(read)
    return found


async def delete_version(request: Request, registry: RegistryLog) -> Any:
    subject, spec = request.path_params["subject"], request.path_params["version"]
    permanent = _flag(request, "permanent")
    return await run_in_threadpool(
        registry.write, lambda state: ops.delete_version(state, subject, spec, permanent)
    )


async def lookup(request: Request, registry: RegistryLog) -> Any:
    subject = request.path_params["subject"]
    wanted = _registration(request, subject, await _body(request))
    deleted = _flag(request, "deleted")

    value = await run_in_threadpool(registry.read, lambda state: ops.lookup(state, wanted, deleted))
    return _version_json(value)


async def delete_subject(request: Request, registry: RegistryLog) -> Any:
    subject = request.path_params["subject"]
    permanent = _flag(request, "permanent")
    return await run_in_threadpool(
        registry.write, lambda state: ops.delete_subject(state, subject, permanent)
    )


# -- schemas by id -------------------------------------------------------------------------------


async def schema_by_id(request: Request, registry: RegistryLog) -> Any:
    schema_id = _schema_id(request.path_params["id"])
    fmt = request.query_params.get("format", "")

    def read(state: RegistryState) -> dict[str, Any]:
        value = ops.schema_by_id(state, schema_id)
        return _schema_json(value, ops.formatted(state, value, fmt))

    found: dict[str, Any] = await run_in_threadpool(registry.read, read)  # format: a parse
    return found


async def schema_text_by_id(request: Request, registry: RegistryLog) -> Any:
    schema_id = _schema_id(request.path_params["id"])
    value = registry.read(lambda s: ops.schema_by_id(s, schema_id))
    return Response(value.text, media_type=MEDIA_TYPE)


async def subjects_of_id(request: Request, registry: RegistryLog) -> Any:
    schema_id = _schema_id(request.path_params["id"])
    deleted = _flag(request, "deleted")

    def read(state: RegistryState) -> list[str]:
        ops.schema_by_id(state, schema_id)
        return sorted({v.subject for v in state.uses_of(schema_id, deleted)})

    return registry.read(read)


async def versions_of_id(request: Request, registry: RegistryLog) -> Any:
    schema_id = _schema_id(request.path_params["id"])
    deleted = _flag(request, "deleted")

    def read(state: RegistryState) -> list[dict[str, Any]]:
        ops.schema_by_id(state, schema_id)
        return [
            {"subject": v.subject, "version": v.version} for v in state.uses_of(schema_id, deleted)
        ]

    return registry.read(read)


async def list_schemas(request: Request, registry: RegistryLog) -> Any:
    prefix = request.query_params.get("subjectPrefix", "")
    deleted = _flag(request, "deleted")
    latest_only = _flag(request, "latestOnly")

    def read(state: RegistryState) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for name in state.subject_names(deleted):
            if not name.startswith(prefix):
                continue
            versions = state.versions(name, deleted)
            found.extend(_version_json(v) for v in (versions[-1:] if latest_only else versions))
        return found

    return registry.read(read)


# -- config and mode -----------------------------------------------------------------------------


async def get_config(request: Request, registry: RegistryLog) -> Any:
    subject = request.path_params.get("subject")
    default_to_global = _flag(request, "defaultToGlobal")

    def read(state: RegistryState) -> dict[str, Any]:
        config = state.config(subject)
        if config is None and subject is not None and not default_to_global:
            raise SubjectLevelNotConfigured(subject)
        return {"compatibilityLevel": ops.level_of(state, subject)} | {
            k: v for k, v in (config or {}).items() if k != "compatibilityLevel"
        }

    return registry.read(read)


async def put_config(request: Request, registry: RegistryLog) -> Any:
    subject = request.path_params.get("subject")
    body = await _body(request)
    return await run_in_threadpool(
        registry.write, lambda state: ops.set_config(state, subject, body)
    )


async def delete_config(request: Request, registry: RegistryLog) -> Any:
    subject = request.path_params.get("subject")
    if subject is not None and registry.read(lambda s: s.config(subject)) is None:
        raise SubjectNotFound(subject)
    return await run_in_threadpool(registry.write, lambda state: ops.delete_config(state, subject))


async def get_mode(request: Request, registry: RegistryLog) -> Any:
    subject = request.path_params.get("subject")
    default_to_global = _flag(request, "defaultToGlobal")

    def read(state: RegistryState) -> dict[str, Any]:
        if subject is not None and state.mode(subject) is None and not default_to_global:
            raise SubjectLevelNotConfigured(subject, "mode")
        return {"mode": ops.mode_of(state, subject)}

    return registry.read(read)


async def put_mode(request: Request, registry: RegistryLog) -> Any:
    subject = request.path_params.get("subject")
    body = await _body(request)
    force = _flag(request, "force")
    return await run_in_threadpool(
        registry.write, lambda state: ops.set_mode(state, subject, body.get("mode"), force)
    )


async def delete_mode(request: Request, registry: RegistryLog) -> Any:
    subject = request.path_params["subject"]
    return await run_in_threadpool(registry.write, lambda state: ops.delete_mode(state, subject))


# -- compatibility -------------------------------------------------------------------------------


async def check_compatibility(request: Request, registry: RegistryLog) -> Any:
    subject = request.path_params["subject"]
    spec = request.path_params.get("version", "")
    wanted = _registration(request, subject, await _body(request))
    found = await run_in_threadpool(registry.read, lambda s: ops.check(s, subject, spec, wanted))
    answer: dict[str, Any] = {"is_compatible": not found}
    if _flag(request, "verbose"):
        answer["messages"] = found
    return answer


#: (path under :data:`PREFIX`, method, handler, what it does), Confluent's v1 API.
ENDPOINTS: list[tuple[str, str, Handler, str]] = [
    ("/", "GET", root, "The registry answers"),
    ("/contexts", "GET", contexts, "The contexts (only the default one)"),
    ("/schemas/types", "GET", schema_types, "The schema kinds: AVRO, JSON, PROTOBUF"),
    ("/schemas", "GET", list_schemas, "Every version (subjectPrefix, deleted, latestOnly)"),
    ("/schemas/ids/{id}", "GET", schema_by_id, "A schema by id (format=serialized)"),
    ("/schemas/ids/{id}/schema", "GET", schema_text_by_id, "A schema's text by id"),
    ("/schemas/ids/{id}/subjects", "GET", subjects_of_id, "The subjects using an id"),
    ("/schemas/ids/{id}/versions", "GET", versions_of_id, "The versions using an id"),
    ("/subjects", "GET", list_subjects, "The subjects (subjectPrefix, deleted)"),
    ("/subjects/{subject}", "POST", lookup, "Look a schema up under a subject"),
    ("/subjects/{subject}", "DELETE", delete_subject, "Delete a subject (permanent)"),
    ("/subjects/{subject}/versions", "GET", list_versions, "A subject's versions"),
    ("/subjects/{subject}/versions", "POST", register, "Register a schema (normalize)"),
    ("/subjects/{subject}/versions/{version}", "GET", get_version, "A version or latest"),
    ("/subjects/{subject}/versions/{version}", "DELETE", delete_version, "Delete a version"),
    ("/subjects/{subject}/versions/{version}/schema", "GET", get_version_schema, "Its text"),
    (
        "/subjects/{subject}/versions/{version}/referencedby",
        "GET",
        referenced_by,
        "The ids of the schemas referencing a version",
    ),
    ("/config", "GET", get_config, "The global compatibility level"),
    ("/config", "PUT", put_config, "Set the global compatibility level"),
    ("/config", "DELETE", delete_config, "Back to the default level"),
    ("/config/{subject}", "GET", get_config, "A subject's level (defaultToGlobal)"),
    ("/config/{subject}", "PUT", put_config, "Set a subject's level"),
    ("/config/{subject}", "DELETE", delete_config, "Remove a subject's level"),
    ("/mode", "GET", get_mode, "The global mode"),
    ("/mode", "PUT", put_mode, "Set the global mode (force)"),
    ("/mode/{subject}", "GET", get_mode, "A subject's mode (defaultToGlobal)"),
    ("/mode/{subject}", "PUT", put_mode, "Set a subject's mode"),
    ("/mode/{subject}", "DELETE", delete_mode, "Remove a subject's mode"),
    (
        "/compatibility/subjects/{subject}/versions",
        "POST",
        check_compatibility,
        "Check a schema against every version (verbose)",
    ),
    (
        "/compatibility/subjects/{subject}/versions/{version}",
        "POST",
        check_compatibility,
        "Check a schema against a version (verbose)",
    ),
]


def _routes() -> list[BaseRoute]:
    by_path: dict[str, dict[str, Handler]] = {}
    for path, method, handler, _ in ENDPOINTS:
        by_path.setdefault(path, {})[method] = handler
    return [
        Route(path, _route(handler), methods=[method])
        for path, methods in by_path.items()
        for method, handler in methods.items()
    ]


ROUTES: list[BaseRoute] = [Mount(PREFIX, routes=_routes())]
"""The registry's routes, under :data:`PREFIX`."""
