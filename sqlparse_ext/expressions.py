"""The sqlglot expression nodes that ksqlDB's SQL adds; one class each, no logic.

Pure: no I/O. The generator prints each node through ``generator.Generator.TRANSFORMS``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlglot import exp


class KsqlSelect(exp.Select):
    """A ksqlDB query: a SELECT plus WINDOW, PARTITION BY and EMIT."""

    arg_types: ClassVar[dict[str, Any]] = {
        **exp.Select.arg_types,
        "window": False,
        "partition": False,
        "emit": False,
    }


class KsqlJoin(exp.Join):
    """A join with an optional ``WITHIN`` window (stream-stream joins)."""

    arg_types: ClassVar[dict[str, Any]] = {**exp.Join.arg_types, "within": False}


class Duration(exp.Expression):
    """``n UNIT`` such as ``10 SECONDS``; ``unit`` keeps the unit word as written, upper-cased."""

    arg_types: ClassVar[dict[str, Any]] = {"this": True, "unit": True}


class TumblingWindow(exp.Expression):
    """``[name] TUMBLING (SIZE d [, RETENTION d] [, GRACE PERIOD d])``."""

    arg_types: ClassVar[dict[str, Any]] = {
        "size": True,
        "retention": False,
        "grace": False,
        "name": False,
    }


class HoppingWindow(exp.Expression):
    """``[name] HOPPING (SIZE d, ADVANCE BY d [, RETENTION d] [, GRACE PERIOD d])``."""

    arg_types: ClassVar[dict[str, Any]] = {
        "size": True,
        "advance": True,
        "retention": False,
        "grace": False,
        "name": False,
    }


class SessionWindow(exp.Expression):
    """``[name] SESSION (d [, RETENTION d] [, GRACE PERIOD d])``."""

    arg_types: ClassVar[dict[str, Any]] = {
        "gap": True,
        "retention": False,
        "grace": False,
        "name": False,
    }


class Within(exp.Expression):
    """``WITHIN d`` or ``WITHIN (before, after)`` with an optional ``GRACE PERIOD d``."""

    arg_types: ClassVar[dict[str, Any]] = {"before": True, "after": False, "grace": False}


class PartitionBy(exp.Expression):
    """``PARTITION BY e, ...`` of a query."""

    arg_types: ClassVar[dict[str, Any]] = {"expressions": True}


class Emit(exp.Expression):
    """``EMIT CHANGES`` or ``EMIT FINAL``; ``this`` is the word."""

    arg_types: ClassVar[dict[str, Any]] = {"this": True}


class StructDeref(exp.Expression):
    """``base->field`` (``expression`` is an Identifier, or a Star for ``base->*``)."""

    arg_types: ClassVar[dict[str, Any]] = {"this": True, "expression": True}


class MapConstructor(exp.Expression):
    """``MAP(k := v, ...)``; ``expressions`` are PropertyEQ nodes."""

    arg_types: ClassVar[dict[str, Any]] = {"expressions": False}


class StructConstructor(exp.Expression):
    """``STRUCT(name := v, ...)``; ``expressions`` are PropertyEQ nodes with Identifier keys."""

    arg_types: ClassVar[dict[str, Any]] = {"expressions": False}


class ArrayConstructor(exp.Expression):
    """``ARRAY[e, ...]``."""

    arg_types: ClassVar[dict[str, Any]] = {"expressions": False}


class TableProperty(exp.Expression):
    """One ``name = literal`` of a ``WITH (...)`` list; ``this`` is an Identifier or a string."""

    arg_types: ClassVar[dict[str, Any]] = {"this": True, "value": True}


class TableProperties(exp.Expression):
    """A ``WITH (...)`` property list."""

    arg_types: ClassVar[dict[str, Any]] = {"expressions": True}


class KeyConstraint(exp.Expression):
    """Column constraint ``KEY`` (streams) or ``PRIMARY KEY`` (``primary``, tables)."""

    arg_types: ClassVar[dict[str, Any]] = {"primary": False}


class HeadersConstraint(exp.Expression):
    """Column constraint ``HEADERS`` or ``HEADER('key')`` (``this`` is the key string)."""

    arg_types: ClassVar[dict[str, Any]] = {"this": False}


class CreateSource(exp.Expression):
    """``CREATE [OR REPLACE] [SOURCE] STREAM|TABLE [IF NOT EXISTS] name [(cols)] [WITH (...)]``."""

    arg_types: ClassVar[dict[str, Any]] = {
        "this": True,
        "kind": True,
        "expressions": False,
        "properties": False,
        "replace": False,
        "exists": False,
        "source": False,
    }


class CreateAsSelect(exp.Expression):
    """``CREATE [OR REPLACE] STREAM|TABLE [IF NOT EXISTS] name [WITH (...)] AS query``."""

    arg_types: ClassVar[dict[str, Any]] = {
        "this": True,
        "kind": True,
        "expression": True,
        "properties": False,
        "replace": False,
        "exists": False,
    }


class InsertSelect(exp.Expression):
    """``INSERT INTO name [WITH (...)] query``."""

    arg_types: ClassVar[dict[str, Any]] = {"this": True, "expression": True, "properties": False}


class InsertValues(exp.Expression):
    """``INSERT INTO name [(cols)] VALUES (e, ...)``."""

    arg_types: ClassVar[dict[str, Any]] = {"this": True, "columns": False, "expressions": False}


class DropObject(exp.Expression):
    """``DROP STREAM|TABLE|TYPE [IF EXISTS] name [DELETE TOPIC]``."""

    arg_types: ClassVar[dict[str, Any]] = {
        "this": True,
        "kind": True,
        "exists": False,
        "delete_topic": False,
    }


class AlterSource(exp.Expression):
    """``ALTER STREAM|TABLE name ADD [COLUMN] col type, ...``; ``expressions`` are ColumnDefs."""

    arg_types: ClassVar[dict[str, Any]] = {"this": True, "kind": True, "expressions": True}


class CreateType(exp.Expression):
    """``CREATE TYPE [IF NOT EXISTS] name AS type``."""

    arg_types: ClassVar[dict[str, Any]] = {"this": True, "kind": True, "exists": False}


class QueryControl(exp.Expression):
    """``TERMINATE|PAUSE|RESUME query_id|ALL``; ``this`` is the verb, ``expression`` the target."""

    arg_types: ClassVar[dict[str, Any]] = {"this": True, "expression": False, "all": False}


class ShowObjects(exp.Expression):
    """``SHOW|LIST what [EXTENDED]``; ``this`` is the object words, ``verb`` SHOW or LIST."""

    arg_types: ClassVar[dict[str, Any]] = {"this": True, "verb": True, "extended": False}


class DescribeObject(exp.Expression):
    """``DESCRIBE [FUNCTION|CONNECTOR] name [EXTENDED]`` / ``DESCRIBE STREAMS|TABLES``."""

    arg_types: ClassVar[dict[str, Any]] = {"this": False, "kind": False, "extended": False}


class ExplainStatement(exp.Expression):
    """``EXPLAIN query_id`` (``this``) or ``EXPLAIN statement`` (``expression``)."""

    arg_types: ClassVar[dict[str, Any]] = {"this": False, "expression": False}


class PrintTopic(exp.Expression):
    """``PRINT topic [FROM BEGINNING] [INTERVAL|SAMPLE n] [LIMIT n]``."""

    arg_types: ClassVar[dict[str, Any]] = {
        "this": True,
        "from_beginning": False,
        "interval": False,
        "limit": False,
    }


class SetProperty(exp.Expression):
    """``SET 'name' = 'value'``."""

    arg_types: ClassVar[dict[str, Any]] = {"this": True, "expression": True}


class UnsetProperty(exp.Expression):
    """``UNSET 'name'``."""

    arg_types: ClassVar[dict[str, Any]] = {"this": True}


class DefineVariable(exp.Expression):
    """``DEFINE name = 'value'``."""

    arg_types: ClassVar[dict[str, Any]] = {"this": True, "expression": True}


class UndefineVariable(exp.Expression):
    """``UNDEFINE name``."""

    arg_types: ClassVar[dict[str, Any]] = {"this": True}


class RunScript(exp.Expression):
    """``RUN SCRIPT 'path'``."""

    arg_types: ClassVar[dict[str, Any]] = {"this": True}


class AssertTopic(exp.Expression):
    """``ASSERT [NOT EXISTS] TOPIC name [WITH (...)] [TIMEOUT d]``."""

    arg_types: ClassVar[dict[str, Any]] = {
        "this": True,
        "not_exists": False,
        "properties": False,
        "timeout": False,
    }


class AssertSchema(exp.Expression):
    """``ASSERT [NOT EXISTS] SCHEMA [SUBJECT name] [ID n] [TIMEOUT d]``."""

    arg_types: ClassVar[dict[str, Any]] = {
        "subject": False,
        "id": False,
        "not_exists": False,
        "timeout": False,
    }
