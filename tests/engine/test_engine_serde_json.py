"""The JSON format: bytes from ksqlDB's functional-test corpus (qtt json.json, decimal.json,
multi-col-keys.json, serdes.json), ksqlDB's reading rules, errors, and round trips."""

from __future__ import annotations

import math
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
    *columns: str, key_format: str = "JSON", value_format: str = "JSON", **props: Any
) -> RowSerde:
    """A serde of a stream with columns written "NAME TYPE" or "NAME TYPE KEY"."""
    cols = []
    for text in columns:
        name, _, rest = text.partition(" ")
        key = rest.endswith(" KEY")
        cols.append(Column(name, rest.removesuffix(" KEY"), key=key))
    properties = tuple(sorted((k.upper(), v) for k, v in props.items()))
    source = Source(
        SourceKind.STREAM, "S", tuple(cols), "topic_t", 1, key_format, value_format, properties
    )
    return RowSerde.for_source(source)


@pytest.mark.parametrize(
    ("type_text", "data", "value"),
    [
        ("BOOLEAN", b"true", True),
        ("INTEGER", b"33", 33),
        ("BIGINT", b"998877665544332211", 998877665544332211),
        ("DOUBLE", b"654.321", 654.321),
        ("STRING", b'"Hey"', "Hey"),
        ("DECIMAL(6, 4)", b"12.3650", Decimal("12.3650")),
        ("ARRAY<DOUBLE>", b"[10.1]", [10.1]),
        ("STRUCT<F DOUBLE>", b'{"F":45.67}', {"F": 45.67}),
    ],
)
def test_single_key_column_is_unwrapped(type_text: str, data: bytes, value: Any) -> None:
    s = serde(f"K {type_text} KEY", "V INT")
    assert s.deserialize_key(data) == (value,)
    assert s.serialize_key((value,)) == data
    assert s.deserialize_key(None) == (None,)
    assert s.serialize_key((None,)) is None


def test_key_reading_follows_ksqldb() -> None:
    assert serde("K DECIMAL(6, 4) KEY", "V INT").deserialize_key(b"12.365") == (Decimal("12.3650"),)
    assert serde("K STRUCT<F DOUBLE> KEY", "V INT").deserialize_key(b'{"f":45.67}') == (
        {"F": 45.67},
    )


def test_multi_column_key_is_an_object() -> None:
    s = serde("K INT KEY", "K2 INT KEY", "V INT")
    assert s.deserialize_key(b'{"K": 1, "K2": 2}') == (1, 2)
    assert s.serialize_key((1, 2)) == b'{"K":1,"K2":2}'
    assert s.deserialize_key(b'{"K":null,"K2":2}') == (None, 2)
    assert s.serialize_key((None, 2)) == b'{"K":null,"K2":2}'
    assert s.deserialize_key(None) == (None, None)
    # ksqlDB writes an object of NULLs (QTT partition-by.json, "multiple columns - some key some
    # value"); only a one-column key that is NULL becomes a null record key.
    assert s.serialize_key((None, None)) == b'{"K":null,"K2":null}'
    struct_key = serde("K INT KEY", "K2 STRUCT<F1 INT> KEY", "V INT")
    assert struct_key.serialize_key((1, {"F1": 2})) == b'{"K":1,"K2":{"F1":2}}'


def test_keyless_source() -> None:
    s = serde("V INT")
    assert s.serialize_key(()) is None
    assert s.deserialize_key(b"anything") == ()


def test_value_object_round_trip_and_tombstone() -> None:
    s = serde("K STRING KEY", "ID BIGINT", "NAME STRING", "VALUE INTEGER")
    assert s.serialize_value({"K": "ignored", "ID": 0, "NAME": "zero", "VALUE": 0}) == (
        b'{"ID":0,"NAME":"zero","VALUE":0}'
    )
    assert s.deserialize_value(b'{"ID":0,"NAME":"zero","VALUE":0}') == {
        "ID": 0,
        "NAME": "zero",
        "VALUE": 0,
    }
    assert s.serialize_value(None) is None
    assert s.deserialize_value(None) is None
    assert s.deserialize_value(b"null") is None


def test_value_fields_match_like_ksqldb() -> None:
    s = serde("ID BIGINT", "`lower` STRING".replace("`", ""), "VALUE INTEGER")
    # exact name first, then the JSON name upper-cased; missing is NULL; extra is ignored
    assert s.deserialize_value(b'{"id": 1, "lower": "a", "extra": true}') == {
        "ID": 1,
        "lower": "a",
        "VALUE": None,
    }
    assert s.deserialize_value(b'{"LOWER": "a"}') == {"ID": None, "lower": None, "VALUE": None}


def test_values_are_coerced_like_ksqldb() -> None:
    s = serde(
        "I INT", "B BIGINT", "D DOUBLE", "S STRING", "A ARRAY<STRING>", "E DECIMAL(4, 2)", "Y BYTES"
    )
    row = s.deserialize_value(
        b'{"I": "12", "B": 1.9, "D": "1.5", "S": {"a": [1, 2.50]}, "A": [1, 2, 3], "E": "0.125", "Y": "AAE="}'
    )
    assert row == {
        "I": 12,
        "B": 1,
        "D": 1.5,
        "S": '{"a":[1,2.50]}',
        "A": ["1", "2", "3"],
        "E": Decimal("0.13"),
        "Y": b"\x00\x01",
    }


def test_decimal_written_as_number_with_full_scale() -> None:
    s = serde("ID STRING KEY", "DEC DECIMAL(21, 19)")
    row = s.deserialize_value(b'{"DEC": 10.123451234512345}')
    assert row == {"DEC": Decimal("10.1234512345123450000")}
    assert s.serialize_value(row) == b'{"DEC":10.1234512345123450000}'
    scaled = serde("ID STRING KEY", "DEC DECIMAL(6, 4)")
    assert scaled.serialize_value(scaled.deserialize_value(b'{"DEC": 10}')) == b'{"DEC":10.0000}'
    assert serde("D DECIMAL(10, 9)").serialize_value({"D": Decimal("1E-7")}) == b'{"D":0.000000100}'


def test_writing_is_compact_like_jackson() -> None:
    s = serde("S STRING", "D DOUBLE", "M MAP<STRING, DOUBLE>", "T TIMESTAMP", "B BOOLEAN")
    data = s.serialize_value(
        {"S": 'é"\n', "D": 1e7, "M": {"a": 1.1, "c": None}, "T": 0, "B": False}
    )
    assert data == '{"S":"é\\"\\n","D":1.0E7,"M":{"a":1.1,"c":null},"T":0,"B":false}'.encode()
    assert s.serialize_value({"D": math.inf})[:30] == b'{"S":null,"D":"Infinity","M":n'
    assert s.deserialize_value(b'{"D": "Infinity"}')["D"] == math.inf  # type: ignore[index]


@pytest.mark.parametrize(
    ("type_text", "data", "value"),
    [
        ("BOOLEAN", b"true", True),
        ("INT", b"10", 10),
        ("BIGINT", b"10827272222", 10827272222),
        ("DOUBLE", b"1234.589", 1234.589),
        ("STRING", b'"hello"', "hello"),
        ("DECIMAL(4, 2)", b"99.99", Decimal("99.99")),
        ("ARRAY<DOUBLE>", b"[10.1]", [10.1]),
        ("MAP<STRING, DOUBLE>", b'{"a":45.67}', {"a": 45.67}),
        ("STRUCT<A DOUBLE>", b'{"A":45.67}', {"A": 45.67}),
    ],
)
def test_unwrapped_single_value(type_text: str, data: bytes, value: Any) -> None:
    s = serde("K STRING KEY", f"V {type_text}", wrap_single_value=False)
    assert s.deserialize_value(data) == {"V": value}
    assert s.serialize_value({"V": value}) == data
    assert s.serialize_value({"V": None}) is None  # an unwrapped NULL is a tombstone, as ksqlDB
    wrapped = serde("K STRING KEY", f"V {type_text}", wrap_single_value="true")
    assert wrapped.serialize_value({"V": value}) == b'{"V":' + data + b"}"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{not json", "invalid JSON"),
        (b'{"I": NaN}', "invalid JSON"),
        (b"\xff", "invalid JSON"),
        (b"[1]", "the record: expected STRUCT<`I` INTEGER, "),
        (b'{"I": "abc"}', "I: expected INTEGER, got string 'abc'"),
        (b'{"I": 2147483648}', "I: expected INTEGER, got integer 2147483648 (out of range"),
        (b'{"I": true}', "I: expected INTEGER, got boolean True"),
        (b'{"B": "true"}', "B: expected BOOLEAN, got string 'true'"),
        (b'{"Y": "***"}', "Y: expected BYTES, got string '***' (not base64)"),
        (b'{"Y": 1}', "Y: expected BYTES, got integer 1"),
        (b'{"E": "1.2.3"}', "E: expected DECIMAL(4, 2), got string '1.2.3' (not a decimal number)"),
        (b'{"E": 100}', "E: expected DECIMAL(4, 2), got integer 100 (must round to an absolute"),
        (b'{"A": {"x": 1}}', "A: expected ARRAY<INTEGER>, got object"),
        (b'{"A": [1, "x"]}', "A[1]: expected INTEGER, got string 'x'"),
        (b'{"T": {"F": "x"}}', "T.F: expected DOUBLE, got string 'x'"),
        (b'{"T": 5}', "T: expected STRUCT<`F` DOUBLE>, got integer 5"),
        (b'{"M": [1]}', "M: expected MAP<STRING, INTEGER>, got array"),
    ],
)
def test_deserialize_errors(data: bytes, message: str) -> None:
    s = serde(
        "I INT",
        "B BOOLEAN",
        "Y BYTES",
        "E DECIMAL(4, 2)",
        "A ARRAY<INT>",
        "T STRUCT<F DOUBLE>",
        "M MAP<STRING, INT>",
    )
    with pytest.raises(SerdeError, match=re.escape(message)) as info:
        s.deserialize_value(data)
    assert info.value.message.startswith("Failed to deserialize value from topic: topic_t. ")
    assert info.value.error_code == 40001


def test_key_errors() -> None:
    s = serde("K INT KEY", "K2 INT KEY", "V INT")
    with pytest.raises(
        SerdeError, match=re.escape("Failed to deserialize key from topic: topic_t. the record")
    ):
        s.deserialize_key(b"1")
    with pytest.raises(
        SerdeError, match=re.escape("S has 2 key column(s) (K, K2), got a key of 1 value(s)")
    ):
        s.serialize_key((1,))
    with pytest.raises(SerdeError, match=re.escape("K2: expected INTEGER, got string 'x'")):
        s.serialize_key((1, "x"))


def test_serialize_errors_name_the_column() -> None:
    s = serde("V INT", "S STRING")
    with pytest.raises(SerdeError, match=re.escape("V: expected INTEGER, got string 'x'")):
        s.serialize_value({"V": "x"})
    with pytest.raises(SerdeError, match=re.escape("S: text cannot be written as UTF-8")):
        s.serialize_value({"S": "\ud800"})


@pytest.mark.parametrize(
    ("columns", "props", "message"),
    [
        (("V MAP<INT, DOUBLE>",), {}, "JSON only supports MAP types with STRING keys"),
        (("V ARRAY<MAP<INT, DOUBLE>>",), {}, "JSON only supports MAP types with STRING keys"),
        (
            ("A INT", "B INT"),
            {"wrap_single_value": True},
            "'WRAP_SINGLE_VALUE' is only valid for single-field value schemas",
        ),
        (
            ("A INT", "B INT"),
            {"wrap_single_value": False},
            "'WRAP_SINGLE_VALUE' is only valid for single-field value schemas",
        ),
        (
            ("A INT",),
            {"value_delimiter": "|"},
            "JSON does not support the following configs: [delimiter]",
        ),
        (("A NOPE",), {}, "unknown type: NOPE"),
    ],
)
def test_schema_errors(columns: tuple[str, ...], props: dict[str, Any], message: str) -> None:
    with pytest.raises(SerdeError, match=re.escape(message)):
        serde(*columns, **props)


def test_custom_types_are_resolved() -> None:
    source = Source(
        SourceKind.TABLE,
        "T",
        (Column("K", "ZIP", key=True), Column("A", "ADDRESS")),
        "t",
        1,
        "JSON",
        "JSON",
    )
    s = RowSerde.for_source(source, {"ADDRESS": "STRUCT<CITY STRING, ZIP ZIP>", "ZIP": "INTEGER"})
    assert s.deserialize_value(b'{"A": {"city": "x", "zip": "7"}}') == {
        "A": {"CITY": "x", "ZIP": 7}
    }
    assert s.serialize_key((7,)) == b"7"


def test_unknown_formats_are_refused_clearly() -> None:
    with pytest.raises(SerdeError, match="Unknown format: FOO"):
        serde("V INT", key_format="FOO")


def test_none_key_format() -> None:
    s = serde("V INT", key_format="NONE")
    assert s.serialize_key(()) is None
    assert s.deserialize_key(b"x") == ()
    with pytest.raises(
        SerdeError,
        match=re.escape(
            "Key format does not support schema.\nformat: NONE\nschema: Persistence{columns=[`K` "
            "INTEGER KEY], features=[]}\nreason: The 'NONE' format can only be used when no "
            "columns are defined. Got: [`K` INTEGER KEY]"
        ),
    ):
        serde("K INT KEY", "V INT", key_format="NONE")


INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
PRIMITIVES: dict[str, st.SearchStrategy[Any]] = {
    "BOOLEAN": st.booleans(),
    "INTEGER": INT32,
    "BIGINT": INT64,
    "DOUBLE": st.floats(allow_nan=False),
    "DECIMAL(12, 3)": st.decimals(min_value=-(10**9) + 1, max_value=10**9 - 1, places=3),
    "STRING": TEXT,
    "BYTES": st.binary(max_size=20),
    "DATE": INT32,
    "TIME": st.integers(0, 86_399_999),
    "TIMESTAMP": INT64,
}
CONTAINERS: dict[str, st.SearchStrategy[Any]] = {
    "ARRAY<DECIMAL(12, 3)>": st.lists(st.none() | PRIMITIVES["DECIMAL(12, 3)"], max_size=4),
    "MAP<STRING, ARRAY<BIGINT>>": st.dictionaries(
        TEXT, st.none() | st.lists(INT64, max_size=3), max_size=3
    ),
    "STRUCT<`a` DOUBLE, B STRUCT<C BYTES>>": st.fixed_dictionaries(
        {
            "a": st.none() | st.floats(allow_nan=False),
            "B": st.none() | st.fixed_dictionaries({"C": st.binary()}),
        }
    ),
}


@settings(derandomize=True, max_examples=60, deadline=None)
@pytest.mark.parametrize("type_text", [*PRIMITIVES, *CONTAINERS])
@given(data=st.data())
def test_round_trip(type_text: str, data: st.DataObject) -> None:
    strategy = PRIMITIVES[type_text] if type_text in PRIMITIVES else CONTAINERS[type_text]
    value, other = data.draw(st.none() | strategy), data.draw(st.none() | strategy)
    wrapped = serde(f"K {type_text} KEY", f"V {type_text}", f"W {type_text}")
    row = {"V": value, "W": other}
    assert wrapped.deserialize_value(wrapped.serialize_value(row)) == row
    assert wrapped.deserialize_key(wrapped.serialize_key((value,))) == (value,)
    unwrapped = serde(f"V {type_text}", wrap_single_value=False)
    expected = None if value is None else {"V": value}
    assert unwrapped.deserialize_value(unwrapped.serialize_value({"V": value})) == expected


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(_json_values)
def test_exact_decoding_is_the_careful_decoder_whatever_path_it_takes(value: object) -> None:
    """The fast path (orjson, taken when the value holds no fraction) and the careful one
    (fractions as Decimal) give exactly what the careful decoder alone gives."""
    import json
    from decimal import Decimal

    from headwater.engine.formats._json import loads

    data = json.dumps(value).encode()
    assert loads(data, True) == json.loads(data, parse_float=Decimal)
    assert loads(data, False) == json.loads(data)


_row_fields = st.dictionaries(
    st.sampled_from(["S", "s", "I", "i", "D", "d", "X", "M", "m"]),
    st.none()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1.5, 2.50, 1.9999999999999999999, 0.1, 1e20, -0.0])
    | st.text(max_size=4),
    max_size=7,
)


@settings(max_examples=400, derandomize=True, deadline=None)
@given(_row_fields)
def test_a_fraction_only_a_double_column_reads_is_not_parsed_again(fields: dict[str, Any]) -> None:
    """A row whose only fractions are in DOUBLE columns, or in fields no column reads, skips the
    careful second parse; every column still decodes (or fails) exactly as after it."""
    import json

    from headwater.engine.formats._json import loads

    row = serde("S STRING", "I BIGINT", "D DOUBLE", "M DECIMAL(30, 10)")
    data = json.dumps(fields).encode()
    careful = loads(data, True)

    def decoded(read: Any) -> Any:
        try:
            return ("row", read())
        except SerdeError as exc:
            return ("error", str(exc))

    from headwater.engine.formats._json import object_reader

    assert isinstance(careful, dict)
    got = decoded(lambda: row.deserialize_value(data))
    expected = decoded(lambda: _careful_row(object_reader, careful))
    if expected[0] == "error":  # the serde names the record around the column's message
        assert got[0] == "error" and expected[1] in got[1]
    else:
        assert got == expected


def _careful_row(object_reader: Any, parsed: dict[str, Any]) -> dict[str, Any]:
    from headwater.engine.formats._json import decoder
    from headwater.sqlparse_ext import parse_type

    columns = [("S", "STRING"), ("I", "BIGINT"), ("D", "DOUBLE"), ("M", "DECIMAL(30, 10)")]
    read = object_reader(tuple((n, decoder(parse_type(t))) for n, t in columns))
    return read(parsed, "")  # type: ignore[no-any-return]


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.text())
def test_strings_are_written_as_json_dumps_writes_them(text: str) -> None:
    """`encode_string` takes json's C escaper directly: the same text as json.dumps, non-ASCII
    kept, lone surrogates and control characters included."""
    import json

    from headwater.engine.formats._json import encode_string

    assert encode_string(text) == json.dumps(text, ensure_ascii=False)
