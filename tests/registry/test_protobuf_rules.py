"""Protobuf's rules for the registry (``headwater.registry.protobuf_rules``): parsing, canonical
text, and Confluent's protobuf diff (new schema reading, old schema writing).

Expected texts and messages come from the Java sources the module follows: Confluent's
``ProtobufSchemaTest`` (canonical and normalized texts), ``Difference`` (message wording),
``SchemaDiff`` (the compatible changes) and ``SchemaDiffTest``'s cases (as data,
``conformance/registry_compat/protobuf.json``, with the changes Confluent lists for each).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from headwater.registry.compatibility import LEVELS, problems
from headwater.registry.errors import InvalidSchema
from headwater.registry.protobuf_rules import (
    KIND,
    ProtoSchema,
    _differences,
    backward_problems,
    canonical,
    parse,
)
from headwater.registry.subject import Subject

REPO = Path(__file__).resolve().parents[2]
CASES = json.loads((REPO / "conformance" / "registry_compat" / "protobuf.json").read_text())
_PROBLEM = re.compile(r'\{errorType:"(\w+)", description:"(.*)"\}\Z', re.DOTALL)

#: Confluent's ``SchemaDiff.COMPATIBLE_CHANGES``, written out again to check the module's.
COMPATIBLE = {
    "MESSAGE_ADDED",
    "MESSAGE_MOVED",
    "ENUM_ADDED",
    "ENUM_REMOVED",
    "ENUM_CONST_ADDED",
    "ENUM_CONST_CHANGED",
    "ENUM_CONST_REMOVED",
    "FIELD_ADDED",
    "FIELD_REMOVED",
    "FIELD_NAME_CHANGED",
    "FIELD_STRING_OR_BYTES_LABEL_CHANGED",
    "ONEOF_ADDED",
    "ONEOF_REMOVED",
    "ONEOF_FIELD_ADDED",
    "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
}


def proto(text: str, references: dict[str, str] | None = None) -> Subject:
    return Subject(KIND, text, references or {})


def message(body: str, *, syntax: str = "proto3", head: str = "") -> str:
    """A file with one message ``TestMessage`` holding ``body``."""
    return f'syntax = "{syntax}";\n{head}message TestMessage {{\n{body}\n}}\n'


def found(
    new: str,
    old: str,
    new_references: dict[str, str] | None = None,
    old_references: dict[str, str] | None = None,
) -> list[tuple[str, str]]:
    """``backward_problems`` as (errorType, description) pairs."""
    out = []
    for text in backward_problems(proto(new, new_references), proto(old, old_references)):
        match = _PROBLEM.match(text)
        assert match, text
        out.append((match[1], match[2]))
    return out


def error_types(new: str, old: str, *references: dict[str, str]) -> list[str]:
    return [kind for kind, _ in found(new, old, *references)]


def invalid(text: str, references: dict[str, str] | None = None) -> str:
    with pytest.raises(InvalidSchema) as caught:
        parse(proto(text, references))
    assert caught.value.status == 422 and caught.value.code == 42201
    return caught.value.message


# --- parsing ---------------------------------------------------------------------------------


def test_parse_gives_the_file_its_messages_and_package() -> None:
    parsed = parse(proto('syntax = "proto3";\npackage a.b;\nmessage M { int32 x = 1; }'))
    assert isinstance(parsed, ProtoSchema)
    assert parsed.file.package == "a.b"
    assert [t.name for t in parsed.file.types] == ["M"]
    assert "a.b.M" in parsed.space.types


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('syntax = "proto3"; message A { int32 a = ; }', "line 1:41"),
        ("message A { strin g a = 1; }", "line 1:20"),
        ("garbage", "line 1:0"),
        ("message A { int32 a = 1; } }", "line 1:27"),
        ("message $A {}", "line 1:8"),
    ],
)
def test_parse_rejects_syntax_errors_saying_where(text: str, where: str) -> None:
    assert invalid(text).startswith(f"Could not parse Protobuf - {where} ")


def test_parse_rejects_required_fields_in_proto3() -> None:
    assert "'required' label forbidden in proto3" in invalid(message("  required int32 a = 1;"))
    parse(proto(message("  required int32 a = 1;", syntax="proto2")))


def test_parse_rejects_types_defined_nowhere() -> None:
    assert invalid(message("  Missing m = 1;")) == "Invalid schema: type 'Missing' is not defined"
    assert "'Gone'" in invalid(message("  map<string, Gone> m = 1;"))
    assert "'Nope'" in invalid("service S { rpc R (Nope) returns (Nope); }")
    assert "'Other.Inner'" in invalid(message("  Other.Inner x = 1;", head="message Other {}\n"))


def test_parse_resolves_names_from_the_innermost_scope_out() -> None:
    text = """syntax = "proto3";
package a.b;
message Outer {
  message Inner { Leaf leaf = 1; Outer.Inner self = 2; .a.b.Leaf full = 3; b.Leaf rel = 4; }
  Inner inner = 1;
}
message Leaf { Outer.Inner back = 1; }
"""
    parse(proto(text))


def test_parse_rejects_imports_that_are_neither_references_nor_well_known() -> None:
    text = 'syntax = "proto3";\nimport "other.proto";\nmessage M { int32 x = 1; }'
    assert "import 'other.proto'" in invalid(text)


def test_well_known_files_are_always_there() -> None:
    text = """syntax = "proto3";
import "google/protobuf/timestamp.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/wrappers.proto";
import "confluent/meta.proto";
import "confluent/type/decimal.proto";
import "google/type/date.proto";
message M {
  google.protobuf.Timestamp at = 1;
  google.protobuf.Struct doc = 2;
  google.protobuf.StringValue name = 3;
  confluent.type.Decimal price = 4 [(confluent.field_meta) = { params: { key: "scale" value: "2" } }];
  google.type.Date day = 5;
  google.protobuf.NullValue nothing = 6;
}
"""
    parse(proto(text))
    # Confluent resolves well-known types even when the file is not imported.
    parse(proto(message("  google.protobuf.Duration d = 1;")))


def test_imports_come_from_the_references_by_import_path() -> None:
    event = 'syntax = "proto3";\npackage ev;\nimport "base.proto";\nmessage Event { Base b = 1; }'
    base = 'syntax = "proto3";\npackage ev;\nmessage Base { string id = 1; }'
    text = 'syntax = "proto3";\nimport "event.proto";\nmessage M { ev.Event e = 1; }'
    parsed = parse(proto(text, {"event.proto": event, "base.proto": base}))
    assert set(parsed.dependencies) == {"event.proto", "base.proto"}
    # What the reference imports must be there too.
    assert "import 'base.proto'" in invalid(text, {"event.proto": event})
    # A type from a file that is not imported is not visible.
    assert "'ev.Event'" in invalid(message("  ev.Event e = 1;"), {"event.proto": event})


def test_a_reference_that_does_not_parse_is_named() -> None:
    text = 'syntax = "proto3";\nimport "bad.proto";\nmessage M { int32 x = 1; }'
    assert invalid(text, {"bad.proto": "message {"}).startswith(
        "Could not parse Protobuf reference 'bad.proto' - line 1:8"
    )


# --- canonical text --------------------------------------------------------------------------

SPACED = """
// A comment that goes.
syntax   =   "proto3" ;
package   shop.orders ;   /* and another */
import "google/protobuf/timestamp.proto";
option java_package = 'shop.orders';

enum Status { NEW = 0; /* inline */ PAID = 1; }

message Order {
  option deprecated = true;
  string id = 1 [json_name = "orderId", deprecated = true];
  map< string , int64 > counts = 2;
  oneof payment { string card = 3; string iban = 4; }
  google.protobuf.Timestamp at = 5;
  message Line { int32 qty = 1; Status status = 2; }
  repeated Line lines = 6;
  reserved 8, 10 to 12, 20 to max;
  reserved "old";
}
"""

SPACED_CANONICAL = """syntax = "proto3";
package shop.orders;

import "google/protobuf/timestamp.proto";

option java_package = "shop.orders";

message Order {
  reserved 8, 10 to 12, 20 to max;
  reserved "old";

  option deprecated = true;

  string id = 1 [
    deprecated = true,
    json_name = "orderId"
  ];
  map<string, int64> counts = 2;
  google.protobuf.Timestamp at = 5;
  repeated Line lines = 6;

  oneof payment {
    string card = 3;
    string iban = 4;
  }

  message Line {
    int32 qty = 1;
    Status status = 2;
  }
}
enum Status {
  NEW = 0;
  PAID = 1;
}
"""


def test_canonical_prints_as_confluent_does() -> None:
    assert canonical(proto(SPACED)) == SPACED_CANONICAL


def test_canonical_ignores_whitespace_and_comments() -> None:
    compact = " ".join(
        line.split("//")[0] for line in SPACED.replace("/* and another */", "").splitlines()
    )
    assert compact != SPACED
    assert canonical(proto(compact)) == canonical(proto(SPACED))
    assert canonical(proto(compact), normalize=True) == canonical(proto(SPACED), normalize=True)


def test_canonical_text_is_a_fixed_point() -> None:
    once = canonical(proto(SPACED))
    assert canonical(proto(once)) == once
    normalized = canonical(proto(SPACED), normalize=True)
    assert canonical(proto(normalized), normalize=True) == normalized


def test_canonical_of_text_that_does_not_parse_raises() -> None:
    with pytest.raises(InvalidSchema):
        canonical(proto("message {"))


def test_normalize_qualifies_names_and_sorts() -> None:
    text = """syntax = "proto3";
package p;
import "google/protobuf/wrappers.proto";
import "google/protobuf/timestamp.proto";
option java_package = "p";
option go_package = "p";
message M {
  Inner b = 2;
  google.protobuf.Timestamp a = 1;
  map<string, Inner> m = 4;
  oneof second { int32 z = 9; int32 y = 8; }
  oneof first { int32 x = 5; }
  message Inner { E e = 1; }
  enum E { TWO = 2; ONE = 1; ZERO = 0; }
}
"""
    assert canonical(proto(text), normalize=True) == (
        'syntax = "proto3";\n'
        "package p;\n"
        "\n"
        'import "google/protobuf/timestamp.proto";\n'
        'import "google/protobuf/wrappers.proto";\n'
        "\n"
        'option go_package = "p";\n'
        'option java_package = "p";\n'
        "\n"
        "message M {\n"
        "  .google.protobuf.Timestamp a = 1;\n"
        "  .p.M.Inner b = 2;\n"
        "  map<string, .p.M.Inner> m = 4;\n"
        "\n"
        "  oneof first {\n"
        "    int32 x = 5;\n"
        "  }\n"
        "  oneof second {\n"
        "    int32 y = 8;\n"
        "    int32 z = 9;\n"
        "  }\n"
        "\n"
        "  message Inner {\n"
        "    .p.M.E e = 1;\n"
        "  }\n"
        "  enum E {\n"
        "    ZERO = 0;\n"
        "    ONE = 1;\n"
        "    TWO = 2;\n"
        "  }\n"
        "}\n"
    )


def test_normalize_drops_proto2_syntax_only() -> None:
    assert canonical(proto('syntax = "proto2";\nmessage M {}'), normalize=True) == (
        "\nmessage M {}\n"
    )
    assert canonical(proto('syntax = "proto2";\nmessage M {}')).startswith('syntax = "proto2";')


def test_strings_are_escaped_as_confluent_escapes_them() -> None:
    text = r"""option a = "back\\slash";
option b = "\"quoted\"";
option c = 'it\'s';
option d = "new\nline\ttab";
option e = "a" "b";
message M {}
"""
    assert canonical(proto(text)) == (
        "\n"
        'option a = "back\\\\slash";\n'
        'option b = "\\"quoted\\"";\n'
        'option c = "it\\\'s";\n'
        'option d = "new\\nline\\ttab";\n'
        'option e = "ab";\n'
        "\n"
        "message M {}\n"
    )


# Confluent's ProtobufSchemaTest: testEnumReserved, testRanges and testNestedCustomOptions.

ENUM_RESERVED = """
import "google/protobuf/descriptor.proto";

message FooOptions {
  optional string name = 1;
  optional FooParameterType type = 2;
}
enum FooParameterType {
  reserved 20, 100 to max;
  reserved 10;
  reserved 1 to 3;
  reserved "BAD", "OLD";
  NUMBER = 1;
  STRING = 2;
}
"""

ENUM_RESERVED_NORMALIZED = """
import "google/protobuf/descriptor.proto";

message FooOptions {
  optional string name = 1;
  optional .FooParameterType type = 2;
}
enum FooParameterType {
  reserved 1 to 3;
  reserved 10;
  reserved 20;
  reserved 100 to max;
  reserved "BAD";
  reserved "OLD";
  NUMBER = 1;
  STRING = 2;
}
"""

RANGES = """
message Money {
  reserved 5000 to 6000;
  reserved 10000 to 10001;
  reserved 20000 to 20000;

  optional int64 cents = 1;

  extensions 100 to 200;
  extensions 1000 to 1001;
  extensions 2000 to 2000;

  enum MoneyEnum {
    reserved 100 to 200;
    reserved 1000 to 1001;
    reserved 2000 to 2000;
    NONE = 0;
    CENTS = 1;
    DOLLARS = 2;
  }
}
"""

NESTED_OPTIONS = """syntax = "proto3";
package acme.events;
import "google/protobuf/wrappers.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/descriptor.proto";

message ValidationSettings {
  bool is_optional = 1;
}
message EventMetadata {
  google.protobuf.StringValue owner = 1;
  google.protobuf.StringValue description = 2;
  RetentionPolicies retention_policy = 4;
}

extend google.protobuf.FieldOptions {
  ValidationSettings validation_settings = 10000;
  EventMetadata event_metadata = 10001;
}

enum RetentionPolicies {
  DEFAULT = 0; // Default value, allows enforcement to implement default strategy
  SEVEN_DAYS = 1;
  ALL_TIME = 7;
}

message Event {
  google.protobuf.Timestamp at = 1;
  oneof only_one_event_limiter {
    SearchEvent requested_search = 2 [
      (event_metadata).description.value = "Fires when a user submits a search request.",
      (event_metadata).owner.value = "DISCO"
    ];
  }
}
message SearchEvent {
  google.protobuf.Int32Value user_id = 1 [(validation_settings).is_optional = true];
}
"""

NESTED_OPTIONS_CANONICAL = """syntax = "proto3";
package acme.events;

import "google/protobuf/wrappers.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/descriptor.proto";

message ValidationSettings {
  bool is_optional = 1;
}
message EventMetadata {
  google.protobuf.StringValue owner = 1;
  google.protobuf.StringValue description = 2;
  RetentionPolicies retention_policy = 4;
}
message Event {
  google.protobuf.Timestamp at = 1;

  oneof only_one_event_limiter {
    SearchEvent requested_search = 2 [
      (event_metadata).description.value = "Fires when a user submits a search request.",
      (event_metadata).owner.value = "DISCO"
    ];
  }
}
message SearchEvent {
  google.protobuf.Int32Value user_id = 1 [(validation_settings).is_optional = true];
}
enum RetentionPolicies {
  DEFAULT = 0;
  SEVEN_DAYS = 1;
  ALL_TIME = 7;
}

extend google.protobuf.FieldOptions {
  ValidationSettings validation_settings = 10000;
  EventMetadata event_metadata = 10001;
}
"""

NESTED_OPTIONS_NORMALIZED = """syntax = "proto3";
package acme.events;

import "google/protobuf/descriptor.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

message ValidationSettings {
  bool is_optional = 1;
}
message EventMetadata {
  .google.protobuf.StringValue owner = 1;
  .google.protobuf.StringValue description = 2;
  .acme.events.RetentionPolicies retention_policy = 4;
}
message Event {
  .google.protobuf.Timestamp at = 1;

  oneof only_one_event_limiter {
    .acme.events.SearchEvent requested_search = 2 [(acme.events.event_metadata) = {
      description: {
        value: "Fires when a user submits a search request."
      },
      owner: {
        value: "DISCO"
      }
    }];
  }
}
message SearchEvent {
  .google.protobuf.Int32Value user_id = 1 [(acme.events.validation_settings) = {
    is_optional: true
  }];
}
enum RetentionPolicies {
  DEFAULT = 0;
  SEVEN_DAYS = 1;
  ALL_TIME = 7;
}

extend .google.protobuf.FieldOptions {
  .acme.events.ValidationSettings validation_settings = 10000;
  .acme.events.EventMetadata event_metadata = 10001;
}
"""


@pytest.mark.parametrize(
    ("text", "printed", "normalized"),
    [
        (ENUM_RESERVED, ENUM_RESERVED, ENUM_RESERVED_NORMALIZED),
        (
            RANGES,
            RANGES,
            RANGES.replace("20000 to 20000", "20000").replace("2000 to 2000", "2000"),
        ),
        (NESTED_OPTIONS, NESTED_OPTIONS_CANONICAL, NESTED_OPTIONS_NORMALIZED),
    ],
    ids=["enum-reserved", "ranges", "nested-custom-options"],
)
def test_confluents_canonical_and_normalized_texts(
    text: str, printed: str, normalized: str
) -> None:
    assert canonical(proto(text)) == printed
    assert canonical(proto(text), normalize=True) == normalized


def test_normalize_merges_a_custom_option_set_in_parts() -> None:
    # Confluent's testComplexCustomOptions2, without its list-valued option.
    text = """syntax = "proto3";
package com.example.mynamespace;
import "confluent/meta.proto";
message SampleRecord {
  int32 my_field1 = 1 [
    (confluent.field_meta).tags = "foo"
  ];
  int32 my_field3 = 3 [
    (confluent.field_meta).tags = "foo",
    (confluent.field_meta).tags = "bar"
  ];
  string my_field5 = 5 [
    (confluent.field_meta) = {
      tags: ["foo"]
    },
    (confluent.field_meta).tags = "bar"
  ];
}"""
    assert canonical(proto(text), normalize=True) == (
        'syntax = "proto3";\n'
        "package com.example.mynamespace;\n"
        "\n"
        'import "confluent/meta.proto";\n'
        "\n"
        "message SampleRecord {\n"
        "  int32 my_field1 = 1 [(confluent.field_meta) = {\n"
        '    tags: "foo"\n'
        "  }];\n"
        "  int32 my_field3 = 3 [(confluent.field_meta) = {\n"
        "    tags: [\n"
        '      "foo",\n'
        '      "bar"\n'
        "    ]\n"
        "  }];\n"
        "  string my_field5 = 5 [(confluent.field_meta) = {\n"
        "    tags: [\n"
        '      "foo",\n'
        '      "bar"\n'
        "    ]\n"
        "  }];\n"
        "}\n"
    )


# --- the diff --------------------------------------------------------------------------------


def test_a_scalar_kind_change_is_described_as_confluent_describes_it() -> None:
    old = message("  string test_string = 1;\n  int32 test_int = 2;")
    new = message("  string test_string = 1;\n  string test_int = 2;")
    assert backward_problems(proto(new), proto(old)) == [
        (
            '{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at '
            "path '#/TestMessage/2' in the new schema does not match its kind in the old schema\"}"
        )
    ]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("int32 a = 1;", "int64 a = 1;"),
        ("uint64 a = 1;", "bool a = 1;"),
        ("string a = 1;", "bytes a = 1;"),
        ("sint32 a = 1;", "sint64 a = 1;"),
        ("fixed32 a = 1;", "sfixed32 a = 1;"),
        ("int32 a = 1;", "int32 renamed = 1;"),
        ("int32 a = 1; int32 b = 2;", "int32 a = 1;"),
        ("int32 a = 1;", "int32 a = 1; int32 b = 2;"),
        ("optional string a = 1;", "repeated string a = 1;"),
        ("int32 a = 1;", "repeated int32 a = 1;"),  # Wire has no label for a plain proto3 field
    ],
)
def test_compatible_field_changes(old: str, new: str) -> None:
    assert found(message(new), message(old)) == []


@pytest.mark.parametrize(
    ("old", "new", "kind"),
    [
        ("int32 a = 1;", "sint32 a = 1;", "FIELD_SCALAR_KIND_CHANGED"),
        ("float a = 1;", "double a = 1;", "FIELD_SCALAR_KIND_CHANGED"),
        ("int32 a = 1;", "map<string, int32> a = 1;", "FIELD_KIND_CHANGED"),
        ("map<string, int32> a = 1;", "map<int32, int32> a = 1;", "FIELD_SCALAR_KIND_CHANGED"),
        ("optional int32 a = 1;", "repeated int32 a = 1;", "FIELD_NUMERIC_LABEL_CHANGED"),
    ],
)
def test_incompatible_field_changes(old: str, new: str, kind: str) -> None:
    assert error_types(message(new), message(old)) == [kind]


def test_required_fields_may_be_neither_added_nor_removed() -> None:
    old = message("  optional string a = 1;", syntax="proto2")
    new = message("  optional string a = 1;\n  required string b = 2;", syntax="proto2")
    assert found(new, old) == [
        (
            "REQUIRED_FIELD_ADDED",
            (
                "A required field  at path '#/TestMessage/2' in the new schema is missing in the "
                "old schema"
            ),
        )
    ]
    assert found(old, new) == [
        (
            "REQUIRED_FIELD_REMOVED",
            (
                "The new schema is missing a required field at path: '#/TestMessage/2' in the old "
                "schema"
            ),
        )
    ]


def test_removed_messages_and_changed_packages() -> None:
    old = 'syntax = "proto3";\npackage a;\nmessage A { int32 x = 1; }\nmessage B { int32 y = 1; }'
    new = 'syntax = "proto3";\npackage b;\nmessage A { int32 x = 1; }'
    assert found(new, old) == [
        (
            "PACKAGE_CHANGED",
            "The package at '#/' in the new schema does not match the package in the old schema",
        ),
        (
            "MESSAGE_REMOVED",
            "The new schema is missing a MESSAGE type at path '#/B' in the old schema",
        ),
    ]


def test_message_typed_fields_compare_by_name() -> None:
    old = 'syntax = "proto3";\nmessage T { A a = 1; }\nmessage A {}\nmessage B {}'
    new = 'syntax = "proto3";\nmessage T { B a = 1; }\nmessage A {}\nmessage B {}'
    assert error_types(new, old) == ["FIELD_NAMED_TYPE_CHANGED"]
    enum = (
        'syntax = "proto3";\nmessage T { E a = 1; }\nenum E { Z = 0; }\nmessage A {}\nmessage B {}'
    )
    assert error_types(enum, old) == ["FIELD_KIND_CHANGED"]


def test_oneof_changes() -> None:
    two = "  oneof o {\n    int32 a = 1;\n    int32 b = 2;\n  }"
    one = "  oneof o {\n    int32 a = 1;\n  }"
    assert found(message(one), message(two)) == [
        (
            "ONEOF_FIELD_REMOVED",
            "The new schema is missing a oneof field at path '#/TestMessage/o/2' in the old schema",
        )
    ]
    assert found(message(two), message(one)) == []
    loose = "  int32 a = 1;\n  int32 b = 2;"
    assert error_types(message(two), message(loose)) == ["MULTIPLE_FIELDS_MOVED_TO_ONEOF"]
    assert found(message(loose), message(two)) == []  # moved out: ONEOF_FIELD_MOVED_TO_TOP_LEVEL
    # The whole oneof deleted is compatible, as is a removed plain field.
    assert found(message("  int32 c = 3;"), message(two + "\n  int32 c = 3;")) == []


def test_enum_constant_changes_are_compatible() -> None:
    old = message("  E e = 1;\n  enum E { A = 0; B = 1; C = 2; }")
    new = message("  E e = 1;\n  enum E { A = 0; BB = 1; D = 3; }")
    diffs = _differences(parse(proto(old)), parse(proto(new)))
    assert diffs == [
        ("ENUM_CONST_CHANGED", "#/TestMessage/E/1"),
        ("ENUM_CONST_REMOVED", "#/TestMessage/E/2"),
        ("ENUM_CONST_ADDED", "#/TestMessage/E/3"),
    ]
    assert found(new, old) == []


def test_referenced_messages_are_compared_field_by_field() -> None:
    main = 'syntax = "proto3";\nimport "dep.proto";\nmessage T { d.Dep dep = 1; }'
    dep_old = 'syntax = "proto3";\npackage d;\nmessage Dep { int32 n = 1; }'
    dep_new = 'syntax = "proto3";\npackage d;\nmessage Dep { string n = 1; }'
    same = {"dep.proto": dep_old}
    assert found(main, main, same, same) == []
    assert error_types(main, main, {"dep.proto": dep_new}, same) == [
        "FIELD_SCALAR_KIND_CHANGED",
        "FIELD_NAMED_TYPE_CHANGED",
    ]
    diffs = _differences(parse(proto(main, same)), parse(proto(main, {"dep.proto": dep_new})))
    assert [path for _, path in diffs] == ["#/Dep/1", "#/T/1"]


def test_forward_and_full_levels_use_the_same_rules() -> None:
    old = message("  optional int32 a = 1;", syntax="proto2")
    new = message("  optional int32 a = 1;\n  required int32 b = 2;", syntax="proto2")
    history = [(1, proto(old))]
    assert problems("BACKWARD", proto(new), history)[0].startswith(
        '{errorType:"REQUIRED_FIELD_ADDED"'
    )
    assert problems("FORWARD", proto(new), history)[0].startswith(
        '{errorType:"REQUIRED_FIELD_REMOVED"'
    )
    assert problems("NONE", proto(new), history) == []


# --- Confluent's cases -----------------------------------------------------------------------


def test_the_confluent_cases_are_well_formed() -> None:
    assert len(CASES) == 55
    for case in CASES:
        assert set(case) <= {
            "description",
            "level",
            "previous",
            "new",
            "compatible",
            "changes",
            "previous_references",
            "new_references",
            "confluent_references",
            "metadata",
            "xfail_reason",
        }
        assert case["level"] in LEVELS
        assert case["previous"] and isinstance(case["compatible"], bool)
        assert len(case.get("previous_references", case["previous"])) == len(case["previous"])


def _subjects(case: dict[str, Any]) -> tuple[Subject, Subject]:
    previous_references = case.get("previous_references") or [{}]
    old = proto(case["previous"][-1], previous_references[-1])
    return proto(case["new"], case.get("new_references")), old


@pytest.mark.parametrize("case", CASES, ids=[f"{i}" for i in range(len(CASES))])
def test_confluents_protobuf_diff_cases(case: dict[str, Any]) -> None:
    if "xfail_reason" in case:
        pytest.skip(case["xfail_reason"])
    new, old = _subjects(case)
    got = backward_problems(new, old)
    assert (not got) == case["compatible"], case["description"]
    # Every difference Confluent lists, in its order; the incompatible ones are the problems.
    changes = [tuple(change.split(" ", 1)) for change in case["changes"]]
    assert _differences(parse(old), parse(new)) == changes, case["description"]
    incompatible = [(kind, path) for kind, path in changes if kind not in COMPATIBLE]
    assert [_PROBLEM.match(p)[1] for p in got] == [kind for kind, _ in incompatible]
    for problem, (_, path) in zip(got, incompatible, strict=True):
        assert f"'{path}'" in problem
