"""What each registry write decides (Confluent's rules and errors), over a folded state, with a
stand-in kind whose compatibility is spelled in the schema ("breaks" refuses what came before)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from headwater.registry import compatibility
from headwater.registry import operations as ops
from headwater.registry.errors import (
    IncompatibleSchema,
    InvalidCompatibilityLevel,
    InvalidSchema,
    OperationNotPermitted,
    ReferenceExists,
    SchemaTooLarge,
    SubjectNotFound,
    SubjectNotSoftDeleted,
    VersionNotFound,
    VersionNotSoftDeleted,
)
from headwater.registry.records import Reference
from headwater.registry.state import RegistryState
from headwater.registry.subject import Subject


class Stand:
    KIND = "AVRO"

    @staticmethod
    def parse(subject: Subject) -> Any:
        try:
            return orjson.loads(subject.text)
        except orjson.JSONDecodeError:
            raise InvalidSchema("Invalid schema: not JSON") from None

    @staticmethod
    def canonical(subject: Subject, normalize: bool = False) -> str:
        return orjson.dumps(orjson.loads(subject.text)).decode()

    @staticmethod
    def backward_problems(new: Subject, old: Subject) -> list[str]:
        return ["{errorType:'BREAKS'}"] if "breaks" in new.text else []


@pytest.fixture(autouse=True)
def stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compatibility, "rules", lambda kind: Stand)


def apply(state: RegistryState, decision: ops.Decision) -> Any:
    if decision.record is not None:
        assert state.feed(state.next_offset, decision.record)
    return decision.answer


def reg(state: RegistryState, subject: str, text: str, **kw: Any) -> Any:
    request = ops.Registration(subject, "AVRO", text, **kw)
    return apply(state, ops.register(state, request, ops.Limits()))


def test_a_registration_takes_the_next_id_and_version_and_repeats_are_free() -> None:
    state = RegistryState()
    first = reg(state, "s", '{"a": 1}')
    assert (first.id, first.version) == (1, 1)
    decision = ops.register(state, ops.Registration("s", "AVRO", '{ "a" : 1 }'), ops.Limits())
    assert decision.record is None and decision.answer.id == 1  # the same schema: nothing written
    assert reg(state, "other", '{"a": 1}').id == 1  # another subject keeps its id
    second = reg(state, "s", '{"a": 2}')
    assert (second.id, second.version) == (2, 2)


def test_the_subjects_level_decides_and_the_global_one_else() -> None:
    state = RegistryState()
    reg(state, "s", '{"a": 1}')
    with pytest.raises(IncompatibleSchema) as refused:
        reg(state, "s", '{"breaks": 1}')
    assert refused.value.status == 409
    assert "{oldSchemaVersion: 1}" in refused.value.message
    assert "{compatibility: 'BACKWARD'}" in refused.value.message
    apply(state, ops.set_config(state, "s", {"compatibility": "none"}))
    assert ops.level_of(state, "s") == "NONE" and ops.level_of(state, None) == "BACKWARD"
    assert reg(state, "s", '{"breaks": 1}').version == 2
    with pytest.raises(InvalidCompatibilityLevel):
        ops.set_config(state, None, {"compatibility": "SIDEWAYS"})


def test_soft_delete_comes_before_hard_delete_and_versions_keep_counting() -> None:
    state = RegistryState()
    reg(state, "s", '{"a": 1}')
    reg(state, "s", '{"a": 2}')
    with pytest.raises(VersionNotSoftDeleted):
        ops.delete_version(state, "s", "1", permanent=True)
    assert apply(state, ops.delete_version(state, "s", "1", permanent=False)) == 1
    assert apply(state, ops.delete_version(state, "s", "1", permanent=True)) == 1
    with pytest.raises(VersionNotFound):
        ops.resolve_version(state, "s", "1")
    with pytest.raises(SubjectNotSoftDeleted):
        ops.delete_subject(state, "s", permanent=True)
    assert apply(state, ops.delete_subject(state, "s", permanent=False)) == [2]
    with pytest.raises(SubjectNotFound):
        ops.resolve_version(state, "s", "latest")
    # a soft-deleted subject's next version continues its numbering
    assert reg(state, "s", '{"a": 3}').version == 3


def test_referenced_versions_cannot_be_deleted_and_references_must_exist() -> None:
    state = RegistryState()
    reg(state, "base", '{"b": 1}')
    with pytest.raises(InvalidSchema):
        reg(state, "user", '{"u": 1}', references=(Reference("b", "base", 9),))
    reg(state, "user", '{"u": 1}', references=(Reference("b", "base", 1),))
    with pytest.raises(ReferenceExists):
        ops.delete_version(state, "base", "1", permanent=False)


def test_read_only_and_import_modes() -> None:
    state = RegistryState()
    apply(state, ops.set_mode(state, "s", "READONLY", force=False))
    with pytest.raises(OperationNotPermitted):
        reg(state, "s", '{"a": 1}')
    with pytest.raises(OperationNotPermitted):  # ids are the registry's unless importing
        reg(state, "t", '{"a": 1}', schema_id=42)
    apply(state, ops.set_mode(state, None, "IMPORT", force=False))
    apply(state, ops.delete_mode(state, "s"))
    assert reg(state, "t", '{"a": 1}', schema_id=42).id == 42
    assert reg(state, "u", '{"a": 2}').id == 43


def test_limits_bound_what_a_client_can_make_the_registry_hold() -> None:
    state = RegistryState()
    limits = ops.Limits(max_schema_bytes=20, max_versions_per_subject=2, max_schemas=3)
    with pytest.raises(SchemaTooLarge):
        ops.register(state, ops.Registration("s", "AVRO", '{"a": "' + "x" * 30 + '"}'), limits)
    for n in range(2):
        apply(state, ops.register(state, ops.Registration("s", "AVRO", f'{{"a": {n}}}'), limits))
    with pytest.raises(InvalidSchema, match="limit"):
        ops.register(state, ops.Registration("s", "AVRO", '{"a": 9}'), limits)
    apply(state, ops.register(state, ops.Registration("t", "AVRO", '{"a": 7}'), limits))
    with pytest.raises(InvalidSchema, match="limit"):
        ops.register(state, ops.Registration("u", "AVRO", '{"a": 8}'), limits)
    tight = ops.Limits(max_total_bytes=state.text_bytes + 5)
    with pytest.raises(InvalidSchema, match="bytes of schemas"):
        ops.register(state, ops.Registration("v", "AVRO", '{"abc": 8}'), tight)
    # a schema the registry holds already costs nothing more
    assert ops.register(state, ops.Registration("v", "AVRO", '{"a": 7}'), tight).answer.id


def test_compatibility_checks_against_one_version_or_all() -> None:
    state = RegistryState()
    reg(state, "s", '{"a": 1}')
    ok = ops.Registration("s", "AVRO", '{"a": 5}')
    bad = ops.Registration("s", "AVRO", '{"breaks": 5}')
    assert ops.check(state, "s", "latest", ok) == []
    assert ops.check(state, "s", "1", bad)
    assert ops.check(state, "s", "", bad)
    assert ops.check(state, "nothing-yet", "latest", bad) == []
