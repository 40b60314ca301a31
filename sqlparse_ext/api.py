"""The public entry points: parse a script or one statement, regenerate SQL, cached lookups.

Pure: no I/O. Every failure leaves as :class:`ParseError` (wrapped here, at the package edge).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Mapping, Sequence

from sqlglot import Token, TokenType, exp
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError

from headwater.sqlparse_ext import statements as st
from headwater.sqlparse_ext._typed import build
from headwater.sqlparse_ext.dialect import Headwater
from headwater.sqlparse_ext.errors import ParseError
from headwater.sqlparse_ext.limits import ParseLimits, too_deep
from headwater.sqlparse_ext.params import ParameterError, literal
from headwater.sqlparse_ext.parser import Parser
from headwater.sqlparse_ext.qualifiers import unknown_qualifier
from headwater.sqlparse_ext.script import (
    Bound,
    LineIndex,
    Segment,
    Substituted,
    split,
    substitute,
)
from headwater.sqlparse_ext.sqltypes import SqlType, from_datatype
from headwater.sqlparse_ext.tokenizer import Tokenizer

DIALECT = Headwater()
CACHE_SIZE = 4096

_local = threading.local()
_EXPECTING = re.compile(r"^Expect(?:ing|ed) (.+)$")


def _tools() -> tuple[Tokenizer, Parser]:
    """This thread's tokenizer and parser (sqlglot's are stateful, so one per thread)."""
    tools: tuple[Tokenizer, Parser] | None = getattr(_local, "tools", None)
    if tools is None:
        tools = _local.tools = (Tokenizer(dialect=DIALECT), Parser(dialect=DIALECT))
    return tools


def _explain(description: str, found: str) -> str:
    """A message that says what was expected, from an error description.

    The headwater parser's own messages pass unchanged; sqlglot's terse ones are rephrased.
    """
    if match := _EXPECTING.match(description):
        what = match.group(1)
        shown = f"'{what}'" if len(what) == 1 else what
        return f"expected {shown}, found {found}"
    if description.startswith("Required keyword"):
        return f"expected an expression, found {found}"
    if description.startswith("Invalid expression"):
        return f"expected a valid expression, found {found}"
    return description


_OPENING = frozenset({TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE})
_CLOSING = frozenset({TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE})


class _Refused(Exception):
    """A statement over one of the request's limits, or one that building it refuses (``form``
    ``"build"``), at ``start`` (an offset in its text)."""

    def __init__(self, message: str, start: int, form: str = "plain") -> None:
        super().__init__(message)
        self.message, self.start, self.form = message, start, form


def _parse_node(text: str, limits: ParseLimits | None = None) -> exp.Expr:
    """Tokenize and parse one statement's (substituted) text into its sqlglot node."""
    tokenizer, parser = _tools()
    if limits is not None and 0 < limits.max_statement_chars < len(text):
        raise _Refused(
            f"expected a statement of at most {limits.max_statement_chars:,} characters, "
            f"found one of {len(text):,} (setting ksql.statement.max.chars)",
            0,
        )
    tokens: list[Token] = tokenizer.tokenize(text)
    if limits is not None and 0 < limits.max_tokens < len(tokens):
        raise _Refused(
            f"expected a statement of at most {limits.max_tokens:,} tokens, found "
            f"{len(tokens):,} (setting ksql.statement.max.tokens)",
            tokens[limits.max_tokens].start,
        )
    if limits is not None and limits.max_depth > 0:  # parentheses, before the parser recurses
        depth = 0
        for token in tokens:
            if token.token_type in _OPENING:
                depth += 1
                if depth > limits.max_depth:
                    raise _Refused(
                        f"expected expressions nested at most {limits.max_depth} deep, "
                        "found deeper nesting here (setting ksql.statement.max.depth)",
                        token.start,
                    )
            elif token.token_type in _CLOSING:
                depth -= 1
    while tokens and tokens[-1].token_type == TokenType.SEMICOLON:
        tokens.pop()
    if not tokens:
        parser.sql = text
        parser.raise_error("expected a statement, found end of statement", Token.string(""))
    nodes = parser.parse(tokens, text)
    node = nodes[0] if len(nodes) == 1 else None
    if node is None:  # a ';' inside the statement (only parse_one can see one)
        semicolon = next(t for t in tokens if t.token_type == TokenType.SEMICOLON)
        parser.raise_error("expected end of statement, found ';'", semicolon)
    assert node is not None
    if limits is not None and (deep := too_deep(node, limits.max_depth)) is not None:
        starts = (n.meta["start"] for n in deep.walk() if "start" in n.meta)
        raise _Refused(
            f"expected expressions nested at most {limits.max_depth} deep, found deeper "
            "nesting here (setting ksql.statement.max.depth)",
            next(starts, 0),
        )
    if (unknown := unknown_qualifier(node)) is not None:
        name, start = unknown
        raise _Refused(f"'{name}' is not a valid stream/table name or alias.", start, "build")
    return node


def _fail(
    error: BaseException, substituted: Substituted, segment: Segment, index: LineIndex
) -> ParseError:
    """The ParseError for an error raised while parsing ``segment``."""
    start, description, found = 0, str(error), "end of statement"
    form, text, expecting, detail = "syntax", "<EOF>", (), None
    if isinstance(error, SqlglotParseError) and error.errors:
        info = error.errors[0]
        start = info.get("start", 0)
        description = info.get("description") or description
        found = info.get("found", found)
        form = info.get("form", form)
        text = info.get("text", text)
        expecting = info.get("expecting", expecting)
        detail = info.get("detail")
        message = _explain(description, found)
    elif isinstance(error, TokenError):
        message = f"expected a valid token: {description}"
    elif isinstance(error, _Refused):
        start, message, form = error.start, error.message, error.form
    elif isinstance(error, RecursionError):
        message = "expected a less deeply nested statement (nesting too deep to parse)"
        form = "plain"
    else:
        message = f"expected a valid statement (internal error {type(error).__name__}: {error})"
        form = "plain"
    start = min(max(start, 0), len(substituted.text))
    line, column = index.position(segment.offset + substituted.original_offset(start))
    text_of_statement = segment.text
    return ParseError(
        worded(message, line, column, form, text, expecting, text_of_statement, detail),
        line,
        column,
        text_of_statement,
    )


def worded(
    message: str,
    line: int,
    column: int,
    form: str = "syntax",
    text: str = "<EOF>",
    expecting: Sequence[str] = (),
    statement: str = "",
    detail: str | None = None,
) -> str:
    """A parse error's message, in the form ksqlDB's parser gives its kind, with our detail.

    - ``syntax``: what the grammar refuses, as ksqlDB's ``SyntaxErrorValidator`` words it:
      ``line L:C: Syntax Error``, then ``Expecting {...}`` when the tokens the grammar accepts
      here are known and at most three, or ksqlDB's own lines where the parser knows them
      (``Unknown statement 'x'``; both say what headwater expected), else ``Syntax
      error at or near 'x' at line L:C`` and what headwater expected and found; then
      ``Statement:`` and the statement's text.
    - ``prepare``: what building the statement refuses at a node (ksqlDB's ``AstBuilder`` with a
      ``ParsingException``): ``Failed to prepare statement: line L:C: ...``, then the
      statement's text.
    - ``build``: what building the statement refuses otherwise (a ``KsqlException`` there):
      ``Failed to prepare statement: ...`` with the position after it, then the text.
    - ``node``: a refusal of a node, with ksqlDB's ``Line: L, Col: C:`` prefix.
    - ``plain``: ``line L:C: ...`` (headwater's own limits).
    """
    shown = f"\nStatement: {statement}" if statement else ""
    if form == "syntax":
        if detail is not None:
            pass
        elif expecting and len(expecting) <= 3:
            detail = f"Expecting {{{', '.join(expecting)}}}"
        else:
            detail = f"Syntax error at or near '{text}' at line {line}:{column}\n{message}"
        return f"line {line}:{column}: Syntax Error\n{detail}{shown}"
    if form == "prepare":
        return f"Failed to prepare statement: line {line}:{column}: {message}{shown}"
    if form == "build":
        return f"Failed to prepare statement: {message} (line {line}:{column}){shown}"
    if form == "node":
        return f"Line: {line}, Col: {column}: {message}"
    return f"line {line}:{column}: {message}"


def _statement(
    segment: Segment,
    variables: Mapping[str, str] | None,
    index: LineIndex,
    bound: Bound | None,
    limits: ParseLimits | None = None,
) -> st.Statement:
    substituted = substitute(segment.text, variables, segment, index, bound)
    try:
        node = _parse_node(substituted.text, limits)
        # The statement's text is what was parsed (variables and parameters in place): it is
        # what the command log keeps, and it is never substituted again.
        return build(
            node, substituted.text, segment.line, segment.column, segment.offset, segment.text
        )
    except ParseError:
        raise
    except Exception as error:
        raise _fail(error, substituted, segment, index) from error


def parse(
    text: str,
    variables: Mapping[str, str] | None = None,
    *,
    parameters: Sequence[object] | None = None,
    substitution: bool = True,
    limits: ParseLimits | None = None,
) -> list[st.Statement]:
    """Parse a script: statements separated by ``;``.

    ``DEFINE name = 'value';`` defines ``${name}`` for the statements after it (UNDEFINE
    removes it); ``variables`` defines some up front. Names are case-insensitive. ``${name}`` is
    replaced everywhere outside comments, inside string literals too, as ksqlDB does.

    With ``parameters``, each ``?`` outside literals, identifiers and comments stands for the next
    parameter, bound as a literal *after* the statement's own text has been read for variables:
    a bound value is data whatever it contains (``${x}``, quotes, comment markers).

    Args:
        text: The script.
        variables: Variables defined before the script's first statement.
        parameters: Values for the ``?`` placeholders, in order (see
            :func:`headwater.sqlparse_ext.params.literal` for the types); None when the text has
            no placeholders.
        substitution: False to leave ``${...}`` as written (ksqlDB's
            ``ksql.variable.substitution.enable``; texts that were substituted once already).
        limits: bounds on the statements' size, tokens and depth and on their count (a
            server's requests); None: no bound.

    Returns:
        The statements, in order; empty statements and comment-only tails are dropped.

    Raises:
        ParseError: the first statement that is not valid, with its position in ``text``.
    """
    try:
        segments = split(text)
        index = LineIndex(text)
        if limits is not None and 0 < limits.max_statements < len(segments):
            extra = segments[limits.max_statements]
            raise ParseError(
                f"line {extra.line}:{extra.column}: expected at most {limits.max_statements:,} "
                f"statements in one request, found {len(segments):,} (setting "
                "ksql.request.max.statements)",
                extra.line,
                extra.column,
                extra.text,
            )
        defined = {name.upper(): value for name, value in (variables or {}).items()}
        bound = None if parameters is None else Bound(_literals(parameters, text))
        statements: list[st.Statement] = []
        for segment in segments:
            statement = _statement(segment, defined if substitution else None, index, bound, limits)
            if isinstance(statement, st.DefineVariable):
                defined[statement.name.upper()] = statement.value
            elif isinstance(statement, st.UndefineVariable):
                defined.pop(statement.name.upper(), None)
            statements.append(statement)
        if bound is not None and bound.used < len(bound.literals):
            line, column = index.position(len(text.rstrip()))
            raise ParseError(
                f"line {line}:{column}: expected {len(bound.literals)} '?' placeholder(s) for the "
                f"bound parameters, found {bound.used}",
                line,
                column,
                text,
            )
        return statements
    except ParseError:
        raise
    except Exception as error:
        raise ParseError(
            f"line 1:1: expected a valid script (internal error {type(error).__name__})",
            1,
            1,
            text,
        ) from error


def _literals(parameters: Sequence[object], text: str) -> list[str]:
    """The literal text of each parameter (ParseError for one that has none)."""
    if isinstance(parameters, (str, bytes, bytearray, Mapping)):
        raise ParseError("line 1:1: expected the bound parameters as a list", 1, 1, text)
    literals = []
    for number, value in enumerate(parameters, 1):
        try:
            literals.append(literal(value))
        except ParameterError as exc:
            raise ParseError(f"line 1:1: bound parameter {number}: {exc}", 1, 1, text) from exc
    return literals


def parse_one(
    text: str,
    variables: Mapping[str, str] | None = None,
    *,
    parameters: Sequence[object] | None = None,
    substitution: bool = True,
    limits: ParseLimits | None = None,
) -> st.Statement:
    """Parse exactly one statement (a trailing ``;`` is optional); arguments as :func:`parse`.

    Raises:
        ParseError: ``text`` holds no statement, several, or an invalid one.
    """
    statements = parse(
        text, variables, parameters=parameters, substitution=substitution, limits=limits
    )
    if len(statements) == 1:
        return statements[0]
    if not statements:
        index = LineIndex(text)
        line, column = index.position(len(text.rstrip()))
        raise ParseError(
            f"line {line}:{column}: expected a statement, found end of input", line, column, text
        )
    second = statements[1]
    raise ParseError(
        f"line {second.line}:{second.column}: expected one statement, found a second one",
        second.line,
        second.column,
        second.text,
    )


@functools.lru_cache(maxsize=CACHE_SIZE)
def parse_cached(text: str) -> st.Statement:
    """:func:`parse_one`, memoised by exact text (for repeated pull queries).

    The result is shared between callers: its typed fields are immutable, and its sqlglot
    expressions must be copied before being changed.
    """
    return parse_one(text)


def to_sql(statement: st.Statement) -> str:
    """ksqlDB SQL for a statement; parsing it gives an equal statement.

    Raises:
        ParseError: the statement's expression cannot be printed (never for parsed ones).
    """
    try:
        return DIALECT.generate(statement.expression, copy=False)
    except Exception as error:
        raise ParseError(
            f"line {statement.line}:{statement.column}: expected a printable statement "
            f"({type(error).__name__}: {error})",
            statement.line,
            statement.column,
            statement.text,
        ) from error


@functools.lru_cache(maxsize=1024)
def parse_type(text: str) -> SqlType:
    """The :class:`SqlType` written as ``text`` (ksqlDB spelling, e.g. ``DECIMAL(4, 2)``).

    The catalog stores column types as canonical text; this turns them back into values.

    Raises:
        ParseError: If ``text`` is not a type.
    """
    try:
        select = parse_one(f"SELECT CAST(NULL AS {text}) FROM T;")
    except ParseError as exc:
        raise ParseError(
            f"not a type: {text!r} ({exc.message})", line=1, column=1, statement_text=text
        ) from None
    node = select.expression.find(exp.DataType) if select.expression is not None else None
    if node is None or not isinstance(select, st.Select) or ";" in text:
        raise ParseError(f"not a type: {text!r}", line=1, column=1, statement_text=text)
    return from_datatype(node)
