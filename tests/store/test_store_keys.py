"""Order-preserving key encoding: round trips and byte order = SQL order, per type and for tuples."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.store.errors import KeyDecodingError, KeyEncodingError
from headwater.store.keys import KeyType, decode_key, encode_key, prefix_end

SETTINGS = settings(derandomize=True, deadline=None, max_examples=200)

VALUES: dict[KeyType, st.SearchStrategy[Any]] = {
    KeyType.BOOLEAN: st.booleans(),
    KeyType.INT: st.integers(-(2**31), 2**31 - 1),
    KeyType.BIGINT: st.integers(-(2**63), 2**63 - 1),
    KeyType.DOUBLE: st.floats()
    | st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan]),
    KeyType.DECIMAL: st.decimals(allow_nan=False, allow_infinity=False)
    | st.sampled_from(
        [Decimal("1.0"), Decimal(1), Decimal("-0"), Decimal("0.10"), Decimal("-1E+5")]
    ),
    KeyType.STRING: st.text() | st.text(alphabet="\x00\x01a\xff\u0100\U0001f600", max_size=4),
    KeyType.BYTES: st.binary() | st.binary(max_size=3).map(lambda b: b.replace(b"\x02", b"\x00")),
    KeyType.DATE: st.integers(-(2**31), 2**31 - 1),
    KeyType.TIME: st.integers(0, 86_399_999),
    KeyType.TIMESTAMP: st.integers(-(2**63), 2**63 - 1),
}


def sql_order(value: Any, key_type: KeyType) -> tuple[Any, ...]:
    """The SQL order of one key column: NULL first, NaN after +inf, -0.0 equal to 0.0."""
    if value is None:
        return (0,)
    if key_type is KeyType.DOUBLE:
        return (1, math.isnan(value), 0.0 if math.isnan(value) else value)
    return (1, value)


def same_value(decoded: Any, original: Any) -> bool:
    if isinstance(original, float) and math.isnan(original):
        return isinstance(decoded, float) and math.isnan(decoded)
    return bool(decoded == original) and type(decoded) is type(original)


ORDERED = [t for t in KeyType if t is not KeyType.CONTAINER]  # containers: equality, no order


@pytest.mark.parametrize("key_type", ORDERED, ids=lambda t: t.value)
def test_round_trip_and_order_per_type(key_type: KeyType) -> None:
    @SETTINGS
    @given(st.lists(st.none() | VALUES[key_type], min_size=2, max_size=12))
    def check(values: list[Any]) -> None:
        types = (key_type,)
        encoded = [encode_key((v,), types) for v in values]
        for value, data in zip(values, encoded, strict=True):
            (decoded,) = decode_key(data, types)
            assert same_value(decoded, value) or (value == 0 and decoded == 0), (value, decoded)
        for a, ea in zip(values, encoded, strict=True):
            for b, eb in zip(values, encoded, strict=True):
                ka, kb = sql_order(a, key_type), sql_order(b, key_type)
                assert (ea < eb) == (ka < kb), (a, b, ea.hex(), eb.hex())
                assert (ea == eb) == (ka == kb), (a, b)

    check()


KEY_TYPES = st.lists(st.sampled_from(ORDERED), min_size=1, max_size=3).map(tuple)


@st.composite
def typed_keys(draw: st.DrawFn) -> tuple[tuple[KeyType, ...], list[tuple[Any, ...]]]:
    types = draw(KEY_TYPES)
    row = st.tuples(*(st.none() | VALUES[t] for t in types))
    return types, draw(st.lists(row, min_size=2, max_size=10))


@SETTINGS
@given(typed_keys())
def test_tuples_round_trip_and_order_column_by_column(
    case: tuple[tuple[KeyType, ...], list[tuple[Any, ...]]],
) -> None:
    types, rows = case
    encoded = [encode_key(row, types) for row in rows]
    for row, data in zip(rows, encoded, strict=True):
        assert [sql_order(v, t) for v, t in zip(decode_key(data, types), types, strict=True)] == [
            sql_order(v, t) for v, t in zip(row, types, strict=True)
        ]
    order = [tuple(sql_order(v, t) for v, t in zip(row, types, strict=True)) for row in rows]
    for i in range(len(rows)):
        for j in range(len(rows)):
            assert (encoded[i] < encoded[j]) == (order[i] < order[j]), (rows[i], rows[j])


@SETTINGS
@given(typed_keys())
def test_leading_columns_bound_a_prefix_range(
    case: tuple[tuple[KeyType, ...], list[tuple[Any, ...]]],
) -> None:
    types, rows = case
    first = rows[0]
    prefix = encode_key(first[:1], types[:1])
    end = prefix_end(prefix)
    for row in rows:
        data = encode_key(row, types)
        same_first = sql_order(row[0], types[0]) == sql_order(first[0], types[0])
        inside = prefix <= data and (end is None or data < end)
        assert inside == same_first, (first, row)


def test_known_encodings() -> None:
    assert encode_key((None,), (KeyType.INT,)) == b"\x00"
    assert encode_key((0,), (KeyType.INT,)) == b"\x01\x80\x00\x00\x00"
    assert encode_key((-1,), (KeyType.BIGINT,)) == b"\x01\x7f" + b"\xff" * 7
    assert encode_key(("a\x00",), (KeyType.STRING,)) == b"\x01a\x00\xff\x00\x01"
    assert encode_key((Decimal(0),), (KeyType.DECIMAL,)) == b"\x01\x02"
    assert encode_key((Decimal("1.50"),), (KeyType.DECIMAL,)) == encode_key(
        (Decimal("1.5"),), (KeyType.DECIMAL,)
    )
    assert encode_key((-0.0,), (KeyType.DOUBLE,)) == encode_key((0.0,), (KeyType.DOUBLE,))
    assert encode_key((-math.nan,), (KeyType.DOUBLE,)) == encode_key((math.nan,), (KeyType.DOUBLE,))
    assert prefix_end(b"\x01a\xff") == b"\x01b"
    assert prefix_end(b"\xff\xff") is None


@pytest.mark.parametrize(
    ("value", "key_type"),
    [
        (True, KeyType.INT),
        (2**31, KeyType.INT),
        (-(2**63) - 1, KeyType.BIGINT),
        (86_400_000, KeyType.TIME),
        (-1, KeyType.TIME),
        (1, KeyType.BOOLEAN),
        ("1", KeyType.DOUBLE),
        (Decimal("NaN"), KeyType.DECIMAL),
        (Decimal("Infinity"), KeyType.DECIMAL),
        (1.5, KeyType.DECIMAL),
        (b"x", KeyType.STRING),
        ("\ud800", KeyType.STRING),
        ("x", KeyType.BYTES),
    ],
)
def test_bad_values_raise_key_encoding_error(value: Any, key_type: KeyType) -> None:
    with pytest.raises(KeyEncodingError) as info:
        encode_key((value,), (key_type,))
    assert info.value.error_code == 40000


def test_value_count_must_match_types() -> None:
    with pytest.raises(KeyEncodingError, match="2 key values for 1 key columns"):
        encode_key((1, 2), (KeyType.INT,))


@pytest.mark.parametrize(
    ("data", "types"),
    [
        (b"", (KeyType.INT,)),
        (b"\x02", (KeyType.INT,)),
        (b"\x01\x00\x00", (KeyType.INT,)),
        (b"\x01\x80\x00\x00\x00\x00", (KeyType.INT,)),  # a byte left over
        (b"\x01abc", (KeyType.STRING,)),  # no terminator
        (b"\x01a\x00\x07", (KeyType.STRING,)),  # bad escape
        (b"\x01\xff\x00\x01", (KeyType.STRING,)),  # not UTF-8
        (b"\x01\x02", (KeyType.BOOLEAN,)),
        (b"\x01\x07", (KeyType.DECIMAL,)),
        (b"\x01\x03\x80\x00\x00\x01\x01\x00", (KeyType.DECIMAL,)),  # leading zero digit
    ],
)
def test_bad_bytes_raise_key_decoding_error(data: bytes, types: tuple[KeyType, ...]) -> None:
    with pytest.raises(KeyDecodingError):
        decode_key(data, types)


CONTAINERS = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.text(max_size=5)
    | st.binary(max_size=5)
    | st.decimals(allow_nan=False, allow_infinity=False, places=2),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=200, derandomize=True)
@given(CONTAINERS, CONTAINERS)
def test_container_keys_round_trip_and_equal_values_give_equal_bytes(a: Any, b: Any) -> None:
    types = (KeyType.CONTAINER, KeyType.STRING)
    encoded = encode_key((a, "x"), types)
    assert decode_key(encoded, types) == (a, "x")
    assert (encoded == encode_key((b, "x"), types)) == (a == b and repr(a) == repr(b))
