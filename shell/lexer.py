"""Syntax highlighting: a Pygments lexer for headwater's (ksqlDB's) SQL. Pure: no I/O.

Keywords, types and functions come from `vocabulary.py`, whose keywords start from the reserved
words of `headwater.sqlparse_ext`'s tokenizer, so highlighting agrees with the parser. Quoting and
comments follow that tokenizer: '...' strings with '' escapes, `...` and "..." identifiers,
`--` and `/* */` comments; `${name}` variables stand out.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pygments.lexer import RegexLexer, words
from pygments.token import (
    Comment,
    Keyword,
    Name,
    Number,
    Operator,
    Punctuation,
    String,
    Text,
)

from .vocabulary import DATA_TYPES, FUNCTIONS, KEYWORDS, PSEUDO_COLUMNS

__all__ = ["HeadwaterLexer"]


class HeadwaterLexer(RegexLexer):  # type: ignore[misc]  # Pygments ships no type hints
    """ksqlDB SQL, as headwater parses it."""

    name = "headwater"
    aliases: ClassVar[list[str]] = ["headwater", "ksql"]
    filenames: ClassVar[list[str]] = ["*.ksql"]

    tokens: ClassVar[dict[str, list[Any]]] = {
        "root": [
            (r"\s+", Text),
            (r"--[^\n]*", Comment.Single),
            (r"/\*(?:.|\n)*?(?:\*/|\Z)", Comment.Multiline),
            (r"'(?:[^']|'')*'?", String.Single),
            (r"`(?:[^`]|``)*`?", Name.Quoted),
            (r'"(?:[^"]|"")*"?', Name.Quoted),
            (r"\$\{[A-Za-z0-9_@]*\}?", Name.Variable),
            (r"\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?", Number),
            (words(DATA_TYPES, suffix=r"\b"), Name.Builtin),
            (words(FUNCTIONS, suffix=r"\b(?=\s*\()"), Name.Function),
            (words(PSEUDO_COLUMNS, suffix=r"\b"), Name.Builtin.Pseudo),
            (words(KEYWORDS, prefix=r"\b", suffix=r"\b"), Keyword),
            (r"[A-Za-z_@][A-Za-z0-9_@]*", Name),
            (r"<=|>=|<>|!=|:=|->|=>|\|\||[-+*/%<>=]", Operator),
            (r"[;:(),.\[\]{}]", Punctuation),
        ]
    }
    flags = re.IGNORECASE
