"""ksqlDB's rendering of expressions in messages, as its ExpressionFormatter prints them. Pure.

``(ID = 11)``, ``'10'``, ``SUBSTRING(S, 1, 2)``; a cached plan's bound value prints as ``?``.
"""

from __future__ import annotations

import re

from sqlglot import exp

from headwater.engine._bound import BoundValue
from headwater.sqlparse_ext import expressions as hx
from headwater.sqlparse_ext.sqltypes import from_datatype, identifier_name

_BINARY = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.And: "AND",
    exp.Or: "OR",
    exp.DPipe: "||",
    exp.NullSafeEQ: "IS NOT DISTINCT FROM",
    exp.NullSafeNEQ: "IS DISTINCT FROM",
}


def _name(identifier: exp.Expr) -> str:
    name = identifier_name(identifier)
    return name if re.fullmatch(r"[A-Z_][A-Z0-9_@$]*", name) else f"`{name}`"


def format_expression(node: exp.Expr) -> str:
    """ksqlDB's rendering of an expression: ``(ID = 11)``, ``'10'``, ``SUBSTRING(S, 1, 2)``."""
    f = format_expression
    kind = type(node)
    if kind in _BINARY:
        return f"({f(node.this)} {_BINARY[kind]} {f(node.expression)})"
    if isinstance(node, exp.Paren):
        return f(node.this)
    if isinstance(node, exp.Alias):
        return f"{f(node.this)} AS {_name(node.args['alias'])}"
    if isinstance(node, exp.Column):
        column = "*" if isinstance(node.this, exp.Star) else _name(node.this)
        table = node.args.get("table")
        return f"{_name(table)}.{column}" if table is not None else column
    if isinstance(node, exp.Literal):
        text = str(node.this)
        return "'" + text.replace("'", "''") + "'" if node.is_string else text
    if isinstance(node, exp.Null):
        return "null"
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, exp.Neg):
        return f"-{f(node.this)}"
    if isinstance(node, exp.Not):
        inner = node.this
        if isinstance(inner, exp.Is):
            return f"({f(inner.this)} IS NOT NULL)"
        for wrapped, word in ((exp.Between, "BETWEEN"), (exp.In, "IN")):
            if isinstance(inner, wrapped):
                return f(inner).replace(f" {word} ", f" NOT {word} ", 1)
        return f"(NOT {f(inner)})"
    if isinstance(node, exp.Is):
        return f"({f(node.this)} IS NULL)"
    if isinstance(node, exp.Between):
        return f"({f(node.this)} BETWEEN {f(node.args['low'])} AND {f(node.args['high'])})"
    if isinstance(node, exp.In):
        return f"({f(node.this)} IN ({', '.join(f(e) for e in node.expressions)}))"
    if isinstance(node, exp.Like):
        word = "NOT LIKE" if node.args.get("negate") else "LIKE"
        return f"({f(node.this)} {word} {f(node.expression)})"
    if isinstance(node, exp.Escape):
        return f"{f(node.this)[:-1]} ESCAPE {f(node.expression)})"
    if isinstance(node, exp.Cast):
        return f"CAST({f(node.this)} AS {from_datatype(node.args['to']).sql()})"
    if isinstance(node, hx.StructDeref):
        field = "*" if isinstance(node.expression, exp.Star) else _name(node.expression)
        return f"{f(node.this)}->{field}"
    if isinstance(node, exp.Bracket):
        return f"{f(node.this)}[{f(node.expressions[0])}]"
    if isinstance(node, hx.ArrayConstructor):
        return f"ARRAY[{', '.join(f(e) for e in node.expressions)}]"
    if isinstance(node, hx.MapConstructor):
        return "MAP(" + ", ".join(f"{f(e.this)}:={f(e.expression)}" for e in node.expressions) + ")"
    if isinstance(node, hx.StructConstructor):
        return (
            "STRUCT("
            + ", ".join(f"{_name(e.this)}:={f(e.expression)}" for e in node.expressions)
            + ")"
        )
    if isinstance(node, exp.Case):
        parts = ["(CASE"] + ([f(node.this)] if node.this else [])
        for branch in node.args.get("ifs") or ():
            parts.append(f"WHEN {f(branch.this)} THEN {f(branch.args['true'])}")
        if node.args.get("default") is not None:
            parts.append(f"ELSE {f(node.args['default'])}")
        return " ".join(parts) + " END)"
    if isinstance(node, exp.Anonymous):
        return f"{str(node.this).upper()}({', '.join(f(e) for e in node.expressions)})"
    if isinstance(node, exp.Lambda):
        return f"({', '.join(identifier_name(p) for p in node.expressions)}) => {f(node.this)}"
    if isinstance(node, exp.Star):
        return "*"
    if isinstance(node, BoundValue):  # a cached plan's literal
        return "?"
    return node.sql()
