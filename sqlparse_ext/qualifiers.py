"""Qualified column references that name no stream or table of the statement. Pure.

ksqlDB's ``AstBuilder`` refuses them while building the statement, before anything is
resolved against the catalog: every ``X.col`` and ``X.*`` must name a source the statement reads
(``FROM``/``JOIN``), by its name or its alias. Doing the same here makes the refusal come first,
as in ksqlDB, whatever else is wrong with the statement.
"""

from __future__ import annotations

from sqlglot import exp

__all__ = ["unknown_qualifier"]


def _name(identifier: exp.Expr | None) -> str | None:
    if not isinstance(identifier, exp.Identifier):
        return None
    return identifier.name if identifier.quoted else identifier.name.upper()


def _relations(node: exp.Expr) -> set[str]:
    """The names and aliases of the streams and tables the statement reads."""
    names: set[str] = set()
    for table in node.find_all(exp.Table):
        if not isinstance(table.parent, exp.From | exp.Join):
            continue  # a target (INSERT INTO x, CREATE ... x AS SELECT): not a relation
        for part in (table.this, table.args.get("alias")):
            if isinstance(part, exp.TableAlias):
                part = part.this
            name = _name(part)
            if name is not None:
                names.add(name)
    return names


def unknown_qualifier(node: exp.Expr) -> tuple[str, int] | None:
    """The first qualifier that names none of the statement's relations, with its offset in the
    statement's text; None when every qualifier names one."""
    relations: set[str] | None = None
    for column in node.find_all(exp.Column):
        qualifier = column.args.get("table")
        name = _name(qualifier)
        if name is None or qualifier is None:
            continue
        if relations is None:
            relations = _relations(node)
        if name not in relations:
            return name, int(qualifier.meta.get("start", 0))
    return None
