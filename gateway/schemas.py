"""ksqlDB's ``SchemaInfo`` JSON of a column type, as DESCRIBE and query headers show it. Pure."""

from __future__ import annotations

from headwater.gateway.errors import Entity
from headwater.metastore.catalog import Catalog
from headwater.sqlparse_ext import parse_one, sqltypes
from headwater.sqlparse_ext import statements as ast


def type_schema(type_text: str, catalog: Catalog | None = None) -> Entity:
    """ksqlDB's ``SchemaInfo`` JSON of canonical type text (``ARRAY<STRING>``, ``DECIMAL(4, 2)``).

    Custom type names are resolved through ``catalog`` when given.
    """
    return _schema(_parse_type(type_text), catalog, 0)


def _parse_type(type_text: str) -> sqltypes.SqlType:
    statement = parse_one(f"CREATE TYPE HEADWATER_SCHEMA AS {type_text}")
    assert isinstance(statement, ast.CreateType)
    return statement.type


def _schema(sql_type: sqltypes.SqlType, catalog: Catalog | None, depth: int) -> Entity:
    if isinstance(sql_type, sqltypes.CustomType):
        custom = catalog.types.get(sql_type.name) if catalog is not None else None
        if custom is not None and depth < 32:
            return _schema(_parse_type(custom.type), catalog, depth + 1)
        return {"type": sql_type.name, "fields": None, "memberSchema": None}
    if isinstance(sql_type, sqltypes.DecimalType):
        return {
            "type": "DECIMAL",
            "fields": None,
            "memberSchema": None,
            "parameters": {"precision": sql_type.precision, "scale": sql_type.scale},
        }
    if isinstance(sql_type, sqltypes.ArrayType):
        member = _schema(sql_type.element, catalog, depth)
        return {"type": "ARRAY", "fields": None, "memberSchema": member}
    if isinstance(sql_type, sqltypes.MapType):
        member = _schema(sql_type.value, catalog, depth)
        return {"type": "MAP", "fields": None, "memberSchema": member}
    if isinstance(sql_type, sqltypes.StructType):
        return {
            "type": "STRUCT",
            "fields": [
                {"name": f.name, "schema": _schema(f.type, catalog, depth)} for f in sql_type.fields
            ],
            "memberSchema": None,
        }
    return {"type": sql_type.sql(), "fields": None, "memberSchema": None}


__all__ = ["type_schema"]
