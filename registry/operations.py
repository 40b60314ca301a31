"""What each write to the registry decides, against a state: the record to append, or Confluent's
error. Pure (the writer in ``log.py`` appends what these return).

Confluent's rules, as its ``KafkaSchemaRegistry`` applies them:

- registering a schema a subject already has (live) answers that version and writes nothing; a
  schema known under another subject keeps its id; a new one takes the next id. The new version is
  the subject's highest (soft-deleted ones included) + 1;
- the subject's compatibility level (else the global one, else BACKWARD) is checked against its
  live versions before anything is written;
- a subject or version is soft deleted first and only then removed for good (``permanent``);
  a version another schema references cannot be deleted;
- ``READONLY`` (subject, else global mode) refuses writes; ``IMPORT`` lets a registration give its
  own id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from headwater.registry import compatibility, protobuf_descriptors
from headwater.registry import records as rec
from headwater.registry.compatibility import DEFAULT_LEVEL, LEVELS
from headwater.registry.errors import (
    IncompatibleSchema,
    InvalidCompatibilityLevel,
    InvalidMode,
    InvalidSchema,
    InvalidVersion,
    OperationNotPermitted,
    ReferenceExists,
    SchemaNotFound,
    SchemaTooLarge,
    SubjectNotFound,
    SubjectNotSoftDeleted,
    SubjectSoftDeleted,
    VersionNotFound,
    VersionNotSoftDeleted,
    VersionSoftDeleted,
)
from headwater.registry.records import Record, Reference, SchemaValue
from headwater.registry.state import Content, RegistryState
from headwater.registry.subject import Subject

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_MODE = "READWRITE"


@dataclass(frozen=True, slots=True)
class Limits:
    """What one client may make the registry hold."""

    max_schema_bytes: int = 1_000_000
    max_versions_per_subject: int = 1_000
    max_schemas: int = 100_000
    max_total_bytes: int = 256_000_000


@dataclass(frozen=True, slots=True)
class Registration:
    """A schema as a client asks to register it (the body of POST .../versions)."""

    subject: str
    kind: str
    text: str
    references: tuple[Reference, ...] = ()
    metadata: Any = None
    rule_set: Any = None
    schema_id: int | None = None
    version: int | None = None
    normalize: bool = False


@dataclass(frozen=True, slots=True)
class Decision:
    """What a write decided: the record to append (None: nothing to write) and the answer."""

    record: Record | None
    answer: Any


# -- reads shared with the API -----------------------------------------------------------------


def level_of(state: RegistryState, subject: str | None) -> str:
    """The compatibility level in force for a subject: its own, else the global one."""
    for scope in (subject, None):
        config = state.config(scope)
        if config and config.get("compatibilityLevel"):
            return str(config["compatibilityLevel"])
    return DEFAULT_LEVEL


def mode_of(state: RegistryState, subject: str | None) -> str:
    for scope in (subject, None):
        mode = state.mode(scope)
        if mode:
            return mode
    return DEFAULT_MODE


def resolve_version(
    state: RegistryState, subject: str, spec: str, deleted: bool = False
) -> SchemaValue:
    """A subject's version by number or ``latest`` (``-1`` too), as the API's paths name it.

    Raises:
        SubjectNotFound, VersionNotFound, InvalidVersion.
    """
    number = -1 if spec == "latest" else parse_version(spec)  # a bad version is told first
    versions = state.versions(subject, deleted=deleted)
    if not state.versions(subject, deleted=True) or (not versions and not deleted):
        raise SubjectNotFound(subject)
    if number == -1:
        if not versions:
            raise SubjectNotFound(subject)
        return versions[-1]
    for value in versions:
        if value.version == number:
            return value
    raise VersionNotFound(spec)


def parse_version(spec: str) -> int:
    try:
        number = int(spec)
    except ValueError:
        raise InvalidVersion(spec) from None
    if number < 1 and number != -1:
        raise InvalidVersion(spec)
    return number


def subject_of(state: RegistryState, value: SchemaValue) -> Subject:
    """The rules' view of a stored version, its references resolved."""
    return Subject(value.kind, value.text, _referenced(state, value.references))


def _referenced(state: RegistryState, refs: Sequence[Reference]) -> dict[str, str]:
    """The texts of the schemas ``refs`` name (and of theirs), by reference name."""
    found: dict[str, str] = {}
    pending = list(refs)
    seen: set[tuple[str, int]] = set()
    while pending:
        ref = pending.pop()
        if (ref.subject, ref.version) in seen:
            continue
        seen.add((ref.subject, ref.version))
        target = next(
            (v for v in state.versions(ref.subject, deleted=True) if v.version == ref.version),
            None,
        )
        if target is None:
            raise InvalidSchema(
                f"Invalid schema: reference {ref.name} names subject '{ref.subject}' version "
                f"{ref.version}, which does not exist"
            )
        found.setdefault(ref.name, target.text)
        pending.extend(target.references)
    return found


def _given(state: RegistryState, request: Registration) -> Subject:
    """The rules' view of a schema a client gives: PROTOBUF given as a base64
    ``FileDescriptorProto`` (what confluent-kafka's ProtobufSerializer sends) becomes its
    ``.proto`` text, as Confluent's registry takes it."""
    references = _referenced(state, request.references)
    text = request.text
    if request.kind == "PROTOBUF" and protobuf_descriptors.looks_serialized(text):
        text = protobuf_descriptors.to_text(text)
    return Subject(request.kind, text, references)


def formatted(state: RegistryState, value: SchemaValue, fmt: str) -> str:
    """A stored schema's text in the ``format`` a client asks for: ``serialized`` gives a
    PROTOBUF schema as the base64 ``FileDescriptorProto`` confluent-kafka's clients read;
    anything else, the stored text."""
    if fmt == "serialized" and value.kind == "PROTOBUF":
        return protobuf_descriptors.to_serialized(value.text, _referenced(state, value.references))
    return value.text


# -- writes -------------------------------------------------------------------------------------


def register(state: RegistryState, request: Registration, limits: Limits) -> Decision:
    """Registers a schema under a subject (POST /subjects/{subject}/versions)."""
    mode = mode_of(state, request.subject)
    if mode in ("READONLY", "READONLY_OVERRIDE"):
        raise OperationNotPermitted(f"Subject {request.subject} is in read-only mode")
    if request.schema_id is not None and mode != "IMPORT":
        raise OperationNotPermitted(
            "Subject "
            f"{request.subject} is not in import mode: a registration may not give its own id"
        )
    if len(request.text.encode()) > limits.max_schema_bytes:
        raise SchemaTooLarge(
            f"Register operation failed because schema is too large: it is "
            f"{len(request.text.encode())} bytes, the registry takes at most "
            f"{limits.max_schema_bytes}"
        )
    kind = compatibility.rules(request.kind)
    given = _given(state, request)
    kind.parse(given)
    text = kind.canonical(given, normalize=request.normalize)
    value = SchemaValue(
        subject=request.subject,
        version=0,
        id=0,
        kind=request.kind,
        text=text,
        references=request.references,
        metadata=request.metadata,
        rule_set=request.rule_set,
    )
    content = Content.of(value)
    for live in state.versions(request.subject):
        if Content.of(live) == content:
            return Decision(None, live)
    previous = state.versions(request.subject)
    if len(state.versions(request.subject, deleted=True)) >= limits.max_versions_per_subject:
        raise InvalidSchema(
            f"Invalid schema: subject '{request.subject}' has "
            f"{limits.max_versions_per_subject} versions, the registry's limit"
        )
    found = compatibility.problems(
        level_of(state, request.subject),
        Subject(request.kind, text, given.references),
        [(v.version, subject_of(state, v)) for v in previous],
    )
    if found:
        raise IncompatibleSchema(request.subject, found)
    schema_id = state.id_of.get(content)
    if request.schema_id is not None:
        known = state.by_id.get(request.schema_id)
        if known is not None and Content.of(known) != content:
            raise OperationNotPermitted(
                f"Overwrite new schema with id {request.schema_id} is not permitted."
            )
        schema_id = request.schema_id
    adds_text = schema_id is None or schema_id not in state.by_id
    if adds_text and state.text_bytes + len(text.encode()) > limits.max_total_bytes:
        raise InvalidSchema(
            f"Invalid schema: the registry holds {state.text_bytes} bytes of schemas; this "
            f"one would pass its limit of {limits.max_total_bytes}"
        )
    if schema_id is None:
        if len(state.by_id) >= limits.max_schemas:
            raise InvalidSchema(
                f"Invalid schema: the registry holds {limits.max_schemas} schemas, its limit"
            )
        schema_id = state.next_id()
    number = max((v.version for v in state.versions(request.subject, deleted=True)), default=0) + 1
    if request.version is not None and mode == "IMPORT":
        number = request.version
    new = SchemaValue(
        subject=request.subject,
        version=number,
        id=schema_id,
        kind=request.kind,
        text=text,
        references=request.references,
        metadata=request.metadata,
        rule_set=request.rule_set,
    )
    return Decision(Record(rec.SCHEMA, request.subject, number, new), new)


def delete_version(state: RegistryState, subject: str, spec: str, permanent: bool) -> Decision:
    """DELETE /subjects/{subject}/versions/{version}: soft, or for good once soft deleted."""
    _writable(state, subject)
    value = resolve_version(state, subject, spec, deleted=spec not in ("latest", "-1"))
    users = state.referenced_by(subject, value.version)
    if users:
        raise ReferenceExists(
            f"One or more references exist to the schema {{magic=1,keytype=SCHEMA,"
            f"subject={subject},version={value.version}}}."
        )
    if permanent:
        if not value.deleted:
            raise VersionNotSoftDeleted(subject, value.version)
        return Decision(Record(rec.SCHEMA, subject, value.version, None), value.version)
    if value.deleted:
        raise VersionSoftDeleted(subject, value.version)
    gone = SchemaValue(**{**_fields(value), "deleted": True})
    return Decision(Record(rec.SCHEMA, subject, value.version, gone), value.version)


def delete_subject(state: RegistryState, subject: str, permanent: bool) -> Decision:
    """DELETE /subjects/{subject}: soft deletes every version, or removes them once soft deleted."""
    _writable(state, subject)
    every = state.versions(subject, deleted=True)
    if not every:
        raise SubjectNotFound(subject)
    live = [v for v in every if not v.deleted]
    for value in live if not permanent else every:
        if state.referenced_by(subject, value.version):
            raise ReferenceExists(
                f"One or more references exist to the schema {{magic=1,keytype=SCHEMA,"
                f"subject={subject},version={value.version}}}."
            )
    last = every[-1].version
    if permanent:
        if live:
            raise SubjectNotSoftDeleted(subject)
        record = Record(rec.CLEAR_SUBJECT, subject, last, {"subject": subject, "version": last})
        return Decision(record, [v.version for v in every])
    if not live:
        raise SubjectSoftDeleted(subject)
    record = Record(rec.DELETE_SUBJECT, subject, last, {"subject": subject, "version": last})
    return Decision(record, [v.version for v in live])


def set_config(state: RegistryState, subject: str | None, body: Mapping[str, Any]) -> Decision:
    """PUT /config[/{subject}]: the compatibility level (and the settings passed along)."""
    level = body.get("compatibility", body.get("compatibilityLevel"))
    if not isinstance(level, str) or level.upper() not in LEVELS:
        raise InvalidCompatibilityLevel()
    stored: dict[str, Any] = {
        k: v
        for k, v in body.items()
        if k not in ("compatibility", "compatibilityLevel") and v is not None
    }
    stored["compatibilityLevel"] = level.upper()
    answer = {
        "compatibility": level.upper(),
        **{k: v for k, v in stored.items() if k != "compatibilityLevel"},
    }
    return Decision(Record(rec.CONFIG, subject, None, stored), answer)


def delete_config(state: RegistryState, subject: str | None) -> Decision:
    """DELETE /config[/{subject}]: back to the global level (or, globally, to the default)."""
    previous = level_of(state, subject)
    return Decision(Record(rec.CONFIG, subject, None, None), {"compatibilityLevel": previous})


def set_mode(state: RegistryState, subject: str | None, mode: Any, force: bool) -> Decision:
    """PUT /mode[/{subject}]. IMPORT needs an empty registry (or subject) unless forced."""
    if not isinstance(mode, str) or mode.upper() not in MODES:
        raise InvalidMode()
    mode = mode.upper()
    if mode == "IMPORT" and not force:
        holds = state.versions(subject, deleted=True) if subject else state.by_id
        if holds:
            raise OperationNotPermitted(
                "Cannot import since found existing subjects"
                if subject is None
                else f"Cannot import since found existing subject {subject}"
            )
    return Decision(Record(rec.MODE, subject, None, {"mode": mode}), {"mode": mode})


def delete_mode(state: RegistryState, subject: str) -> Decision:
    return Decision(Record(rec.MODE, subject, None, None), {"mode": mode_of(state, subject)})


def _writable(state: RegistryState, subject: str) -> None:
    if mode_of(state, subject) in ("READONLY", "READONLY_OVERRIDE"):
        raise OperationNotPermitted(f"Subject {subject} is in read-only mode")


def _fields(value: SchemaValue) -> dict[str, Any]:
    return {name: getattr(value, name) for name in SchemaValue.__dataclass_fields__}


def check(state: RegistryState, subject: str, spec: str, request: Registration) -> list[str]:
    """POST /compatibility/subjects/{subject}/versions/{version}: why ``request`` could not be
    registered after that version (``latest``), or after all of them (no version): [] if it could."""
    kind = compatibility.rules(request.kind)
    given = _given(state, request)
    kind.parse(given)
    new = Subject(request.kind, kind.canonical(given, request.normalize), given.references)
    level = level_of(state, subject)
    if spec:
        try:
            value = resolve_version(state, subject, spec)
        except SubjectNotFound:
            if spec in ("latest", "-1"):
                return []
            raise
        previous = [(value.version, subject_of(state, value))]
        if level.endswith("_TRANSITIVE"):
            level = level.removesuffix("_TRANSITIVE")
    else:
        previous = [(v.version, subject_of(state, v)) for v in state.versions(subject)]
    return compatibility.problems(level, new, previous)


def lookup(state: RegistryState, request: Registration, deleted: bool) -> SchemaValue:
    """POST /subjects/{subject}: the subject's version holding this schema, newest first.

    Raises:
        SubjectNotFound, SchemaNotFound, InvalidSchema.
    """
    versions = state.versions(request.subject, deleted)
    if not versions:
        raise SubjectNotFound(request.subject)
    kind = compatibility.rules(request.kind)
    given = _given(state, request)
    kind.parse(given)
    probe = SchemaValue(
        subject=request.subject,
        version=0,
        id=0,
        kind=request.kind,
        text=kind.canonical(given, normalize=request.normalize),
        references=request.references,
        metadata=request.metadata,
        rule_set=request.rule_set,
    )
    content = Content.of(probe)
    for value in reversed(versions):
        if Content.of(value) == content:
            return value
    raise SchemaNotFound()


def schema_by_id(state: RegistryState, schema_id: int) -> SchemaValue:
    """The schema of an id that some version (soft-deleted ones too) still uses.

    Raises:
        SchemaNotFound.
    """
    value = state.schema(schema_id)
    if value is None or next(state.uses_of(schema_id, deleted=True), None) is None:
        raise SchemaNotFound(schema_id)
    return value
