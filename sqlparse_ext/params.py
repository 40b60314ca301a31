"""Parameter binding (qmark style): placeholders, literals and the parameters' wire form. No I/O.

The DB-API driver sends parameters apart from the statement (`to_json`); the server turns them back
into values (`from_json`) and the parser binds each one's `literal` in place of its `?`, after the
text was read for `${...}` variables (`headwater.sqlparse_ext.parse`).

`bind` replaces each `?` that stands outside string literals ('...' with '' escapes), quoted
identifiers (`...` and "...", with doubled-quote escapes) and comments (`-- ...` to end of line,
`/* ... */`) with the ksqlDB literal for the matching parameter. `leading_keyword` returns a
statement's first keyword after leading whitespace and comments, so the driver can route SELECT to
`/query` without parsing. Both walk the text one character at a time; no regex is run over SQL.

Literals (`literal`):

======================================  =============================================
Python value                            ksqlDB text
======================================  =============================================
None                                    NULL
bool                                    TRUE / FALSE
int                                     digits (negative numbers in parentheses)
float                                   repr(); NaN and infinities are refused
decimal.Decimal                         plain digits, no exponent; NaN/infinity refused
str                                     '...' with every ' doubled
datetime.datetime / date / time         ISO 8601 string literal ('2024-05-01T12:00:00')
bytes / bytearray / memoryview          TO_BYTES('<base64>', 'base64') (a BYTES value)
list / tuple                            ARRAY[v, ...]
dict (any Mapping)                      MAP(k := v, ...)
======================================  =============================================

Negative numbers are parenthesised so that `x -?` bound to -1 cannot become the comment `x --1`.
Anything else, a wrong number of parameters, or nesting deeper than `MAX_DEPTH` raises
`ParameterError` (a ValueError), which the driver re-raises as its ProgrammingError.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import math
from collections.abc import Iterator, Mapping, Sequence

__all__ = [
    "MAX_DEPTH",
    "ParameterError",
    "bind",
    "from_json",
    "leading_keyword",
    "literal",
    "placeholders",
    "to_json",
]

MAX_DEPTH = 32
"""How deeply lists and maps may nest inside one parameter (guards against cycles)."""

# Quote character -> what it opens: a string literal or a quoted identifier. All escape by doubling.
_QUOTES = {"'": "string literal", "`": "quoted identifier", '"': "quoted identifier"}


class ParameterError(ValueError):
    """A parameter that cannot be bound: unsupported type, NaN, or a count that does not match."""


def _skip_quoted(sql: str, start: int) -> int:
    """Index just past the quoted run opening at `start` (doubled quotes escape); len(sql) if open."""
    quote = sql[start]
    i = start + 1
    n = len(sql)
    while i < n:
        if sql[i] == quote:
            if i + 1 < n and sql[i + 1] == quote:
                i += 2
                continue
            return i + 1
        i += 1
    return n


def _skip_comment(sql: str, start: int) -> int:
    """Index just past the comment opening at `start`, or `start` when no comment opens there."""
    pair = sql[start : start + 2]
    if pair == "--":
        end = sql.find("\n", start + 2)
        return len(sql) if end < 0 else end + 1
    if pair == "/*":
        end = sql.find("*/", start + 2)
        return len(sql) if end < 0 else end + 2
    return start


def _code_positions(sql: str) -> Iterator[int]:
    """Yield the index of every character that stands outside literals, identifiers and comments."""
    i = 0
    n = len(sql)
    while i < n:
        ch = sql[i]
        if ch in _QUOTES:
            i = _skip_quoted(sql, i)
            continue
        after_comment = _skip_comment(sql, i)
        if after_comment != i:
            i = after_comment
            continue
        yield i
        i += 1


def placeholders(sql: str) -> list[int]:
    """Positions of the `?` placeholders in `sql` (those outside literals, identifiers, comments).

    Args:
        sql: one or more statements.

    Returns:
        The indexes of the placeholders, in order.
    """
    return [i for i in _code_positions(sql) if sql[i] == "?"]


def leading_keyword(sql: str) -> str:
    """The first word of `sql` after whitespace and comments, upper-cased ("" when there is none).

    Args:
        sql: one or more statements.

    Returns:
        The leading keyword, e.g. "SELECT" for `/* pull */ select * from t;`.
    """
    for i in _code_positions(sql):
        if sql[i].isspace():
            continue
        end = i
        while end < len(sql) and (sql[end].isalnum() or sql[end] == "_"):
            end += 1
        return sql[i:end].upper()
    return ""


def bind(sql: str, params: Sequence[object]) -> str:
    """Replace the qmark placeholders of `sql` with ksqlDB literals for `params`.

    Args:
        sql: the operation, with `?` placeholders.
        params: one value per placeholder, in order (a list or tuple; not a str or a mapping).

    Returns:
        The SQL text with every placeholder replaced by a literal.

    Raises:
        ParameterError: `params` is not a sequence, its length differs from the number of
            placeholders, or a value has no safe literal.
    """
    if isinstance(params, (str, bytes, bytearray, Mapping)) or not isinstance(params, Sequence):
        raise ParameterError(
            f"parameters must be a sequence (list or tuple) for paramstyle 'qmark', "
            f"not {type(params).__name__}"
        )
    positions = placeholders(sql)
    if len(positions) != len(params):
        raise ParameterError(
            f"the statement has {len(positions)} placeholder(s) but {len(params)} parameter(s) "
            "were given"
        )
    parts: list[str] = []
    last = 0
    for index, value in zip(positions, params, strict=True):
        parts.append(sql[last:index])
        parts.append(literal(value))
        last = index + 1
    parts.append(sql[last:])
    return "".join(parts)


def literal(value: object, _depth: int = 0) -> str:
    """The ksqlDB literal for one Python value (see the module docstring for the table).

    Args:
        value: the parameter.

    Returns:
        SQL text that evaluates to `value`.

    Raises:
        ParameterError: the value has no safe literal (unsupported type, NaN, infinity, too deep).
    """
    if _depth > MAX_DEPTH:
        raise ParameterError(f"parameter nests deeper than {MAX_DEPTH} levels")
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return _signed(str(int(value)))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ParameterError(f"{value!r} has no ksqlDB literal")
        return _signed(repr(value))
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ParameterError(f"Decimal {value} has no ksqlDB literal")
        return _signed(format(value, "f"))
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, (datetime.date, datetime.time)):  # datetime.datetime is a date
        return "'" + value.isoformat() + "'"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "TO_BYTES('" + base64.b64encode(bytes(value)).decode("ascii") + "', 'base64')"
    if isinstance(value, (list, tuple)):
        return "ARRAY[" + ", ".join(literal(v, _depth + 1) for v in value) + "]"
    if isinstance(value, Mapping):
        entries = (
            f"{literal(k, _depth + 1)} := {literal(v, _depth + 1)}" for k, v in value.items()
        )
        return "MAP(" + ", ".join(entries) + ")"
    raise ParameterError(f"cannot bind a parameter of type {type(value).__name__}")


def _signed(text: str) -> str:
    """Parenthesise a negative number so a preceding `-` cannot turn it into a `--` comment."""
    return f"({text})" if text.startswith("-") else text


# -- parameters on the wire ------------------------------------------------------------------------
#
# The driver sends the statement with its `?` placeholders and the values apart, in the request's
# "parameters" list; the server binds them after reading the statement for ${...} variables, so a
# bound value can never be read as SQL or as a variable reference. JSON carries null, booleans,
# numbers, strings and lists as themselves; the other types travel as one-key objects:
# {"decimal": "12.50"}, {"bytes": "<base64>"}, {"map": [[key, value], ...]}. Dates and times
# travel as their ISO 8601 strings (the literal the driver always bound them to).


def to_json(value: object, _depth: int = 0) -> object:
    """One parameter as the JSON value the server's :func:`from_json` reads back.

    Raises:
        ParameterError: the value has no ksqlDB literal (checked here, before anything is sent).
    """
    if _depth > MAX_DEPTH:
        raise ParameterError(f"parameter nests deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        literal(value)  # NaN and infinities are refused
        return value
    if isinstance(value, decimal.Decimal):
        literal(value)
        return {"decimal": format(value, "f")}
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, (list, tuple)):
        return [to_json(v, _depth + 1) for v in value]
    if isinstance(value, Mapping):
        return {"map": [[to_json(k, _depth + 1), to_json(v, _depth + 1)] for k, v in value.items()]}
    raise ParameterError(f"cannot bind a parameter of type {type(value).__name__}")


def from_json(value: object, _depth: int = 0) -> object:
    """The Python value of one parameter as a request carries it (see :func:`to_json`).

    Raises:
        ParameterError: the JSON is not a parameter (an object of another shape, bad base64 or
            decimal text, nesting deeper than MAX_DEPTH).
    """
    if _depth > MAX_DEPTH:
        raise ParameterError(f"parameter nests deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        return [from_json(v, _depth + 1) for v in value]
    if isinstance(value, dict) and len(value) == 1:
        ((kind, inner),) = value.items()
        if kind == "decimal" and isinstance(inner, str):
            try:
                return decimal.Decimal(inner)
            except decimal.InvalidOperation:
                raise ParameterError(f"{inner!r} is not a decimal number") from None
        if kind == "bytes" and isinstance(inner, str):
            try:
                return base64.b64decode(inner, validate=True)
            except ValueError:
                raise ParameterError("a bytes parameter must be base64 text") from None
        if (
            kind == "map"
            and isinstance(inner, list)
            and all(isinstance(e, list) and len(e) == 2 for e in inner)
        ):
            return {_key(from_json(k, _depth + 1)): from_json(v, _depth + 1) for k, v in inner}
    raise ParameterError(
        'a parameter is null, a boolean, a number, a string, a list, or one of {"decimal": "..."}, '
        '{"bytes": "<base64>"}, {"map": [[key, value], ...]}'
    )


def _key(value: object) -> object:
    if isinstance(value, (list, dict, bytes)):
        raise ParameterError("a map key must be a scalar")
    return value
