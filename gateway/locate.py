"""Where in a statement an error is: the offset of the node a message names. Pure.

The planners' messages name what is wrong in ksqlDB's words (``WHERE column 'NOPE' cannot be
resolved.``, ``Expected type BIGINT for field V``); the caret of the error should stand under that
thing, not at the statement's first column. These helpers find it in the parsed tree (sqlglot
nodes carry their start offset in the statement's text).
"""

from __future__ import annotations

import re

from sqlglot import exp

from headwater.sqlparse_ext import statements as ast

__all__ = [
    "keyword_offset",
    "line_column",
    "located_message",
    "named_offset",
    "offset_in_message",
    "source_offset",
]

_MISSING = re.compile(r"^(?:Source )?`?([^\s`]+)`? does not exist\.?$")
#: The messages ksqlDB prefixes with where the fault is (``Line: 3, Col: 70: ``): its
#: InvalidColumnException (an unknown or ambiguous column, in any clause) and its
#: UnknownSourceException (INSERT INTO an unknown stream).
_LOCATED = re.compile(
    r"^(?:(?:[A-Z]+ )+c|C)olumn '[^']*' (?:cannot be resolved|is ambiguous)"
    r"|^Source `[^`]*` does not exist\.$"
)
_AMBIGUOUS = re.compile(r"^Column '[^']*' is ambiguous")
_QUOTED = re.compile(r"(?:column|field|Column name|name) [`'\"]?([A-Za-z_][A-Za-z0-9_@$]*)[`'\"]?")


def named_offset(statement: ast.Statement, name: str) -> int | None:
    """The offset of the first column or identifier called ``name`` (any case), or None."""
    wanted = name.upper()
    for node in statement.expression.walk():
        if isinstance(node, exp.Column | exp.Identifier) and node.name.upper() == wanted:
            start = node.meta.get("start")
            if start is None and isinstance(node, exp.Column):
                start = (
                    node.this.meta.get("start") if isinstance(node.this, exp.Expression) else None
                )
            if start is not None:
                return int(start)
    return None


def source_offset(statement: ast.Statement, name: str) -> int | None:
    """The offset of the first stream or table called ``name`` (``FROM nope``), or None."""
    wanted = name.upper()
    for node in statement.expression.walk():
        if (
            isinstance(node, exp.Table)
            and node.name.upper() == wanted
            and isinstance(node.this, exp.Expression)
            and "start" in node.this.meta
        ):
            return int(node.this.meta["start"])
    return None


def keyword_offset(statement: ast.Statement, keyword: str) -> int | None:
    """The offset of ``keyword`` as a word of the statement's text outside quotes, or None."""
    for match in re.finditer(
        rf"'(?:[^']|'')*'|`[^`]*`|\"[^\"]*\"|\b{keyword}\b", statement.text, re.IGNORECASE
    ):
        if match.group()[0] not in "'`\"":
            return match.start()
    return None


def offset_in_message(statement: ast.Statement, message: str) -> int | None:
    """Where the thing a message names is: for an INSERT, the value given for the field named
    (or the column named); for "X does not exist.", the stream or table X where it is named;
    otherwise the column named, when the message names one."""
    missing = _MISSING.match(message)
    if missing is not None:
        found_source = source_offset(statement, missing.group(1))
        if found_source is not None:
            return found_source
    found = _QUOTED.search(message)
    if found is None:  # "Unknown format: NOPE": the value as the statement quotes it
        value = re.search(r": '?([A-Za-z0-9_.-]+)'?\.?$", message)
        if value is not None:
            quoted = re.search(rf"'{re.escape(value.group(1))}'", statement.text, re.IGNORECASE)
            if quoted is not None:
                return quoted.start()
        return None
    name = found.group(1)
    if isinstance(statement, ast.InsertValues):
        columns = [c.upper() for c in statement.columns]
        if "field" in found.group(0) and name.upper() in columns:
            index = columns.index(name.upper())
            if index < len(statement.values):
                start = statement.values[index].meta.get("start")
                if start is not None:
                    return int(start)
    return named_offset(statement, name)


def line_column(statement: ast.Statement, offset: int | None) -> tuple[int, int]:
    """The script line and column of ``offset`` in the statement's text (the statement's own
    position when the fault has none)."""
    if offset is None or not 0 <= offset <= len(statement.text):
        return statement.line, statement.column
    before = statement.text[:offset]
    newlines = before.count("\n")
    if newlines == 0:
        return statement.line, statement.column + offset
    return statement.line + newlines, offset - before.rfind("\n")


def located_message(statement: ast.Statement, message: str, offset: int | None) -> str:
    """``message`` as ksqlDB words it: with ``Line: n, Col: m: `` (the script position of
    ``offset``, else of the thing the message names) before the errors ksqlDB locates."""
    if not _LOCATED.match(message):
        return message
    if offset is None:
        offset = offset_in_message(statement, message)
    if offset is None:
        return message
    line, column = line_column(statement, offset)
    located = f"Line: {line}, Col: {column}: {message}"
    if _AMBIGUOUS.match(message):  # ksqlDB finds it while preparing (its AstSanitizer)
        return f"Exception while preparing statement: {located}"
    return located
