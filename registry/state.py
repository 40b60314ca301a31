"""The registry's state, folded from its topic's records. Pure.

Every server folds the same records in the same order into the same state, so every server
answers reads from its own copy. A record is applied or refused by rules that depend only on the
state before it, never on which server reads it:

- **compare-and-append**: a record written by headwater carries the topic's end offset its writer
  decided it against (``records.VALIDATED_END``); it is refused when a record after that point was
  applied already. Two servers deciding at once against the same end both write; the first record
  in the topic wins and the other server, seeing its own refused, decides again. A copy that lands
  late (a writer that died mid-write, a retried produce) is refused the same way.
- **one id names one schema**: a version whose id already names another schema is refused
  (records from a Confluent registry carry no validated end; this keeps its topic's ids
  consistent too). A schema gets a second id only when a client gives one in IMPORT mode, as
  Confluent allows; a registration without an id takes the schema's first id (``id_of``);
- a version that exists already may only change its ``deleted`` flag (or be removed for good).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import orjson

from headwater.registry import records as rec
from headwater.registry.records import Record, Reference, SchemaValue

#: How many decided offsets the fold remembers, for writers waiting on their record's fate.
_VERDICTS_KEPT = 4096


@dataclass(frozen=True, slots=True)
class Content:
    """What makes two registrations the same schema (and so the same id)."""

    kind: str
    text: str
    references: tuple[Reference, ...]
    metadata: str
    rule_set: str

    @classmethod
    def of(cls, value: SchemaValue) -> Content:
        return cls(
            value.kind,
            value.text,
            value.references,
            _json_key(value.metadata),
            _json_key(value.rule_set),
        )


def _json_key(raw: Any) -> str:
    return "" if raw is None else orjson.dumps(raw, option=orjson.OPT_SORT_KEYS).decode()


class RegistryState:
    """Subjects and their versions, schemas by id, configs and modes, as of ``next_offset``."""

    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, SchemaValue]] = {}
        self.by_id: dict[int, SchemaValue] = {}
        self.id_of: dict[Content, int] = {}
        self.configs: dict[str | None, dict[str, Any]] = {}
        self.modes: dict[str | None, str] = {}
        self.next_offset = 0
        self.last_applied = -1
        #: the bytes of the distinct schemas' texts held (ids are never forgotten)
        self.text_bytes = 0
        self._verdicts: OrderedDict[int, bool] = OrderedDict()

    # -- the fold ---------------------------------------------------------------------------------

    def feed(self, offset: int, record: Record) -> bool:
        """Applies the record at ``offset``, or refuses it (see the module docstring); returns
        whether it was applied."""
        applied = self._valid_now(record) and self._apply(record)
        if applied:
            self.last_applied = offset
        self.next_offset = max(self.next_offset, offset + 1)
        self._verdicts[offset] = applied
        while len(self._verdicts) > _VERDICTS_KEPT:
            self._verdicts.popitem(last=False)
        return applied

    def skip_to(self, offset: int) -> None:
        """The reader's position moved past records that are not data (transaction markers)."""
        self.next_offset = max(self.next_offset, offset)

    def verdict(self, offset: int) -> bool | None:
        """Whether the record at ``offset`` was applied (None: not decided, or long ago)."""
        return self._verdicts.get(offset)

    def _valid_now(self, record: Record) -> bool:
        return record.validated_end is None or record.validated_end > self.last_applied

    def _apply(self, record: Record) -> bool:
        if record.keytype == rec.SCHEMA:
            return self._apply_schema(record)
        if record.keytype in (rec.CONFIG, rec.MODE):
            target: dict[str | None, Any] = (
                self.configs if record.keytype == rec.CONFIG else self.modes
            )
            if record.value is None:
                target.pop(record.subject, None)
            elif record.keytype == rec.CONFIG:
                self.configs[record.subject] = dict(record.value)  # type: ignore[arg-type]
            else:
                mode = record.value.get("mode")  # type: ignore[union-attr]
                if not isinstance(mode, str):
                    return False
                self.modes[record.subject] = mode
            return True
        if record.keytype in (rec.DELETE_SUBJECT, rec.CLEAR_SUBJECT):
            assert record.subject is not None and record.version is not None
            versions = self.subjects.get(record.subject, {})
            for number in [n for n in versions if n <= record.version]:
                if record.keytype == rec.CLEAR_SUBJECT:
                    del versions[number]
                else:
                    versions[number] = replace(versions[number], deleted=True)
            if not versions:
                self.subjects.pop(record.subject, None)
            return True
        return record.keytype == rec.NOOP

    def _apply_schema(self, record: Record) -> bool:
        assert record.subject is not None and record.version is not None
        versions = self.subjects.get(record.subject, {})
        existing = versions.get(record.version)
        value = record.value
        if value is None:  # removed for good
            if existing is None:
                return False
            del versions[record.version]
            if not versions:
                del self.subjects[record.subject]
            return True
        assert isinstance(value, SchemaValue)
        if existing is not None:
            if existing.id != value.id or Content.of(existing) != Content.of(value):
                return False
            versions[record.version] = value
            return True
        content = Content.of(value)
        known = self.by_id.get(value.id)
        if known is not None and Content.of(known) != content:
            return False
        self.subjects.setdefault(record.subject, {})[record.version] = value
        if value.id not in self.by_id:
            self.by_id[value.id] = value
            self.text_bytes += len(value.text.encode())
        self.id_of.setdefault(content, value.id)
        return True

    # -- reads ------------------------------------------------------------------------------------

    def subject_names(self, deleted: bool = False) -> list[str]:
        """Subjects with a version (with ``deleted``, also those whose versions are all soft
        deleted), sorted."""
        return sorted(
            name
            for name, versions in self.subjects.items()
            if deleted or any(not v.deleted for v in versions.values())
        )

    def versions(self, subject: str, deleted: bool = False) -> list[SchemaValue]:
        """A subject's versions, oldest first (``deleted``: soft-deleted ones too)."""
        found = self.subjects.get(subject, {})
        return [found[n] for n in sorted(found) if deleted or not found[n].deleted]

    def schema(self, schema_id: int) -> SchemaValue | None:
        """The first version registered with this id (its schema), if any is known."""
        return self.by_id.get(schema_id)

    def uses_of(self, schema_id: int, deleted: bool = False) -> Iterator[SchemaValue]:
        """Every version registered with this id."""
        for name in sorted(self.subjects):
            for value in self.versions(name, deleted):
                if value.id == schema_id:
                    yield value

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the live versions whose schema references ``subject`` at ``version``."""
        return sorted(
            {
                value.id
                for versions in self.subjects.values()
                for value in versions.values()
                if not value.deleted
                and any(r.subject == subject and r.version == version for r in value.references)
            }
        )

    def next_id(self) -> int:
        return max(self.by_id, default=0) + 1

    def config(self, subject: str | None) -> Mapping[str, Any] | None:
        return self.configs.get(subject)

    def mode(self, subject: str | None) -> str | None:
        return self.modes.get(subject)
