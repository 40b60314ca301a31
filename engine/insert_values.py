"""INSERT VALUES: the record a statement writes, its values coerced to the columns' types. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from headwater.engine._format import format_expression
from headwater.engine._scope import Scope, UnresolvedColumn, resolve_type
from headwater.engine.errors import ExpressionError, StatementPrepareError
from headwater.engine.expressions import compile_expression
from headwater.engine.functions.casts import parse_string
from headwater.engine.functions.types import (
    BIGINT,
    DOUBLE,
    INTEGER,
    NULL,
    STRING,
    TEMPORAL,
    EvalFailure,
    fit_decimal,
    is_numeric,
)
from headwater.metastore.catalog import Source
from headwater.sqlparse_ext.sqltypes import (
    ArrayType,
    DecimalType,
    MapType,
    SqlType,
    StructType,
)
from headwater.sqlparse_ext.statements import InsertValues


@dataclass(frozen=True, slots=True)
class InsertRecord:
    """The record an INSERT VALUES statement writes.

    Attributes:
        key: the key columns' values, in key-column order (None for a column not given).
        value: every value column by name, in schema order (None for a column not given).
        rowtime: the ``ROWTIME`` given, or None (the producer then uses the current time).
    """

    key: tuple[Any, ...]
    value: dict[str, Any]
    rowtime: int | None


_NOT_INSERTABLE = ("ROWPARTITION", "ROWOFFSET", "WINDOWSTART", "WINDOWEND")


def coerce_value(value: Any, source: SqlType, target: SqlType, column: str, shown: str = "") -> Any:
    """A value of type ``source`` as a value of the column type ``target`` (INSERT VALUES rules).

    INTEGER widens to BIGINT, DECIMAL and DOUBLE; BIGINT to DECIMAL and DOUBLE; DECIMAL to DOUBLE
    and to a DECIMAL that holds it exactly; a STRING parses as DECIMAL, DATE, TIME or TIMESTAMP;
    ARRAY, MAP and STRUCT convert element by element (missing STRUCT fields are NULL, fields the
    column's STRUCT lacks are dropped).

    Raises:
        ExpressionError: ``Expected type T for field C but got v(S)`` when the types do not fit.
    """

    def mismatch() -> ExpressionError:
        return ExpressionError(
            f"Expected type {target} for field {column} but got "
            f"{shown if shown else repr(value)}({source})"
        )

    if value is None or source == NULL:
        return None
    try:
        if source == target and not isinstance(target, DecimalType):
            return value
        if is_numeric(source) and is_numeric(target):
            widens = (
                target == DOUBLE
                or source == INTEGER
                and target == BIGINT
                or (isinstance(target, DecimalType) and source != DOUBLE)
            )
            if not widens:
                raise mismatch()
            if target == DOUBLE:
                return float(value)
            if isinstance(target, DecimalType):
                fitted = fit_decimal(Decimal(value), target)
                if fitted != value:
                    raise mismatch()
                return fitted
            return value
        if source == STRING and (isinstance(target, DecimalType) or target in TEMPORAL):
            return parse_string(value, target)
        if isinstance(source, ArrayType) and isinstance(target, ArrayType):
            return [coerce_value(v, source.element, target.element, column) for v in value]
        if isinstance(source, MapType) and isinstance(target, MapType):
            return {
                coerce_value(k, source.key, target.key, column): coerce_value(
                    v, source.value, target.value, column
                )
                for k, v in value.items()
            }
        if isinstance(source, StructType) and isinstance(target, StructType):
            # ksqlDB's DefaultSqlValueCoercer.coerceToStruct: the target's fields, by name; a
            # field the target lacks is dropped, one the value lacks is NULL
            given = {f.name: f.type for f in source.fields}
            return {
                f.name: coerce_value(
                    value.get(f.name), given.get(f.name, NULL), f.type, f"{column}->{f.name}"
                )
                for f in target.fields
            }
    except EvalFailure as error:
        raise ExpressionError(str(error)) from error
    raise mismatch()


def evaluate_insert_values(
    statement: InsertValues, source: Source, custom_types: Mapping[str, Any]
) -> InsertRecord:
    """The record of ``INSERT INTO target [(columns)] VALUES (values)``.

    Without a column list the values are for every column, key columns first, then the value
    columns. ``ROWTIME`` may be listed (it is returned apart); ``ROWPARTITION``/``ROWOFFSET`` and
    header columns may not. A table needs every key column.

    Args:
        statement: the parsed ``InsertValues``.
        source: the target ``metastore.catalog.Source``.
        custom_types: for column types that name a custom type (see `resolve_type`).

    Raises:
        ExpressionError: With ksqlDB's message when the statement does not fit the source.
    """
    name = source.name
    kind = source.kind.value.lower()
    if source.read_only:
        raise ExpressionError(f"Cannot insert values into read-only {kind}: {name}")
    by_name = {c.name: c for c in source.columns}
    texts = [format_expression(v) for v in statement.values]
    if statement.columns:
        columns = list(statement.columns)
        if len(columns) != len(statement.values):
            raise StatementPrepareError(
                "Expected number columns and values to match: "
                f"{len(columns)}, {len(statement.values)}"
            )
    else:
        columns = [c.name for c in source.key_columns] + [
            c.name for c in source.columns if not c.key
        ]
        if len(columns) != len(statement.values):
            expected = ", ".join(f"`{c}`" for c in columns)
            raise ExpressionError(
                f"Failed to insert values into '{name}'. Expected a value for "
                f"each column. Expected Columns: [{expected}]. "
                f"Got [{', '.join(texts)}]"
            )
    for column in columns:
        if column in _NOT_INSERTABLE:
            raise ExpressionError(f"Inserting into column `{column}` is not allowed.")
        if column != "ROWTIME" and column not in by_name:
            raise ExpressionError(f"Column name `{column}` does not exist.")
    headers = [
        c for c in columns if c in by_name and not by_name[c].key and not by_name[c].in_value
    ]
    if headers:
        raise ExpressionError(f"Cannot insert into HEADER columns: {', '.join(headers)}")
    scope = Scope({}, frozenset(), custom_types)
    given: dict[str, Any] = {}
    try:
        for column, node, text in zip(columns, statement.values, texts, strict=True):
            compiled = compile_expression(node, scope)
            target = (
                BIGINT if column == "ROWTIME" else resolve_type(by_name[column].type, custom_types)
            )
            given[column] = coerce_value(compiled.evaluate({}), compiled.type, target, column, text)
    except UnresolvedColumn:
        raise
    except ExpressionError as error:
        if "is not a valid stream/table name or alias" in error.message:  # a column reference
            raise StatementPrepareError(error.message) from error
        raise ExpressionError(f"Failed to insert values into '{name}'. {error.message}") from error
    key = tuple(given.get(c.name) for c in source.key_columns)
    missing = [c.name for c, v in zip(source.key_columns, key, strict=True) if v is None]
    if kind == "table" and missing:
        raise ExpressionError(
            f"Failed to insert values into '{name}'. Value for primary key "
            f"column(s) {', '.join(missing)} is required for tables"
        )
    value = {c.name: given.get(c.name) for c in source.value_columns}
    return InsertRecord(key, value, given.get("ROWTIME"))
