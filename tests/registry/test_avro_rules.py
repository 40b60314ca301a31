"""Avro's rules for the registry (``headwater.registry.avro_rules``): parsing, canonical text, and
schema resolution (new schema reading, old schema writing).

Expected texts, messages and locations come from the Java sources the module follows: Confluent's
``AvroSchemaTest`` (canonical and normalised texts), ``Difference`` (message wording) and
``AvroCompatibilityTest`` (as data, ``conformance/registry_compat/avro.json``), and Avro's
``TestSchemaCompatibility*`` tests (incompatibility types, details and JSON-pointer locations).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from headwater.registry.avro_rules import KIND, backward_problems, canonical, parse
from headwater.registry.compatibility import LEVELS
from headwater.registry.errors import InvalidSchema
from headwater.registry.subject import Subject

REPO = Path(__file__).resolve().parents[2]
CASES = json.loads((REPO / "conformance" / "registry_compat" / "avro.json").read_text())
_PROBLEM = re.compile(
    r"\{errorType:'(\w+)', description:'(.*)', additionalInfo:'(.*)'\}\Z", re.DOTALL
)


def avro(schema: Any, references: dict[str, str] | None = None) -> Subject:
    """A subject of kind AVRO: ``schema`` is its text, or JSON values written as text."""
    text = schema if isinstance(schema, str) else json.dumps(schema)
    return Subject(KIND, text, references or {})


def record(name: str, *fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def fld(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def problems(new: Any, old: Any) -> list[tuple[str, str, str]]:
    """``backward_problems`` as (errorType, description, additionalInfo) triples."""
    found = []
    for message in backward_problems(avro(new), avro(old)):
        match = _PROBLEM.match(message)
        assert match, message
        found.append((match[1], match[2], match[3]))
    return found


def error_types(new: Any, old: Any) -> list[str]:
    return [kind for kind, _, _ in problems(new, old)]


def paths(found: list[tuple[str, str, str]]) -> list[str]:
    """The location each problem's description gives."""
    return [re.findall(r"path '([^']*)'", description)[0] for _, description, _ in found]


# -- parsing ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["{", "", '{"type": "int"} trailing', "NaN", "[1, 2"])
def test_parse_rejects_text_that_is_not_json(text: str) -> None:
    with pytest.raises(InvalidSchema, match="^Invalid schema: not JSON") as caught:
        parse(avro(text))
    assert (caught.value.status, caught.value.code) == (422, 42201)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": 5}, "No type"),
        (7, "Schema not yet supported: 7"),
        ({"type": "strin"}, 'Undefined name: "strin"'),
        ({"type": "array"}, "Array has no items type"),
        ({"type": "map", "items": "int"}, "Map has no values type"),
        ({"type": "record", "name": "r"}, "Record has no fields"),
        ({"type": "record", "fields": []}, "No name in schema"),
        (record("r", {"type": "int"}), "No field name"),
        (record("r", {"name": "a"}), "No field type"),
        (record("r", fld("a", "int"), fld("a", "long")), "Duplicate field a in record r"),
        ({"type": "fixed", "name": "F", "size": "3"}, "Invalid or no size"),
        ({"type": "fixed", "name": "F", "size": -1}, "Length is negative"),
        ({"type": "enum", "name": "E", "symbols": ["A", "A"]}, "Duplicate enum symbol: A"),
        ({"type": "enum", "name": "E", "symbols": ["A"], "default": "B"}, "The Enum Default: B"),
        ({"type": "enum", "name": "E", "symbols": ["1A"]}, "Illegal initial character: 1A"),
        (["int", "int"], "Duplicate in union:int"),
        (["int", ["null", "string"]], "Nested union"),
        ([{"type": "array", "items": "int"}, {"type": "array", "items": "long"}], "union:array"),
        (record("1r"), "Illegal initial character: 1r"),
        (record("r-1"), "Illegal character in: r-1"),
        (record("r", namespace="a.9b"), "Namespace part"),
        (record("r", fld("a b", "int")), "Illegal character in: a b"),
        ({"type": "fixed", "name": "int", "size": 1}, "may not be named after primitives: int"),
        (record("r", fld("a", "int", default="x")), 'Invalid default for field a: "x" not a "int"'),
        (record("r", fld("a", "int", default=2**31)), "Invalid default for field a"),
        (record("r", fld("a", "string", default=None)), "Invalid default for field a: null"),
        (record("r", fld("a", ["null", "int"], default="x")), "Invalid default for field a"),
        (record("r", fld("a", "int", order="sideways")), "Invalid field order"),
        (record("r", fld("a", "int", aliases="b")), "aliases not an array"),
        (
            record(
                "r",
                fld("a", {"type": "enum", "name": "E", "symbols": ["A"]}),
                fld("b", {"type": "enum", "name": "E", "symbols": ["B"]}),
            ),
            "Can't redefine: E",
        ),
    ],
)
def test_parse_rejects_invalid_schemas(schema: Any, message: str) -> None:
    with pytest.raises(InvalidSchema, match="^Invalid schema: ") as caught:
        parse(avro(schema))
    assert message in caught.value.message


def test_parse_rejects_a_name_no_schema_or_reference_defines() -> None:
    uses = record("r", fld("e", "a.E"))
    with pytest.raises(InvalidSchema, match='Undefined name: "a.E"'):
        parse(avro(uses))
    with pytest.raises(InvalidSchema, match='Undefined name: "a.E"'):
        parse(avro(uses, {"b.F": json.dumps({"type": "fixed", "name": "b.F", "size": 1})}))
    with pytest.raises(InvalidSchema, match='Undefined name: "Missing"'):
        parse(avro(uses, {"a.E": json.dumps(record("a.E", fld("m", "Missing")))}))


@pytest.mark.parametrize(
    "schema",
    [
        # Confluent's AvroCompatibilityTest.testBadDefaultNull: a union default any branch takes.
        (
            '{"type":"record","name":"myrecord","fields":[{"type":["null", "string"],"name":"f1", '
            '"default": "null"}, {"type":"string","name":"f2", "default": "foo"}, '
            '{"type":"string","name":"f3", "default": "bar"}]}'
        ),
        # Avro's parser allows comments.
        '/* a comment */ {"type": "record", "name": "r", // another\n "fields": []}',
        # A short name is looked up in the enclosing namespace, then in the null one.
        record(
            "r",
            fld("f", {"type": "fixed", "name": "F", "size": 2}),
            fld("g", record("Inner", fld("x", "F"), namespace="a")),
        ),
        record("r", fld("d", "double", default="1.5"), fld("n", "float", default="NaN")),
        record("r", fld("self", ["null", "r"], default=None)),
        # Avro before 1.12 also takes {"type": "AName"} for a named type.
        record(
            "r", fld("e", {"type": "enum", "name": "E", "symbols": ["A"]}), fld("f", {"type": "E"})
        ),
        record("r", fld("rec", record("s", fld("x", "int", default=1)), default={})),
        {"type": "error", "name": "Oops", "fields": [fld("why", "string")]},
        {"type": "long", "logicalType": "timestamp-millis"},
        '"string"',
    ],
)
def test_parse_accepts_what_avro_java_accepts(schema: Any) -> None:
    assert parse(avro(schema)) is not None


def test_named_types_of_references_are_usable_whatever_their_order() -> None:
    enum = {"type": "enum", "name": "E", "namespace": "b", "symbols": ["X", "Y"]}
    inner = record("R", fld("e", "b.E"), namespace="a")
    main = record("Top", fld("r", "a.R"), fld("e", "b.E"))
    # "a.R" needs "b.E" but comes first: references parse in whichever order works.
    subject = avro(main, {"a.R": json.dumps(inner), "b.E": json.dumps(enum)})
    assert parse(subject) is not None
    assert canonical(subject) == (
        '{"type":"record","name":"Top","fields":[{"name":"r","type":"a.R"},'
        '{"name":"e","type":"b.E"}]}'
    )


def test_a_type_nested_in_a_reference_is_written_out_as_confluent_does() -> None:
    # Confluent knows the references' top-level names only: a type nested in one is written in
    # full where the main schema uses it (and that text parses again: it is the same type).
    inner = {"type": "enum", "name": "Inner", "symbols": ["X"]}
    outer = record("R", fld("i", inner), namespace="a")
    subject = avro(record("Top", fld("r", "a.R"), fld("i", "a.Inner")), {"a.R": json.dumps(outer)})
    text = canonical(subject)
    assert text == (
        '{"type":"record","name":"Top","fields":[{"name":"r","type":"a.R"},{"name":"i","type":'
        '{"type":"enum","name":"Inner","namespace":"a","symbols":["X"]}}]}'
    )
    assert canonical(Subject(KIND, text, subject.references)) == text


# -- canonical text -----------------------------------------------------------------------------


def test_canonical_is_the_same_for_the_same_schema_however_written() -> None:
    compact = '{"type":"record","name":"r","fields":[{"name":"a","type":"int","default":1}]}'
    spaced = """
        {
          "fields" : [ { "default" : 1, "type" : "int", "name" : "a" } ],
          "name" : "r",
          "type" : "record"
        }
    """
    assert canonical(avro(compact)) == canonical(avro(spaced)) == compact
    assert canonical(avro(spaced.replace('"default" : 1', '"default" : 2'))) != compact


def test_canonical_is_confluents_canonical_string() -> None:
    # Confluent's AvroSchemaTest.testNormalization: the same text canonical or normalised.
    given = (
        '{"type":"record","name":"myrecord","doc":"hi\\"there","fields":'
        '[{"type":"string","name":"f1","doc":"bye\\"now"}]}'
    )
    expected = (
        '{"type":"record","name":"myrecord","doc":"hi\\"there","fields":'
        '[{"name":"f1","type":"string","doc":"bye\\"now"}]}'
    )
    assert canonical(avro(given)) == expected
    assert canonical(avro(given), normalize=True) == expected


def test_canonical_keeps_properties_of_primitives() -> None:
    # Confluent's AvroSchemaTest.testNormalizationPreservesMetadataForPrimitiveTypes.
    value = record(
        "Value",
        fld(
            "created_at",
            {
                "connect.name": "io.debezium.time.Timestamp",
                "connect.version": 1,
                "type": "long",
            },
        ),
        fld("normal_long", "long"),
        **{"connect.name": "some.scope.Value"},
    )
    given = {
        "connect.name": "some.scope.Envelope",
        "fields": [
            {"default": None, "name": "before", "type": ["null", value]},
            {"default": None, "name": "after", "type": ["null", "Value"]},
        ],
        "name": "Envelope",
        "namespace": "some.scope",
        "type": "record",
    }
    expected = (
        '{"type":"record","name":"Envelope","namespace":"some.scope","fields":[{"name":"before",'
        '"type":["null",{"type":"record","name":"Value","fields":[{"name":"created_at","type":'
        '{"type":"long","connect.name":"io.debezium.time.Timestamp","connect.version":1}},'
        '{"name":"normal_long","type":"long"}],"connect.name":"some.scope.Value"}],'
        '"default":null},{"name":"after","type":["null","Value"],"default":null}],'
        '"connect.name":"some.scope.Envelope"}'
    )
    assert canonical(avro(given)) == expected
    assert canonical(avro(given), normalize=True) == expected


def test_canonical_writes_attributes_in_avros_order_and_names_relative_to_namespaces() -> None:
    given = {
        "aliases": ["Old", "c.Older"],
        "x-prop": {"b": 1, "a": 2},
        "fields": [
            {
                "p": 1,
                "aliases": ["z", "y"],
                "order": "descending",
                "default": "A",
                "type": {"default": "A", "symbols": ["A", "B"], "name": "E", "type": "enum"},
                "name": "e",
            },
            {
                "name": "f",
                "type": ["null", {"type": "fixed", "name": "F", "namespace": "", "size": 4}],
            },
            {"name": "g", "type": "F"},
            {"name": "h", "type": "a.b.E"},
        ],
        "doc": "d",
        "namespace": "a.b",
        "name": "R",
        "type": "record",
    }
    assert canonical(avro(given)) == (
        '{"type":"record","name":"R","namespace":"a.b","doc":"d","fields":[{"name":"e","type":'
        '{"type":"enum","name":"E","symbols":["A","B"],"default":"A"},"default":"A",'
        '"order":"descending","aliases":["z","y"],"p":1},{"name":"f","type":["null",{"type":'
        '"fixed","name":"F","namespace":"","size":4}]},{"name":"g","type":"F"},'
        '{"name":"h","type":"E"}],"x-prop":{"b":1,"a":2},"aliases":["Old","c.Older"]}'
    )


def test_normalize_sorts_properties_and_aliases_and_types_defaults() -> None:
    given = record(
        "r",
        fld(
            "a", "float", default=1, aliases=["z", "y"], **{"z-prop": 1, "a-prop": {"b": 1, "a": 2}}
        ),
        fld("b", ["float", "int"], default=1),
        fld("c", "double", default=1e22),
        fld(
            "dec",
            {
                "type": "bytes",
                "connect.name": "x",
                "logicalType": "decimal",
                "precision": 4,
                "scale": 0,
            },
        ),
        doc="",
        aliases=["q", "p"],
        **{"b-prop": True, "a-prop": None},
    )
    assert canonical(avro(given)) == (
        '{"type":"record","name":"r","doc":"","fields":[{"name":"a","type":"float","default":1,'
        '"aliases":["z","y"],"z-prop":1,"a-prop":{"b":1,"a":2}},{"name":"b","type":["float",'
        '"int"],"default":1},{"name":"c","type":"double","default":1.0E22},{"name":"dec","type":'
        '{"type":"bytes","connect.name":"x","logicalType":"decimal","precision":4,"scale":0}}],'
        '"b-prop":true,"a-prop":null,"aliases":["q","p"]}'
    )
    # A valid logical type's attributes first, then the other properties sorted; an empty doc
    # dropped; a default takes its field's type (a union's first non-null branch).
    assert canonical(avro(given), normalize=True) == (
        '{"type":"record","name":"r","fields":[{"name":"a","type":"float","default":1.0,'
        '"aliases":["y","z"],"a-prop":{"a":2,"b":1},"z-prop":1},{"name":"b","type":["float",'
        '"int"],"default":1.0},{"name":"c","type":"double","default":1.0E22},{"name":"dec",'
        '"type":{"type":"bytes","logicalType":"decimal","precision":4,"connect.name":"x",'
        '"scale":0}}],"a-prop":null,"b-prop":true,"aliases":["p","q"]}'
    )


def test_canonical_writes_the_types_of_references_as_names() -> None:
    enum = json.dumps({"type": "enum", "name": "E", "namespace": "a", "symbols": ["X"]})
    main = avro(record("r", fld("a", "a.E"), fld("b", ["null", "a.E"])), {"a.E": enum})
    expected = (
        '{"type":"record","name":"r","fields":[{"name":"a","type":"a.E"},'
        '{"name":"b","type":["null","a.E"]}]}'
    )
    assert canonical(main) == canonical(main, normalize=True) == expected


def test_canonical_writes_numbers_as_java_does() -> None:
    given = record(
        "r",
        fld("a", "double", default=1e-5),
        fld("b", "double", default="2.5"),
        fld("c", "double", default=1234567.0),
        fld("d", "long", default=12345678901),
        fld("e", "string", default="tab\there\u0001"),
    )
    assert canonical(avro(given)) == (
        '{"type":"record","name":"r","fields":[{"name":"a","type":"double","default":1.0E-5},'
        '{"name":"b","type":"double","default":2.5},{"name":"c","type":"double",'
        '"default":1234567.0},{"name":"d","type":"long","default":12345678901},'
        '{"name":"e","type":"string","default":"tab\\there\\u0001"}]}'
    )


def test_canonical_text_parses_to_the_same_canonical_text() -> None:
    for case in CASES:
        for text in [*case["previous"], case["new"]]:
            once = canonical(avro(text))
            assert canonical(avro(once)) == once
            assert canonical(avro(canonical(avro(text), normalize=True))) == canonical(
                avro(text), normalize=True
            )


# -- schema resolution --------------------------------------------------------------------------


def test_a_new_field_needs_a_default() -> None:
    old = record("r", fld("f1", "string"))
    assert problems(record("r", fld("f1", "string"), fld("f2", "string", default="x")), old) == []
    assert backward_problems(
        avro(record("r", fld("f1", "string"), fld("f2", "string"))), avro(old)
    ) == [
        (
            "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'f2' at path "
            "'/fields/1' in the new schema has no default value and is missing in the old schema', "
            "additionalInfo:'f2'}"
        )
    ]
    # A removed field is no problem for the reader.
    assert problems(old, record("r", fld("f1", "string"), fld("f2", "string"))) == []


def test_an_enum_field_with_an_enum_default_still_needs_the_writer_field() -> None:
    # Avro checks the reader's enum against the writer's whole record: a type mismatch.
    enum = {"type": "enum", "name": "E", "symbols": ["A"], "default": "A"}
    found = problems(record("r", fld("e", enum)), record("r"))
    assert found == [
        (
            "TYPE_MISMATCH",
            (
                "The type (path '/fields/0/type') of a field in the new schema does not match with "
                "the old schema"
            ),
            "reader type: ENUM not compatible with writer type: RECORD",
        )
    ]


@pytest.mark.parametrize(
    ("reader", "writers"),
    [
        ("null", {"null"}),
        ("boolean", {"boolean"}),
        ("int", {"int"}),
        ("long", {"int", "long"}),
        ("float", {"int", "long", "float"}),
        ("double", {"int", "long", "float", "double"}),
        ("bytes", {"bytes", "string"}),
        ("string", {"bytes", "string"}),
    ],
)
def test_primitives_read_what_avros_promotions_allow(reader: str, writers: set[str]) -> None:
    for writer in ("null", "boolean", "int", "long", "float", "double", "bytes", "string"):
        found = problems(record("r", fld("f", reader)), record("r", fld("f", writer)))
        if writer in writers:
            assert found == [], (reader, writer)
        else:
            assert found == [
                (
                    "TYPE_MISMATCH",
                    (
                        "The type (path '/fields/0/type') of a field in the new schema does not "
                        "match with the old schema"
                    ),
                    (
                        f"reader type: {reader.upper()} not compatible with writer type: "
                        f"{writer.upper()}"
                    ),
                )
            ], (reader, writer)


def test_named_types_must_keep_their_name_unless_the_reader_has_an_alias() -> None:
    assert problems(record("a", fld("f", "int")), record("b", fld("f", "int"))) == [
        ("NAME_MISMATCH", "The name of the schema has changed (path '/name')", "expected: b")
    ]
    assert problems(record("a", fld("f", "int"), aliases=["b"]), record("b", fld("f", "int"))) == []
    # Avro compares short names: a namespace change is not a name change.
    assert problems(record("a", namespace="x"), record("a", namespace="y")) == []
    fixed_a = {"type": "fixed", "name": "A", "size": 2}
    fixed_b = {"type": "fixed", "name": "B", "size": 2}
    assert error_types(record("r", fld("f", fixed_a)), record("r", fld("f", fixed_b))) == [
        "NAME_MISMATCH"
    ]


def test_fixed_sizes_must_match() -> None:
    found = problems(
        {"type": "fixed", "name": "F", "size": 4}, {"type": "fixed", "name": "F", "size": 8}
    )
    assert found == [
        (
            "FIXED_SIZE_MISMATCH",
            (
                "The size of FIXED type field at path '/size' in the new schema does not match with "
                "the old schema"
            ),
            "expected: 8, found: 4",
        )
    ]


def test_an_enum_must_have_the_writers_symbols_unless_it_has_a_default() -> None:
    old = {"type": "enum", "name": "E", "symbols": ["A", "D", "C", "B"]}
    new = {"type": "enum", "name": "E", "symbols": ["A", "C"]}
    assert problems(new, old) == [
        (
            "MISSING_ENUM_SYMBOLS",
            "The new schema is missing enum symbols '[B, D]' at path '/symbols' in the old schema",
            "[B, D]",
        )
    ]
    assert problems({**new, "default": "A"}, old) == []
    assert problems(old, new) == []


def test_each_writer_union_branch_needs_a_reader_branch() -> None:
    six = record("myrecord", fld("f1", ["null", "string"]))
    seven = record("myrecord", fld("f1", ["null", "string", "int"]))
    assert problems(seven, six) == []
    assert problems(six, seven) == [
        (
            "MISSING_UNION_BRANCH",
            (
                "The new schema is missing a type inside a union field at path '/fields/0/type/2' "
                "in the old schema"
            ),
            "reader union lacking writer type: INT",
        )
    ]
    # A union reads a non-union its branches can read (promotions included)...
    assert problems(record("r", fld("f", ["null", "long"])), record("r", fld("f", "int"))) == []
    # ...and a non-union reader must read every branch of a union writer.
    assert problems(record("r", fld("f", "long")), record("r", fld("f", ["int", "string"]))) == [
        (
            "TYPE_MISMATCH",
            (
                "The type (path '/fields/0/type/1') of a field in the new schema does not match with "
                "the old schema"
            ),
            "reader type: LONG not compatible with writer type: STRING",
        )
    ]
    assert problems(record("r", fld("f", "string")), record("r", fld("f", ["null", "string"]))) == [
        (
            "TYPE_MISMATCH",
            (
                "The type (path '/fields/0/type/0') of a field in the new schema does not match with "
                "the old schema"
            ),
            "reader type: STRING not compatible with writer type: NULL",
        )
    ]


def test_a_non_union_writer_needs_a_reader_union_branch() -> None:
    assert problems(["null", "string"], '"int"') == [
        (
            "MISSING_UNION_BRANCH",
            "The new schema is missing a type inside a union field at path '/' in the old schema",
            "reader union lacking writer type: INT",
        )
    ]


def test_avros_union_branch_locations() -> None:
    # Avro's TestSchemaCompatibilityMissingUnionBranch.
    assert [(k, i) for k, _, i in problems(["int"], ["int", "string"])] == [
        ("MISSING_UNION_BRANCH", "reader union lacking writer type: STRING")
    ]
    assert paths(problems(["int"], ["int", "string"])) == ["/1"]
    assert paths(problems(["string"], ["int", "string"])) == ["/0"]
    found = problems(["int"], ["int", "long", "float", "double"])
    assert [info for _, _, info in found] == [
        "reader union lacking writer type: LONG",
        "reader union lacking writer type: FLOAT",
        "reader union lacking writer type: DOUBLE",
    ]
    assert paths(found) == ["/1", "/2", "/3"]
    a_b = record("Record1", fld("a", "int", default=0), fld("b", ["int"], default=0))
    a_b_string = record("Record1", fld("a", "int", default=0), fld("b", ["int", "string"]))
    assert paths(problems(a_b, a_b_string)) == ["/fields/1/type/1"]


def test_fields_match_by_the_readers_aliases() -> None:
    # Confluent's schema4: a renamed field keeps its old name as an alias.
    old = record("myrecord", fld("f1", "string"))
    assert problems(record("myrecord", fld("f1_new", "string", aliases=["f1"])), old) == []
    assert error_types(record("myrecord", fld("f1_new", "string")), old) == [
        "READER_FIELD_MISSING_DEFAULT_VALUE"
    ]


def test_a_field_matching_two_writer_fields_is_reported_as_confluent_reports_avros_error() -> None:
    found = backward_problems(
        avro(record("r", fld("a", "int", aliases=["b"]))),
        avro(record("r", fld("a", "int"), fld("b", "int"))),
    )
    assert len(found) == 1
    assert found[0].startswith(
        "Unexpected exception during compatibility check: Reader record field a type:INT pos:0 "
        "matches multiple fields in writer record schema "
    )


def test_arrays_and_maps_check_their_items_and_values() -> None:
    assert problems({"type": "array", "items": "long"}, {"type": "array", "items": "int"}) == []
    assert problems({"type": "map", "values": "int"}, {"type": "map", "values": "long"}) == [
        (
            "TYPE_MISMATCH",
            (
                "The type (path '/values') of a field in the new schema does not match with the old "
                "schema"
            ),
            "reader type: INT not compatible with writer type: LONG",
        )
    ]
    assert error_types({"type": "array", "items": "int"}, {"type": "map", "values": "int"}) == [
        "TYPE_MISMATCH"
    ]


def test_recursive_schemas_are_checked_once() -> None:
    def linked(value: str) -> dict[str, Any]:
        return record("node", fld("value", value), fld("next", ["null", "node"]))

    assert problems(linked("long"), linked("int")) == []
    assert [(k, i) for k, _, i in problems(linked("int"), linked("long"))] == [
        ("TYPE_MISMATCH", "reader type: INT not compatible with writer type: LONG")
    ]


def test_avros_multiple_incompatibilities() -> None:
    # Avro's TestSchemaCompatibilityMultiple, its SchemaBuilder schemas written as JSON.
    def enum(name: str, *symbols: str) -> dict[str, Any]:
        return {"type": "enum", "name": name, "symbols": list(symbols)}

    def sub(*fields: dict[str, Any]) -> dict[str, Any]:
        return record("sub_record_type", fld("identical_1_field", "long", default=42), *fields)

    reader = record(
        "base",
        fld("check_enum_symbols_field", enum("check_enum_symbols_type", "A", "C")),
        fld("check_enum_name_field", enum("check_enum_name_type", "A", "B", "C", "D")),
        fld("type_mismatch_field", "string"),
        fld(
            "sub_record",
            sub(
                fld("extra_no_default_field", "long"),
                fld("fixed_length_mismatch_field", {"type": "fixed", "name": "flmt", "size": 4}),
                fld("union_missing_branches_field", ["boolean"]),
                fld("reader_union_does_not_support_type_field", ["boolean"]),
                fld(
                    "record_fqn_mismatch_field",
                    record(
                        "recordA",
                        fld("A_field_0", "boolean", default=True),
                        fld("array_type_mismatch_field", {"type": "array", "items": "string"}),
                        namespace="not_nsA",
                    ),
                ),
            ),
        ),
    )
    writer = record(
        "base",
        fld("check_enum_symbols_field", enum("check_enum_symbols_type", "A", "B", "C", "D")),
        fld("check_enum_name_field", enum("check_enum_name_type_ERR", "A", "B", "C", "D")),
        fld("type_mismatch_field", "long"),
        fld(
            "sub_record",
            sub(
                fld("fixed_length_mismatch_field", {"type": "fixed", "name": "flmt", "size": 8}),
                fld("union_missing_branches_field", ["boolean", "double", "string"]),
                fld("reader_union_does_not_support_type_field", "long"),
                fld(
                    "record_fqn_mismatch_field",
                    record(
                        "recordA",
                        fld("A_field_0", "boolean", default=True),
                        fld("array_type_mismatch_field", {"type": "array", "items": "boolean"}),
                        namespace="nsA",
                    ),
                ),
            ),
        ),
    )
    found = problems(reader, writer)
    assert [(kind, info) for kind, _, info in found] == [
        ("MISSING_ENUM_SYMBOLS", "[B, D]"),
        ("NAME_MISMATCH", "expected: check_enum_name_type_ERR"),
        ("TYPE_MISMATCH", "reader type: STRING not compatible with writer type: LONG"),
        ("READER_FIELD_MISSING_DEFAULT_VALUE", "extra_no_default_field"),
        ("FIXED_SIZE_MISMATCH", "expected: 8, found: 4"),
        ("MISSING_UNION_BRANCH", "reader union lacking writer type: DOUBLE"),
        ("MISSING_UNION_BRANCH", "reader union lacking writer type: STRING"),
        ("MISSING_UNION_BRANCH", "reader union lacking writer type: LONG"),
        ("TYPE_MISMATCH", "reader type: STRING not compatible with writer type: BOOLEAN"),
    ]
    assert paths(found) == [
        "/fields/0/type/symbols",
        "/fields/1/type/name",
        "/fields/2/type",
        "/fields/3/type/fields/1",
        "/fields/3/type/fields/2/type/size",
        "/fields/3/type/fields/3/type/1",
        "/fields/3/type/fields/3/type/2",
        "/fields/3/type/fields/4/type",
        "/fields/3/type/fields/5/type/fields/1/type/items",
    ]


def test_types_from_references_are_resolved_in_both_schemas() -> None:
    def enum(*symbols: str) -> dict[str, str]:
        text = json.dumps({"type": "enum", "name": "E", "namespace": "a", "symbols": list(symbols)})
        return {"a.E": text}

    uses = json.dumps(record("r", fld("e", "a.E")))
    assert backward_problems(avro(uses, enum("X", "Y")), avro(uses, enum("X"))) == []
    found = backward_problems(avro(uses, enum("X")), avro(uses, enum("X", "Y")))
    assert len(found) == 1
    assert found[0].startswith("{errorType:'MISSING_ENUM_SYMBOLS'")
    assert "at path '/fields/0/type/symbols'" in found[0]


def test_backward_problems_of_an_invalid_schema_raise() -> None:
    with pytest.raises(InvalidSchema):
        backward_problems(avro("{"), avro('"int"'))


# -- Confluent's AvroCompatibilityTest, as data ---------------------------------------------------


def _compatible(level: str, previous: list[str], new: str) -> bool:
    """Confluent's CompatibilityChecker over backward_problems: transitive levels check every
    previous schema, the others the latest only; FORWARD swaps reader and writer."""
    if level == "NONE":
        return True
    checked = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    for old in checked:
        found: list[str] = []
        if base in ("BACKWARD", "FULL"):
            found += backward_problems(avro(new), avro(old))
        if base in ("FORWARD", "FULL"):
            found += backward_problems(avro(old), avro(new))
        if found:
            return False
    return True


def test_the_confluent_cases_are_well_formed() -> None:
    assert len(CASES) == 32
    for case in CASES:
        assert set(case) <= {
            "description",
            "level",
            "previous",
            "new",
            "compatible",
            "xfail_reason",
        }
        assert case["level"] in LEVELS
        assert case["previous"] and isinstance(case["compatible"], bool)


@pytest.mark.parametrize("case", CASES, ids=[f"{i}" for i in range(len(CASES))])
def test_confluents_avro_compatibility_cases(case: dict[str, Any]) -> None:
    if "xfail_reason" in case:
        pytest.skip(case["xfail_reason"])
    got = _compatible(case["level"], case["previous"], case["new"])
    assert got == case["compatible"], case["description"]
