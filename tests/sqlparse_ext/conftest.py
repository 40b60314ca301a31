"""Shared helpers of the sqlparse_ext tests: the ``v`` validator fixture."""

from __future__ import annotations

import pytest

from headwater.sqlparse_ext import ParseError, Statement, parse, parse_one, to_sql
from tests.support.parse_errors import names_position


class Validator:
    """Round-trip and error checks, in the manner of sqlglot's own dialect tests."""

    def validate_identity(self, sql: str, expected: str | None = None) -> Statement:
        """Parse, print, parse again: the two statements (and their sqlglot trees) are equal.

        Args:
            sql: The statement.
            expected: If given, the exact SQL ``to_sql`` must print.

        Returns:
            The first parse, for checks of its typed fields.
        """
        statement = parse_one(sql)
        printed = to_sql(statement)
        if expected is not None:
            assert printed == expected
        again = parse_one(printed)
        assert again == statement, printed
        assert again.expression == statement.expression, printed
        assert to_sql(again) == printed
        return statement

    def validate_error(self, sql: str, line: int, column: int, fragment: str) -> ParseError:
        """Parsing fails with ParseError at ``line:column``, its message holding ``fragment``."""
        with pytest.raises(ParseError) as info:
            parse(sql)
        error = info.value
        assert fragment in error.message, error.message
        assert (error.line, error.column) == (line, column), error.message
        assert names_position(error.message, line, column), error.message
        assert error.error_code == 40001
        return error


@pytest.fixture
def v() -> Validator:
    """The validator."""
    return Validator()
