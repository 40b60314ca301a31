"""Order-preserving encoding of typed table keys to bytes. Pure (no I/O).

A table's rows are stored under `encode_key(values, types)`, and the stores keep keys in byte order,
so the byte order of encoded keys must be the SQL order of the values: then a pull query's key range
(`WHERE k BETWEEN a AND b`) is a store range, not a scan. Every column encodes to a self-delimiting
byte string, so a multi-column key is the concatenation of its columns' encodings, ordered column by
column, and the encoding of the leading columns is a byte prefix of the full key's (see
`prefix_end` for a range over a prefix).

Each column starts with one tag byte: 0x00 for NULL, 0x01 for a value, so NULL orders first. Then:

- BOOLEAN: one byte, 0x00 false, 0x01 true.
- INT, DATE (days since 1970-01-01), TIME (milliseconds since midnight, 0 <= t < 86,400,000):
  4 bytes big-endian of the signed 32-bit value with its sign bit flipped.
- BIGINT, TIMESTAMP (milliseconds since the epoch): 8 bytes, the same for signed 64-bit values.
- DOUBLE: the IEEE-754 bits, big-endian; positive numbers get the sign bit flipped, negative numbers
  all bits inverted, which orders -inf < negatives < 0 < positives < +inf. -0.0 is encoded as 0.0
  (SQL equality says they are equal, so a lookup of either must find the row; it decodes as 0.0).
  Every NaN is encoded as one canonical NaN, ordered after +inf (as Java's Double.compareTo and
  PostgreSQL order it).
- DECIMAL (`decimal.Decimal`, finite only): a sign class byte (0x01 negative, 0x02 zero, 0x03
  positive); for non-zero values, with trailing zeros stripped and the value written
  0.d1d2...dn x 10^e (d1 != 0): e as a flipped signed 32-bit integer, then one byte d+1 per digit,
  then 0x00. Negative values store the bitwise inverse of their magnitude's bytes (the terminator
  becomes 0xFF), which reverses their order. Equal decimals of different scale (1.0, 1.00) encode
  alike and decode to the shortest form (1); the SQL layer re-applies a column's scale.
- STRING (UTF-8) and BYTES: the bytes with each 0x00 written 0x00 0xFF, then the terminator
  0x00 0x01, so a string orders before every string it is a prefix of. Strings order by code point
  (= UTF-8 byte order = Python's order). Java orders by UTF-16 code unit instead; the two differ
  only between U+E000..U+FFFF and characters above U+FFFF.
"""

from __future__ import annotations

import enum
import math
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from headwater.store.errors import KeyDecodingError, KeyEncodingError


class KeyType(enum.Enum):
    """The SQL types a table key column may have (the SQL layer maps its own types to these)."""

    BOOLEAN = "BOOLEAN"
    INT = "INT"
    BIGINT = "BIGINT"
    DOUBLE = "DOUBLE"
    DECIMAL = "DECIMAL"
    STRING = "STRING"
    BYTES = "BYTES"
    DATE = "DATE"
    TIME = "TIME"
    TIMESTAMP = "TIMESTAMP"
    CONTAINER = "CONTAINER"  # ARRAY, STRUCT: self-describing; equal values give equal bytes


NULL_TAG = 0x00
VALUE_TAG = 0x01
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_TIME_RANGE = (0, 86_400_000 - 1)
_SIGN64 = 1 << 63
_ALL64 = (1 << 64) - 1
_CANONICAL_NAN = 0x7FF8_0000_0000_0000
_DEC_NEG, _DEC_ZERO, _DEC_POS = 0x01, 0x02, 0x03
_ESCAPED_NUL, _TERMINATOR = b"\x00\xff", b"\x00\x01"

Encoder = Callable[[Any, KeyType], bytes]
Decoder = Callable[[bytes, int], tuple[Any, int]]


def encode_key(values: tuple[Any, ...], types: tuple[KeyType, ...]) -> bytes:
    """Encodes a (possibly multi-column) key so that byte order is SQL order.

    Args:
        values: One value per key column; None is SQL NULL.
        types: The key columns' types, as many as `values` (fewer for a prefix of the key).

    Returns:
        The encoded key.

    Raises:
        KeyEncodingError: If the counts differ or a value does not fit its type.
    """
    if len(values) != len(types):
        raise KeyEncodingError(f"{len(values)} key values for {len(types)} key columns")
    parts = []
    for value, key_type in zip(values, types, strict=True):
        if value is None:
            parts.append(b"\x00")
        else:
            encode, _ = _CODECS[key_type]
            parts.append(b"\x01" + encode(value, key_type))
    return b"".join(parts)


def encode_utf8_key(raw: bytes) -> bytes:
    """`encode_key` of one STRING value given as its UTF-8 bytes ``raw`` (a table restoring a
    KAFKA STRING key writes it without decoding it first: `raw.decode()` must succeed).

    Raises:
        UnicodeDecodeError: If ``raw`` is not UTF-8.
    """
    if not raw.isascii():
        raw.decode("utf-8")  # only checks: valid UTF-8 is its own encoding again
    return b"\x01" + raw.replace(b"\x00", _ESCAPED_NUL) + _TERMINATOR


def decode_key(data: bytes, types: tuple[KeyType, ...]) -> tuple[Any, ...]:
    """Decodes bytes made by `encode_key` with the same types.

    Args:
        data: The encoded key.
        types: The key columns' types.

    Returns:
        The values: bool, int, float, Decimal, str or bytes per type, None for NULL.

    Raises:
        KeyDecodingError: If `data` is not exactly one encoded key of these types.
    """
    values: list[Any] = []
    pos = 0
    for key_type in types:
        if pos >= len(data):
            raise KeyDecodingError(f"key ends before its {key_type.value} column")
        tag = data[pos]
        pos += 1
        if tag == NULL_TAG:
            values.append(None)
        elif tag == VALUE_TAG:
            _, decode = _CODECS[key_type]
            value, pos = decode(data, pos)
            values.append(value)
        else:
            raise KeyDecodingError(f"bad column tag 0x{tag:02x} at byte {pos - 1}")
    if pos != len(data):
        raise KeyDecodingError(f"{len(data) - pos} bytes left after the last key column")
    return tuple(values)


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string that starts with `prefix`.

    With `range(prefix, prefix_end(prefix), high_inclusive=False)` a store yields exactly the keys
    whose leading columns are `prefix` (an `encode_key` of those columns).

    Args:
        prefix: A non-empty key prefix.

    Returns:
        The exclusive upper bound, or None when there is none (the prefix is all 0xFF bytes).
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _check_int(value: Any, key_type: KeyType, bounds: tuple[int, int]) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise KeyEncodingError(f"{key_type.value} key needs an int, not {type(value).__name__}")
    if not bounds[0] <= value <= bounds[1]:
        raise KeyEncodingError(f"{key_type.value} key {value} is out of range {bounds}")
    return value


def _enc_bool(value: Any, key_type: KeyType) -> bytes:
    if not isinstance(value, bool):
        raise KeyEncodingError(f"BOOLEAN key needs a bool, not {type(value).__name__}")
    return b"\x01" if value else b"\x00"


def _dec_bool(data: bytes, pos: int) -> tuple[bool, int]:
    raw = _take(data, pos, 1)
    if raw not in (b"\x00", b"\x01"):
        raise KeyDecodingError(f"bad BOOLEAN byte {raw!r}")
    return raw == b"\x01", pos + 1


def _enc_int32(value: Any, key_type: KeyType) -> bytes:
    bounds = _TIME_RANGE if key_type is KeyType.TIME else _INT32
    return struct.pack(">I", _check_int(value, key_type, bounds) + 2**31)


def _dec_int32(data: bytes, pos: int) -> tuple[int, int]:
    return struct.unpack(">I", _take(data, pos, 4))[0] - 2**31, pos + 4


def _enc_int64(value: Any, key_type: KeyType) -> bytes:
    return struct.pack(">Q", _check_int(value, key_type, _INT64) + 2**63)


def _dec_int64(data: bytes, pos: int) -> tuple[int, int]:
    return struct.unpack(">Q", _take(data, pos, 8))[0] - 2**63, pos + 8


def _enc_double(value: Any, key_type: KeyType) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise KeyEncodingError(f"DOUBLE key needs a float, not {type(value).__name__}")
    number = float(value)
    if math.isnan(number):
        bits = _CANONICAL_NAN
    elif number == 0.0:
        bits = 0  # -0.0 == 0.0
    else:
        bits = struct.unpack(">Q", struct.pack(">d", number))[0]
    bits = bits ^ _ALL64 if bits & _SIGN64 else bits ^ _SIGN64
    return struct.pack(">Q", bits)


def _dec_double(data: bytes, pos: int) -> tuple[float, int]:
    bits = struct.unpack(">Q", _take(data, pos, 8))[0]
    bits = bits ^ _SIGN64 if bits & _SIGN64 else bits ^ _ALL64
    return struct.unpack(">d", struct.pack(">Q", bits))[0], pos + 8


def _enc_decimal(value: Any, key_type: KeyType) -> bytes:
    if isinstance(value, bool) or not isinstance(value, Decimal | int):
        raise KeyEncodingError(f"DECIMAL key needs a Decimal, not {type(value).__name__}")
    number = Decimal(value)
    if not number.is_finite():
        raise KeyEncodingError(f"DECIMAL key must be finite, not {number}")
    if number.is_zero():
        return bytes([_DEC_ZERO])
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)  # finite
    count = len(digits)
    while digits[count - 1] == 0:
        count -= 1
    # value = 0.d1..dn x 10^e, e = exponent of the last digit + number of digits
    e = exponent + len(digits)
    if not _INT32[0] <= e <= _INT32[1]:
        raise KeyEncodingError(f"DECIMAL key {number} has an exponent out of range")
    magnitude = struct.pack(">I", e + 2**31) + bytes(d + 1 for d in digits[:count]) + b"\x00"
    if sign:
        return bytes([_DEC_NEG]) + bytes(b ^ 0xFF for b in magnitude)
    return bytes([_DEC_POS]) + magnitude


def _dec_decimal(data: bytes, pos: int) -> tuple[Decimal, int]:
    cls = _take(data, pos, 1)[0]
    pos += 1
    if cls == _DEC_ZERO:
        return Decimal(0), pos
    if cls not in (_DEC_NEG, _DEC_POS):
        raise KeyDecodingError(f"bad DECIMAL sign byte 0x{cls:02x}")
    flip = 0xFF if cls == _DEC_NEG else 0x00
    e = struct.unpack(">I", bytes(b ^ flip for b in _take(data, pos, 4)))[0] - 2**31
    pos += 4
    end = data.find(bytes([flip]), pos)
    if end < 0:
        raise KeyDecodingError("DECIMAL key has no terminator")
    digits = tuple((b ^ flip) - 1 for b in data[pos:end])
    if not digits or not all(0 <= d <= 9 for d in digits) or digits[0] == 0 or digits[-1] == 0:
        raise KeyDecodingError("bad DECIMAL digits")
    sign = 1 if cls == _DEC_NEG else 0
    return Decimal((sign, digits, e - len(digits))), end + 1


def _enc_string(value: Any, key_type: KeyType) -> bytes:
    if not isinstance(value, str):
        raise KeyEncodingError(f"STRING key needs a str, not {type(value).__name__}")
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise KeyEncodingError(f"STRING key is not valid Unicode: {exc.reason}") from exc
    return raw.replace(b"\x00", _ESCAPED_NUL) + _TERMINATOR


def _dec_string(data: bytes, pos: int) -> tuple[str, int]:
    raw, pos = _dec_bytes(data, pos)
    try:
        return raw.decode("utf-8"), pos
    except UnicodeDecodeError as exc:
        raise KeyDecodingError(f"STRING key is not UTF-8: {exc.reason}") from exc


def _enc_bytes(value: Any, key_type: KeyType) -> bytes:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise KeyEncodingError(f"BYTES key needs bytes, not {type(value).__name__}")
    return bytes(value).replace(b"\x00", _ESCAPED_NUL) + _TERMINATOR


def _dec_bytes(data: bytes, pos: int) -> tuple[bytes, int]:
    out = bytearray()
    while True:
        nul = data.find(b"\x00", pos)
        if nul < 0 or nul + 1 >= len(data):
            raise KeyDecodingError("STRING/BYTES key has no terminator")
        out += data[pos:nul]
        marker = data[nul + 1]
        if marker == 0x01:
            return bytes(out), nul + 2
        if marker != 0xFF:
            raise KeyDecodingError(f"bad escape 0x00 0x{marker:02x} in STRING/BYTES key")
        out.append(0)
        pos = nul + 2


def _take(data: bytes, pos: int, size: int) -> bytes:
    if pos + size > len(data):
        raise KeyDecodingError(f"key ends after {len(data)} bytes, needed {pos + size}")
    return data[pos : pos + size]


_C_NULL, _C_FALSE, _C_TRUE, _C_INT, _C_FLOAT, _C_DECIMAL = 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
_C_STR, _C_BYTES, _C_LIST, _C_DICT, _C_END = 0x07, 0x08, 0x09, 0x0A, 0x0B


def _enc_container(value: Any, key_type: KeyType) -> bytes:
    """A value of any shape (lists, dicts, scalars, nested), each part tagged. A dict's entries
    are written in their order: a STRUCT's declared order, so equal values give equal bytes
    (MAP keys, whose order is not theirs, are refused above this layer, as ksqlDB refuses them)."""
    if value is None:
        return bytes([_C_NULL])
    if value is True or value is False:
        return bytes([_C_TRUE if value else _C_FALSE])
    if isinstance(value, int):
        return bytes([_C_INT]) + _enc_int64(value, KeyType.BIGINT)
    if isinstance(value, float):
        return bytes([_C_FLOAT]) + _enc_double(value, KeyType.DOUBLE)
    if isinstance(value, Decimal):
        return bytes([_C_DECIMAL]) + _enc_decimal(value, KeyType.DECIMAL)
    if isinstance(value, str):
        return bytes([_C_STR]) + _enc_string(value, KeyType.STRING)
    if isinstance(value, bytes | bytearray):
        return bytes([_C_BYTES]) + _enc_bytes(bytes(value), KeyType.BYTES)
    if isinstance(value, list | tuple):
        return (
            bytes([_C_LIST])
            + b"".join(_enc_container(v, key_type) for v in value)
            + bytes([_C_END])
        )
    if isinstance(value, dict):
        entries = [
            _enc_container(k, key_type) + _enc_container(v, key_type) for k, v in value.items()
        ]
        return bytes([_C_DICT]) + b"".join(entries) + bytes([_C_END])
    raise KeyEncodingError(f"cannot encode {type(value).__name__} in a container key")


def _dec_container(data: bytes, pos: int) -> tuple[Any, int]:
    tag = _take(data, pos, 1)[0]
    pos += 1
    if tag == _C_NULL:
        return None, pos
    if tag in (_C_FALSE, _C_TRUE):
        return tag == _C_TRUE, pos
    if tag == _C_INT:
        return _dec_int64(data, pos)
    if tag == _C_FLOAT:
        return _dec_double(data, pos)
    if tag == _C_DECIMAL:
        return _dec_decimal(data, pos)
    if tag == _C_STR:
        return _dec_string(data, pos)
    if tag == _C_BYTES:
        return _dec_bytes(data, pos)
    if tag in (_C_LIST, _C_DICT):
        items: list[Any] = []
        while _take(data, pos, 1)[0] != _C_END:
            item, pos = _dec_container(data, pos)
            items.append(item)
        pos += 1
        if tag == _C_LIST:
            return items, pos
        return dict(zip(items[::2], items[1::2], strict=True)), pos
    raise KeyDecodingError(f"bad container tag 0x{tag:02x} at byte {pos - 1}")


_CODECS: dict[KeyType, tuple[Encoder, Decoder]] = {
    KeyType.BOOLEAN: (_enc_bool, _dec_bool),
    KeyType.INT: (_enc_int32, _dec_int32),
    KeyType.BIGINT: (_enc_int64, _dec_int64),
    KeyType.DOUBLE: (_enc_double, _dec_double),
    KeyType.DECIMAL: (_enc_decimal, _dec_decimal),
    KeyType.STRING: (_enc_string, _dec_string),
    KeyType.BYTES: (_enc_bytes, _dec_bytes),
    KeyType.DATE: (_enc_int32, _dec_int32),
    KeyType.TIME: (_enc_int32, _dec_int32),
    KeyType.TIMESTAMP: (_enc_int64, _dec_int64),
    KeyType.CONTAINER: (_enc_container, _dec_container),
}
