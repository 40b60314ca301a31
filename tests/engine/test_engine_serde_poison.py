"""Hostile records: every format's reader turns whatever bytes it is given into a value or a
SerdeError with a clear message, never another exception (issue 28: a JSON value nested 5,000 deep
raised RecursionError, which no caller expected, and wedged every query on its stream)."""

from __future__ import annotations

import dataclasses
import random
from decimal import Decimal
from typing import Any

import pytest

from headwater.engine.errors import SerdeError
from headwater.engine.formats import _json as jsonfmt
from headwater.engine.formats.schema_registry import MemorySchemaRegistry
from headwater.engine.formats.serde import RowSerde
from headwater.metastore.catalog import Column, Source, SourceKind

COLUMNS = (
    "K STRING KEY",
    "ID BIGINT",
    "NAME STRING",
    "PRICE DECIMAL(4, 2)",
    "TAGS ARRAY<INT>",
    "ADDR STRUCT<CITY STRING, ZIP INT>",
    "M MAP<STRING, DOUBLE>",
    "AT TIMESTAMP",
    "B BYTES",
)
ROW = {
    "ID": 1,
    "NAME": "x",
    "PRICE": Decimal("1.50"),
    "TAGS": [1, None],
    "ADDR": {"CITY": "c", "ZIP": 3},
    "M": {"a": 1.5},
    "AT": 5,
    "B": b"\x00\x01",
}
DEEP = 5000  # the record: ~10 KB


def serde(
    *columns: str,
    fmt: str = "JSON",
    key_format: str = "KAFKA",
    registry: MemorySchemaRegistry | None = None,
    **props: str,
) -> RowSerde:
    cols = []
    for text in columns:
        name, _, rest = text.partition(" ")
        cols.append(Column(name, rest.removesuffix(" KEY"), key=rest.endswith(" KEY")))
    source = Source(
        SourceKind.STREAM,
        "S",
        tuple(cols),
        "poison",
        1,
        key_format,
        fmt,
        tuple(sorted((k.upper(), v) for k, v in props.items())),
    )
    return RowSerde.for_source(source, {}, registry)


def nested(depth: int, inner: bytes = b"1", opening: bytes = b"[", closing: bytes = b"]") -> bytes:
    return opening * depth + inner + closing * depth


def refused(read: Any, data: bytes | None) -> str:
    """The message of the SerdeError reading ``data`` raises (any other exception fails)."""
    with pytest.raises(SerdeError) as caught:
        read(data)
    return caught.value.message


# -- JSON nesting ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "column",
    [
        "NAME STRING",
        "ID BIGINT",
        "TAGS ARRAY<INT>",
        "M MAP<STRING, STRING>",
        "ADDR STRUCT<CITY STRING>",
    ],
)
@pytest.mark.parametrize(
    ("opening", "closing", "inner"),
    [
        (b"[", b"]", b"1"),
        (b'{"a":', b"}", b"1"),
        (b"[", b"]", b"1.5"),  # 1.5: the exact path
        (b"[", b"]", b"12345678901234567890"),  # 20 digits: the careful path, orjson skipped
    ],
)
def test_json_nested_5000_deep_is_a_deserialization_error(
    column: str, opening: bytes, closing: bytes, inner: bytes
) -> None:
    name = column.split()[0]
    data = b'{"' + name.encode() + b'":' + nested(DEEP, inner, opening, closing) + b"}"
    message = refused(serde("K STRING KEY", column).deserialize_value, data)
    assert message == (
        "Failed to deserialize value from topic: poison. invalid JSON: arrays and "
        f"objects nested deeper than {jsonfmt.MAX_NESTING_DEPTH} levels"
    )


def test_json_nesting_is_bounded_in_keys_unwrapped_values_and_every_encoding() -> None:
    deep = nested(DEEP)
    key = serde("K STRING KEY", "V INT", key_format="JSON")
    assert "nested deeper than" in refused(key.deserialize_key, deep)
    unwrapped = serde("V STRING", wrap_single_value="false")
    assert "nested deeper than" in refused(unwrapped.deserialize_value, deep)
    as_utf16 = ('{"V":' + "[" * DEEP + "]" * DEEP + "}").encode("utf-16")
    assert "nested deeper than" in refused(serde("V STRING").deserialize_value, as_utf16)
    truncated = b'{"V":' + b"[" * DEEP  # never closed: a parser recurses all the same
    assert "nested deeper than" in refused(serde("V STRING").deserialize_value, truncated)
    registry = MemorySchemaRegistry()
    json_sr = serde("K STRING KEY", "V STRING", fmt="JSON_SR", registry=registry)
    header = json_sr.serialize_value({"V": "x"})[:5]  # type: ignore[index]
    assert "nested deeper than" in refused(
        json_sr.deserialize_value, header + b'{"V":' + deep + b"}"
    )


def test_json_nested_up_to_the_bound_is_read() -> None:
    depth = jsonfmt.MAX_NESTING_DEPTH - 1  # inside the record's object
    as_string = serde("V STRING")
    for inner in (b"1", b"1.5"):  # 1.5: read exactly (Decimal), walking the whole value
        value = as_string.deserialize_value(b'{"V":' + nested(depth, inner) + b"}")
        assert value == {"V": nested(depth, inner).decode()}
    objects = nested(depth, b"1", b'{"a":', b"}")
    assert as_string.deserialize_value(b'{"V":' + objects + b"}") == {"V": objects.decode()}
    assert "nested deeper than" in refused(
        as_string.deserialize_value, b'{"V":' + nested(depth + 1) + b"}"
    )


def test_brackets_inside_strings_do_not_count() -> None:
    text = "[" * DEEP + '\\"]' + "{" * DEEP
    data = b'{"V":"' + text.encode() + b'","W":[[1]]}'
    assert serde("V STRING", "W ARRAY<ARRAY<INT>>").deserialize_value(data) == {
        "V": text.replace('\\"', '"'),
        "W": [[1]],
    }
    assert jsonfmt.nesting_depth(data) == 3
    # a string cannot hide depth: closing brackets in it do not close anything
    hidden = b'{"a":' * 300 + b'"]]]]}}}}"' + b"}" * 300
    assert jsonfmt.nesting_depth(hidden) > jsonfmt.MAX_NESTING_DEPTH  # counting stops there
    within = b'{"a":' * 200 + b'"]]]]}}}}"' + b"}" * 200
    assert jsonfmt.nesting_depth(within) == 200


def test_wide_values_are_not_deep() -> None:
    wide = b'{"V":[' + b",".join(b'{"a":[1,2],"b":"x[y"}' for _ in range(2000)) + b"]}"
    assert jsonfmt.nesting_depth(wide) == 4
    value = serde("V ARRAY<STRUCT<A ARRAY<INT>, B STRING>>").deserialize_value(wide)
    assert value is not None and len(value["V"]) == 2000


# -- every format, hostile bytes ---------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["JSON", "JSON_SR", "AVRO", "PROTOBUF", "PROTOBUF_NOSR"])
def test_truncated_and_corrupted_records_are_serde_errors(fmt: str) -> None:
    registry = MemorySchemaRegistry()
    s = serde(*COLUMNS, fmt=fmt, registry=registry)
    good = s.serialize_value(ROW)
    assert good is not None and s.deserialize_value(good) is not None
    rnd = random.Random(28)
    cases = [good[:i] for i in range(len(good))]  # every truncation
    for _ in range(500):
        corrupted = bytearray(good)
        for _ in range(rnd.randint(1, 4)):
            corrupted[rnd.randrange(len(corrupted))] = rnd.randrange(256)
        cases.append(bytes(corrupted))
    cases += [bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 40))) for _ in range(300)]
    for data in cases:
        try:
            s.deserialize_value(data)
        except SerdeError as exc:
            assert exc.message.startswith("Failed to deserialize value from topic: poison. ")
            assert not exc.message.rstrip().endswith(":"), exc.message  # says what went wrong


def test_hostile_avro_lengths_and_protobuf_indexes() -> None:
    registry = MemorySchemaRegistry()
    avro = serde(*COLUMNS, fmt="AVRO", registry=registry)
    header = avro.serialize_value(ROW)[:5]  # type: ignore[index]
    for body in (
        b"\x02\x02\xfe\xff\xff\xff\xff\xff\xff\xff\x01",  # a string of 2**62 bytes
        b"\x02\x02\x01",  # a negative length
        b"\x02\x02\x02\x02\x02xx\x02\x02\x02\xfe\xff\xff\xff\x0f",
    ):  # a huge array
        message = refused(avro.deserialize_value, header + body)
        assert message.startswith("Failed to deserialize value from topic: poison. not AVRO")
        assert not message.endswith(": ")
    protobuf = serde(*COLUMNS, fmt="PROTOBUF", registry=registry)
    header = protobuf.serialize_value(ROW)[:5]  # type: ignore[index]
    assert "truncated message indexes" in refused(protobuf.deserialize_value, header + b"\x85")
    assert "PROTOBUF" in refused(protobuf.deserialize_value, header + b"\x00" + b"\x0b" * DEEP)


@pytest.mark.parametrize(
    ("fmt", "column", "data", "says"),
    [
        ("JSON", "V INT", b'{"V":1\xff}', "invalid JSON"),  # invalid UTF-8
        ("JSON", "V STRING", b'{"V":"a\x00b"}', "Invalid control character"),  # a raw NUL
        ("JSON", "V INT", b'{"V":"seven"}', "expected INTEGER"),  # wrong types
        ("JSON", "V BOOLEAN", b'{"V":[true]}', "expected BOOLEAN"),
        ("JSON", "V STRUCT<A INT>", b'{"V":[1]}', "expected STRUCT"),
        ("JSON", "V INT", b"[1]", "expected a JSON object"),
        ("JSON", "V BIGINT", b'{"V":1' + b"0" * 5000 + b"}", "invalid JSON"),  # a huge number
        ("JSON", "V DECIMAL(4, 2)", b'{"V":1e999999999}', "expected DECIMAL"),
        ("DELIMITED", "V BIGINT", b"1" * 5000, "digits"),  # int() refuses: was a bare ValueError
        ("DELIMITED", "V INT", b"\xff", "not UTF-8"),
        ("DELIMITED", "V INT", b"1,2", "Column count mismatch"),
        ("KAFKA", "V INT", b"\x00\x00\x00", "is not 4"),
        ("KAFKA", "V DOUBLE", b"\x00" * 9, "is not 8"),
    ],
)
def test_bad_bytes_of_each_format_say_what_is_wrong(
    fmt: str, column: str, data: bytes, says: str
) -> None:
    message = refused(serde(column, fmt=fmt).deserialize_value, data)
    assert message.startswith("Failed to deserialize value from topic: poison. ")
    assert says in message


def test_nul_bytes_and_huge_values_that_fit_are_read() -> None:
    assert serde("V STRING", fmt="DELIMITED").deserialize_value(b"a\x00b") == {"V": "a\x00b"}
    assert serde("V STRING").deserialize_value(b'{"V":"a\\u0000b"}') == {"V": "a\x00b"}
    huge = "x" * 5_000_000
    assert serde("V STRING").deserialize_value(b'{"V":"' + huge.encode() + b'"}') == {"V": huge}
    assert serde("V STRING", fmt="KAFKA").deserialize_value(b"\xff\x00") == {"V": "\ufffd\x00"}


def test_any_exception_a_reader_raises_is_a_serde_error() -> None:
    """The boundary itself: a reader failing in a way nobody foresaw still fails the record only."""
    s = serde("K STRING KEY", "V INT", key_format="JSON")

    def unforeseen(data: bytes) -> Any:
        raise KeyError("surprise")

    broken = dataclasses.replace(
        s,
        _value=dataclasses.replace(s._value, read=unforeseen),
        _key=dataclasses.replace(s._key, read=unforeseen),
    )
    assert refused(broken.deserialize_value, b"{}") == (
        "Failed to deserialize value from topic: poison. KeyError: 'surprise'"
    )
    assert refused(broken.deserialize_key, b"{}") == (
        "Failed to deserialize key from topic: poison. KeyError: 'surprise'"
    )
