"""The records of the registry's topic, in Confluent Schema Registry's ``_schemas`` format. Pure.

Every record's key and value are JSON, as Confluent's ``KafkaStore`` writes them, so a topic
written by Confluent's registry can be read here and one written here by Confluent's:

- ``{"keytype":"SCHEMA","subject":s,"version":v,"magic":1}`` -> ``{"subject","version","id",
  "schema","schemaType"?,"references"?,"metadata"?,"ruleSet"?,"deleted"}``; a null value removes
  that version for good (a permanent delete);
- ``{"keytype":"CONFIG","subject":s|null,"magic":0}`` -> ``{"compatibilityLevel":...}``, null
  removes the subject's setting (``subject`` null: the global one);
- ``{"keytype":"MODE","subject":s|null,"magic":0}`` -> ``{"mode":...}`` or null;
- ``{"keytype":"DELETE_SUBJECT","subject":s,"magic":0}`` -> ``{"subject":s,"version":v}``: every
  version up to ``v`` is soft deleted;
- ``{"keytype":"CLEAR_SUBJECT","subject":s,"magic":0}`` -> ``{"subject":s,"version":v}``: every
  version up to ``v`` is gone;
- ``{"keytype":"NOOP","magic":0}``: nothing (Confluent's readers write it to find the end).

headwater adds one record header, ``headwater-validated-end``: the topic's end offset when its writer
decided the record (see ``state.Fold``). Confluent's readers ignore headers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

#: The header carrying the end offset a headwater writer decided a record against.
VALIDATED_END = "headwater-validated-end"

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
DELETE_SUBJECT = "DELETE_SUBJECT"
CLEAR_SUBJECT = "CLEAR_SUBJECT"
NOOP = "NOOP"
KEY_TYPES = (SCHEMA, CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT, NOOP)


class UnreadableRecord(ValueError):
    """A record of the topic that is not one of the registry's."""


@dataclass(frozen=True, slots=True)
class Reference:
    """A schema's reference to a version of another subject, named as the schema names it."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True, slots=True)
class SchemaValue:
    """One version of a subject: its schema's id, kind, text, references and state."""

    subject: str
    version: int
    id: int
    kind: str
    text: str
    references: tuple[Reference, ...] = ()
    metadata: Any = None
    rule_set: Any = None
    deleted: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "subject": self.subject,
            "version": self.version,
            "id": self.id,
            "schema": self.text,
            "deleted": self.deleted,
        }
        if self.kind != "AVRO":
            out["schemaType"] = self.kind
        if self.references:
            out["references"] = [r.to_json() for r in self.references]
        if self.metadata is not None:
            out["metadata"] = self.metadata
        if self.rule_set is not None:
            out["ruleSet"] = self.rule_set
        return out


@dataclass(frozen=True, slots=True)
class Record:
    """A decoded record: its key type, subject (None: global), version (SCHEMA, DELETE_SUBJECT
    and CLEAR_SUBJECT) and value (None: a tombstone)."""

    keytype: str
    subject: str | None = None
    version: int | None = None
    value: SchemaValue | Mapping[str, Any] | None = None
    validated_end: int | None = None
    headers: Mapping[str, bytes] = field(default_factory=dict)


def references_of(raw: Any) -> tuple[Reference, ...]:
    """References as the API and the topic give them: a list of {name, subject, version}."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise UnreadableRecord("references must be a list")
    found = []
    for item in raw:
        if not isinstance(item, Mapping):
            raise UnreadableRecord("a reference must be an object")
        try:
            found.append(Reference(str(item["name"]), str(item["subject"]), int(item["version"])))
        except (KeyError, TypeError, ValueError):
            raise UnreadableRecord("a reference needs a name, a subject and a version") from None
    return tuple(found)


def encode(record: Record) -> tuple[bytes, bytes | None]:
    """The key and value bytes of a record."""
    key: dict[str, Any] = {"keytype": record.keytype}
    if record.keytype != NOOP:
        key["subject"] = record.subject
    if record.keytype == SCHEMA:
        key["version"] = record.version
    key["magic"] = 1 if record.keytype == SCHEMA else 0
    value = record.value
    if value is None:
        return orjson.dumps(key), None
    body = value.to_json() if isinstance(value, SchemaValue) else dict(value)
    return orjson.dumps(key), orjson.dumps(body)


def decode(key: bytes | None, value: bytes | None, validated_end: int | None = None) -> Record:
    """A record from its key and value bytes.

    Raises:
        UnreadableRecord: the key or value is not a registry record.
    """
    try:
        parsed_key = orjson.loads(key or b"")
        parsed_value = None if value is None else orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise UnreadableRecord(f"not JSON: {exc}") from None
    if not isinstance(parsed_key, dict) or parsed_key.get("keytype") not in KEY_TYPES:
        raise UnreadableRecord(f"not a registry key: {key!r:.200}")
    keytype = parsed_key["keytype"]
    subject = parsed_key.get("subject")
    if subject is not None and not isinstance(subject, str):
        raise UnreadableRecord("a key's subject must be a string")
    if keytype == NOOP:
        return Record(NOOP)
    if parsed_value is not None and not isinstance(parsed_value, dict):
        raise UnreadableRecord(f"a {keytype} value must be an object")
    if keytype == SCHEMA:
        return _schema_record(parsed_key, parsed_value, validated_end)
    if keytype in (DELETE_SUBJECT, CLEAR_SUBJECT):
        if parsed_value is None or not isinstance(subject, str):
            raise UnreadableRecord(f"a {keytype} record needs a subject and a value")
        version = _int(parsed_value.get("version"), "version")
        return Record(keytype, subject, version, parsed_value, validated_end)
    return Record(keytype, subject, None, parsed_value, validated_end)


def _int(raw: Any, what: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise UnreadableRecord(f"{what} must be an integer, not {raw!r:.50}")
    return raw


def _schema_record(key: dict[str, Any], value: dict[str, Any] | None, end: int | None) -> Record:
    subject = key.get("subject")
    if not isinstance(subject, str):
        raise UnreadableRecord("a SCHEMA key needs a subject")
    version = _int(key.get("version"), "version")
    if value is None:
        return Record(SCHEMA, subject, version, None, end)
    text = value.get("schema")
    if not isinstance(text, str):
        raise UnreadableRecord("a SCHEMA value needs its schema text")
    kind = value.get("schemaType") or "AVRO"
    schema = SchemaValue(
        subject=subject,
        version=version,
        id=_int(value.get("id"), "id"),
        kind=str(kind).upper(),
        text=text,
        references=references_of(value.get("references")),
        metadata=value.get("metadata"),
        rule_set=value.get("ruleSet"),
        deleted=bool(value.get("deleted", False)),
    )
    return Record(SCHEMA, subject, version, schema, end)
