"""Parsing of ksqlDB's DDL and DML: CREATE STREAM/TABLE/TYPE (and ... AS SELECT), INSERT,
DROP, ALTER, and ``WITH (...)`` property lists.

Pure: no I/O.
"""

from __future__ import annotations

from sqlglot import Token, TokenType, exp

from headwater.sqlparse_ext import expressions as hx
from headwater.sqlparse_ext._parse_common import NAME_TOKENS
from headwater.sqlparse_ext._parse_query import QueryParser

#: What ksqlDB adds when a column's key constraint does not suit its kind of source.
_KEYS_EXPLAINED = (
    "\nTables have PRIMARY KEYs, which are unique and NON NULL."
    "\nStreams have KEYs, which have no uniqueness or NON NULL constraints."
)


class DdlParser(QueryParser):
    """CREATE, INSERT, DROP and ALTER statements."""

    def _parse_ksql_create(self) -> exp.Expr:
        """Everything after CREATE."""
        replace = self._match(TokenType.OR)
        if replace:
            self._expect_word("REPLACE")
        source_token = self._curr if self._is_word("SOURCE") else None
        if source_token is not None:
            self._advance()
        if self._match_word("TYPE") and source_token is None:
            return self._parse_create_type()
        if not self._match_set((TokenType.STREAM, TokenType.TABLE)):
            what = "STREAM or TABLE" if source_token or replace else "STREAM, TABLE or TYPE"
            self._expected(f"{what} after {'SOURCE' if source_token else 'CREATE'}")
        kind = self._prev.text.upper()
        exists = self._parse_if_not_exists()
        name = self._parse_source_name()
        columns = (
            self._parse_table_elements(kind) if self._curr.token_type == TokenType.L_PAREN else None
        )
        properties = self._parse_with_properties()
        if self._match(TokenType.ALIAS):
            if columns is not None:
                self._expected(
                    "WITH or end of statement (no column list with AS SELECT)", self._prev
                )
            if source_token is not None:
                self._expected(f"{kind} (CREATE SOURCE {kind} cannot be AS SELECT)", source_token)
            if self._curr.token_type != TokenType.SELECT:
                self._expected("SELECT after AS")
            return hx.CreateAsSelect(
                this=name,
                kind=kind,
                expression=self._parse_ksql_query(),
                properties=properties,
                replace=replace or None,
                exists=exists or None,
            )
        return hx.CreateSource(
            this=name,
            kind=kind,
            expressions=columns,
            properties=properties,
            replace=replace or None,
            exists=exists or None,
            source=bool(source_token) or None,
        )

    def _parse_if_not_exists(self) -> bool:
        """An optional ``IF NOT EXISTS``."""
        if not self._match_word("IF"):
            return False
        self._expect(TokenType.NOT, "NOT after IF")
        self._expect(TokenType.EXISTS, "EXISTS after IF NOT")
        return True

    def _parse_if_exists(self) -> bool:
        """An optional ``IF EXISTS``."""
        if not self._match_word("IF"):
            return False
        self._expect(TokenType.EXISTS, "EXISTS after IF")
        return True

    def _parse_create_type(self) -> hx.CreateType:
        """``CREATE TYPE [IF NOT EXISTS] name AS type``."""
        exists = self._parse_if_not_exists()
        name = self._parse_name("a type name")
        self._expect(TokenType.ALIAS, "AS after the type name")
        return hx.CreateType(this=name, kind=self._parse_ksql_type(), exists=exists or None)

    def _parse_table_elements(self, kind: str) -> list[exp.Expr]:
        """``(name type [KEY | PRIMARY KEY | HEADERS | HEADER('k')], ...)``."""
        self._advance()
        columns: list[exp.Expr] = []
        while True:
            name_token = self._curr
            name = self._parse_name("a column name")
            column = exp.ColumnDef(this=name, kind=self._parse_ksql_type())
            constraint = self._parse_column_key_constraint(kind, name_token)
            if constraint is not None:
                column.set("constraints", [constraint])
            columns.append(column)
            if not self._match(TokenType.COMMA):
                break
        # ksqlDB's grammar, once a column is read (its optional parts are behind it)
        self._expect(TokenType.R_PAREN, "',' or ')' after a column", expecting=("','", "')'"))
        return columns

    def _parse_column_key_constraint(self, kind: str, name_token: Token) -> exp.Expr | None:
        """KEY (streams), PRIMARY KEY (tables), HEADERS or HEADER('key')."""
        quoted = name_token.token_type == TokenType.IDENTIFIER
        shown = f"`{name_token.text if quoted else name_token.text.upper()}`"
        if self._match_word("KEY"):
            if kind == "TABLE":
                self.raise_error(
                    f"Column {shown} is a 'KEY' column: please use 'PRIMARY KEY' for tables."
                    f"{_KEYS_EXPLAINED}",
                    name_token,
                    form="node",
                )
            return hx.KeyConstraint()
        if self._match_word("PRIMARY"):
            self._expect_word("KEY", what="KEY after PRIMARY")
            if kind == "STREAM":
                self.raise_error(
                    f"Column {shown} is a 'PRIMARY KEY' column: please use 'KEY' for streams."
                    f"{_KEYS_EXPLAINED}",
                    name_token,
                    form="node",
                )
            return hx.KeyConstraint(primary=True)
        if self._match_word("HEADERS"):
            return hx.HeadersConstraint()
        if self._match_word("HEADER"):
            self._expect(TokenType.L_PAREN, "'(' after HEADER")
            key = self._expect(TokenType.STRING, "the header key as a string")
            self._expect(TokenType.R_PAREN, "')' after the header key")
            return hx.HeadersConstraint(this=exp.Literal.string(key.text))
        return None

    def _parse_with_properties(self) -> hx.TableProperties | None:
        """An optional ``WITH (name = literal, ...)``; names may be dotted or quoted."""
        if not self._match(TokenType.WITH):
            return None
        self._expect(TokenType.L_PAREN, "'(' after WITH")
        props: list[exp.Expr] = []
        seen: dict[str, Token] = {}
        while True:
            name_token = self._curr
            key = self._parse_property_name()
            upper = key.name.upper()
            if upper in seen:
                self.raise_error(f"Duplicate property {key.name}", name_token, form="plain")
            seen[upper] = name_token
            self._expect(TokenType.EQ, f"'=' after {key.name}")
            props.append(hx.TableProperty(this=key, value=self._parse_property_value()))
            if not self._match(TokenType.COMMA):
                break
        self._expect(TokenType.R_PAREN, "',' or ')' in the WITH list")
        self._check_window_properties(props, seen)
        return hx.TableProperties(expressions=props)

    def _parse_property_name(self) -> exp.Expr:
        """``name``, ``dotted.name``, `quoted` or 'string'."""
        token = self._curr
        if token.token_type == TokenType.STRING:
            self._advance()
            return exp.Literal.string(token.text)
        if token.token_type == TokenType.IDENTIFIER:
            self._advance()
            return exp.Identifier(this=token.text, quoted=True)
        if token.token_type != TokenType.VAR:
            self._expected("a property name")
        parts = [token.text]
        self._advance()
        while self._curr.token_type == TokenType.DOT and self._next.token_type in NAME_TOKENS:
            self._advance(2)
            parts.append(self._prev.text)
        return exp.var(".".join(parts))

    def _parse_property_value(self) -> exp.Expr:
        """ksqlDB's ``literal``: a string, a signed number, TRUE/FALSE or NULL."""
        if self._match(TokenType.STRING):
            return exp.Literal.string(self._prev.text)
        if self._match_set((TokenType.TRUE, TokenType.FALSE)):
            return exp.Boolean(this=self._prev.token_type == TokenType.TRUE)
        if self._match(TokenType.NULL):
            return exp.Null()
        if self._curr.token_type in (TokenType.NUMBER, TokenType.DASH):
            return self._parse_signed_number()
        self._expected("a literal value (string, number, TRUE, FALSE or NULL)")

    def _check_window_properties(self, props: list[exp.Expr], seen: dict[str, Token]) -> None:
        """ksqlDB refuses WINDOW_SIZE for SESSION windows while parsing."""
        values = {p.this.name.upper(): p.args["value"] for p in props}
        window_type = values.get("WINDOW_TYPE")
        if (
            isinstance(window_type, exp.Literal)
            and window_type.name.upper() == "SESSION"
            and "WINDOW_SIZE" in values
        ):
            self.raise_error(
                "'WINDOW_SIZE' should not be set for SESSION windows.",
                seen["WINDOW_SIZE"],
                form="build",
            )

    def _parse_ksql_insert(self) -> exp.Expr:
        """``INSERT INTO name [WITH (...)] query`` or ``INSERT INTO name [(cols)] VALUES (...)``."""
        self._expect(TokenType.INTO, "INTO after INSERT")
        target = self._parse_source_name()
        if self._curr.token_type == TokenType.SELECT or self._curr.token_type == TokenType.WITH:
            properties = self._parse_with_properties()
            if self._curr.token_type != TokenType.SELECT:
                self._expected("SELECT")
            return hx.InsertSelect(
                this=target, expression=self._parse_ksql_query(), properties=properties
            )
        columns = None
        if self._match(TokenType.L_PAREN):
            columns = self._parse_csv(lambda: self._parse_name("a column name"))
            self._expect(TokenType.R_PAREN, "',' or ')' after a column name")
        if not self._match(TokenType.VALUES):
            self._expected("VALUES" if columns else "SELECT, WITH, '(' or VALUES")
        self._expect(TokenType.L_PAREN, "'(' after VALUES")
        values: list[exp.Expr] = []
        if not self._match(TokenType.R_PAREN):
            while True:
                start = self._curr
                value = self._parse_bitwise()
                if value is None:
                    self._expected("a value", start)
                values.append(value)
                if not self._match(TokenType.COMMA):
                    break
            self._expect(TokenType.R_PAREN, "',' or ')' after a value")
        return hx.InsertValues(this=target, columns=columns, expressions=values or None)

    def _parse_ksql_drop(self) -> hx.DropObject:
        """``DROP STREAM|TABLE [IF EXISTS] name [DELETE TOPIC]`` or ``DROP TYPE [IF EXISTS] n``."""
        if self._match_set((TokenType.STREAM, TokenType.TABLE)):
            kind = self._prev.text.upper()
        elif self._match_word("TYPE"):
            kind = "TYPE"
        else:
            self._expected("STREAM, TABLE or TYPE after DROP")
        exists = self._parse_if_exists()
        if kind == "TYPE":
            return hx.DropObject(
                this=self._parse_name("a type name"), kind=kind, exists=exists or None
            )
        name = self._parse_source_name()
        delete_topic = None
        if self._match_word("DELETE"):
            self._expect_word("TOPIC", what="TOPIC after DELETE")
            delete_topic = True
        return hx.DropObject(this=name, kind=kind, exists=exists or None, delete_topic=delete_topic)

    def _parse_ksql_alter(self) -> hx.AlterSource:
        """``ALTER STREAM|TABLE name ADD [COLUMN] name type [, ADD [COLUMN] name type ...]``."""
        if not self._match_set((TokenType.STREAM, TokenType.TABLE)):
            self._expected("STREAM or TABLE after ALTER")
        kind = self._prev.text.upper()
        name = self._parse_source_name()
        columns: list[exp.Expr] = []
        while True:
            self._expect_word("ADD", what="ADD" if not columns else "ADD after ','")
            self._match_word("COLUMN")
            column = self._parse_name("a column name")
            columns.append(exp.ColumnDef(this=column, kind=self._parse_ksql_type()))
            if not self._match(TokenType.COMMA):
                break
        return hx.AlterSource(this=name, kind=kind, expressions=columns)
