"""The KAFKA format (Kafka's own primitive serializers) and the NULL rules of unwrapped values."""

from __future__ import annotations

import math
import re
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.engine.errors import SerdeError
from headwater.engine.formats.serde import RowSerde
from headwater.metastore.catalog import Column, Source, SourceKind


def serde(
    *columns: str, key_format: str = "KAFKA", value_format: str = "KAFKA", **props: Any
) -> RowSerde:
    """A serde of a table with columns written "NAME TYPE" or "NAME TYPE KEY"."""
    cols = []
    for text in columns:
        name, _, rest = text.partition(" ")
        cols.append(Column(name, rest.removesuffix(" KEY"), key=rest.endswith(" KEY")))
    properties = tuple(sorted((k.upper(), v) for k, v in props.items()))
    source = Source(
        SourceKind.TABLE, "T", tuple(cols), "topic_k", 3, key_format, value_format, properties
    )
    return RowSerde.for_source(source)


@pytest.mark.parametrize(
    ("type_text", "value", "data"),
    [
        ("INTEGER", 1, b"\x00\x00\x00\x01"),
        ("INTEGER", -2, b"\xff\xff\xff\xfe"),
        ("BIGINT", 2, b"\x00\x00\x00\x00\x00\x00\x00\x02"),
        ("BIGINT", -(2**63), b"\x80" + b"\x00" * 7),
        ("DOUBLE", 1.1, b"\x3f\xf1\x99\x99\x99\x99\x99\x9a"),
        ("DOUBLE", -0.0, b"\x80" + b"\x00" * 7),
        ("STRING", "foo", b"foo"),
        ("STRING", "é", b"\xc3\xa9"),
        ("STRING", "", b""),
        ("BYTES", b"variations", b"variations"),  # bytes.json: dmFyaWF0aW9ucw== in and out
        ("BYTES", b"", b""),
    ],
)
def test_bytes_are_kafkas_serializers(type_text: str, value: Any, data: bytes) -> None:
    s = serde(f"K {type_text} KEY", f"V {type_text}")
    assert s.serialize_key((value,)) == data
    assert s.serialize_value({"V": value}) == data
    assert s.deserialize_key(data) == (value,)
    assert s.deserialize_value(data) == {"V": value}


def test_nulls_and_keyless() -> None:
    s = serde("K INT KEY", "V STRING")
    assert s.serialize_key((None,)) is None
    assert s.deserialize_key(None) == (None,)
    assert s.serialize_value({"V": None}) is None  # an unwrapped NULL is a tombstone, as in ksqlDB
    assert s.serialize_value(None) is None
    assert s.deserialize_value(None) is None
    keyless = serde("V BIGINT")
    assert keyless.serialize_key(()) is None
    assert keyless.deserialize_key(b"whatever") == ()


def test_invalid_utf8_is_replaced_like_java() -> None:
    assert serde("V STRING").deserialize_value(b"a\xffb") == {"V": "a\ufffdb"}


def test_nan_double() -> None:
    s = serde("V DOUBLE")
    data = s.serialize_value({"V": math.nan})
    assert data == struct.pack(">d", math.nan)
    assert math.isnan(s.deserialize_value(data)["V"])  # type: ignore[index]


@pytest.mark.parametrize(
    ("type_text", "data", "message"),
    [
        (
            "INTEGER",
            b"\x00\x01",
            "Size of data received by IntegerDeserializer is not 4 (got 2 bytes)",
        ),
        ("INTEGER", b"", "Size of data received by IntegerDeserializer is not 4 (got 0 bytes)"),
        ("BIGINT", b"\x00" * 4, "Size of data received by LongDeserializer is not 8 (got 4 bytes)"),
        (
            "DOUBLE",
            b"\x00" * 9,
            "Size of data received by DoubleDeserializer is not 8 (got 9 bytes)",
        ),
    ],
)
def test_wrong_lengths(type_text: str, data: bytes, message: str) -> None:
    s = serde(f"K {type_text} KEY", f"V {type_text}")
    with pytest.raises(
        SerdeError, match=re.escape(f"Failed to deserialize key from topic: topic_k. {message}")
    ):
        s.deserialize_key(data)
    with pytest.raises(
        SerdeError, match=re.escape(f"Failed to deserialize value from topic: topic_k. {message}")
    ):
        s.deserialize_value(data)


def test_serialize_checks_values() -> None:
    s = serde("K INT KEY", "V BIGINT")
    with pytest.raises(
        SerdeError, match=re.escape("K: expected INTEGER, got integer 2147483648 (out of range")
    ):
        s.serialize_key((2**31,))
    with pytest.raises(SerdeError, match=re.escape("V: expected BIGINT, got double 1.5")):
        s.serialize_value({"V": 1.5})


@pytest.mark.parametrize(
    ("columns", "props", "message"),
    [
        (("K BOOLEAN KEY", "V INT"), {}, "The 'KAFKA' format does not support type 'BOOLEAN'"),
        (
            ("K DECIMAL(21,19) KEY", "V INT"),
            {},
            "The 'KAFKA' format does not support type 'DECIMAL'",
        ),
        (("V ARRAY<INT>",), {}, "The 'KAFKA' format does not support type 'ARRAY'"),
        (("V MAP<STRING, INT>",), {}, "The 'KAFKA' format does not support type 'MAP'"),
        (
            ("K STRUCT<F1 DOUBLE> KEY", "V INT"),
            {},
            "The 'KAFKA' format does not support type 'STRUCT'",
        ),
        (("V DATE",), {}, "The 'KAFKA' format does not support type 'DATE'"),
        (("V TIMESTAMP",), {}, "The 'KAFKA' format does not support type 'TIMESTAMP'"),
        (
            ("A INT", "B INT"),
            {},
            "The 'KAFKA' format only supports a single field. Got: [`A` INTEGER, `B` INTEGER]",
        ),
        (
            ("K INT KEY", "K2 INT KEY", "V INT"),
            {},
            "The 'KAFKA' format only supports a single field. Got: [`K` INTEGER, `K2` INTEGER]",
        ),
        (
            ("V INT",),
            {"wrap_single_value": "true"},
            "Format 'KAFKA' does not support 'WRAP_SINGLE_VALUE' set to 'true'.",
        ),
        (
            ("V INT",),
            {"value_delimiter": ","},
            "KAFKA does not support the following configs: [delimiter]",
        ),
    ],
)
def test_schema_errors(columns: tuple[str, ...], props: dict[str, Any], message: str) -> None:
    with pytest.raises(SerdeError, match=re.escape(message)):
        serde(*columns, **props)


def test_unwrapped_single_value_is_the_default() -> None:
    assert (
        serde("K STRING KEY", "FOO INT", wrap_single_value=False).serialize_value({"FOO": 1})
        == b"\x00\x00\x00\x01"
    )


def test_mixed_formats() -> None:
    s = serde("K STRING KEY", "FOO INT", value_format="JSON")
    assert s.serialize_key(("hello",)) == b"hello"
    assert s.serialize_value({"FOO": 10}) == b'{"FOO":10}'


PRIMITIVES: dict[str, st.SearchStrategy[Any]] = {
    "INTEGER": st.integers(-(2**31), 2**31 - 1),
    "BIGINT": st.integers(-(2**63), 2**63 - 1),
    "DOUBLE": st.floats(allow_nan=False),
    "STRING": st.text(st.characters(blacklist_categories=("Cs",)), max_size=30),
    "BYTES": st.binary(max_size=30),
}


@settings(derandomize=True, max_examples=100, deadline=None)
@pytest.mark.parametrize("type_text", list(PRIMITIVES))
@given(data=st.data())
def test_round_trip(type_text: str, data: st.DataObject) -> None:
    value = data.draw(PRIMITIVES[type_text])
    s = serde(f"K {type_text} KEY", f"V {type_text}")
    assert s.deserialize_key(s.serialize_key((value,))) == (value,)
    assert s.deserialize_value(s.serialize_value({"V": value})) == {"V": value}


def test_a_string_key_is_its_utf8_and_refuses_what_utf8_cannot_write() -> None:
    s = serde("K STRING KEY", "V INT")
    assert s.serialize_key(("ключ",)) == "ключ".encode()
    assert s.serialize_key((None,)) is None
    assert s.deserialize_key("ключ".encode()) == ("ключ",)
    with pytest.raises(SerdeError, match=re.escape("K: text cannot be written as UTF-8")):
        s.serialize_key(("\ud800",))
    with pytest.raises(SerdeError, match=re.escape("K: expected STRING, got integer 1")):
        s.serialize_key((1,))
    with pytest.raises(SerdeError, match=re.escape("got a key of 2 value(s)")):
        s.serialize_key(("a", "b"))
