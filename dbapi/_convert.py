"""Turn JSON values of a `/query` row into Python values by their ksqlDB type. No I/O.

Rows are decoded with `parse_float=decimal.Decimal`, so DECIMAL columns keep every digit; the
conversion then gives:

=====================  ===================================================================
ksqlDB type            Python value
=====================  ===================================================================
INT, INTEGER, BIGINT   int
DOUBLE                 float
DECIMAL(p, s)          decimal.Decimal
BOOLEAN, STRING        bool, str
BYTES                  bytes (the server sends base64 text)
DATE                   datetime.date from "2024-05-01" (or an int: days since 1970-01-01)
TIME                   datetime.time from "12:30:00.123" (or an int: milliseconds of the day)
TIMESTAMP              datetime.datetime from "2024-05-01T12:30:00.123" (naive, ksqlDB's UTC;
                       aware when the text has an offset) or an int of epoch milliseconds
ARRAY / MAP / STRUCT   list / dict / dict, members converted by their own types
anything else          the JSON value (numbers with a fraction as float)
=====================  ===================================================================
"""

from __future__ import annotations

import base64
import binascii
import datetime
import decimal
from collections.abc import Callable
from typing import Any

from ._errors import DataError
from ._schema import SqlType

__all__ = ["convert", "plain"]

_EPOCH = datetime.datetime(1970, 1, 1)


def plain(value: Any) -> Any:
    """A JSON value with Decimals (from `parse_float`) turned back into floats, recursively."""
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def _integer(value: Any, _t: SqlType) -> Any:
    return (
        int(value) if isinstance(value, decimal.Decimal) and value == value.to_integral() else value
    )


def _double(value: Any, _t: SqlType) -> Any:
    return (
        float(value)
        if isinstance(value, (int, decimal.Decimal)) and not isinstance(value, bool)
        else value
    )


def _decimal(value: Any, _t: SqlType) -> Any:
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        return decimal.Decimal(value)
    return value


def _bytes(value: Any, _t: SqlType) -> Any:
    return base64.b64decode(value, validate=True) if isinstance(value, str) else value


def _date(value: Any, _t: SqlType) -> Any:
    if isinstance(value, str):
        return datetime.date.fromisoformat(value)
    if isinstance(value, int):
        return _EPOCH.date() + datetime.timedelta(days=value)
    return value


def _time(value: Any, _t: SqlType) -> Any:
    if isinstance(value, str):
        return datetime.time.fromisoformat(value)
    if isinstance(value, int):
        return (_EPOCH + datetime.timedelta(milliseconds=value)).time()
    return value


def _timestamp(value: Any, _t: SqlType) -> Any:
    if isinstance(value, str):
        return datetime.datetime.fromisoformat(value)
    if isinstance(value, int):
        return _EPOCH + datetime.timedelta(milliseconds=value)
    return value


def _array(value: Any, t: SqlType) -> Any:
    if isinstance(value, list) and t.members:
        return [convert(v, t.members[0]) for v in value]
    return plain(value)


def _map(value: Any, t: SqlType) -> Any:
    if isinstance(value, dict) and len(t.members) == 2:
        return {k: convert(v, t.members[1]) for k, v in value.items()}
    return plain(value)


def _struct(value: Any, t: SqlType) -> Any:
    if not isinstance(value, dict):
        return plain(value)
    types = dict(t.fields)
    return {k: convert(v, types[k]) if k in types else plain(v) for k, v in value.items()}


_CONVERTERS: dict[str, Callable[[Any, SqlType], Any]] = {
    "INT": _integer,
    "INTEGER": _integer,
    "BIGINT": _integer,
    "DOUBLE": _double,
    "DECIMAL": _decimal,
    "BYTES": _bytes,
    "DATE": _date,
    "TIME": _time,
    "TIMESTAMP": _timestamp,
    "ARRAY": _array,
    "MAP": _map,
    "STRUCT": _struct,
}


def convert(value: Any, sql_type: SqlType) -> Any:
    """Convert one JSON value by its ksqlDB type (see the module docstring).

    Args:
        value: the decoded JSON value (floats as Decimal).
        sql_type: the column's type from the header schema.

    Returns:
        The Python value; None stays None.

    Raises:
        DataError: the value does not fit its type (bad base64, a malformed date, ...).
    """
    if value is None:
        return None
    converter = _CONVERTERS.get(sql_type.base)
    if converter is None:
        return plain(value)
    try:
        return converter(value, sql_type)
    except (ValueError, TypeError, ArithmeticError, binascii.Error, OverflowError) as exc:
        raise DataError(f"cannot read {value!r} as {sql_type}: {exc}") from exc
