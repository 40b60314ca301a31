"""Shared helpers of the headwater parser mixins: errors that say what was expected, names,
numbers and durations.

Pure: no I/O. Every mixin derives from :class:`CommonParser`, itself a sqlglot ``Parser``.
"""

from __future__ import annotations

from typing import Literal, NoReturn

from sqlglot import Token, TokenType, exp, parser
from sqlglot.errors import ParseError as SqlglotParseError

from headwater.sqlparse_ext import expressions as hx

#: ksqlDB's window units (``windowUnit``), singular and plural.
TIME_UNITS: frozenset[str] = frozenset(
    {
        "DAY",
        "HOUR",
        "MINUTE",
        "SECOND",
        "MILLISECOND",
        "DAYS",
        "HOURS",
        "MINUTES",
        "SECONDS",
        "MILLISECONDS",
    }
)

#: How the edge words a parse error (see :meth:`CommonParser.raise_error`).
ErrorForm = Literal["syntax", "prepare", "build", "node", "plain"]

#: Token types that can name something (ksqlDB's ``identifier``).
NAME_TOKENS: frozenset[TokenType] = frozenset({TokenType.VAR, TokenType.IDENTIFIER})

_UNITS_TEXT = "a time unit (DAYS, HOURS, MINUTES, SECONDS or MILLISECONDS)"


def describe_token(token: Token) -> str:
    """How an error message shows the token found instead of the expected one."""
    if not token:
        return "end of statement"
    if token.token_type == TokenType.STRING:
        return f"string '{token.text}'"
    return f"'{token.text}'"


class CommonParser(parser.Parser):
    """Helpers shared by the statement, query and admin parsers."""

    def raise_error(
        self,
        message: str,
        token: Token = parser.SENTINEL_NONE,
        *,
        form: ErrorForm = "syntax",
        expecting: tuple[str, ...] = (),
        detail: str | None = None,
    ) -> None:
        """Raise (always immediately) with the token's start offset kept for the edge.

        ``form`` says how the edge words the message, as ksqlDB's parser does (see
        :func:`headwater.sqlparse_ext.api.worded`): ``"syntax"`` for what the grammar refuses,
        ``"prepare"`` for what building the statement refuses at a node, ``"build"`` for what
        it refuses otherwise, ``"node"`` for refusals that
        name a node's position, ``"plain"`` for the rest. ``expecting`` names the tokens the
        grammar accepts at this point, in ksqlDB's grammar's names, when this parser knows them
        all; ``detail`` is the line ksqlDB's parser gives instead, where this parser knows it.
        """
        if message.startswith("Expect"):  # sqlglot's "Expected X": X is missing here
            token = self._curr
        at_end = not token and not self._curr
        if at_end:  # point just after the last token
            start = self._prev.end + 1 if self._prev else 0
        token = token or self._curr or self._prev or Token.string("")
        if not at_end:
            start = token.start if token else len(self.sql)
        try:
            super().raise_error(message, token)
        except SqlglotParseError as error:
            if error.errors:
                info = error.errors[0]
                info["start"] = start
                info["found"] = "end of statement" if at_end else describe_token(token)
                info["text"] = "<EOF>" if at_end else self.sql[token.start : token.end + 1]
                info["form"] = form
                info["expecting"] = expecting
                info["detail"] = detail
            raise

    def _expected(
        self, what: str, token: Token | None = None, expecting: tuple[str, ...] = ()
    ) -> NoReturn:
        """Raise ``expected <what>, found '<token>'`` at the current (or given) token."""
        at = token if token is not None else self._curr
        self.raise_error(f"expected {what}, found {describe_token(at)}", at, expecting=expecting)
        raise AssertionError("unreachable")  # pragma: no cover - raise_error always raises

    def _expect_word(self, *words: str, what: str | None = None) -> None:
        """Consume the given words (matched by text, case-insensitively) or raise."""
        for word in words:
            if not self._is_word(word):
                self._expected(what or word)
            self._advance()

    def _is_word(self, *words: str) -> bool:
        """Whether the current token is one of these words (a keyword or an unquoted name)."""
        curr = self._curr
        return (
            bool(curr)
            and curr.token_type
            not in (
                TokenType.STRING,
                TokenType.IDENTIFIER,
            )
            and curr.text.upper() in words
        )

    def _match_word(self, *words: str) -> bool:
        """Consume the current token if it is one of these words."""
        if self._is_word(*words):
            self._advance()
            return True
        return False

    def _expect(self, token_type: TokenType, what: str, expecting: tuple[str, ...] = ()) -> Token:
        """Consume a token of this type or raise ``expected <what>`` (``expecting``: as for
        :meth:`raise_error`)."""
        if self._curr.token_type != token_type:
            self._expected(what, expecting=expecting)
        self._advance()
        return self._prev

    def _parse_name(self, what: str = "a name") -> exp.Identifier:
        """ksqlDB's ``identifier``: an unquoted word, or a `backtick`/"double" quoted name."""
        token = self._curr
        if token.token_type not in NAME_TOKENS:
            self._expected(what)
        self._advance()
        return self.expression(
            exp.Identifier(this=token.text, quoted=token.token_type == TokenType.IDENTIFIER),
            token,
        )

    def _parse_source_name(self, what: str = "a stream or table name") -> exp.Table:
        """A source name: one identifier."""
        return self.expression(exp.Table(this=self._parse_name(what)))

    def _parse_signed_number(self, what: str = "a number") -> exp.Literal:
        """ksqlDB's ``number``: an optional minus and an integer, decimal or float literal."""
        negative = self._match(TokenType.DASH)
        if self._curr.token_type != TokenType.NUMBER:
            self._expected(what)
        self._advance()
        text = ("-" if negative else "") + self._prev.text
        # one literal with its sign (Literal.number would make a Neg node whose name drops it)
        return exp.Literal(this=text, is_string=False)

    def _parse_integer(self, what: str) -> exp.Literal:
        """A non-negative integer literal."""
        token = self._curr
        if token.token_type != TokenType.NUMBER or not token.text.isdigit():
            self._expected(what)
        self._advance()
        return exp.Literal(this=token.text, is_string=False)

    def _parse_duration(self, what: str = "a duration such as 10 SECONDS") -> hx.Duration:
        """``number unit``, e.g. ``10 SECONDS``."""
        amount = self._parse_integer(what)
        if not self._is_word(*TIME_UNITS):
            self._expected(_UNITS_TEXT)
        self._advance()
        return hx.Duration(this=amount, unit=exp.var(self._prev.text.upper()))

    def _parse_grace(self) -> hx.Duration | None:
        """An optional ``GRACE PERIOD d``."""
        if not self._match_word("GRACE"):
            return None
        self._expect_word("PERIOD")
        return self._parse_duration()

    def _parse_ksql_statement(self) -> exp.Expr:
        """One statement at the current token; the dispatch lives in ``parser.Parser``."""
        raise NotImplementedError  # pragma: no cover - parser.Parser overrides it
