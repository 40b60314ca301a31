"""Parsing of ksqlDB queries: SELECT ... FROM ... [JOIN ... WITHIN] [WINDOW] [WHERE] [GROUP BY]
[PARTITION BY] [HAVING] [EMIT] [LIMIT], and the expression hooks that differ from sqlglot's
(struct dereference, lambdas, constructors, CAST to ksqlDB types, literal ranges).

Pure: no I/O. ksqlDB fixes the order of the clauses, so the query is read in that order here
(a procedural part, as sqlglot's own dialects do for theirs) with sqlglot parsing expressions.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from sqlglot import TokenType, exp

from headwater.sqlparse_ext import expressions as hx
from headwater.sqlparse_ext._parse_common import NAME_TOKENS
from headwater.sqlparse_ext._parse_type import TypeParser

_MAX_BIGINT = 2**63 - 1
_MAX_INT = 2**31 - 1

#: Words that end a relation, so they are never read as its alias.
_NOT_ALIASES = frozenset({"EMIT", "WITHIN"})

#: Tokens after which a ``-`` is binary (subtraction), not the sign of a literal.
_OPERAND_END = frozenset(
    {
        TokenType.NUMBER,
        TokenType.STRING,
        TokenType.VAR,
        TokenType.IDENTIFIER,
        TokenType.R_PAREN,
        TokenType.R_BRACKET,
        TokenType.NULL,
        TokenType.TRUE,
        TokenType.FALSE,
        TokenType.END,
        TokenType.STAR,
    }
)

_JOIN_START = frozenset(
    {TokenType.JOIN, TokenType.INNER, TokenType.LEFT, TokenType.RIGHT, TokenType.FULL}
)

#: The clauses after FROM, in ksqlDB's order, for "expected ..." messages.
_CLAUSES = ("WINDOW", "WHERE", "GROUP BY", "PARTITION BY", "HAVING", "EMIT", "LIMIT")


class QueryParser(TypeParser):
    """The SELECT statement and ksqlDB's expression syntax."""

    # -- the query -------------------------------------------------------------------------

    def _parse_ksql_query(self) -> hx.KsqlSelect:
        """``SELECT items FROM relation [clauses]``, clauses in ksqlDB's order."""
        select_token = self._expect(TokenType.SELECT, "SELECT")
        comments = self._prev_comments
        projections = self._parse_csv(self._parse_select_item)
        if not self._match(TokenType.FROM):
            self._expected("',' or FROM")
        query = self.expression(hx.KsqlSelect(expressions=projections), select_token, comments)
        query.set("from_", exp.From(this=self._parse_relation()))
        joins = []
        while self._curr.token_type in _JOIN_START:
            joins.append(self._parse_ksql_join())
        if joins:
            query.set("joins", joins)
        self._parse_clauses(query)
        return query

    def _parse_select_item(self) -> exp.Expr:
        """``expr [AS] alias``, ``*``, ``source.*`` or ``struct->*``."""
        start = self._curr
        item = self._parse_expression()
        if item is None:
            self._expected("an expression or '*'", start)
        return item

    def _parse_relation(self) -> exp.Table:
        """``name [[AS] alias]``: ksqlDB reads only named streams and tables."""
        table = self._parse_source_name()
        if self._curr.token_type == TokenType.L_PAREN:
            self._expected(
                "a stream or table name (table functions go in the SELECT list)", self._prev
            )
        alias_token = None
        if self._match(TokenType.ALIAS):
            alias_token = self._curr
            if alias_token.token_type not in NAME_TOKENS:
                self._expected("an alias")
        elif self._curr.token_type in NAME_TOKENS and not self._is_word(*_NOT_ALIASES):
            alias_token = self._curr
        if alias_token is not None:
            alias = self._parse_name("an alias")
            table.set("alias", exp.TableAlias(this=alias))
        return table

    def _parse_ksql_join(self) -> hx.KsqlJoin:
        """``[INNER | LEFT [OUTER] | RIGHT [OUTER] | FULL [OUTER]] JOIN rel [WITHIN ...] ON c``."""
        side = kind = None
        if self._match(TokenType.INNER):
            kind = "INNER"
        elif self._match_set((TokenType.LEFT, TokenType.RIGHT, TokenType.FULL)):
            side = self._prev.text.upper()
            if self._match(TokenType.OUTER):
                kind = "OUTER"
        self._expect(TokenType.JOIN, "JOIN")
        join = hx.KsqlJoin(this=self._parse_relation(), side=side, kind=kind)
        if self._match_word("WITHIN"):
            join.set("within", self._parse_within())
        if not self._match(TokenType.ON):
            self._expected("WITHIN or ON" if join.args.get("within") is None else "ON")
        join.set("on", self._parse_condition_or_fail("a join condition"))
        return self.expression(join)

    def _parse_within(self) -> hx.Within:
        """``WITHIN d`` or ``WITHIN (before, after)``, then an optional ``GRACE PERIOD d``."""
        if self._match(TokenType.L_PAREN):
            before = self._parse_duration()
            self._expect(TokenType.COMMA, "',' between the before and after durations")
            after = self._parse_duration()
            self._expect(TokenType.R_PAREN, "')'")
            within = hx.Within(before=before, after=after)
        else:
            within = hx.Within(before=self._parse_duration())
        within.set("grace", self._parse_grace())
        return within

    def _parse_clauses(self, query: hx.KsqlSelect) -> None:
        """The optional clauses after FROM/JOIN, each at most once and in ksqlDB's order."""
        if self._match(TokenType.WINDOW):
            query.set("window", self._parse_ksql_window())
        if self._match(TokenType.WHERE):
            query.set("where", exp.Where(this=self._parse_condition_or_fail("a condition")))
        if self._match(TokenType.GROUP_BY):
            query.set("group", exp.Group(expressions=self._parse_value_list("GROUP BY")))
        if self._match(TokenType.PARTITION_BY):
            query.set(
                "partition", hx.PartitionBy(expressions=self._parse_value_list("PARTITION BY"))
            )
        if self._match(TokenType.HAVING):
            query.set("having", exp.Having(this=self._parse_condition_or_fail("a condition")))
        if self._match_word("EMIT"):
            if not self._match_word("CHANGES", "FINAL"):
                self._expected("CHANGES or FINAL after EMIT")
            query.set("emit", hx.Emit(this=exp.var(self._prev.text.upper())))
        if self._match(TokenType.LIMIT):
            query.set("limit", exp.Limit(expression=self._parse_limit_count()))

    def _parse_limit_count(self) -> exp.Literal:
        """ksqlDB's ``limitClause``: any number, signed; building the statement wants an integer
        (a negative one is the query planner's to refuse)."""
        start = self._curr
        sign = "-" if self._match(TokenType.DASH) else ""
        token = self._curr
        if token.token_type != TokenType.NUMBER:
            self._expected("an integer after LIMIT")
        self._advance()
        if not token.text.isdigit():
            self.raise_error("Value must be integer for command: LIMIT", start, form="build")
        if int(token.text) > _MAX_INT:  # ksqlDB's LIMIT is an INT
            self.raise_error(
                f"Value must be integer for command: LIMIT (at most {_MAX_INT:,})",
                start,
                form="build",
            )
        return exp.Literal(this=sign + token.text, is_string=False)

    def _expected_clause(self, query: exp.Expr) -> str:
        """What may follow the query parsed so far, for the error at a stray token."""
        keys = ("window", "where", "group", "partition", "having", "emit", "limit")
        last = max((i for i, key in enumerate(keys) if query.args.get(key)), default=-1)
        rest = list(_CLAUSES[last + 1 :])
        if not query.args.get("window") and last < 0:
            rest.insert(0, "JOIN")
        return ", ".join(rest) + " or end of statement" if rest else "end of statement"

    def _parse_ksql_window(self) -> exp.Expr:
        """``[name] TUMBLING (...)``, ``[name] HOPPING (...)`` or ``[name] SESSION (...)``."""
        kinds = ("TUMBLING", "HOPPING", "SESSION")
        name = None
        if self._curr.token_type == TokenType.VAR and self._next.text.upper() in kinds:
            name = self._parse_name()
        if not self._match_word(*kinds):
            self._expected("TUMBLING, HOPPING or SESSION after WINDOW")
        kind = self._prev.text.upper()
        self._expect(TokenType.L_PAREN, f"'(' after {kind}")
        window: exp.Expr
        if kind == "SESSION":
            window = hx.SessionWindow(gap=self._parse_duration())
        else:
            self._expect_word("SIZE")
            size = self._parse_duration()
            if kind == "TUMBLING":
                window = hx.TumblingWindow(size=size)
            else:
                self._expect(TokenType.COMMA, "',' then ADVANCE BY")
                self._expect_word("ADVANCE", "BY")
                window = hx.HoppingWindow(size=size, advance=self._parse_duration())
        if self._curr.token_type == TokenType.COMMA and self._next.text.upper() == "RETENTION":
            self._advance(2)
            window.set("retention", self._parse_duration())
        if self._match(TokenType.COMMA):
            if not self._is_word("GRACE"):
                self._expected("RETENTION or GRACE PERIOD")
            window.set("grace", self._parse_grace())
        self._expect(TokenType.R_PAREN, "',' or ')'")
        window.set("name", name)
        return self.expression(window)

    def _parse_value_list(self, clause: str) -> list[exp.Expr]:
        """ksqlDB's ``groupBy``/``partitionBy``: value expressions, or one parenthesised list."""
        items: list[exp.Expr] = []
        starts = []
        if (
            self._curr.token_type == TokenType.L_PAREN
            and self._next.token_type == TokenType.R_PAREN
        ):
            # the grammar allows ``()``; building the statement refuses it
            self.raise_error(f"{clause} requires at least one expression", form="build")
        while True:
            starts.append(self._curr)
            item = self._parse_bitwise()
            if item is None:
                self._expected(f"an expression after {clause}" if not items else "an expression")
            items.append(item)
            if not self._match(TokenType.COMMA):
                break
        if len(items) == 1 and isinstance(items[0], exp.Tuple):
            items = list(items[0].expressions)
            if not items:
                self._expected("an expression", self._prev)
            return items
        for item, start in zip(items, starts, strict=True):
            if isinstance(item, exp.Tuple):
                self._expected(f"an expression in {clause} (not a parenthesised list)", start)
        return items

    def _parse_condition_or_fail(self, what: str) -> exp.Expr:
        """A boolean expression, or ``expected <what>``."""
        start = self._curr
        condition = self._parse_disjunction()
        if condition is None:
            self._expected(what, start)
        return condition

    # -- expression hooks ------------------------------------------------------------------

    def _parse_select(self, *args: object, **kwargs: object) -> exp.Expr | None:
        """ksqlDB has no subqueries: a nested SELECT is never an expression."""
        return None

    def _parse_types(self, *args: object, **kwargs: object) -> exp.Expr | None:
        """No typed literals (``DATE '...'``) in ksqlDB expressions; CAST parses its own type."""
        return None

    def _parse_interval(self, *args: object, **kwargs: object) -> None:
        """No INTERVAL literals in ksqlDB."""
        return

    def _parse_function_args(self, alias: bool = False) -> list[exp.Expr]:
        """Arguments are expressions or lambdas, never aliased."""
        return self._parse_csv(self._parse_lambda)

    def _parse_number_literal(self) -> exp.Literal:
        """A numeric literal, refused when it overflows BIGINT or DOUBLE as in ksqlDB."""
        token = self._prev
        text = token.text
        index = self._index - 2
        before = self._tokens[index] if index >= 0 else None
        signed = (
            before is not None
            and before.token_type == TokenType.DASH
            and (index == 0 or self._tokens[index - 1].token_type not in _OPERAND_END)
        )
        shown = ("-" if signed else "") + text
        at = before if signed and before is not None else token
        if text.isdigit():
            if int(text) > _MAX_BIGINT + (1 if signed else 0):
                self.raise_error(f"Invalid numeric literal: {shown}", at, form="prepare")
        elif "E" in text.upper():
            try:
                overflow = Decimal(text) > Decimal("1.7976931348623157E308")
            except InvalidOperation:
                overflow = True
            if overflow:
                self.raise_error(f"Number overflows DOUBLE: {shown}", at, form="prepare")
        return self.expression(exp.Literal(this=text, is_string=False), token)

    def _parse_ksql_in(self, this: exp.Expr | None) -> exp.In:
        """``x [NOT] IN (e, ...)`` with at least one element."""
        self._expect(TokenType.L_PAREN, "'(' after IN")
        start = self._curr
        items = self._parse_csv(self._parse_disjunction)
        if not items:
            self._expected("an expression in the IN list", start)
        self._expect(TokenType.R_PAREN, "',' or ')'")
        return self.expression(exp.In(this=this, expressions=items))

    def _parse_struct_deref(self, this: exp.Expr, field: exp.Expr | None) -> exp.Expr:
        """``base->field`` or ``base->*``."""
        if isinstance(field, exp.Column) and not field.table:
            return self.expression(hx.StructDeref(this=this, expression=field.this))
        if isinstance(field, exp.Star):
            return self.expression(hx.StructDeref(this=this, expression=field))
        if isinstance(field, exp.Column):
            # a->b.c: the column parser read "b.c"; ksqlDB has no dots after a dereference.
            self._expected("a field name after '->'", self._prev)
        self._expected("a field name or '*' after '->'", self._prev if field else self._curr)

    def _parse_ksql_lambda(self, params: list[exp.Expr | None]) -> exp.Lambda:
        """``x => body`` or ``(x, y) => body``."""
        body = self._parse_disjunction()
        if body is None:
            self._expected("a lambda body after '=>'")
        names = [p for p in params if p is not None]
        return self.expression(exp.Lambda(this=body, expressions=names))

    def _parse_ksql_cast(self) -> exp.Cast:
        """``CAST(expr AS type)`` (called after ``CAST(``)."""
        this = self._parse_disjunction()
        if this is None:
            self._expected("an expression to CAST")
        if not self._match(TokenType.ALIAS):
            self._expected("AS in CAST")
        to = self._parse_ksql_type()
        if self._curr.token_type != TokenType.R_PAREN:
            self._expected("')' to close CAST")
        return self.expression(exp.Cast(this=this, to=to))

    def _parse_constructor_entries(self, keyed_by_name: bool) -> list[exp.Expr]:
        """``k := v, ...`` inside MAP(...) or STRUCT(...) (called after the parenthesis)."""
        entries: list[exp.Expr] = []
        # (a look, not a comparison: mypy would keep the token type narrowed past the loop below)
        if self._match(TokenType.R_PAREN, advance=False):
            return entries
        while True:
            key: exp.Expr | None
            if keyed_by_name:
                key = self._parse_name("a field name")
            else:
                key = self._parse_bitwise()
                if key is None:
                    self._expected("a map key")
            self._expect(TokenType.COLON_EQ, "':='")
            value = self._parse_disjunction()
            if value is None:
                self._expected("a value after ':='")
            entries.append(self.expression(exp.PropertyEQ(this=key, expression=value)))
            if not self._match(TokenType.COMMA):
                break
        if self._curr.token_type != TokenType.R_PAREN:
            self._expected("',' or ')'")
        return entries
