"""JSON text for answers, with exact decimals. Pure.

``json.dumps`` cannot write a ``Decimal`` as a number without going through float (and losing
digits: DECIMAL(38, 10) values do not fit a double). ksqlDB prints DECIMAL columns as JSON numbers
with their scale (``1.50``), so this writes them from their own plain text (``1E-8`` never).

:func:`dumpb` is the fast path (orjson, decimals as raw fragments); what orjson refuses (integers
beyond 64 bits, strings holding lone surrogates) goes through the pure-Python writer, which
escapes every non-ASCII character. Non-finite floats must be turned into ksqlDB's strings before
(``engine.values.to_json_output`` does): orjson would write them as ``null``.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import orjson

_encode_str = json.encoder.encode_basestring_ascii
_OPTIONS = orjson.OPT_NON_STR_KEYS


def _fragment(value: Any) -> Any:
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise TypeError(f"cannot write the decimal {value} as JSON")
        return orjson.Fragment(format(value, "f"))
    raise TypeError(f"not JSON-writable: {type(value).__name__}")


def dumpb(value: Any) -> bytes:
    """Compact JSON (UTF-8) of ``value``: as :func:`dumps`, faster.

    Raises:
        TypeError: For a value of a type :func:`dumps` does not write.
    """
    try:
        return orjson.dumps(value, default=_fragment, option=_OPTIONS)
    except orjson.JSONEncodeError:  # what orjson refuses; the writer below raises TypeError itself
        return _python_dumps(value).encode("ascii")


def dumps(value: Any) -> str:
    """Compact JSON text of ``value`` (dicts, lists, tuples, str, int, float, bool, None, Decimal).

    Raises:
        TypeError: For a value of any other type.
    """
    return dumpb(value).decode("utf-8")


def _python_dumps(value: Any) -> str:
    """:func:`dumps` in pure Python, every non-ASCII character escaped (lone surrogates too).

    Non-finite floats are written as strings ("NaN", "Infinity", "-Infinity"), as Jackson does with
    its default settings for ksqlDB's REST output; strict JSON has no such numbers.

    Raises:
        TypeError: For a value of any other type.
    """
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts)


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_encode_str(value))
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        if math.isfinite(value):
            out.append(float.__repr__(value))
        else:
            out.append(
                '"NaN"' if math.isnan(value) else ('"Infinity"' if value > 0 else '"-Infinity"')
            )
    elif isinstance(value, Decimal):
        if not value.is_finite():
            raise TypeError(f"cannot write the decimal {value} as JSON")
        out.append(format(value, "f"))
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for key, item in value.items():
            if not first:
                out.append(",")
            first = False
            out.append(_encode_str(str(key)))
            out.append(":")
            _write(item, out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise TypeError(f"not JSON-writable: {type(value).__name__}")
