"""The headwater generator: prints the AST back as ksqlDB SQL that parses to an equal AST.

Pure: no I/O. Every node from ``expressions.py`` is printed through ``TRANSFORMS`` (sqlglot
finds ``<key>_sql`` methods only for its own classes); queries print their clauses in ksqlDB's
order: FROM/JOIN, WINDOW, WHERE, GROUP BY, PARTITION BY, HAVING, EMIT, LIMIT.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from sqlglot import exp, generator

from headwater.sqlparse_ext import expressions as hx


def _method(name: str) -> Callable[..., str]:
    """A TRANSFORMS entry calling the generator method ``name``."""
    return lambda self, expression: getattr(self, name)(expression)


class Generator(generator.Generator):
    """Single-line ksqlDB SQL."""

    TYPE_MAPPING: ClassVar[dict[exp.DType, str]] = {
        **generator.Generator.TYPE_MAPPING,
        exp.DType.VARCHAR: "STRING",
        exp.DType.VARBINARY: "BYTES",
        exp.DType.INT: "INTEGER",
    }

    TRANSFORMS: ClassVar[dict[type[exp.Expr], Callable[..., str]]] = {
        **generator.Generator.TRANSFORMS,
        **{
            cls: _method(f"{cls.key}_sql")
            for cls in (
                hx.KsqlSelect,
                hx.KsqlJoin,
                hx.Duration,
                hx.TumblingWindow,
                hx.HoppingWindow,
                hx.SessionWindow,
                hx.Within,
                hx.PartitionBy,
                hx.Emit,
                hx.StructDeref,
                hx.MapConstructor,
                hx.StructConstructor,
                hx.ArrayConstructor,
                hx.TableProperty,
                hx.TableProperties,
                hx.KeyConstraint,
                hx.HeadersConstraint,
                hx.CreateSource,
                hx.CreateAsSelect,
                hx.InsertSelect,
                hx.InsertValues,
                hx.DropObject,
                hx.AlterSource,
                hx.CreateType,
                hx.QueryControl,
                hx.ShowObjects,
                hx.DescribeObject,
                hx.ExplainStatement,
                hx.PrintTopic,
                hx.SetProperty,
                hx.UnsetProperty,
                hx.DefineVariable,
                hx.UndefineVariable,
                hx.RunScript,
                hx.AssertTopic,
                hx.AssertSchema,
            )
        },
        exp.Lambda: lambda self, e: self.lambda_sql(e, arrow_sep="=>"),
    }

    # -- queries ---------------------------------------------------------------------------

    def ksqlselect_sql(self, expression: hx.KsqlSelect) -> str:
        """``SELECT ... FROM ...`` with the clauses in ksqlDB's order."""
        parts = [
            "SELECT " + self.expressions(expression, flat=True),
            "FROM " + self.sql(expression.args["from_"], "this"),
            *(self.sql(join) for join in expression.args.get("joins") or ()),
        ]
        window = expression.args.get("window")
        if window is not None:
            name = window.args.get("name")
            parts.append("WINDOW " + (f"{self.sql(name)} " if name else "") + self.sql(window))
        where = expression.args.get("where")
        if where is not None:
            parts.append("WHERE " + self.sql(where, "this"))
        group = expression.args.get("group")
        if group is not None:
            parts.append("GROUP BY " + self.expressions(group, flat=True))
        for key in ("partition", "having", "emit", "limit"):
            node = expression.args.get(key)
            if node is not None:
                parts.append(self.sql(node))
        return " ".join(parts)

    def having_sql(self, expression: exp.Having) -> str:
        """``HAVING condition`` on one line."""
        return "HAVING " + self.sql(expression, "this")

    def limit_sql(self, expression: exp.Limit, top: bool = False) -> str:
        """``LIMIT n``."""
        return "LIMIT " + self.sql(expression, "expression")

    def partitionby_sql(self, expression: hx.PartitionBy) -> str:
        """``PARTITION BY e, ...``."""
        return "PARTITION BY " + self.expressions(expression, flat=True)

    def emit_sql(self, expression: hx.Emit) -> str:
        """``EMIT CHANGES|FINAL``."""
        return "EMIT " + self.sql(expression, "this")

    def ksqljoin_sql(self, expression: hx.KsqlJoin) -> str:
        """``[side] [kind] JOIN source [WITHIN ...] ON condition``."""
        words = [w for w in (expression.args.get("side"), expression.args.get("kind")) if w]
        parts = [*words, "JOIN", self.sql(expression, "this")]
        within = expression.args.get("within")
        if within is not None:
            parts.append(self.sql(within))
        parts.append("ON " + self.sql(expression, "on"))
        return " ".join(parts)

    def within_sql(self, expression: hx.Within) -> str:
        """``WITHIN d`` or ``WITHIN (before, after)`` [GRACE PERIOD d]."""
        before = self.sql(expression, "before")
        after = expression.args.get("after")
        text = f"WITHIN ({before}, {self.sql(after)})" if after is not None else f"WITHIN {before}"
        return text + self._grace(expression)

    def duration_sql(self, expression: hx.Duration) -> str:
        """``10 SECONDS``."""
        return f"{self.sql(expression, 'this')} {self.sql(expression, 'unit')}"

    def _grace(self, expression: exp.Expr) -> str:
        grace = expression.args.get("grace")
        return f" GRACE PERIOD {self.sql(grace)}" if grace is not None else ""

    def _window_tail(self, expression: exp.Expr) -> str:
        retention = expression.args.get("retention")
        tail = f", RETENTION {self.sql(retention)}" if retention is not None else ""
        grace = expression.args.get("grace")
        return tail + (f", GRACE PERIOD {self.sql(grace)}" if grace is not None else "") + ")"

    def tumblingwindow_sql(self, expression: hx.TumblingWindow) -> str:
        """``TUMBLING (SIZE d, ...)``."""
        return f"TUMBLING (SIZE {self.sql(expression, 'size')}" + self._window_tail(expression)

    def hoppingwindow_sql(self, expression: hx.HoppingWindow) -> str:
        """``HOPPING (SIZE d, ADVANCE BY d, ...)``."""
        size, advance = self.sql(expression, "size"), self.sql(expression, "advance")
        return f"HOPPING (SIZE {size}, ADVANCE BY {advance}" + self._window_tail(expression)

    def sessionwindow_sql(self, expression: hx.SessionWindow) -> str:
        """``SESSION (d, ...)``."""
        return f"SESSION ({self.sql(expression, 'gap')}" + self._window_tail(expression)

    def datatype_sql(self, expression: exp.DataType) -> str:
        """sqlglot's spelling, plus ``STRUCT<>`` for a struct without fields."""
        if expression.this == exp.DType.STRUCT and not expression.expressions:
            return "STRUCT<>"
        return super().datatype_sql(expression)

    # -- expressions -----------------------------------------------------------------------

    def structderef_sql(self, expression: hx.StructDeref) -> str:
        """``base->field``."""
        return f"{self.sql(expression, 'this')}->{self.sql(expression, 'expression')}"

    def _entries(self, expression: exp.Expr) -> str:
        return ", ".join(
            f"{self.sql(e, 'this')} := {self.sql(e, 'expression')}" for e in expression.expressions
        )

    def mapconstructor_sql(self, expression: hx.MapConstructor) -> str:
        """``MAP(k := v, ...)``."""
        return f"MAP({self._entries(expression)})"

    def structconstructor_sql(self, expression: hx.StructConstructor) -> str:
        """``STRUCT(f := v, ...)``."""
        return f"STRUCT({self._entries(expression)})"

    def arrayconstructor_sql(self, expression: hx.ArrayConstructor) -> str:
        """``ARRAY[e, ...]``."""
        return f"ARRAY[{self.expressions(expression, flat=True)}]"

    # -- DDL and DML -----------------------------------------------------------------------

    def tableproperty_sql(self, expression: hx.TableProperty) -> str:
        """``name=value``."""
        return f"{self.sql(expression, 'this')}={self.sql(expression, 'value')}"

    def tableproperties_sql(self, expression: hx.TableProperties) -> str:
        """``WITH (name=value, ...)``."""
        return f"WITH ({self.expressions(expression, flat=True)})"

    def keyconstraint_sql(self, expression: hx.KeyConstraint) -> str:
        """``KEY`` or ``PRIMARY KEY``."""
        return "PRIMARY KEY" if expression.args.get("primary") else "KEY"

    def headersconstraint_sql(self, expression: hx.HeadersConstraint) -> str:
        """``HEADERS`` or ``HEADER('key')``."""
        key = expression.args.get("this")
        return f"HEADER({self.sql(key)})" if key is not None else "HEADERS"

    def _create_head(self, expression: exp.Expr, source: bool = False) -> str:
        words = ["CREATE"]
        if expression.args.get("replace"):
            words.append("OR REPLACE")
        if source:
            words.append("SOURCE")
        words.append(expression.args["kind"])
        if expression.args.get("exists"):
            words.append("IF NOT EXISTS")
        words.append(self.sql(expression, "this"))
        return " ".join(words)

    def _with(self, expression: exp.Expr) -> str:
        properties = expression.args.get("properties")
        return f" {self.sql(properties)}" if properties is not None else ""

    def createsource_sql(self, expression: hx.CreateSource) -> str:
        """``CREATE ... STREAM|TABLE name (columns) WITH (...)``."""
        head = self._create_head(expression, source=bool(expression.args.get("source")))
        columns = expression.args.get("expressions")
        cols = f" ({self.expressions(expression, flat=True)})" if columns else ""
        return head + cols + self._with(expression)

    def createasselect_sql(self, expression: hx.CreateAsSelect) -> str:
        """``CREATE ... STREAM|TABLE name WITH (...) AS SELECT ...``."""
        query = self.sql(expression, "expression")
        return f"{self._create_head(expression)}{self._with(expression)} AS {query}"

    def insertselect_sql(self, expression: hx.InsertSelect) -> str:
        """``INSERT INTO name WITH (...) SELECT ...``."""
        target, query = self.sql(expression, "this"), self.sql(expression, "expression")
        return f"INSERT INTO {target}{self._with(expression)} {query}"

    def insertvalues_sql(self, expression: hx.InsertValues) -> str:
        """``INSERT INTO name (cols) VALUES (...)``."""
        columns = expression.args.get("columns")
        cols = f" ({self.expressions(expression, key='columns', flat=True)})" if columns else ""
        values = self.expressions(expression, flat=True)
        return f"INSERT INTO {self.sql(expression, 'this')}{cols} VALUES ({values})"

    def dropobject_sql(self, expression: hx.DropObject) -> str:
        """``DROP STREAM|TABLE|TYPE [IF EXISTS] name [DELETE TOPIC]``."""
        exists = " IF EXISTS" if expression.args.get("exists") else ""
        delete = " DELETE TOPIC" if expression.args.get("delete_topic") else ""
        kind, name = expression.args["kind"], self.sql(expression, "this")
        return f"DROP {kind}{exists} {name}{delete}"

    def altersource_sql(self, expression: hx.AlterSource) -> str:
        """``ALTER STREAM|TABLE name ADD COLUMN c T, ...``."""
        adds = ", ".join(f"ADD COLUMN {self.sql(c)}" for c in expression.expressions)
        return f"ALTER {expression.args['kind']} {self.sql(expression, 'this')} {adds}"

    def createtype_sql(self, expression: hx.CreateType) -> str:
        """``CREATE TYPE [IF NOT EXISTS] name AS type``."""
        exists = " IF NOT EXISTS" if expression.args.get("exists") else ""
        name, kind = self.sql(expression, "this"), self.sql(expression, "kind")
        return f"CREATE TYPE{exists} {name} AS {kind}"

    # -- administration --------------------------------------------------------------------

    def querycontrol_sql(self, expression: hx.QueryControl) -> str:
        """``TERMINATE|PAUSE|RESUME id|ALL``."""
        target = "ALL" if expression.args.get("all") else self.sql(expression, "expression")
        return f"{self.sql(expression, 'this')} {target}"

    def showobjects_sql(self, expression: hx.ShowObjects) -> str:
        """``SHOW|LIST what [EXTENDED]``."""
        extended = " EXTENDED" if expression.args.get("extended") else ""
        return f"{self.sql(expression, 'verb')} {self.sql(expression, 'this')}{extended}"

    def describeobject_sql(self, expression: hx.DescribeObject) -> str:
        """``DESCRIBE [kind] [name] [EXTENDED]``."""
        parts = ["DESCRIBE"]
        for key in ("kind", "this"):
            if expression.args.get(key) is not None:
                parts.append(self.sql(expression, key))
        if expression.args.get("extended"):
            parts.append("EXTENDED")
        return " ".join(parts)

    def explainstatement_sql(self, expression: hx.ExplainStatement) -> str:
        """``EXPLAIN id|statement``."""
        target = expression.args.get("expression")
        return f"EXPLAIN {self.sql(target if target is not None else expression.this)}"

    def printtopic_sql(self, expression: hx.PrintTopic) -> str:
        """``PRINT topic [FROM BEGINNING] [INTERVAL n] [LIMIT n]``."""
        parts = ["PRINT", self.sql(expression, "this")]
        if expression.args.get("from_beginning"):
            parts.append("FROM BEGINNING")
        for key, word in (("interval", "INTERVAL"), ("limit", "LIMIT")):
            if expression.args.get(key) is not None:
                parts.append(f"{word} {self.sql(expression, key)}")
        return " ".join(parts)

    def setproperty_sql(self, expression: hx.SetProperty) -> str:
        """``SET 'name'='value'``."""
        return f"SET {self.sql(expression, 'this')}={self.sql(expression, 'expression')}"

    def unsetproperty_sql(self, expression: hx.UnsetProperty) -> str:
        """``UNSET 'name'``."""
        return f"UNSET {self.sql(expression, 'this')}"

    def definevariable_sql(self, expression: hx.DefineVariable) -> str:
        """``DEFINE name = 'value'``."""
        return f"DEFINE {self.sql(expression, 'this')} = {self.sql(expression, 'expression')}"

    def undefinevariable_sql(self, expression: hx.UndefineVariable) -> str:
        """``UNDEFINE name``."""
        return f"UNDEFINE {self.sql(expression, 'this')}"

    def runscript_sql(self, expression: hx.RunScript) -> str:
        """``RUN SCRIPT 'path'``."""
        return f"RUN SCRIPT {self.sql(expression, 'this')}"

    def asserttopic_sql(self, expression: hx.AssertTopic) -> str:
        """``ASSERT [NOT EXISTS] TOPIC name [WITH (...)] [TIMEOUT d]``."""
        return self._assert(expression, f"TOPIC {self.sql(expression, 'this')}")

    def assertschema_sql(self, expression: hx.AssertSchema) -> str:
        """``ASSERT [NOT EXISTS] SCHEMA [SUBJECT name] [ID n] [TIMEOUT d]``."""
        parts = ["SCHEMA"]
        for key in ("subject", "id"):
            if expression.args.get(key) is not None:
                parts.append(f"{key.upper()} {self.sql(expression, key)}")
        return self._assert(expression, " ".join(parts))

    def _assert(self, expression: exp.Expr, body: str) -> str:
        not_exists = "NOT EXISTS " if expression.args.get("not_exists") else ""
        timeout = expression.args.get("timeout")
        tail = f" TIMEOUT {self.sql(timeout)}" if timeout is not None else ""
        return f"ASSERT {not_exists}{body}{self._with(expression)}{tail}"


__all__ = ["Generator"]
