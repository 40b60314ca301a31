"""What an expression may reference: the scope's columns, and custom types resolved. Pure (no I/O)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from sqlglot import exp

from headwater.engine.errors import ExpressionError
from headwater.sqlparse_ext.sqltypes import (
    ArrayType,
    CustomType,
    MapType,
    SqlType,
    StructField,
    StructType,
    identifier_name,
)

Row = Mapping[str, Any]
Evaluator = Callable[[Row], Any]


class UnresolvedColumn(ExpressionError):
    """A column reference that names no column of the scope (``column`` as written, qualified)."""

    def __init__(self, column: str) -> None:
        super().__init__(f"Column '{column}' cannot be resolved.")
        self.column = column


@dataclass(frozen=True, slots=True)
class Scope:
    """The columns an expression may reference.

    Attributes:
        columns: column name (as ksqlDB resolves it) -> type, in schema order.
        qualifiers: names accepted before a dot (``T.COL``): the source's name and alias.
        custom_types: types made by CREATE TYPE, for CAST (see `resolve_type`).
        lambda_variables: inside a lambda's body, the parameters of it and of the lambdas around
            it -> their types; a row holds their values under these names.
    """

    columns: Mapping[str, SqlType]
    qualifiers: frozenset[str] = frozenset()
    custom_types: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    lambda_variables: Mapping[str, SqlType] = field(default_factory=lambda: MappingProxyType({}))

    def with_lambda(self, names: Sequence[str], types: Sequence[SqlType]) -> Scope:
        """The scope of a lambda's body: this one plus the lambda's parameters.

        Raises:
            ExpressionError: For a repeated parameter, one named as a column, or one reusing the
                name of an enclosing lambda's parameter (ksqlDB forbids all three).
        """
        if len(set(names)) != len(names):
            raise ExpressionError(f"Lambda arguments have duplicates: [{', '.join(names)}]")
        clash = next((n for n in names if n in self.columns), None)
        if clash is not None:
            raise ExpressionError(f"Lambda function argument can't be a column name: {clash}")
        if any(n in self.lambda_variables for n in names):
            raise ExpressionError("Reusing lambda arguments in nested lambda is not allowed")
        variables = {**self.lambda_variables, **dict(zip(names, types, strict=True))}
        return replace(self, lambda_variables=MappingProxyType(variables))

    def resolve(self, node: exp.Column) -> tuple[str, SqlType]:
        """The name and type of a column reference (or of a lambda parameter).

        Raises:
            ExpressionError: If the qualifier is not the source's name or alias.
            UnresolvedColumn: If the column does not exist.
        """
        name = identifier_name(node.this)
        shown = name
        table = node.args.get("table")
        if table is None and name in self.lambda_variables:
            return name, self.lambda_variables[name]
        if table is not None:
            qualifier = identifier_name(table)
            if qualifier not in self.qualifiers:
                raise ExpressionError(f"'{qualifier}' is not a valid stream/table name or alias.")
            shown = f"{qualifier}.{name}"
        if name not in self.columns:
            raise UnresolvedColumn(shown)
        return name, self.columns[name]


def resolve_type(t: SqlType | str, custom_types: Mapping[str, Any] | None = None) -> SqlType:
    """A type with every custom type name replaced by its definition.

    Args:
        t: a type, or ksqlDB type text as the catalog stores it.
        custom_types: name -> SqlType, type text, or an object with a ``type`` text attribute
            (``metastore.catalog.CustomType``).

    Raises:
        ExpressionError: For a custom type that is not defined.
    """
    if isinstance(t, str):
        from headwater.sqlparse_ext import parse_type

        t = parse_type(t)
    if isinstance(t, CustomType):
        found = (custom_types or {}).get(t.name)
        if found is None:
            raise ExpressionError(f"Unknown type: {t.name}")
        inner = found if isinstance(found, (SqlType, str)) else found.type
        return resolve_type(inner, custom_types)
    if isinstance(t, ArrayType):
        return ArrayType(resolve_type(t.element, custom_types))
    if isinstance(t, MapType):
        return MapType(resolve_type(t.key, custom_types), resolve_type(t.value, custom_types))
    if isinstance(t, StructType):
        return StructType(
            tuple(StructField(f.name, resolve_type(f.type, custom_types)) for f in t.fields)
        )
    return t
