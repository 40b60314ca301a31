"""The headwater parser: sqlglot's expression parser with ksqlDB's statements and syntax.

Pure: no I/O. Statements are dispatched by their first word (ksqlDB's verbs are not sqlglot
token types); the hook tables below narrow sqlglot's expression grammar to ksqlDB's:
functions are user-defined functions resolved by name (``exp.Anonymous``), ``->`` dereferences
a struct field, ``=>`` builds a lambda, ``ARRAY[...]``, ``MAP(k := v)`` and ``STRUCT(f := v)``
construct values, and a nested SELECT is never an expression.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from sqlglot import TokenType, exp, parser

from headwater.sqlparse_ext import expressions as hx
from headwater.sqlparse_ext._parse_admin import AdminParser
from headwater.sqlparse_ext._parse_common import NAME_TOKENS

_Base = parser.Parser

#: The statement verbs, for "expected ..." at an unknown first word.
_VERBS_TEXT = (
    "a statement (SELECT, CREATE, INSERT, DROP, ALTER, SHOW, LIST, DESCRIBE, EXPLAIN, PRINT, "
    "TERMINATE, PAUSE, RESUME, SET, UNSET, DEFINE, UNDEFINE, RUN SCRIPT or ASSERT)"
)

#: ksqlDB's statement commands, in the order its ``SyntaxErrorValidator`` suggests them.
_COMMANDS = (
    "SELECT",
    "CREATE",
    "INSERT",
    "DESCRIBE",
    "PRINT",
    "EXPLAIN",
    "SHOW",
    "LIST",
    "TERMINATE",
    "PAUSE",
    "RESUME",
    "DROP",
    "SET",
    "DEFINE",
    "UNDEFINE",
    "UNSET",
    "ASSERT",
    "ALTER",
    "RUN",  # headwater's shell runs RUN SCRIPT
)

_QUERY_HOLDERS = (hx.CreateAsSelect, hx.InsertSelect)


def edit_distance(a: str, b: str) -> int:
    """Levenshtein's distance: the fewest insertions, deletions and substitutions from a to b."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def nearest_command(word: str) -> str:
    """The statement command nearest to ``word`` (the first of equals, as ksqlDB picks it)."""
    return min(_COMMANDS, key=lambda command: edit_distance(command, word.upper()))


class Parser(AdminParser):
    """Parses one ksqlDB statement per chunk of tokens."""

    KSQL_STATEMENT_PARSERS: ClassVar[dict[str, Callable[[Parser], exp.Expr]]] = {
        "CREATE": lambda self: self._parse_ksql_create(),
        "INSERT": lambda self: self._parse_ksql_insert(),
        "DROP": lambda self: self._parse_ksql_drop(),
        "ALTER": lambda self: self._parse_ksql_alter(),
        "SHOW": lambda self: self._parse_ksql_show(),
        "LIST": lambda self: self._parse_ksql_show(),
        "DESCRIBE": lambda self: self._parse_ksql_describe(),
        "EXPLAIN": lambda self: self._parse_ksql_explain(),
        "PRINT": lambda self: self._parse_ksql_print(),
        "TERMINATE": lambda self: self._parse_query_control(),
        "PAUSE": lambda self: self._parse_query_control(),
        "RESUME": lambda self: self._parse_query_control(),
        "SET": lambda self: self._parse_ksql_set(),
        "UNSET": lambda self: self._parse_ksql_unset(),
        "DEFINE": lambda self: self._parse_ksql_define(),
        "UNDEFINE": lambda self: self._parse_ksql_undefine(),
        "RUN": lambda self: self._parse_ksql_run(),
        "ASSERT": lambda self: self._parse_ksql_assert(),
    }
    """Statement parsers by first word; SELECT is handled before this table."""

    # ksqlDB's functions are UDFs looked up by name when planning: no sqlglot Func classes.
    FUNCTIONS: ClassVar[dict[str, Callable[..., exp.Expr]]] = {}
    NO_PAREN_FUNCTIONS: ClassVar[dict[TokenType, type[exp.Func]]] = {}
    FUNCTION_PARSERS: ClassVar[dict[str, Callable[..., exp.Expr]]] = {
        "CAST": lambda self: self._parse_ksql_cast(),
        "MAP": lambda self: self.expression(
            hx.MapConstructor(expressions=self._parse_constructor_entries(keyed_by_name=False))
        ),
        "STRUCT": lambda self: self.expression(
            hx.StructConstructor(expressions=self._parse_constructor_entries(keyed_by_name=True))
        ),
    }
    NO_PAREN_FUNCTION_PARSERS: ClassVar[dict[str, Callable[..., exp.Expr]]] = {
        "CASE": _Base.NO_PAREN_FUNCTION_PARSERS["CASE"],
    }
    # sqlglot leaves this table untyped (a bare ClassVar: mypy takes exp.Func from its default);
    # build_array_constructor takes any expression class, as ARRAY[...]'s own node is.
    ARRAY_CONSTRUCTORS: ClassVar[dict[str, type[exp.Expr]]] = {"ARRAY": hx.ArrayConstructor}  # type: ignore[assignment]
    PRIMARY_PARSERS: ClassVar[dict[TokenType, Callable[..., exp.Expr | None]]] = {
        TokenType.STRING: _Base.PRIMARY_PARSERS[TokenType.STRING],
        TokenType.NUMBER: lambda self, _token: self._parse_number_literal(),
        TokenType.NULL: _Base.PRIMARY_PARSERS[TokenType.NULL],
        TokenType.TRUE: _Base.PRIMARY_PARSERS[TokenType.TRUE],
        TokenType.FALSE: _Base.PRIMARY_PARSERS[TokenType.FALSE],
        TokenType.STAR: lambda self, token: self.expression(exp.Star(), token),
    }
    PLACEHOLDER_PARSERS: ClassVar[dict[TokenType, Callable[..., exp.Expr | None]]] = {}
    RANGE_PARSERS: ClassVar[dict[TokenType, Callable[..., exp.Expr | None]]] = {
        TokenType.BETWEEN: _Base.RANGE_PARSERS[TokenType.BETWEEN],
        TokenType.IN: lambda self, this: self._parse_ksql_in(this),
        TokenType.IS: _Base.RANGE_PARSERS[TokenType.IS],
        TokenType.LIKE: _Base.RANGE_PARSERS[TokenType.LIKE],
    }
    COLUMN_OPERATORS: ClassVar[dict[TokenType, Callable[..., exp.Expr] | None]] = {
        TokenType.DOT: None,
        TokenType.ARROW: lambda self, this, field: self._parse_struct_deref(this, field),
    }
    CAST_COLUMN_OPERATORS: ClassVar[set[TokenType]] = set()
    LAMBDAS: ClassVar[dict[TokenType, Callable[..., exp.Expr]]] = {
        TokenType.FARROW: lambda self, params: self._parse_ksql_lambda(params),
    }
    UNARY_PARSERS: ClassVar[dict[TokenType, Callable[..., exp.Expr | None]]] = {
        key: _Base.UNARY_PARSERS[key] for key in (TokenType.PLUS, TokenType.NOT, TokenType.DASH)
    }
    ASSIGNMENT: ClassVar[dict[TokenType, type[exp.Expr]]] = {}
    BITWISE: ClassVar[dict[TokenType, type[exp.Binary]]] = {}
    EQUALITY: ClassVar[dict[TokenType, type[exp.Binary]]] = {
        key: cls for key, cls in _Base.EQUALITY.items() if key != TokenType.NULLSAFE_EQ
    }
    TERM: ClassVar[dict[TokenType, type[exp.Binary]]] = {
        key: cls for key, cls in _Base.TERM.items() if key != TokenType.COLLATE
    }
    FACTOR: ClassVar[dict[TokenType, type[exp.Binary]]] = {
        key: cls
        for key, cls in _Base.FACTOR.items()
        if key in (TokenType.MOD, TokenType.SLASH, TokenType.STAR)
    }
    STATEMENT_PARSERS: ClassVar[dict[TokenType, Callable[..., exp.Expr | None]]] = {}

    def _parse_statement(self) -> exp.Expr | None:
        """sqlglot's entry point: one ksqlDB statement, then the end of the chunk."""
        if not self._curr:
            return None
        statement = self._parse_ksql_statement()
        if self._curr:
            query = statement.expression if isinstance(statement, _QUERY_HOLDERS) else statement
            if isinstance(query, hx.KsqlSelect):
                self._expected(self._expected_clause(query))
            self._expected("end of statement")
        return statement

    def _parse_ksql_statement(self) -> exp.Expr:
        """Dispatch on the first word."""
        token = self._curr
        if token.token_type == TokenType.SELECT:
            return self._parse_ksql_query()
        word = token.text.upper() if token.token_type not in (TokenType.STRING,) else ""
        handler = self.KSQL_STATEMENT_PARSERS.get(word)
        if handler is None or token.token_type == TokenType.IDENTIFIER:
            if token.token_type in NAME_TOKENS or token.text.isalpha():
                written = self.sql[token.start : token.end + 1]
                detail = (
                    f"Unknown statement '{written}'\nDid you mean '{nearest_command(token.text)}'?"
                )
                self.raise_error(f"expected {_VERBS_TEXT}, found '{written}'", detail=detail)
            self._expected(_VERBS_TEXT)
        self._advance()
        return handler(self)

    def _parse_id_var(self, any_token: bool = True, tokens: Any = None) -> exp.Expr | None:
        """Names are unquoted words or quoted identifiers (no keywords as names)."""
        if self._curr.token_type in NAME_TOKENS:
            return self._parse_name()
        return None
