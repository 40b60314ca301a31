"""Parsing of ksqlDB's administrative statements: SHOW/LIST, DESCRIBE, EXPLAIN, PRINT,
TERMINATE/PAUSE/RESUME, SET/UNSET, DEFINE/UNDEFINE, RUN SCRIPT and ASSERT TOPIC/SCHEMA.

Pure: no I/O.
"""

from __future__ import annotations

from sqlglot import TokenType, exp

from headwater.sqlparse_ext import expressions as hx
from headwater.sqlparse_ext._parse_common import NAME_TOKENS
from headwater.sqlparse_ext._parse_ddl import DdlParser

#: What SHOW/LIST can list: first word -> the words that may follow (None: nothing) and
#: whether EXTENDED is allowed.
_SHOWABLE: dict[str, tuple[tuple[str, ...] | None, bool]] = {
    "STREAMS": (None, True),
    "TABLES": (None, True),
    "QUERIES": (None, True),
    "TOPICS": (None, True),
    "PROPERTIES": (None, False),
    "FUNCTIONS": (None, False),
    "TYPES": (None, False),
    "VARIABLES": (None, False),
    "CONNECTORS": (None, False),
    "ALL": (("TOPICS",), True),
    "SOURCE": (("CONNECTORS",), False),
    "SINK": (("CONNECTORS",), False),
    "CONNECTOR": (("PLUGINS",), False),
}

_SHOW_TEXT = (
    "STREAMS, TABLES, QUERIES, TOPICS, PROPERTIES, FUNCTIONS, TYPES, VARIABLES or CONNECTORS"
)


class AdminParser(DdlParser):
    """The statements that inspect or configure rather than define."""

    def _parse_ksql_show(self) -> hx.ShowObjects:
        """``SHOW|LIST what [EXTENDED]`` (the verb is already consumed)."""
        verb = self._prev.text.upper()
        if not self._is_word(*_SHOWABLE):
            self._expected(f"{_SHOW_TEXT} after {verb}")
        first = self._curr.text.upper()
        self._advance()
        follow, extendable = _SHOWABLE[first]
        words = [first]
        if follow is not None:
            if not self._match_word(*follow):
                self._expected(f"{' or '.join(follow)} after {first}")
            words.append(self._prev.text.upper())
        extended = extendable and self._match_word("EXTENDED")
        return hx.ShowObjects(
            this=exp.var(" ".join(words)), verb=exp.var(verb), extended=extended or None
        )

    def _parse_ksql_describe(self) -> hx.DescribeObject:
        """``DESCRIBE name|STREAMS|TABLES [EXTENDED]`` or ``DESCRIBE FUNCTION|CONNECTOR name``."""
        if (
            self._curr.token_type in NAME_TOKENS
            and self._next.token_type in NAME_TOKENS
            and (self._is_word("FUNCTION", "CONNECTOR"))
        ):
            kind = self._curr.text.upper()
            self._advance()
            return hx.DescribeObject(
                this=self._parse_name(f"a {kind.lower()} name"), kind=exp.var(kind)
            )
        if self._is_word("STREAMS", "TABLES") and self._next.token_type not in NAME_TOKENS - {
            TokenType.VAR
        }:
            kind = self._curr.text.upper()
            self._advance()
            extended = self._match_word("EXTENDED")
            return hx.DescribeObject(kind=exp.var(kind), extended=extended or None)
        name = self._parse_source_name("a stream or table name, STREAMS, TABLES or FUNCTION")
        extended = self._match_word("EXTENDED")
        return hx.DescribeObject(this=name, extended=extended or None)

    def _parse_ksql_explain(self) -> hx.ExplainStatement:
        """``EXPLAIN query_id`` or ``EXPLAIN statement``."""
        if self._curr.token_type in (TokenType.SELECT, TokenType.CREATE, TokenType.INSERT):
            return hx.ExplainStatement(expression=self._parse_ksql_statement())
        return hx.ExplainStatement(this=self._parse_name("a query id or a statement"))

    def _parse_ksql_print(self) -> hx.PrintTopic:
        """``PRINT topic [FROM BEGINNING] [INTERVAL|SAMPLE n] [LIMIT n]``."""
        topic = self._parse_resource_name("a topic name")
        printed = hx.PrintTopic(this=topic)
        if self._match(TokenType.FROM):
            self._expect_word("BEGINNING", what="BEGINNING after FROM")
            printed.set("from_beginning", True)
        if self._match_word("INTERVAL", "SAMPLE"):
            printed.set("interval", self._parse_integer("an integer interval"))
        if self._match(TokenType.LIMIT):
            printed.set("limit", self._parse_integer("an integer after LIMIT"))
        return printed

    def _parse_resource_name(self, what: str) -> exp.Expr:
        """ksqlDB's ``resourceName``: an identifier or a string."""
        if self._match(TokenType.STRING):
            return exp.Literal.string(self._prev.text)
        return self._parse_name(what)

    def _parse_query_control(self) -> hx.QueryControl:
        """``TERMINATE|PAUSE|RESUME query_id|ALL`` (the verb is already consumed)."""
        verb = exp.var(self._prev.text.upper())
        if self._match(TokenType.ALL):
            return hx.QueryControl(this=verb, all=True)
        return hx.QueryControl(this=verb, expression=self._parse_name("a query id or ALL"))

    def _parse_ksql_set(self) -> hx.SetProperty:
        """``SET 'name' = 'value'``."""
        name = self._expect(TokenType.STRING, "a quoted property name after SET")
        self._expect(TokenType.EQ, "'=' after the property name")
        value = self._expect(TokenType.STRING, "a quoted property value")
        return hx.SetProperty(
            this=exp.Literal.string(name.text), expression=exp.Literal.string(value.text)
        )

    def _parse_ksql_unset(self) -> hx.UnsetProperty:
        """``UNSET 'name'``."""
        name = self._expect(TokenType.STRING, "a quoted property name after UNSET")
        return hx.UnsetProperty(this=exp.Literal.string(name.text))

    def _parse_ksql_define(self) -> hx.DefineVariable:
        """``DEFINE name = 'value'``."""
        name = self._parse_variable_name()
        self._expect(TokenType.EQ, "'=' after the variable name")
        value = self._expect(TokenType.STRING, "a quoted variable value")
        return hx.DefineVariable(this=name, expression=exp.Literal.string(value.text))

    def _parse_variable_name(self) -> exp.Identifier:
        """A variable name: an unquoted identifier."""
        if self._curr.token_type != TokenType.VAR:
            self._expected("a variable name")
        return self._parse_name()

    def _parse_ksql_undefine(self) -> hx.UndefineVariable:
        """``UNDEFINE name``."""
        return hx.UndefineVariable(this=self._parse_variable_name())

    def _parse_ksql_run(self) -> hx.RunScript:
        """``RUN SCRIPT 'path'``."""
        self._expect_word("SCRIPT", what="SCRIPT after RUN")
        path = self._expect(TokenType.STRING, "a quoted script path")
        return hx.RunScript(this=exp.Literal.string(path.text))

    def _parse_ksql_assert(self) -> exp.Expr:
        """``ASSERT [NOT EXISTS] TOPIC ...`` or ``ASSERT [NOT EXISTS] SCHEMA ...``."""
        not_exists = None
        if self._match(TokenType.NOT):
            self._expect(TokenType.EXISTS, "EXISTS after NOT")
            not_exists = True
        if self._match_word("TOPIC"):
            topic = hx.AssertTopic(
                this=self._parse_resource_name("a topic name"), not_exists=not_exists
            )
            topic.set("properties", self._parse_with_properties())
            topic.set("timeout", self._parse_timeout())
            return topic
        if not self._match_word("SCHEMA"):
            self._expected("TOPIC or SCHEMA after ASSERT")
        schema = hx.AssertSchema(not_exists=not_exists)
        if self._match_word("SUBJECT"):
            schema.set("subject", self._parse_resource_name("a subject name"))
        if self._match_word("ID"):
            schema.set("id", self._parse_integer("an integer schema id"))
        if schema.args.get("subject") is None and schema.args.get("id") is None:
            self._expected("SUBJECT or ID")
        schema.set("timeout", self._parse_timeout())
        return schema

    def _parse_timeout(self) -> hx.Duration | None:
        """An optional ``TIMEOUT d``."""
        return self._parse_duration() if self._match_word("TIMEOUT") else None
