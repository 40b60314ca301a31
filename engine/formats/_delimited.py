"""ksqlDB's DELIMITED format: one CSV record, written and read as commons-csv does for ksqlDB.

Pure (no I/O). ksqlDB prints a record with ``CSVFormat.DEFAULT.withDelimiter(d)`` (quote char
``"``, quote mode MINIMAL, no escape char, no null string) and strips the record separator; this
module copies that printer's quoting rules, including the one the ksqlDB corpus shows (``"-10"``,
``"-1",a,1``): the *first* field of a record is quoted unless it starts with an ASCII letter or
digit. Any field is quoted when it starts with a character <= ``#``, contains the delimiter, a
quote, CR or LF, or ends with a character <= space; an embedded quote is doubled. NULL is an
empty, unquoted field; an empty string is ``""`` only in the first position (elsewhere it is
empty, and so reads back as NULL, as in ksqlDB).

Reading: the first CSV record of the text; quoted fields may hold delimiters, doubled quotes and
line breaks; an empty field is NULL; the field count must equal the column count. Text to value
follows ksqlDB's parsers: BOOLEAN is true only for ``true`` (any case, Java's
``Boolean.parseBoolean``: anything else is false), integers and DATE/TIME/TIMESTAMP as Java
integers, DOUBLE as ``Double.parseDouble``, DECIMAL as ``new BigDecimal`` fitted to the type,
BYTES as base64, STRING as is.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import Any

from headwater.engine.errors import SerdeError
from headwater.engine.formats._json import parse_decimal_text
from headwater.engine.values import (
    BIGINT_MAX,
    BIGINT_MIN,
    INT_MAX,
    INT_MIN,
    format_decimal,
    mismatch,
)
from headwater.metastore.delimiters import DelimiterError, delimiter
from headwater.sqlparse_ext import DecimalType, PrimitiveType, SqlType
from headwater.sqlparse_ext.sqltypes import format_double

ToText = Callable[[Any], str | None]
FromText = Callable[[str, str], Any]


_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
_DOUBLE_TEXT = re.compile(
    r"\s*[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?\s*"
)


def parse_delimiter(value: object, prop: str) -> str:
    """The delimiter character a ``VALUE_DELIMITER``/``KEY_DELIMITER`` property names.

    Raises:
        SerdeError: With ksqlDB's messages for an empty, blank or multi-character value.
    """
    try:
        return delimiter(value, prop)
    except DelimiterError as exc:
        raise SerdeError(str(exc)) from None


def supports(sql_type: SqlType) -> bool:
    """Whether DELIMITED can hold the type (primitives and DECIMAL, not ARRAY/MAP/STRUCT)."""
    return isinstance(sql_type, PrimitiveType | DecimalType)


def to_text(sql_type: SqlType) -> ToText:
    """A function printing one checked value as its field text (None for NULL)."""
    if isinstance(sql_type, DecimalType):
        return lambda v: None if v is None else format_decimal(v)
    assert isinstance(sql_type, PrimitiveType)
    name = sql_type.name
    if name == "BOOLEAN":
        return lambda v: None if v is None else ("true" if v else "false")
    if name == "DOUBLE":
        return lambda v: None if v is None else format_double(v)
    if name == "STRING":
        return lambda v: v
    if name == "BYTES":
        return lambda v: None if v is None else base64.b64encode(v).decode("ascii")
    return lambda v: None if v is None else str(v)


def _int_parser(sql_type: SqlType, low: int, high: int) -> FromText:
    def parse_int(text: str, where: str) -> Any:
        if not _INTEGER_TEXT.fullmatch(text):
            raise mismatch(where, sql_type, text)
        value = int(text)
        if not low <= value <= high:
            raise mismatch(where, sql_type, text, f"out of range {low}..{high}")
        return value

    return parse_int


def from_text(sql_type: SqlType) -> FromText:
    """A function reading one non-empty field's text as a value of ``sql_type``."""
    if isinstance(sql_type, DecimalType):
        return lambda text, where: parse_decimal_text(text, sql_type, where)
    assert isinstance(sql_type, PrimitiveType)
    name = sql_type.name
    if name in ("INTEGER", "DATE"):
        return _int_parser(sql_type, INT_MIN, INT_MAX)
    if name in ("BIGINT", "TIMESTAMP"):
        return _int_parser(sql_type, BIGINT_MIN, BIGINT_MAX)
    if name == "TIME":
        return _int_parser(sql_type, 0, 86_400_000 - 1)
    if name == "BOOLEAN":
        return lambda text, where: text.lower() == "true"
    if name == "STRING":
        return lambda text, where: text
    if name == "DOUBLE":

        def parse_double(text: str, where: str) -> Any:
            if not _DOUBLE_TEXT.fullmatch(text):
                raise mismatch(where, sql_type, text)
            return float(text.strip().rstrip("fFdD"))

        return parse_double

    def parse_bytes(text: str, where: str) -> Any:
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise mismatch(where, sql_type, text, "not base64") from None

    return parse_bytes


def _quote_needed(text: str, first: bool, delimiter: str) -> bool:
    """commons-csv's MINIMAL rule (the version ksqlDB ships; see the module docstring)."""
    if not text:
        return first
    c = text[0]
    if first and not (c.isascii() and c.isalnum()):
        return True
    if c <= "#":
        return True
    if delimiter in text or '"' in text or "\n" in text or "\r" in text:
        return True
    return text[-1] <= " "


def write_record(fields: list[str | None], delimiter: str) -> str:
    """One CSV record (no record separator) of field texts; None is an empty unquoted field."""
    out: list[str] = []
    for i, text in enumerate(fields):
        if text is None:
            out.append("")
        elif _quote_needed(text, i == 0, delimiter):
            out.append('"' + text.replace('"', '""') + '"')
        else:
            out.append(text)
    return delimiter.join(out)


def read_record(text: str, delimiter: str) -> list[str]:
    """The fields of the first CSV record in ``text`` (commons-csv DEFAULT with ``delimiter``).

    Empty lines before the record are skipped (DEFAULT ignores empty lines).

    Raises:
        SerdeError: If there is no record, or a quoted field is unterminated or followed by
            something other than the delimiter or the end of the record.
    """
    n = len(text)
    pos = 0
    while pos < n and text[pos] in "\r\n":
        pos += 1
    if pos >= n:
        raise SerdeError("no fields in the record")
    fields: list[str] = []
    while True:
        if pos < n and text[pos] == '"':
            pos += 1
            parts: list[str] = []
            while True:
                end = text.find('"', pos)
                if end < 0:
                    raise SerdeError("EOF reached before the quoted field was closed")
                parts.append(text[pos:end])
                if end + 1 < n and text[end + 1] == '"':
                    parts.append('"')
                    pos = end + 2
                    continue
                pos = end + 1
                break
            while pos < n and text[pos] in " \t" and text[pos] != delimiter:
                pos += 1  # commons-csv allows whitespace after the closing quote
            if pos < n and text[pos] != delimiter and text[pos] not in "\r\n":
                raise SerdeError(
                    f"invalid character {text[pos]!r} between a quoted field and the delimiter"
                )
            fields.append("".join(parts))
        else:
            end = pos
            while end < n and text[end] != delimiter and text[end] not in "\r\n":
                end += 1
            fields.append(text[pos:end])
            pos = end
        if pos < n and text[pos] == delimiter:
            pos += 1
            continue
        return fields
