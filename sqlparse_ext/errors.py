"""The one exception type of ``headwater.sqlparse_ext``: a statement that cannot be parsed.

Pure: no I/O. Every failure of the package (a sqlglot ``ParseError``/``TokenError``, an
undefined ``${variable}``, an internal bug) reaches callers as :class:`ParseError`.
"""

from __future__ import annotations


class ParseError(Exception):
    """A statement that is not valid headwater (ksqlDB) SQL.

    Attributes:
        message: What was expected and what was found, prefixed with ``line L:C:``.
        line: 1-based line of the offending token's start in the original script.
        column: 1-based column of the offending token's start in the original script.
        statement_text: The source text of the statement the error occurred in.
    """

    error_code = 40001
    retriable = False

    def __init__(self, message: str, line: int, column: int, statement_text: str) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column
        self.statement_text = statement_text

    def __reduce__(self) -> tuple[type[ParseError], tuple[str, int, int, str]]:
        return (type(self), (self.message, self.line, self.column, self.statement_text))
