"""Parse the schema string of a `/query` header into typed columns. No I/O.

ksqlDB describes a result as one string, e.g.
"`ID` STRING KEY, `NAME` STRING, `TOTAL` DECIMAL(10, 2), `TAGS` ARRAY<STRING>, `S` STRUCT<`A` INT>".
`parse_schema` turns it into `Column`s whose `SqlType` is a small tree, and `str(SqlType)` renders
the canonical type string the cursor reports as `type_code`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._errors import InterfaceError

__all__ = ["Column", "SqlType", "parse_schema"]

_PUNCT = frozenset("<>(),")


@dataclass(frozen=True, slots=True)
class SqlType:
    """A ksqlDB type: base name, numeric parameters, member types (ARRAY/MAP) or fields (STRUCT)."""

    base: str
    params: tuple[int, ...] = ()
    members: tuple[SqlType, ...] = ()
    fields: tuple[tuple[str, SqlType], ...] = ()

    def __str__(self) -> str:
        text = self.base
        if self.params:
            text += "(" + ", ".join(str(p) for p in self.params) + ")"
        if self.base == "STRUCT":
            text += "<" + ", ".join(f"{_quote(n)} {t}" for n, t in self.fields) + ">"
        elif self.members:
            text += "<" + ", ".join(str(m) for m in self.members) + ">"
        return text


@dataclass(frozen=True, slots=True)
class Column:
    """One result column: its name, type, and whether it is (part of) the key."""

    name: str
    type: SqlType
    key: bool = False


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _tokens(text: str) -> list[str]:
    """Split a schema string into words, quoted names (kept with their quotes) and punctuation."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in _PUNCT:
            out.append(ch)
            i += 1
        elif ch in "`\"'":
            j = i + 1
            while j < n and not (text[j] == ch and text[j + 1 : j + 2] != ch):
                j += 2 if text[j] == ch else 1
            if j >= n:
                raise InterfaceError(f"unterminated quote in the result schema {text!r}")
            out.append(text[i : j + 1])
            i = j + 1
        else:
            j = i
            while (
                j < n and not text[j].isspace() and text[j] not in _PUNCT and text[j] not in "`\"'"
            ):
                j += 1
            out.append(text[i:j])
            i = j
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.pos = 0

    def peek(self) -> str | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            want = repr(expected) if expected else "more text"
            raise InterfaceError(f"cannot read the result schema {self.text!r}: expected {want}")
        self.pos += 1
        return tok

    def name(self) -> str:
        tok = self.take()
        if tok[0] in '`"':
            return tok[1:-1].replace(tok[0] * 2, tok[0])
        return tok

    def type(self) -> SqlType:
        base = self.take().upper()
        params: list[int] = []
        if self.peek() == "(":
            self.take("(")
            while True:
                tok = self.take()
                if not tok.isdigit():
                    raise InterfaceError(f"bad type parameter {tok!r} in schema {self.text!r}")
                params.append(int(tok))
                if self.take() == ")":
                    break
        if self.peek() != "<":
            return SqlType(base, tuple(params))
        self.take("<")
        if base == "STRUCT":
            fields: list[tuple[str, SqlType]] = []
            while self.peek() != ">":
                fields.append((self.name(), self.type()))
                if self.peek() == ",":
                    self.take(",")
            self.take(">")
            return SqlType(base, tuple(params), fields=tuple(fields))
        members = [self.type()]
        while self.peek() == ",":
            self.take(",")
            members.append(self.type())
        self.take(">")
        return SqlType(base, tuple(params), members=tuple(members))

    def column(self) -> Column:
        name = self.name()
        sql_type = self.type()
        # Trailing modifiers: KEY, PRIMARY KEY, HEADERS, HEADER('k'): skipped, KEY remembered.
        words: list[str] = []
        depth = 0
        while (tok := self.peek()) is not None and (tok != "," or depth):
            depth += {"(": 1, ")": -1}.get(tok, 0)
            words.append(self.take().upper())
        return Column(name, sql_type, key="KEY" in words)


def parse_schema(text: str) -> tuple[Column, ...]:
    """Parse a `/query` header schema string.

    Args:
        text: e.g. "`ID` STRING KEY, `TOTAL` DECIMAL(10, 2)".

    Returns:
        The columns, in order (empty for an empty string).

    Raises:
        InterfaceError: the string is not a schema this driver can read.
    """
    parser = _Parser(text)
    columns: list[Column] = []
    while parser.peek() is not None:
        columns.append(parser.column())
        if parser.peek() == ",":
            parser.take(",")
    return tuple(columns)
