"""The DELIMITED format: bytes from ksqlDB's functional-test corpus (qtt delimited.json, string.json,
bytes-and-strings.json, group-by.json, date.json, decimal.json), quoting, delimiters, errors, round trips."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.engine.errors import SerdeError
from headwater.engine.formats.serde import RowSerde
from headwater.metastore.catalog import Column, Source, SourceKind


def serde(
    *columns: str, key_format: str = "DELIMITED", value_format: str = "DELIMITED", **props: Any
) -> RowSerde:
    """A serde of a stream with columns written "NAME TYPE" or "NAME TYPE KEY"."""
    cols = []
    for text in columns:
        name, _, rest = text.partition(" ")
        cols.append(Column(name, rest.removesuffix(" KEY"), key=rest.endswith(" KEY")))
    properties = tuple(sorted((k.upper(), v) for k, v in props.items()))
    source = Source(
        SourceKind.STREAM, "S", tuple(cols), "topic_d", 1, key_format, value_format, properties
    )
    return RowSerde.for_source(source)


@pytest.mark.parametrize(
    ("type_text", "inputs", "value", "output"),
    [
        ("BOOLEAN", [b"true", b'"true"'], True, b"true"),
        ("BOOLEAN", [b"false", b"FALSE"], False, b"false"),
        ("INT", [b"33"], 33, b"33"),
        ("INT", [b'"22"'], 22, b"22"),
        ("BIGINT", [b"998877665544332211"], 998877665544332211, b"998877665544332211"),
        ("DOUBLE", [b"654.321"], 654.321, b"654.321"),
        ("DOUBLE", [b'"123.456"'], 123.456, b"123.456"),
        ("STRING", [b"Hey"], "Hey", b"Hey"),
        ("STRING", [b'"You"'], "You", b"You"),
        ("DECIMAL(6,4)", [b"12.3650"], Decimal("12.3650"), b"12.3650"),
        ("DECIMAL(6,4)", [b'"12.0"'], Decimal("12.0000"), b"12.0000"),
    ],
)
def test_corpus_keys(type_text: str, inputs: list[bytes], value: Any, output: bytes) -> None:
    s = serde(f"K {type_text} KEY", "V INT")
    for data in inputs:
        assert s.deserialize_key(data) == (value,)
    assert s.serialize_key((value,)) == output
    assert s.deserialize_key(None) == (None,)
    assert s.serialize_key((None,)) is None


def test_corpus_multi_column_keys_and_delimiters() -> None:
    s = serde("K1 STRING KEY", "K2 STRING KEY", "V INT")
    assert s.deserialize_key(b"foo,bar") == s.deserialize_key(b'"foo","bar"') == ("foo", "bar")
    custom = serde(
        "K1 STRING KEY", "K2 STRING KEY", "V INT", "V2 INT", key_delimiter=";", value_delimiter="-"
    )
    assert custom.deserialize_key(b"foo,bar;baz") == ("foo,bar", "baz")
    assert custom.serialize_key(("foo,bar", "baz")) == b"foo,bar;baz"
    assert custom.deserialize_value(b"0-1") == {"V": 0, "V2": 1}


@pytest.mark.parametrize(
    ("delimiter", "char"), [(",", ","), ("|", "|"), ("$", "$"), ("SPACE", " "), ("TAB", "\t")]
)
def test_corpus_value_delimiters(delimiter: str, char: str) -> None:
    s = serde(
        "K STRING KEY", "ID BIGINT", "NAME STRING", "VALUE INTEGER", value_delimiter=delimiter
    )
    data = char.join(["100", "zero", "500"]).encode()
    assert s.deserialize_value(data) == {"ID": 100, "NAME": "zero", "VALUE": 500}
    assert s.serialize_value({"ID": 100, "NAME": "zero", "VALUE": 500}) == data


def test_corpus_decimals() -> None:
    s = serde("ID STRING KEY", "V DECIMAL(33, 16)")
    cases = [
        (b"12345678987654321.2345678987654321", b"12345678987654321.2345678987654321"),
        (b".12", b"0.1200000000000000"),
        (b"-12345.12", b'"-12345.1200000000000000"'),
        (b'"-12345.12"', b'"-12345.1200000000000000"'),
    ]
    for data, output in cases:
        assert s.serialize_value(s.deserialize_value(data)) == output
    trailing = serde("ID STRING KEY", "DEC DECIMAL(6,4)")
    assert trailing.serialize_value(trailing.deserialize_value(b"10.0000")) == b"10.0000"


def test_corpus_quoting_follows_commons_csv() -> None:
    dates = serde("ID STRING KEY", "D DATE")
    assert (
        dates.serialize_value({"D": -10}) == b'"-10"'
    )  # date.json: a first field not alphanumeric
    assert dates.deserialize_value(b"-10") == {"D": -10}
    strings = serde("A STRING", "B STRING", "C STRING", "D STRING")
    row = {
        "A": " \t with white space \t",
        "B": " \t WITH WHITE SPACE \t",
        "C": "with white space",
        "D": "\t wit",
    }
    assert (
        strings.serialize_value(row)
        == b'" \t with white space \t"," \t WITH WHITE SPACE \t",with white space,"\t wit"'
    )
    assert strings.serialize_value({"A": "s", "B": "S", "C": "s", "D": ""}) == b"s,S,s,"
    mixed = serde("A STRING", "B BYTES", "C STRING")
    assert mixed.serialize_value({"A": "!", "B": b"!", "C": "!"}) == b'"!",IQ==,"!"'
    assert mixed.deserialize_value(b"#,Iw==,#") == {"A": "#", "B": b"#", "C": "#"}
    keys = serde("A INT KEY", "B STRING KEY", "C INT KEY", "V INT")
    assert keys.serialize_key((-1, "a", 1)) == b'"-1",a,1'
    embedded = serde("A STRING", "B STRING")
    assert embedded.serialize_value({"A": 'say "hi"', "B": "a,b\nc"}) == b'"say ""hi""","a,b\nc"'
    assert embedded.deserialize_value(b'"say ""hi""","a,b\nc"') == {"A": 'say "hi"', "B": "a,b\nc"}
    assert embedded.serialize_value({"A": "é", "B": "x "}) == '"é","x "'.encode()


def test_nulls_are_empty_fields() -> None:
    s = serde("A INT", "B STRING", "C DOUBLE")
    assert s.serialize_value({"A": None, "B": None, "C": 1.0}) == b",,1.0"
    assert s.deserialize_value(b',"",1.0') == {"A": None, "B": None, "C": 1.0}
    single = serde("A INT")
    assert single.serialize_value({"A": None}) == b""
    assert single.deserialize_value(b"") == {"A": None}


def test_reading_like_ksqldb_parsers() -> None:
    s = serde("B BOOLEAN", "D DOUBLE", "T TIMESTAMP", "Y BYTES")
    # Boolean.parseBoolean: only "true" (any case) is true
    assert s.deserialize_value(b"yes,1e3,10,dmFyaWF0aW9ucw==") == {
        "B": False,
        "D": 1000.0,
        "T": 10,
        "Y": b"variations",
    }
    assert s.deserialize_value(b"TRUE,NaN,-5,") == {
        "B": True,
        "D": pytest.approx(float("nan"), nan_ok=True),
        "T": -5,
        "Y": None,
    }
    assert (
        s.serialize_value({"B": True, "D": 1e-5, "T": 0, "Y": b"variations"})
        == b"true,1.0E-5,0,dmFyaWF0aW9ucw=="
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"1,2", "Column count mismatch on deserialization: expected 3, got 2"),
        (b"1,2,3,4", "Column count mismatch on deserialization: expected 3, got 4"),
        (b"x,2,3", "I: expected INTEGER, got string 'x'"),
        (b"2147483648,2,3", "I: expected INTEGER, got string '2147483648' (out of range"),
        (b" 1,2,3", "I: expected INTEGER, got string ' 1'"),
        (b"1,x,3", "D: expected DOUBLE, got string 'x'"),
        (b"1,2,1e", "E: expected DECIMAL(3, 2), got string '1e' (not a decimal number)"),
        (b'1,2,"3', "EOF reached before the quoted field was closed"),
        (b'1,"2"x,3', "invalid character 'x' between a quoted field and the delimiter"),
        (b"\n", "no fields in the record"),
        (b"\xff,1,2", "not UTF-8 text"),
    ],
)
def test_deserialize_errors(data: bytes, message: str) -> None:
    s = serde("I INT", "D DOUBLE", "E DECIMAL(3, 2)")
    with pytest.raises(SerdeError, match=re.escape(message)) as info:
        s.deserialize_value(data)
    assert info.value.message.startswith("Failed to deserialize value from topic: topic_d. ")


def test_decimal_overflow_and_bytes_errors() -> None:
    with pytest.raises(
        SerdeError, match=re.escape("E: expected DECIMAL(3, 2), got string '12.5' (must round")
    ):
        serde("E DECIMAL(3, 2)").deserialize_value(b"12.5")
    with pytest.raises(
        SerdeError, match=re.escape("Y: expected BYTES, got string '*' (not base64)")
    ):
        serde("Y BYTES").deserialize_value(b"*")


@pytest.mark.parametrize(
    ("columns", "props", "message"),
    [
        (("V ARRAY<INT>",), {}, "The 'DELIMITED' format does not support type 'ARRAY'"),
        (("V MAP<STRING, INT>",), {}, "The 'DELIMITED' format does not support type 'MAP'"),
        (
            ("K STRUCT<F DOUBLE> KEY", "V INT"),
            {},
            "The 'DELIMITED' format does not support type 'STRUCT'",
        ),
        (
            ("V INT",),
            {"wrap_single_value": True},
            "Format 'DELIMITED' does not support 'WRAP_SINGLE_VALUE' set to 'true'.",
        ),
        (
            ("V INT",),
            {"value_delimiter": "<~>"},
            "Configuration VALUE_DELIMITER is invalid: Invalid delimiter value: '<~>'. Delimiter must be a single character or TAB,SPACE",
        ),
        (
            ("V INT",),
            {"value_delimiter": ""},
            "Configuration VALUE_DELIMITER is invalid: Delimiter cannot be empty, if you meant to have a tab or space for delimiter, please use the special values 'TAB' or 'SPACE'",
        ),
        (("V INT",), {"value_delimiter": " "}, "Delimiter cannot be empty"),
        (("V INT",), {"value_delimiter": "\t"}, "Delimiter cannot be empty"),
        (
            ("K INT KEY", "V INT"),
            {"key_delimiter": '"'},
            "Configuration KEY_DELIMITER is invalid: '\"' cannot be a delimiter",
        ),
    ],
)
def test_schema_errors(columns: tuple[str, ...], props: dict[str, Any], message: str) -> None:
    with pytest.raises(SerdeError, match=re.escape(message)):
        serde(*columns, **props)


def test_wrap_single_value_false_is_accepted() -> None:
    s = serde("K STRING KEY", "FOO INT", wrap_single_value=False)
    assert s.deserialize_value(b"1") == {"FOO": 1}


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
PRIMITIVES: dict[str, st.SearchStrategy[Any]] = {
    "BOOLEAN": st.booleans(),
    "INTEGER": INT32,
    "BIGINT": INT64,
    "DOUBLE": st.floats(allow_nan=False),
    "DECIMAL(12, 3)": st.decimals(min_value=-(10**9) + 1, max_value=10**9 - 1, places=3),
    "STRING": TEXT,  # an empty string is written as an empty field, which reads as NULL (as ksqlDB)
    "BYTES": st.binary(min_size=1, max_size=20),
    "DATE": INT32,
    "TIME": st.integers(0, 86_399_999),
    "TIMESTAMP": INT64,
}


@settings(derandomize=True, max_examples=80, deadline=None)
@pytest.mark.parametrize("delimiter", [",", "TAB", "|"])
@pytest.mark.parametrize("type_text", list(PRIMITIVES))
@given(data=st.data())
def test_round_trip(type_text: str, delimiter: str, data: st.DataObject) -> None:
    values = [data.draw(st.none() | PRIMITIVES[type_text]) for _ in range(3)]
    s = serde(
        f"K {type_text} KEY",
        f"A {type_text}",
        f"B {type_text}",
        f"C {type_text}",
        key_delimiter=delimiter,
        value_delimiter=delimiter,
    )
    row = dict(zip("ABC", values))
    assert s.deserialize_value(s.serialize_value(row)) == row
    assert s.deserialize_key(s.serialize_key((values[0],))) == (values[0],)
