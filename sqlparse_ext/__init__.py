"""The headwater SQL dialect (ksqlDB's SQL) on sqlglot.

Pure: no I/O. ``parse`` reads a script into typed statements (``statements.py``), ``parse_one``
one statement, ``parse_cached`` memoises ``parse_one`` by text, ``to_sql`` prints a statement
back; every failure is a :class:`ParseError` with the position in the original text. The sqlglot
dialect itself is :class:`Headwater` (registered as ``"headwater"``).
"""

from __future__ import annotations

from headwater.sqlparse_ext.api import parse, parse_cached, parse_one, parse_type, to_sql
from headwater.sqlparse_ext.dialect import Headwater
from headwater.sqlparse_ext.errors import ParseError
from headwater.sqlparse_ext.sqltypes import (
    ArrayType,
    CustomType,
    DecimalType,
    MapType,
    PrimitiveType,
    SqlType,
    StructField,
    StructType,
)
from headwater.sqlparse_ext.statements import (
    AlterSource,
    AssertSchema,
    AssertTopic,
    Column,
    CreateAsSelect,
    CreateSource,
    CreateType,
    DefineVariable,
    Describe,
    Drop,
    DropType,
    Duration,
    Explain,
    InsertInto,
    InsertValues,
    Join,
    JoinWindow,
    PauseQuery,
    Print,
    Properties,
    Query,
    ResumeQuery,
    RunScript,
    Select,
    SetProperty,
    Show,
    SourceRef,
    Statement,
    Terminate,
    UndefineVariable,
    UnsetProperty,
    Window,
)

__all__ = [
    "AlterSource", "ArrayType", "AssertSchema", "AssertTopic", "Column", "CreateAsSelect",
    "CreateSource", "CreateType", "CustomType", "DecimalType", "DefineVariable", "Describe",
    "Drop", "DropType", "Duration", "Explain", "Headwater", "InsertInto", "InsertValues",
    "Join", "JoinWindow", "MapType", "ParseError", "PauseQuery", "PrimitiveType", "Print",
    "Properties", "Query", "ResumeQuery", "RunScript", "Select", "SetProperty", "Show",
    "SourceRef", "SqlType", "Statement", "StructField", "StructType", "Terminate",
    "UndefineVariable", "UnsetProperty", "Window", "parse", "parse_cached", "parse_one", "parse_type",
    "to_sql",
]  # fmt: skip
