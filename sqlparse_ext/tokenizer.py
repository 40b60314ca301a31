"""The headwater tokenizer: ksqlDB's lexical rules on sqlglot's pure-Python tokenizer.

Pure: no I/O. ksqlDB reserves few words (its grammar's ``nonReserved`` list makes type names,
``KEY``, ``EMIT``, ``SESSION`` ... usable as identifiers), so the keyword table keeps sqlglot's
operators and only the reserved words the parser matches by token type; every other word is a
``VAR`` that the parser matches by text. That also keeps sqlglot from reading ``DATE`` or
``INTERVAL`` as the start of a typed literal, and ``EXPLAIN``/``SHOW`` as opaque commands.
"""

from __future__ import annotations

from typing import ClassVar

from sqlglot import TokenType, tokens

#: The words that stay keywords (sqlglot token types the expression parser relies on).
RESERVED_WORDS: frozenset[str] = frozenset(
    {
        "ALL",
        "AND",
        "AS",
        "BETWEEN",
        "CASE",
        "CREATE",
        "DISTINCT",
        "DROP",
        "ELSE",
        "END",
        "ESCAPE",
        "EXISTS",
        "FALSE",
        "FROM",
        "FULL",
        "GROUP BY",
        "HAVING",
        "IN",
        "INNER",
        "INSERT",
        "INTO",
        "IS",
        "JOIN",
        "LEFT",
        "LIKE",
        "LIMIT",
        "NOT",
        "NULL",
        "ON",
        "OR",
        "ORDER BY",
        "OUTER",
        "PARTITION BY",
        "RIGHT",
        "SELECT",
        "TABLE",
        "THEN",
        "TRUE",
        "VALUES",
        "WHEN",
        "WHERE",
        "WINDOW",
        "WITH",
    }
)


class Tokenizer(tokens.Tokenizer):
    """ksqlDB tokens: '...' strings ('' escapes), `...` and "..." identifiers, -- and /* */."""

    IDENTIFIERS: ClassVar[list[str | tuple[str, str]]] = ["`", '"']
    QUOTES: ClassVar[list[tuple[str, str] | str]] = ["'"]
    STRING_ESCAPES: ClassVar[list[str]] = ["'"]
    NESTED_COMMENTS = False
    HINT_START = "/*+-never-a-hint"

    KEYWORDS: ClassVar[dict[str, TokenType]] = {
        **{
            word: token_type
            for word, token_type in tokens.Tokenizer.KEYWORDS.items()
            if not word[:1].isalpha() or word in RESERVED_WORDS
        },
        "STREAM": TokenType.STREAM,
    }

    COMMANDS: ClassVar[set[TokenType]] = set()
