"""PEP 249 type objects and constructors over ksqlDB's type names. No I/O.

A cursor's `description` carries the ksqlDB type string as `type_code` ("BIGINT", "DECIMAL(10, 2)",
"ARRAY<STRING>"); the type objects compare equal to every code of their group by base name, so
`description[i][1] == NUMBER` holds for "DECIMAL(10, 2)".
"""

from __future__ import annotations

import datetime
import time

__all__ = [
    "BINARY",
    "DATETIME",
    "NUMBER",
    "ROWID",
    "STRING",
    "Binary",
    "DBAPITypeObject",
    "Date",
    "DateFromTicks",
    "Time",
    "TimeFromTicks",
    "Timestamp",
    "TimestampFromTicks",
    "base_type",
]


def base_type(type_code: str) -> str:
    """The base name of a ksqlDB type string: "DECIMAL(10, 2)" -> "DECIMAL", "ARRAY<INT>" -> "ARRAY"."""
    end = len(type_code)
    for stop in ("(", "<"):
        found = type_code.find(stop)
        if 0 <= found < end:
            end = found
    return type_code[:end].strip().upper()


class DBAPITypeObject:
    """PEP 249: a type object that "must compare equal to all type codes" of its group."""

    __slots__ = ("name", "values")

    def __init__(self, name: str, *values: str) -> None:
        self.name = name
        self.values = frozenset(values)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DBAPITypeObject):
            return self.values == other.values
        if isinstance(other, str):
            return base_type(other) in self.values
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.values)

    def __repr__(self) -> str:
        return f"<DBAPITypeObject {self.name}: {', '.join(sorted(self.values))}>"


STRING = DBAPITypeObject("STRING", "STRING", "VARCHAR")
"""PEP 249: "describe columns in a database that are string-based (e.g. CHAR)"."""
BINARY = DBAPITypeObject("BINARY", "BYTES")
"""PEP 249: "describe (long) binary columns in a database (e.g. LONG, RAW, BLOBs)"."""
NUMBER = DBAPITypeObject("NUMBER", "INT", "INTEGER", "BIGINT", "DOUBLE", "DECIMAL")
"""PEP 249: "describe numeric columns in a database"."""
DATETIME = DBAPITypeObject("DATETIME", "DATE", "TIME", "TIMESTAMP")
"""PEP 249: "describe date/time columns in a database"."""
ROWID = DBAPITypeObject("ROWID")
"""PEP 249: "describe the Row ID column": ksqlDB has none, so ROWID equals no type code."""

Date = datetime.date
Time = datetime.time
Timestamp = datetime.datetime


def DateFromTicks(ticks: float) -> datetime.date:
    """PEP 249: "construct an object holding a date value from the given ticks value"."""
    return Date(*time.localtime(ticks)[:3])


def TimeFromTicks(ticks: float) -> datetime.time:
    """PEP 249: "construct an object holding a time value from the given ticks value"."""
    return Time(*time.localtime(ticks)[3:6])


def TimestampFromTicks(ticks: float) -> datetime.datetime:
    """PEP 249: "construct an object holding a time stamp value from the given ticks value"."""
    return Timestamp(*time.localtime(ticks)[:6])


def Binary(value: bytes | bytearray | memoryview | str) -> bytes:
    """PEP 249: "construct an object capable of holding a binary (long) string value"."""
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)
