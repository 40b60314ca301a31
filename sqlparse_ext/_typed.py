"""Builds the typed statements of ``statements.py`` from the parser's sqlglot nodes.

Pure: no I/O. The parser has already checked the syntax, so this module only reads nodes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, cast

from sqlglot import exp

from headwater.sqlparse_ext import expressions as hx
from headwater.sqlparse_ext import statements as st
from headwater.sqlparse_ext.sqltypes import from_datatype, identifier_name


def _name(node: exp.Expr) -> str:
    """The ksqlDB name of an Identifier, or of a Table's identifier."""
    return identifier_name(node.this if isinstance(node, exp.Table) else node)


def _duration(node: exp.Expr | None) -> st.Duration | None:
    if node is None:
        return None
    return st.Duration(int(node.this.name), node.args["unit"].name)


def _literal_value(node: exp.Expr) -> st.PropertyValue:
    """The Python value of a property literal."""
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Null):
        return None
    if node.is_string:
        return str(node.this)
    text = node.name
    if text.lstrip("-").isdigit():
        return int(text)
    return float(text)


def _property_name(node: exp.Expr) -> str:
    if isinstance(node, exp.Var) and "." not in node.name:
        return node.name.upper()
    return node.name


def properties(node: exp.Expr | None) -> st.Properties:
    """The typed ``WITH (...)`` list of a statement node."""
    if node is None:
        return st.Properties()
    return st.Properties(
        tuple((_property_name(p.this), _literal_value(p.args["value"])) for p in node.expressions)
    )


def _column(node: exp.ColumnDef) -> st.Column:
    constraints = node.args.get("constraints") or []
    key = primary = headers = False
    header_key = None
    for constraint in constraints:
        if isinstance(constraint, hx.KeyConstraint):
            primary = bool(constraint.args.get("primary"))
            key = not primary
        elif isinstance(constraint, hx.HeadersConstraint):
            header = constraint.args.get("this")
            headers = header is None
            header_key = str(header.this) if header is not None else None
    return st.Column(
        name=_name(node.this),
        type=from_datatype(node.args["kind"]),
        key=key,
        primary_key=primary,
        headers=headers,
        header_key=header_key,
    )


def _source_ref(table: exp.Expr) -> st.SourceRef:
    alias = table.args.get("alias")
    return st.SourceRef(_name(table), _name(alias.this) if alias is not None else None)


def _window(node: exp.Expr | None) -> st.Window | None:
    if node is None:
        return None
    common = {
        "retention": _duration(node.args.get("retention")),
        "grace": _duration(node.args.get("grace")),
    }
    if isinstance(node, hx.SessionWindow):
        return st.Window(
            kind="SESSION", size=cast(st.Duration, _duration(node.args["gap"])), **common
        )
    size = cast(st.Duration, _duration(node.args["size"]))
    if isinstance(node, hx.HoppingWindow):
        return st.Window(
            kind="HOPPING", size=size, advance=_duration(node.args["advance"]), **common
        )
    return st.Window(kind="TUMBLING", size=size, **common)


def _join(node: exp.Expr) -> st.Join:
    within_node = node.args.get("within")
    within = None
    if within_node is not None:
        before = cast(st.Duration, _duration(within_node.args["before"]))
        after = _duration(within_node.args.get("after")) or before
        within = st.JoinWindow(before, after, _duration(within_node.args.get("grace")))
    kind = cast(Literal["INNER", "LEFT", "RIGHT", "FULL"], node.args.get("side") or "INNER")
    return st.Join(kind=kind, source=_source_ref(node.this), on=node.args["on"], within=within)


def query(node: exp.Expr) -> st.Query:
    """The typed view of a ``KsqlSelect``."""
    args = node.args
    emit = args.get("emit")
    limit = args.get("limit")
    where, having = args.get("where"), args.get("having")
    group, partition = args.get("group"), args.get("partition")
    return st.Query(
        expression=node,
        select=tuple(node.expressions),
        source=_source_ref(args["from_"].this),
        joins=tuple(_join(j) for j in args.get("joins") or ()),
        window=_window(args.get("window")),
        where=where.this if where is not None else None,
        group_by=tuple(group.expressions) if group is not None else (),
        partition_by=tuple(partition.expressions) if partition is not None else (),
        having=having.this if having is not None else None,
        emit=emit.this.name if emit is not None else None,
        limit=int(limit.expression.name) if limit is not None else None,
    )


def _flag(node: exp.Expr, key: str) -> bool:
    return bool(node.args.get(key))


def _optional_name(node: exp.Expr | None) -> str | None:
    return _name(node) if node is not None else None


Fields = dict[str, Any]

_BUILDERS: dict[type[exp.Expr], Callable[[Any], tuple[type[st.Statement], Fields]]] = {
    hx.KsqlSelect: lambda n: (st.Select, {"query": query(n)}),
    hx.CreateSource: lambda n: (
        st.CreateSource,
        {
            "kind": n.args["kind"],
            "name": _name(n.this),
            "columns": tuple(_column(c) for c in n.expressions),
            "properties": properties(n.args.get("properties")),
            "or_replace": _flag(n, "replace"),
            "if_not_exists": _flag(n, "exists"),
            "source": _flag(n, "source"),
        },
    ),
    hx.CreateAsSelect: lambda n: (
        st.CreateAsSelect,
        {
            "kind": n.args["kind"],
            "name": _name(n.this),
            "query": query(n.expression),
            "properties": properties(n.args.get("properties")),
            "or_replace": _flag(n, "replace"),
            "if_not_exists": _flag(n, "exists"),
        },
    ),
    hx.InsertSelect: lambda n: (
        st.InsertInto,
        {
            "target": _name(n.this),
            "query": query(n.expression),
            "properties": properties(n.args.get("properties")),
        },
    ),
    hx.InsertValues: lambda n: (
        st.InsertValues,
        {
            "target": _name(n.this),
            "columns": tuple(_name(c) for c in n.args.get("columns") or ()),
            "values": tuple(n.expressions),
        },
    ),
    hx.AlterSource: lambda n: (
        st.AlterSource,
        {
            "kind": n.args["kind"],
            "name": _name(n.this),
            "columns": tuple(_column(c) for c in n.expressions),
        },
    ),
    hx.CreateType: lambda n: (
        st.CreateType,
        {
            "name": _name(n.this),
            "type": from_datatype(n.args["kind"]),
            "if_not_exists": _flag(n, "exists"),
        },
    ),
    hx.ShowObjects: lambda n: (st.Show, {"what": n.this.name, "extended": _flag(n, "extended")}),
    hx.PrintTopic: lambda n: (
        st.Print,
        {
            "topic": n.this.name,
            "from_beginning": _flag(n, "from_beginning"),
            "interval": int(n.args["interval"].name) if n.args.get("interval") else None,
            "limit": int(n.args["limit"].name) if n.args.get("limit") else None,
        },
    ),
    hx.SetProperty: lambda n: (st.SetProperty, {"name": n.this.name, "value": n.expression.name}),
    hx.UnsetProperty: lambda n: (st.UnsetProperty, {"name": n.this.name}),
    hx.DefineVariable: lambda n: (
        st.DefineVariable,
        {
            "name": n.this.name,
            "value": n.expression.name,
        },
    ),
    hx.UndefineVariable: lambda n: (st.UndefineVariable, {"name": n.this.name}),
    hx.RunScript: lambda n: (st.RunScript, {"path": n.this.name}),
    hx.AssertTopic: lambda n: (
        st.AssertTopic,
        {
            "topic": n.this.name,
            "exists": not _flag(n, "not_exists"),
            "properties": properties(n.args.get("properties")),
            "timeout": _duration(n.args.get("timeout")),
        },
    ),
    hx.AssertSchema: lambda n: (
        st.AssertSchema,
        {
            "subject": n.args["subject"].name if n.args.get("subject") else None,
            "schema_id": int(n.args["id"].name) if n.args.get("id") else None,
            "exists": not _flag(n, "not_exists"),
            "timeout": _duration(n.args.get("timeout")),
        },
    ),
}


def _drop(node: hx.DropObject) -> tuple[type[st.Statement], Fields]:
    if node.args["kind"] == "TYPE":
        return st.DropType, {"name": _name(node.this), "if_exists": _flag(node, "exists")}
    return st.Drop, {
        "kind": node.args["kind"],
        "name": _name(node.this),
        "if_exists": _flag(node, "exists"),
        "delete_topic": _flag(node, "delete_topic"),
    }


_CONTROLS: dict[str, type[st.Statement]] = {
    "TERMINATE": st.Terminate,
    "PAUSE": st.PauseQuery,
    "RESUME": st.ResumeQuery,
}


def _control(node: hx.QueryControl) -> tuple[type[st.Statement], Fields]:
    target = None if node.args.get("all") else _name(node.expression)
    return _CONTROLS[node.this.name], {"query_id": target}


def _describe(node: hx.DescribeObject) -> tuple[type[st.Statement], Fields]:
    kind = node.args.get("kind")
    what = kind.name if kind is not None else "SOURCE"
    return st.Describe, {
        "what": what,
        "name": _optional_name(node.this),
        "extended": _flag(node, "extended"),
    }


def build(
    node: exp.Expr, text: str, line: int, column: int, offset: int, written: str | None = None
) -> st.Statement:
    """The typed statement of a parsed node, placed at ``line:column`` (``offset``); ``written``
    is its text before substitution (when that differs from ``text``)."""
    position: Fields = {
        "text": text,
        "line": line,
        "column": column,
        "offset": offset,
        "expression": node,
        "written": text if written is None else written,
    }
    if isinstance(node, hx.ExplainStatement):
        inner = node.args.get("expression")
        return st.Explain(
            query_id=_optional_name(node.this) if inner is None else None,
            statement=build(inner, text, line, column, offset, written)
            if inner is not None
            else None,
            **position,
        )
    if isinstance(node, hx.DropObject):
        cls, fields = _drop(node)
    elif isinstance(node, hx.QueryControl):
        cls, fields = _control(node)
    elif isinstance(node, hx.DescribeObject):
        cls, fields = _describe(node)
    else:
        cls, fields = _BUILDERS[type(node)](node)
    return cls(**fields, **position)
