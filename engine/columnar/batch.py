"""Columns of a batch of rows: Arrow arrays for the types Arrow holds exactly, lists otherwise. Pure.

INTEGER, BIGINT, DOUBLE, STRING and BOOLEAN values are held as int32, int64, float64, string (UTF-8)
and bool arrays; every other type (DECIMAL, BYTES, temporal, containers) as a Python list of the
value model's values, which only the per-record functions read. Converting a list to an array
never changes a value: what Arrow would coerce (a bool into a number, a float into an integer) or
cannot hold (a string with a lone surrogate, an integer out of range) is found per value, and those
rows are reported, never converted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import pyarrow as pa

from headwater.engine.functions.types import BIGINT, BOOLEAN, DOUBLE, INTEGER, NULL, STRING
from headwater.sqlparse_ext.sqltypes import SqlType

Column: TypeAlias = pa.Array | list[Any]

_ARROW: dict[SqlType, pa.DataType] = {
    INTEGER: pa.int32(),
    BIGINT: pa.int64(),
    DOUBLE: pa.float64(),
    STRING: pa.string(),
    BOOLEAN: pa.bool_(),
}
#: The Python type each Arrow-held SQL type's values have in the value model (exactly: a bool is
#: not an INTEGER here, an int is not a DOUBLE until converted).
_PYTHON: dict[SqlType, type] = {
    INTEGER: int,
    BIGINT: int,
    DOUBLE: float,
    STRING: str,
    BOOLEAN: bool,
}
_INT_RANGE: dict[SqlType, tuple[int, int]] = {
    INTEGER: (-(2**31), 2**31 - 1),
    BIGINT: (-(2**63), 2**63 - 1),
}


def arrow_type(sql_type: SqlType) -> pa.DataType | None:
    """The Arrow type holding ``sql_type``'s values exactly, or None (then a list holds them)."""
    return _ARROW.get(sql_type)


@dataclass
class Batch:
    """Named columns of ``size`` rows, and the Python values of those read per row (cached)."""

    size: int
    columns: dict[str, Column]
    _values: dict[str, list[Any]] = field(default_factory=dict, repr=False)

    def values(self, name: str) -> list[Any]:
        """Column ``name`` as Python values (for the per-record functions)."""
        found = self._values.get(name)
        if found is None:
            column = self.columns[name]
            found = column if isinstance(column, list) else column.to_pylist()
            self._values[name] = found
        return found

    def rows(self, names: Sequence[str]) -> list[dict[str, Any]]:
        """The rows as dicts of the named columns (what a per-record function reads)."""
        lists = [self.values(n) for n in names]
        if not lists:
            return [{} for _ in range(self.size)]
        return [dict(zip(names, each, strict=True)) for each in zip(*lists, strict=True)]

    def take(self, indices: pa.Array) -> Batch:
        """The rows at ``indices`` (an int array), in that order."""
        picked = indices.to_pylist()
        columns: dict[str, Column] = {}
        for name, column in self.columns.items():
            if isinstance(column, list):
                columns[name] = [column[i] for i in picked]
            else:
                columns[name] = column.take(indices)
        return Batch(len(picked), columns)


def to_column(values: list[Any], sql_type: SqlType) -> tuple[Column, dict[int, str]]:
    """``values`` (of the value model, NULL as None) as a column of ``sql_type``, and the rows
    whose value the column cannot hold exactly (index -> why): those rows hold NULL."""
    target = _ARROW.get(sql_type)
    if target is None:
        return values, {}
    try:
        inferred = pa.array(values)
    except (pa.ArrowException, TypeError, ValueError, OverflowError, UnicodeError):
        inferred = None
    if sql_type == DOUBLE and inferred is not None and bool in set(map(type, values)):
        inferred = None  # a bool after a float is inferred as a double (True -> 1.0)
    if inferred is not None and _exact(inferred.type, sql_type):
        try:
            return inferred.cast(target), {}  # safe: an integer out of range raises
        except (pa.ArrowException, OverflowError):
            pass
    return _per_value(values, sql_type, target)


def _exact(inferred: pa.DataType, sql_type: SqlType) -> bool:
    """Whether an array Arrow inferred from values holds them exactly as ``sql_type``'s."""
    if pa.types.is_null(inferred):
        return True
    if sql_type in (INTEGER, BIGINT):
        return bool(pa.types.is_int64(inferred))
    if sql_type == DOUBLE:  # ints cast exactly or not at all (safe cast), as float() gives
        return bool(pa.types.is_float64(inferred) or pa.types.is_int64(inferred))
    if sql_type == STRING:
        return bool(pa.types.is_string(inferred))
    return sql_type == BOOLEAN and bool(pa.types.is_boolean(inferred))


def _per_value(
    values: list[Any], sql_type: SqlType, target: pa.DataType
) -> tuple[pa.Array, dict[int, str]]:
    kind = _PYTHON[sql_type]
    low, high = _INT_RANGE.get(sql_type, (None, None))
    kept: list[Any] = []
    bad: dict[int, str] = {}
    for i, v in enumerate(values):
        if v is None:
            kept.append(None)
            continue
        if sql_type == DOUBLE and type(v) is int:  # DOUBLE's value model takes ints, as float()
            try:
                v = float(v)
            except OverflowError:
                bad[i] = "out of range"
                kept.append(None)
                continue
        ok = type(v) is kind
        if ok and low is not None:
            ok = low <= v <= high
        if ok and kind is str:
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                ok = False
        if not ok:
            bad[i] = f"{type(v).__name__} is not {sql_type}"
            kept.append(None)
            continue
        kept.append(v)
    return pa.array(kept, target), bad


def broadcast(value: Any, sql_type: SqlType, size: int) -> Column:
    """A column of ``size`` rows all holding ``value`` (a constant)."""
    target = _ARROW.get(sql_type)
    if sql_type == NULL:
        return pa.nulls(size, pa.bool_())
    if target is None:
        return [value] * size
    return pa.repeat(pa.scalar(value, target), size)
