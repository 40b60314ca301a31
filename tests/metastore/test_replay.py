"""The command runner's pure decisions: compare-and-append, no double apply, stop on unreadable."""

from __future__ import annotations

import json

import pytest

from headwater.metastore.catalog import Column, Source, SourceKind
from headwater.metastore.codec import (
    catalog_digest,
    catalog_from_dict,
    catalog_to_dict,
    source_to_dict,
)
from headwater.metastore.errors import UnreadableRecord
from headwater.metastore.records import FORMAT_VERSION, CommandRecord, decode, encode
from headwater.metastore.replay import CommandState, Fold


def _source(name: str, kind: SourceKind = SourceKind.STREAM) -> Source:
    return Source(
        kind=kind,
        name=name,
        columns=(Column("ID", "STRING", key=True), Column("V", "BIGINT")),
        topic=name.lower(),
        partitions=2,
        value_format="JSON",
        properties=(("KAFKA_TOPIC", name.lower()), ("VALUE_FORMAT", "JSON")),
    )


def _create(command_id: str, name: str, validated: int, *, replace: bool = False) -> bytes:
    command = {"type": "create_source", "source": source_to_dict(_source(name)), "replace": replace}
    return encode(CommandRecord(command_id, validated, f"CREATE STREAM {name} ...", command))


def _drop(command_id: str, name: str, validated: int) -> bytes:
    command = {"type": "drop_source", "name": name}
    return encode(CommandRecord(command_id, validated, f"DROP STREAM {name}", command))


def test_commands_validated_at_the_end_are_applied() -> None:
    fold = Fold()
    assert fold.feed(0, _create("a", "S1", 0)).state is CommandState.SUCCESS
    assert fold.feed(1, _create("b", "S2", 1)).state is CommandState.SUCCESS
    assert sorted(fold.catalog.sources) == ["S1", "S2"]
    assert fold.catalog.source("S2").created_offset == 1
    assert fold.position.next_offset == 2


def test_a_record_appended_in_between_makes_a_conflict() -> None:
    fold = Fold()
    fold.feed(0, _create("a", "S1", 0))
    # Both submitters validated at end offset 1; the first to land wins, the second conflicts.
    assert fold.feed(1, _create("b", "S2", 1)).state is CommandState.SUCCESS
    outcome = fold.feed(2, _create("c", "S3", 1))
    assert outcome.state is CommandState.ERROR and outcome.conflict
    assert "S3" not in fold.catalog.sources


def test_transaction_markers_between_records_do_not_make_a_conflict() -> None:
    # On real Kafka a commit marker takes an offset: record at 0, marker at 1, next record at 2
    # validated at end offset 2 (the end after the marker).
    fold = Fold()
    fold.feed(0, _create("a", "S1", 0))
    assert fold.feed(2, _create("b", "S2", 2)).state is CommandState.SUCCESS


def test_a_command_id_is_never_applied_twice() -> None:
    fold = Fold()
    fold.feed(0, _create("a", "S1", 0))
    fold.feed(1, _drop("d", "S1", 1))
    # The same create again (a retried submission that also landed): ignored, even though it
    # would otherwise be valid against the catalog at this point.
    assert fold.feed(2, _create("a", "S1", 2)) is None
    assert "S1" not in fold.catalog.sources
    assert fold.outcomes["a"].offset == 0


def test_invalid_command_is_rejected_identically_and_changes_nothing() -> None:
    fold = Fold()
    fold.feed(0, _create("a", "S1", 0))
    before = fold.catalog
    outcome = fold.feed(1, _create("b", "S1", 1))
    assert outcome.state is CommandState.ERROR and not outcome.conflict
    assert "already exists" in outcome.message
    assert fold.catalog is before


@pytest.mark.parametrize(
    "value",
    [
        b"not json",
        b"[]",
        json.dumps(
            {
                "format": FORMAT_VERSION + 1,
                "id": "x",
                "validatedOffset": 0,
                "command": {"type": "create_source"},
            }
        ).encode(),
        json.dumps(
            {"format": 1, "id": "x", "validatedOffset": 1, "command": {"type": "launch_rockets"}}
        ).encode(),
        json.dumps(
            {
                "format": 1,
                "id": "x",
                "validatedOffset": 1,
                "command": {"type": "create_source", "source": {"name": "S"}},
            }
        ).encode(),
        None,
    ],
    ids=["garbage", "not-object", "future-format", "unknown-command", "malformed", "tombstone"],
)
def test_unreadable_records_stop_the_runner_without_skipping(value: bytes | None) -> None:
    fold = Fold()
    fold.feed(0, _create("a", "S1", 0))
    with pytest.raises(UnreadableRecord):
        fold.feed(1, value)
    assert fold.position.next_offset == 1  # will retry the same record, never skip it
    assert sorted(fold.catalog.sources) == ["S1"]


def test_two_folds_of_one_log_have_one_digest_and_the_snapshot_round_trips() -> None:
    log = [_create(f"c{i}", f"S{i % 7}", i, replace=i > 7) for i in range(30)]
    log += [_drop("d1", "S3", 30), _create("late", "S9", 5)]
    first, second = Fold(), Fold()
    for offset, value in enumerate(log):
        first.feed(offset, value)
        second.feed(offset, value)
    assert catalog_digest(first.catalog) == catalog_digest(second.catalog)
    restored = catalog_from_dict(json.loads(json.dumps(catalog_to_dict(first.catalog))))
    assert dict(restored.sources) == dict(first.catalog.sources)
    assert catalog_digest(restored) == catalog_digest(first.catalog)
    assert first.outcomes["late"].conflict


def test_record_codec_round_trips() -> None:
    record = CommandRecord(
        "id1",
        42,
        "CREATE STREAM S ...",
        {"type": "drop_type", "name": "T"},
        submitted_by="127.0.0.1:8088",
    )
    assert decode(encode(record)) == record


def test_replay_of_ten_thousand_commands_reaches_one_catalog() -> None:
    log, model, missing_drops = [], set(), 0
    for offset in range(10_000):
        name = f"S{offset % 50}"
        if offset % 7 == 6:
            log.append(_drop(f"d{offset}", name, offset))
            missing_drops += name not in model
            model.discard(name)
        else:
            log.append(_create(f"c{offset}", name, offset, replace=True))
            model.add(name)
    folds = [Fold(), Fold()]
    for fold in folds:
        for offset, value in enumerate(log):
            fold.feed(offset, value)
    first, second = folds
    assert first.position.next_offset == 10_000 and len(first.outcomes) == 10_000
    assert catalog_digest(first.catalog) == catalog_digest(second.catalog)
    assert sorted(first.catalog.sources) == sorted(model)
    errors = [o for o in first.outcomes.values() if o.state is CommandState.ERROR]
    assert len(errors) == missing_drops and all("does not exist" in o.message for o in errors)
