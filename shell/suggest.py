"""What to suggest at the cursor: the text before it (and the rest of the statement) -> the kinds
of names that fit there. Pure: no I/O, no prompt_toolkit.

Tokens come from ``headwater.sqlparse_ext``'s tokenizer (quotes, comments and identifiers are
its business, not ours). Only the statement the cursor is in counts: tokens after the last ``;``
before the cursor. The rules are a small ordered table over the last words typed, in the manner
of pgcli's ``sqlcompletion.suggest_type``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import Token, TokenType
from sqlglot.errors import TokenError

from headwater.sqlparse_ext.dialect import Headwater

from .vocabulary import SHOWABLE, STATEMENT_STARTS

__all__ = ["Kind", "Suggestion", "Suggestions", "suggest"]

_DIALECT = Headwater()
_WORD = re.compile(r"[A-Za-z0-9_@.]*$")
_VARIABLE = re.compile(r"\$\{([A-Za-z0-9_@]*)$")
_NAME_TYPES = frozenset({TokenType.VAR, TokenType.IDENTIFIER})
# Tokens after which an expression (column, function) may start inside a query.
_EXPRESSION_AFTER = frozenset(
    {
        "SELECT",
        "WHERE",
        "AND",
        "OR",
        "ON",
        "BY",
        "HAVING",
        "WHEN",
        "THEN",
        "ELSE",
        "NOT",
        ",",
        "(",
        "=",
        "<",
        ">",
        "<=",
        ">=",
        "<>",
        "!=",
        "+",
        "-",
        "*",
        "/",
        "%",
        "CASE",
        "DISTINCT",
    }
)


class Kind(enum.Enum):
    """A kind of completion."""

    KEYWORD = "keyword"
    SOURCE = "source"  # streams and tables
    STREAM = "stream"
    TABLE = "table"
    COLUMN = "column"
    FUNCTION = "function"
    PROPERTY = "property"
    VARIABLE = "variable"
    TOPIC = "topic"
    QUERY = "query"
    TYPE = "type"


@dataclass(frozen=True, slots=True)
class Suggestion:
    """One kind of name to offer.

    Attributes:
        kind: what to offer.
        words: for KEYWORD, the keywords that fit (empty: every keyword).
        sources: for COLUMN, the sources (upper-cased names) whose columns fit (empty: all).
    """

    kind: Kind
    words: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Suggestions:
    """What fits at the cursor.

    Attributes:
        word: the partial word before the cursor (what completions replace).
        items: the kinds of names that fit, most likely first.
        quoted: the word is inside an open '...' (a property name after SET).
    """

    word: str
    items: tuple[Suggestion, ...]
    quoted: bool = False


def _tokens(text: str) -> list[Token] | None:
    """The tokens of `text`, or None when it does not tokenize (an open quote)."""
    try:
        return list(_DIALECT.tokenizer().tokenize(text))
    except TokenError:
        return None


def _statement_tokens(tokens: Sequence[Token]) -> list[Token]:
    """The tokens after the last ';'."""
    last = max((i for i, t in enumerate(tokens) if t.token_type == TokenType.SEMICOLON), default=-1)
    return list(tokens[last + 1 :])


def _words(tokens: Sequence[Token]) -> list[str]:
    """Upper-cased text of each token (quoted identifiers keep their case)."""
    return [t.text if t.token_type == TokenType.IDENTIFIER else t.text.upper() for t in tokens]


def sources_in(tokens: Sequence[Token]) -> dict[str, str]:
    """The sources a statement reads or names, alias (or name) -> source name.

    A name after FROM, JOIN, INTO, or DESCRIBE counts; a name right after it is its alias.
    """
    found: dict[str, str] = {}
    words = _words(tokens)
    for i, token in enumerate(tokens[:-1]):
        if words[i] not in {"FROM", "JOIN", "INTO"}:
            continue
        target = tokens[i + 1]
        if target.token_type not in _NAME_TYPES:
            continue
        name = words[i + 1]
        found[name] = name
        if i + 2 < len(tokens) and tokens[i + 2].token_type in _NAME_TYPES:
            alias = words[i + 2]
            if alias not in {"WHERE", "EMIT", "WINDOW", "GROUP", "PARTITION", "LIMIT", "WITHIN"}:
                found[alias] = name
        if i + 3 < len(tokens) and words[i + 2] == "AS" and tokens[i + 3].token_type in _NAME_TYPES:
            found[words[i + 3]] = name
    return found


def _in_query(words: list[str]) -> bool:
    return "SELECT" in words


def _after_keyword(words: list[str], full: list[Token]) -> tuple[Suggestion, ...] | None:
    """The suggestions decided by the last word(s) before the cursor."""
    last = words[-1]
    before = words[-2] if len(words) > 1 else ""
    if last in {"SHOW", "LIST"}:
        return (Suggestion(Kind.KEYWORD, SHOWABLE),)
    if last == "ALL" and before in {"SHOW", "LIST"}:
        return (Suggestion(Kind.KEYWORD, ("TOPICS",)),)
    if last in {"FROM", "JOIN"} and before != "PRINT":
        return (Suggestion(Kind.SOURCE),)
    if last == "INTO":
        return (Suggestion(Kind.STREAM),)
    if last == "DESCRIBE":
        return (
            Suggestion(Kind.SOURCE),
            Suggestion(Kind.KEYWORD, ("STREAMS", "TABLES", "FUNCTION")),
        )
    if before == "DESCRIBE" and last not in {"STREAMS", "TABLES", "FUNCTION"}:
        return (Suggestion(Kind.KEYWORD, ("EXTENDED",)),)
    if last == "DROP":
        return (Suggestion(Kind.KEYWORD, ("STREAM", "TABLE", "TYPE")),)
    kind_of = {"STREAM": Kind.STREAM, "TABLE": Kind.TABLE, "TYPE": Kind.TYPE}
    if last in kind_of and before == "DROP":
        return (Suggestion(kind_of[last]), Suggestion(Kind.KEYWORD, ("IF",)))
    if last == "EXISTS" and len(words) > 3 and words[-4] == "DROP" and words[-3] in kind_of:
        return (Suggestion(kind_of[words[-3]]),)
    if last in {"TERMINATE", "PAUSE", "RESUME"}:
        return (Suggestion(Kind.QUERY), Suggestion(Kind.KEYWORD, ("ALL",)))
    if last == "EXPLAIN":
        return (Suggestion(Kind.QUERY), Suggestion(Kind.KEYWORD, ("SELECT",)))
    if last == "PRINT":
        return (Suggestion(Kind.TOPIC),)
    if last in {"SET", "UNSET"} and len(words) == 1:
        return (Suggestion(Kind.PROPERTY),)
    if last == "UNDEFINE":
        return (Suggestion(Kind.VARIABLE),)
    if last == "CREATE":
        return (Suggestion(Kind.KEYWORD, ("STREAM", "TABLE", "TYPE", "OR", "SOURCE")),)
    if last == "OR" and before == "CREATE":
        return (Suggestion(Kind.KEYWORD, ("REPLACE",)),)
    if last == "RUN":
        return (Suggestion(Kind.KEYWORD, ("SCRIPT",)),)
    if last == "INSERT":
        return (Suggestion(Kind.KEYWORD, ("INTO",)),)
    if last == "EMIT":
        return (Suggestion(Kind.KEYWORD, ("CHANGES", "FINAL")),)
    if last == "WINDOW":
        return (Suggestion(Kind.KEYWORD, ("TUMBLING", "HOPPING", "SESSION")),)
    if last in _EXPRESSION_AFTER and _in_query(words):
        aliases = sources_in(full)
        return (
            Suggestion(Kind.COLUMN, sources=tuple(dict.fromkeys(aliases.values()))),
            Suggestion(Kind.FUNCTION),
            Suggestion(Kind.KEYWORD),
        )
    return None


def suggest(before_cursor: str, after_cursor: str = "") -> Suggestions:
    """What to offer at the cursor.

    Args:
        before_cursor: the buffer's text before the cursor.
        after_cursor: the text after it (the rest of the statement names its sources).

    Returns:
        The partial word and the kinds of names that fit there.
    """
    variable = _VARIABLE.search(before_cursor)
    if variable:
        return Suggestions(variable.group(1), (Suggestion(Kind.VARIABLE),))
    word = _WORD.search(before_cursor)
    partial = word.group(0) if word else ""
    head = before_cursor[: len(before_cursor) - len(partial)]
    quoted = False
    tokens = _tokens(head)
    if tokens is None and head.endswith("'"):  # SET 'auto.o|
        tokens, quoted = _tokens(head[:-1]), True
    if tokens is None:
        return Suggestions(partial, ())
    statement = _statement_tokens(tokens)
    words = _words(statement)
    if quoted:
        fits = words[-1:] in (["SET"], ["UNSET"])
        return Suggestions(partial, (Suggestion(Kind.PROPERTY),) if fits else (), quoted=True)
    if not words:
        return Suggestions(partial, (Suggestion(Kind.KEYWORD, STATEMENT_STARTS),))
    full = statement + _statement_head(after_cursor)
    if "." in partial:  # alias.column
        alias, _, column = partial.rpartition(".")
        target = sources_in(full).get(alias.upper(), alias.upper())
        return Suggestions(column, (Suggestion(Kind.COLUMN, sources=(target,)),))
    decided = _after_keyword(words, full)
    if decided is not None:
        return Suggestions(partial, decided)
    return Suggestions(partial, (Suggestion(Kind.KEYWORD),))


def _statement_head(after_cursor: str) -> list[Token]:
    """The tokens after the cursor up to the end of the statement."""
    tokens = _tokens(after_cursor) or []
    end = next(
        (i for i, t in enumerate(tokens) if t.token_type == TokenType.SEMICOLON), len(tokens)
    )
    # The first token may be the rest of the word being typed: it starts no clause.
    return tokens[:end]
