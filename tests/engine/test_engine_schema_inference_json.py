"""Columns inferred from a registered JSON Schema: as ksqlDB's runner shows them, upper-cased when
the schema is found by subject, as written when the statement names it by id."""

from __future__ import annotations

import json

from headwater.engine.formats import _json_sr as json_sr

SCHEMA = json.dumps({"type": "object", "properties": {"c1": {"type": "integer"}}})


def test_a_schema_found_by_subject_gives_upper_case_names() -> None:
    assert json_sr.inferred_columns(SCHEMA, "ROWVAL", upper=True) == (("C1", "BIGINT"),)


def test_a_schema_named_by_id_keeps_its_names() -> None:
    assert json_sr.inferred_columns(SCHEMA, "ROWVAL") == (("c1", "BIGINT"),)


def test_a_schema_that_is_not_an_object_is_one_column() -> None:
    assert json_sr.inferred_columns(json.dumps({"type": "string"}), "ROWVAL") == (
        ("ROWVAL", "STRING"),
    )
