"""Event times read a column at a time: a STRING TIMESTAMP column in a fixed-width ISO shape. Pure.

A source whose TIMESTAMP column is text reads one instant per record. For the patterns whose texts
`engine.functions.temporal` already reads with ``fromisoformat`` (``yyyy-MM-dd HH:mm:ss[.SSS]``,
with ``' '`` or ``'T'``; UTC, as a TIMESTAMP_FORMAT without a zone is), numpy reads a whole column
in one step, ~0.1 µs a value against ~7 µs. It answers only when every value has the shape in
ASCII digits, none is NULL, no year is 0000 (numpy's proleptic year 0, which Python's datetime
refuses) and numpy accepts them all (it refuses a day, hour, minute or second out of range, as
strptime does); otherwise None, and the caller reads value by value.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from headwater.engine.functions.temporal import iso_shape

_YEAR = "(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"  # 0001 to 9999
_MILLIS = r"\.[0-9]{3}"


def _shape(separator: str, fraction: bool) -> str:
    time = "[0-9]{2}:[0-9]{2}:[0-9]{2}" + (_MILLIS if fraction else "")
    return f"^{_YEAR}-[0-9]{{2}}-[0-9]{{2}}{separator}{time}$"


def iso_millis(column: pa.Array | list[object], pattern: str) -> list[int] | None:
    """ms since the epoch of every value of ``column`` read with ``pattern``, or None (then read
    them one by one: some value is not in the shape, or not a real instant)."""
    shape = iso_shape(pattern)
    if shape is None:
        return None
    separator, fraction = shape
    try:
        array = column if isinstance(column, pa.Array) else pa.array(column, pa.string())
    except (pa.ArrowException, TypeError, ValueError):
        return None  # a value that is not text
    if not pa.types.is_string(array.type) or array.null_count:
        return None
    if not pc.all(pc.match_substring_regex(array, _shape(separator, fraction))).as_py():
        return None
    try:
        read = np.array(array.to_numpy(zero_copy_only=False), dtype="datetime64[ms]")
    except ValueError:
        return None
    millis: list[int] = read.astype(np.int64).tolist()
    return millis
