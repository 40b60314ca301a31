"""The registry topic's records and their fold: Confluent's format, and the rules that keep every
server's copy the same and ids unique, whatever order writers race in."""

from __future__ import annotations

import orjson
import pytest

from headwater.registry import records as rec
from headwater.registry.records import Record, Reference, SchemaValue
from headwater.registry.state import RegistryState


def schema(
    subject: str, version: int, schema_id: int, text: str = '"string"', **kw: object
) -> Record:
    value = SchemaValue(subject, version, schema_id, "AVRO", text, **kw)  # type: ignore[arg-type]
    return Record(rec.SCHEMA, subject, version, value)


def test_records_are_confluents_json_both_ways() -> None:
    value = SchemaValue(
        "orders-value", 3, 7, "PROTOBUF", "syntax...", (Reference("a.proto", "a", 1),)
    )
    key, body = rec.encode(Record(rec.SCHEMA, "orders-value", 3, value))
    assert orjson.loads(key) == {
        "keytype": "SCHEMA",
        "subject": "orders-value",
        "version": 3,
        "magic": 1,
    }
    assert orjson.loads(body or b"") == {
        "subject": "orders-value",
        "version": 3,
        "id": 7,
        "schema": "syntax...",
        "deleted": False,
        "schemaType": "PROTOBUF",
        "references": [{"name": "a.proto", "subject": "a", "version": 1}],
    }
    assert rec.decode(key, body).value == value
    config_key, config_value = rec.encode(
        Record(rec.CONFIG, None, None, {"compatibilityLevel": "FULL"})
    )
    assert orjson.loads(config_key) == {"keytype": "CONFIG", "subject": None, "magic": 0}
    decoded = rec.decode(config_key, config_value)
    assert (decoded.keytype, decoded.subject, decoded.value) == (
        "CONFIG",
        None,
        {"compatibilityLevel": "FULL"},
    )


def test_a_confluent_registry_record_reads_with_avro_as_the_default_kind() -> None:
    key = b'{"keytype":"SCHEMA","subject":"t-value","version":1,"magic":1}'
    value = b'{"subject":"t-value","version":1,"id":1,"schema":"\\"string\\"","deleted":false}'
    record = rec.decode(key, value)
    assert isinstance(record.value, SchemaValue)
    assert (record.value.kind, record.value.text) == ("AVRO", '"string"')


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (b"not json", b"{}"),
        (b'{"keytype":"WHAT"}', b"{}"),
        (b'{"keytype":"SCHEMA","subject":"s","version":"1","magic":1}', b"{}"),
        (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b'{"id":1}'),
        (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b"[1]"),
    ],
)
def test_records_that_are_not_the_registrys_are_refused_clearly(key: bytes, value: bytes) -> None:
    with pytest.raises(rec.UnreadableRecord):
        rec.decode(key, value)


def test_of_two_writers_deciding_against_the_same_end_the_first_in_the_topic_wins() -> None:
    state = RegistryState()
    first = schema("s", 1, 1, '"string"')
    second = schema("s", 1, 1, '"int"')
    assert state.feed(0, Record(first.keytype, "s", 1, first.value, validated_end=0))
    # decided against end 0 too, but a record after 0 was applied since: refused
    assert not state.feed(1, Record(second.keytype, "s", 1, second.value, validated_end=0))
    assert [v.text for v in state.versions("s")] == ['"string"']
    assert state.verdict(0) is True and state.verdict(1) is False
    # decided against the new end: applied
    third = schema("s", 2, 2, '"int"')
    assert state.feed(2, Record(third.keytype, "s", 2, third.value, validated_end=2))


def test_an_id_never_names_two_schemas() -> None:
    state = RegistryState()
    assert state.feed(0, schema("a", 1, 1, '"string"'))
    assert not state.feed(1, schema("b", 1, 1, '"int"'))  # id 1 is "string"
    assert state.feed(3, schema("b", 1, 1, '"string"'))  # the same schema under another subject
    assert state.feed(4, schema("b", 2, 2, '"int"'))
    assert [(v.subject, v.version) for v in state.uses_of(1)] == [("a", 1), ("b", 1)]
    assert state.next_id() == 3
    # a second id for a schema (a client's, in IMPORT mode): the first stays the schema's id
    assert state.feed(5, schema("c", 1, 7, '"string"'))
    assert state.id_of[next(iter(state.id_of))] == 1


def test_an_existing_version_only_changes_its_deleted_flag() -> None:
    state = RegistryState()
    assert state.feed(0, schema("s", 1, 1, '"string"'))
    assert not state.feed(1, schema("s", 1, 2, '"int"'))
    deleted = SchemaValue("s", 1, 1, "AVRO", '"string"', deleted=True)
    assert state.feed(2, Record(rec.SCHEMA, "s", 1, deleted))
    assert state.versions("s") == [] and state.subject_names() == []
    assert state.subject_names(deleted=True) == ["s"]
    assert state.feed(3, Record(rec.SCHEMA, "s", 1, None))  # removed for good
    assert state.subject_names(deleted=True) == []
    assert state.schema(1) is not None  # the id keeps its schema: never reused


def test_subject_deletes_soft_then_for_good() -> None:
    state = RegistryState()
    state.feed(0, schema("s", 1, 1, '"string"'))
    state.feed(1, schema("s", 2, 2, '"int"'))
    body = {"subject": "s", "version": 2}
    assert state.feed(2, Record(rec.DELETE_SUBJECT, "s", 2, body))
    assert state.versions("s") == [] and len(state.versions("s", deleted=True)) == 2
    assert state.feed(3, Record(rec.CLEAR_SUBJECT, "s", 2, body))
    assert state.subject_names(deleted=True) == []


def test_configs_and_modes_are_set_and_removed() -> None:
    state = RegistryState()
    state.feed(0, Record(rec.CONFIG, None, None, {"compatibilityLevel": "FULL"}))
    state.feed(1, Record(rec.CONFIG, "s", None, {"compatibilityLevel": "NONE"}))
    state.feed(2, Record(rec.MODE, "s", None, {"mode": "READONLY"}))
    assert state.config(None) == {"compatibilityLevel": "FULL"}
    assert state.config("s") == {"compatibilityLevel": "NONE"}
    assert state.mode("s") == "READONLY"
    state.feed(3, Record(rec.CONFIG, "s", None, None))
    state.feed(4, Record(rec.MODE, "s", None, None))
    assert state.config("s") is None and state.mode("s") is None
    assert state.next_offset == 5
