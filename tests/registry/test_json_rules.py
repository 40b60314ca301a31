"""JSON Schema's rules for the registry (``headwater.registry.json_rules``): parsing, canonical
text, and Confluent's JSON Schema diff.

Expected outcomes come from Confluent's ``json-schema-provider``: ``SchemaDiffTest``'s example
files (``diff-schema-examples.json``, ``diff-combined-schema-examples.json`` and their 2020-12
variants) and ``JsonSchemaTest``'s STRICT verdicts, as data in
``conformance/registry_compat/json.json`` (each case's ``changes`` are Confluent's, in its order);
message wording from ``Difference``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from headwater.registry.compatibility import LEVELS
from headwater.registry.errors import InvalidSchema
from headwater.registry.json_rules import (
    KIND,
    backward_problems,
    canonical,
    differences,
    parse,
)
from headwater.registry.subject import Subject

REPO = Path(__file__).resolve().parents[2]
CASES = json.loads((REPO / "conformance" / "registry_compat" / "json.json").read_text())
_PROBLEM = re.compile(r"\{errorType:\"(\w+)\", description:\"(.*)'\}\Z", re.DOTALL)
DRAFT_2020 = "https://json-schema.org/draft/2020-12/schema"


def schema(value: Any, references: dict[str, str] | None = None) -> Subject:
    """A subject of kind JSON: ``value`` is its text, or a JSON value written as text."""
    text = value if isinstance(value, str) else json.dumps(value)
    return Subject(KIND, text, references or {})


def changes(old: Any, new: Any) -> list[str]:
    """Every difference Confluent's diff finds from ``old`` to ``new``, as its tests write them."""
    return [f"{kind} {path}" for kind, path in differences(schema(old), schema(new))]


def problems(new: Any, old: Any) -> list[tuple[str, str]]:
    """``backward_problems`` as (errorType, description) pairs."""
    found = []
    for message in backward_problems(schema(new), schema(old)):
        match = _PROBLEM.match(message)
        assert match, message
        found.append((match[1], match[2]))
    return found


def invalid(value: Any, references: dict[str, str] | None = None) -> str:
    with pytest.raises(InvalidSchema) as caught:
        parse(schema(value, references))
    assert caught.value.status == 422 and caught.value.code == 42201
    return caught.value.message


# --- parse ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {"type": "object", "properties": {"a": {"type": "string"}}},
        True,
        {},
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "maximum": 3,
            "exclusiveMaximum": True,
        },
        {"$schema": "http://json-schema.org/draft-06/schema#", "exclusiveMaximum": 3},
        {"$schema": "https://json-schema.org/draft/2019-09/schema", "dependentRequired": {}},
        {"$schema": DRAFT_2020, "prefixItems": [{"type": "string"}], "items": False},
        {"$ref": "#/definitions/a", "definitions": {"a": {"type": "string"}}},
        {"$ref": "#/$defs/a", "definitions": {"a": {"type": "string"}}},  # Confluent's bridge
        {"$ref": "http://json-schema.org/draft-07/schema#"},  # a metaschema resolves locally
    ],
)
def test_valid_schemas_parse(value: Any) -> None:
    assert parse(schema(value)) == value


def test_parse_refuses_what_is_not_json() -> None:
    message = invalid('{"type": "string"')
    assert message.startswith("Invalid schema of type JSON, details: the schema is not JSON")


@pytest.mark.parametrize(("text", "found"), [("[]", "ARRAY"), ('"s"', "STRING"), ("1", "NUMBER")])
def test_parse_wants_an_object_or_a_boolean(text: str, found: str) -> None:
    assert invalid(text).endswith(
        f"Invalid JSON schema: expected an object or boolean at the root, found {found}"
    )


def test_parse_checks_the_drafts_metaschema_and_says_where() -> None:
    assert invalid({"properties": {"a": {"type": "strin"}}}).endswith(
        "'strin' is not valid under any of the given schemas at '#/properties/a/type'"
    )
    assert "-1 is less than the minimum of 0 at '#/minLength'" in invalid({"minLength": -1})
    # draft-04's exclusiveMaximum is a flag, draft-06's a number
    assert "is not of type 'boolean'" in invalid(
        {"$schema": "http://json-schema.org/draft-04/schema#", "maximum": 5, "exclusiveMaximum": 3}
    )
    # an unknown $schema is checked as draft-07, as Confluent does
    assert "at '#/minLength'" in invalid({"$schema": "http://example.com/mine", "minLength": -1})


def test_parse_resolves_every_ref() -> None:
    assert "$ref '#/definitions/b' cannot be resolved: nothing is at /definitions/b" in invalid(
        {"properties": {"a": {"$ref": "#/definitions/b"}}, "definitions": {}}
    )
    message = invalid({"$ref": "https://example.com/address.json"})
    assert "no schema is known as https://example.com/address.json" in message
    assert "the registry fetches none" in message


def test_parse_refuses_numbers_json_has_not() -> None:
    assert "NaN is not a JSON number" in invalid('{"maximum": NaN}')


def test_comparing_checks_both_schemas_as_parse_does() -> None:
    with pytest.raises(InvalidSchema, match="at '#/properties/\\$id'"):
        backward_problems(schema({"properties": {"$id": "x"}}), schema({}))


def test_a_referenced_text_must_be_json() -> None:
    message = invalid({"$ref": "a.json"}, {"a.json": "{"})
    assert "the referenced schema 'a.json' is not JSON" in message


# --- canonical ------------------------------------------------------------------------------------


def test_canonical_is_compact_in_the_given_order_with_decimals_as_written() -> None:
    text = '{ "b" : 1.50,\n "a": [1e3, -0.0, 10, "\\u001f\\u00e9/\\n"], "c": {"z": 1, "y": null} }'
    assert (
        canonical(schema(text))
        == '{"b":1.50,"a":[1E+3,0.0,10,"\\u001Fé/\\n"],"c":{"z":1,"y":null}}'
    )


def test_normalized_canonical_sorts_keys_all_the_way_down() -> None:
    text = '{"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "number"}}}'
    assert canonical(schema(text), normalize=True) == (
        '{"properties":{"a":{"type":"number"},"b":{"type":"string"}},"type":"object"}'
    )


def test_canonical_texts_differing_only_in_layout_are_equal() -> None:
    one = canonical(schema('{"type":"string","maxLength":3}'))
    assert one == canonical(schema('{\n  "type": "string",\n  "maxLength": 3\n}'))
    assert one != canonical(schema('{"maxLength":3,"type":"string"}'))
    assert canonical(schema('{"maxLength":3,"type":"string"}'), normalize=True) == canonical(
        schema('{"type":"string","maxLength":3}'), normalize=True
    )


def test_canonical_refuses_what_is_not_json() -> None:
    with pytest.raises(InvalidSchema):
        canonical(schema("{"))


# --- the diff's rules -----------------------------------------------------------------------------


def test_a_message_is_confluents_difference_with_new_and_old() -> None:
    found = backward_problems(
        schema({"properties": {"foo": {"type": "number"}}}),
        schema({"properties": {"foo": {"type": "string"}}}),
    )
    assert found == [
        (
            '{errorType:"TYPE_CHANGED", description:"A type at path \'#/properties/foo\' is '
            "different between the new schema and the old schema'}"
        )
    ]


def test_labels_name_the_schemas_the_other_way_for_a_forward_check() -> None:
    old, new = schema({"type": "string", "maxLength": 5}), schema({"type": "string"})
    assert backward_problems(old, new, labels=("old", "new")) == [
        (
            '{errorType:"MAX_LENGTH_ADDED", description:"The keyword at path \'#/maxLength\' in '
            "the old schema is not present in the new schema'}"
        )
    ]


def test_an_optional_property_added_to_an_open_object_is_incompatible() -> None:
    old = {"type": "object", "properties": {"a": {"type": "string"}}}
    new = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    assert problems(new, old) == [
        (
            "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
            (
                "The new schema has an open content model and has a property or item at path "
                "'#/properties/b' which is missing in the old schema"
            ),
        )
    ]
    closed = {**new, "additionalProperties": False}
    assert problems(closed, {**old, "additionalProperties": False}) == []


def test_a_required_property_needs_a_default() -> None:
    old = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    b: dict[str, Any] = {"type": "string"}
    new = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": b},
        "required": ["b"],
        "additionalProperties": False,
    }
    assert [kind for kind, _ in problems(new, old)] == [
        "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
    ]
    b["default"] = "x"
    assert problems(new, old) == []
    assert changes(old, new) == [
        "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL #/properties/b"
    ]


@pytest.mark.parametrize(
    ("old", "new", "found"),
    [
        ({"type": "integer"}, {"type": "number"}, ["TYPE_EXTENDED #/"]),
        ({"type": "number"}, {"type": "integer"}, ["TYPE_NARROWED #/"]),
        ({"enum": ["a", "b"]}, {"enum": ["b", "a", "c"]}, ["ENUM_ARRAY_EXTENDED #/enum"]),
        ({"enum": ["a", "b"]}, {"enum": ["b", "b", "a"]}, []),
        ({"enum": ["a", "b"]}, {"enum": ["a"]}, ["ENUM_ARRAY_NARROWED #/enum"]),
        ({"type": "string"}, {"type": ["string", "null"]}, ["SUM_TYPE_EXTENDED #/"]),
        (
            {"type": "number", "minimum": 1},
            {"type": "number", "minimum": 0},
            ["MINIMUM_DECREASED #/minimum"],
        ),
        (
            {"type": "array", "items": {"type": "string"}},
            {"type": "array"},
            ["SCHEMA_REMOVED #/items"],
        ),
        ({"default": {"a": 1}}, {"default": {"a": 1}}, ["DEFAULT_CHANGED #/"]),  # org.json identity
        (
            {"not": {"type": "string"}},
            {"not": {"type": ["string", "null"]}},
            ["NOT_TYPE_EXTENDED #/not"],
        ),
    ],
)
def test_diff_rules(old: Any, new: Any, found: list[str]) -> None:
    assert changes(old, new) == found


def test_draft_04_exclusive_limits_are_flags_the_diff_does_not_compare() -> None:
    draft4 = "http://json-schema.org/draft-04/schema#"
    old = {"$schema": draft4, "type": "number", "maximum": 3}
    assert changes(old, {**old, "exclusiveMaximum": True}) == []
    draft7 = {"type": "number", "exclusiveMaximum": 3}
    assert changes(draft7, {"type": "number", "exclusiveMaximum": 4}) == [
        "EXCLUSIVE_MAXIMUM_INCREASED #/exclusiveMaximum"
    ]


def test_2020_12_keywords_are_translated_to_everits_model() -> None:
    old = {
        "$schema": DRAFT_2020,
        "type": "array",
        "prefixItems": [{"type": "string"}],
        "items": False,
    }
    new = {**old, "prefixItems": [{"type": "string"}, {"type": "number"}]}
    assert changes(old, new) == ["ITEM_ADDED_TO_CLOSED_CONTENT_MODEL #/items/1"]
    # json-sKema keeps no $id, so Confluent never sees it change
    assert changes({"$schema": DRAFT_2020, "$id": "a"}, {"$schema": DRAFT_2020, "$id": "b"}) == []
    assert changes({"$id": "a"}, {"$id": "b"}) == ["ID_CHANGED #/"]


def test_a_ref_hides_its_siblings_before_2019_09() -> None:
    definitions = {"s": {"type": "string"}}
    old = {"properties": {"a": {"$ref": "#/definitions/s"}}, "definitions": definitions}
    new = {
        "properties": {"a": {"$ref": "#/definitions/s", "maxLength": 3}},
        "definitions": definitions,
    }
    assert changes(old, new) == []
    modern = {"$schema": DRAFT_2020}
    # from 2019-09 on they join it: a generated allOf of the reference and the string
    assert changes({**modern, **old}, {**modern, **new}) == ["TYPE_CHANGED #/properties/a"]


def test_recursive_schemas_compare_and_changes_deep_in_them_are_found() -> None:
    def tree(leaf: str) -> dict[str, Any]:
        node = {
            "type": "object",
            "properties": {
                "value": {"type": leaf},
                "children": {"type": "array", "items": {"$ref": "#/definitions/node"}},
            },
        }
        return {"$ref": "#/definitions/node", "definitions": {"node": node}}

    assert changes(tree("string"), tree("string")) == []
    assert changes(tree("integer"), tree("number")) == ["TYPE_EXTENDED #/properties/value"]
    # a cycle first assumed compatible is compared again once found not to be (Confluent's
    # fixpoint), so the change shows where the recursion meets it too
    assert changes(tree("number"), tree("string")) == [
        "TYPE_CHANGED #/properties/children/items/properties/value",
        "TYPE_CHANGED #/properties/value",
    ]


# --- references -----------------------------------------------------------------------------------


def _referrer(external: str) -> tuple[Subject, dict[str, str]]:
    """Confluent's ``JsonSchemaTest`` referrer: a schema with an ``$id`` using a definition of
    the schema referenced as ``ref.json``."""
    reference = {
        "type": "object",
        "additionalProperties": False,
        "definitions": {
            "ExternalType": {
                "type": "object",
                "properties": {"name": {"type": external}},
                "additionalProperties": False,
            }
        },
    }
    main = {
        "$id": "https://acme.com/referrer.json",
        "type": "object",
        "properties": {"Ref": {"$ref": "ref.json#/definitions/ExternalType"}},
        "additionalProperties": False,
    }
    references = {"ref.json": json.dumps(reference)}
    return schema(main, references), references


def test_refs_resolve_in_referenced_schemas_against_the_id() -> None:
    main, _ = _referrer("string")
    assert parse(main)["$id"] == "https://acme.com/referrer.json"
    assert "no schema is known as ref.json#/definitions/ExternalType" in invalid(
        json.loads(main.text)
    )


def test_changes_in_a_referenced_schema_count() -> None:
    old, _ = _referrer("string")
    same, _ = _referrer("string")
    new, _ = _referrer("number")
    assert backward_problems(same, old) == []
    found = backward_problems(new, old)
    assert len(found) == 1 and found[0].startswith('{errorType:"TYPE_CHANGED"')
    assert differences(old, new) == [("TYPE_CHANGED", "#/properties/Ref/properties/name")]


# --- Confluent's cases ----------------------------------------------------------------------------


def test_the_confluent_cases_are_well_formed() -> None:
    assert len(CASES) == 282
    for case in CASES:
        assert set(case) <= {
            "description",
            "level",
            "previous",
            "new",
            "compatible",
            "changes",
            "xfail_reason",
        }
        assert case["level"] in LEVELS
        assert case["previous"] and isinstance(case["compatible"], bool)
    assert len({case["description"] for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case["description"][:80] for case in CASES])
def test_confluents_json_schema_cases(case: dict[str, Any]) -> None:
    if "xfail_reason" in case:
        pytest.skip(case["xfail_reason"])
    old, new = schema(case["previous"][-1]), schema(case["new"])
    parse(old)
    parse(new)
    assert (backward_problems(new, old) == []) == case["compatible"]
    if "changes" in case:
        found = [f"{kind} {path}" for kind, path in differences(old, new)]
        assert found == case["changes"]
