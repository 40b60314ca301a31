"""The typed AST: one frozen dataclass per statement family, with named fields.

Pure: no I/O. Later layers read these fields and never re-parse text. Every statement keeps
its source ``text``, its position in the script (``line``, ``column``, ``offset`` of its start)
and the sqlglot ``expression`` it was built from (what ``to_sql`` prints). Positions, text and
the expression do not take part in equality: two statements are equal when their typed fields
are, which is what the round trip ``parse(to_sql(s)) == s`` checks. Names follow ksqlDB's rule:
unquoted names are upper-cased, quoted names are kept as written.

The sqlglot expressions held here (``Query.expression``, ``InsertValues.values``, ...) are shared
with the parse cache: copy them (``.copy()``) before changing them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from sqlglot import exp

from headwater.sqlparse_ext.sqltypes import SqlType

PropertyValue = str | int | float | bool | None
SourceKind = Literal["STREAM", "TABLE"]


class Properties(Mapping[str, PropertyValue]):
    """A read-only ``WITH (...)`` list: name -> typed value, looked up case-insensitively.

    Names are upper-cased when written as plain words and kept as written when dotted
    (``acceptable.offset.lag``) or quoted; iteration yields them in that form and order.
    """

    __slots__ = ("_index", "_items")

    def __init__(self, items: tuple[tuple[str, PropertyValue], ...] = ()) -> None:
        self._items = items
        self._index = {name.upper(): value for name, value in items}

    def __getitem__(self, name: str) -> PropertyValue:
        return self._index[name.upper()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.upper() in self._index

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Properties):
            return self._items == other._items
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    def __hash__(self) -> int:
        return hash(self._items)

    def __repr__(self) -> str:
        return f"Properties({dict(self._items)!r})"


@dataclass(frozen=True, slots=True)
class Duration:
    """``10 SECONDS``: an amount and ksqlDB's unit word (upper-cased, as written)."""

    amount: int
    unit: str

    _MS: ClassVar[dict[str, int]] = {
        "MILLISECOND": 1,
        "SECOND": 1000,
        "MINUTE": 60_000,
        "HOUR": 3_600_000,
        "DAY": 86_400_000,
    }

    @property
    def milliseconds(self) -> int:
        """The duration in milliseconds."""
        return self.amount * self._MS[self.unit.removesuffix("S")]


@dataclass(frozen=True, slots=True)
class Window:
    """A WINDOW clause; ``size`` is the gap of a SESSION window."""

    kind: Literal["TUMBLING", "HOPPING", "SESSION"]
    size: Duration
    advance: Duration | None = None
    retention: Duration | None = None
    grace: Duration | None = None


@dataclass(frozen=True, slots=True)
class SourceRef:
    """A stream or table read by a query, with its alias."""

    name: str
    alias: str | None = None


@dataclass(frozen=True, slots=True)
class JoinWindow:
    """``WITHIN d`` (before == after) or ``WITHIN (before, after)``, and the grace period."""

    before: Duration
    after: Duration
    grace: Duration | None = None


@dataclass(frozen=True, slots=True)
class Join:
    """One JOIN of a query."""

    kind: Literal["INNER", "LEFT", "RIGHT", "FULL"]
    source: SourceRef
    on: exp.Expr
    within: JoinWindow | None = None


@dataclass(frozen=True, slots=True)
class Query:
    """A SELECT: the sqlglot node plus its clauses as typed fields."""

    expression: exp.Expr
    select: tuple[exp.Expr, ...]
    source: SourceRef
    joins: tuple[Join, ...] = ()
    window: Window | None = None
    where: exp.Expr | None = None
    group_by: tuple[exp.Expr, ...] = ()
    partition_by: tuple[exp.Expr, ...] = ()
    having: exp.Expr | None = None
    emit: Literal["CHANGES", "FINAL"] | None = None
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class Column:
    """A column of CREATE STREAM/TABLE or ALTER ... ADD COLUMN."""

    name: str
    type: SqlType
    key: bool = False
    primary_key: bool = False
    headers: bool = False
    header_key: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Statement:
    """Fields every statement has."""

    text: str = field(compare=False)  # as parsed: ${...} substituted, parameters bound
    line: int = field(compare=False)
    column: int = field(compare=False)
    offset: int = field(compare=False)
    expression: exp.Expr = field(compare=False, repr=False)
    written: str = field(default="", compare=False, repr=False)  # as written (before either)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateSource(Statement):
    """CREATE [OR REPLACE] [SOURCE] STREAM|TABLE [IF NOT EXISTS] name [(columns)] [WITH]."""

    kind: SourceKind
    name: str
    columns: tuple[Column, ...]
    properties: Properties
    or_replace: bool = False
    if_not_exists: bool = False
    source: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateAsSelect(Statement):
    """CREATE [OR REPLACE] STREAM|TABLE [IF NOT EXISTS] name [WITH (...)] AS SELECT."""

    kind: SourceKind
    name: str
    query: Query
    properties: Properties
    or_replace: bool = False
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class InsertInto(Statement):
    """INSERT INTO target [WITH (...)] SELECT ..."""

    target: str
    query: Query
    properties: Properties


@dataclass(frozen=True, slots=True, kw_only=True)
class InsertValues(Statement):
    """INSERT INTO target [(columns)] VALUES (values)."""

    target: str
    columns: tuple[str, ...]
    values: tuple[exp.Expr, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Select(Statement):
    """A push or pull query."""

    query: Query


@dataclass(frozen=True, slots=True, kw_only=True)
class Drop(Statement):
    """DROP STREAM|TABLE [IF EXISTS] name [DELETE TOPIC]."""

    kind: SourceKind
    name: str
    if_exists: bool = False
    delete_topic: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DropType(Statement):
    """DROP TYPE [IF EXISTS] name."""

    name: str
    if_exists: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterSource(Statement):
    """ALTER STREAM|TABLE name ADD COLUMN ..."""

    kind: SourceKind
    name: str
    columns: tuple[Column, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateType(Statement):
    """CREATE TYPE [IF NOT EXISTS] name AS type."""

    name: str
    type: SqlType
    if_not_exists: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryControl(Statement):
    """A statement acting on one running query, or on all of them (``query_id`` None)."""

    query_id: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Terminate(QueryControl):
    """TERMINATE query_id | ALL."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PauseQuery(QueryControl):
    """PAUSE query_id | ALL."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeQuery(QueryControl):
    """RESUME query_id | ALL."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Show(Statement):
    """SHOW|LIST what [EXTENDED]; ``what`` e.g. "STREAMS", "ALL TOPICS", "SINK CONNECTORS"."""

    what: str
    extended: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Describe(Statement):
    """DESCRIBE name [EXTENDED] | DESCRIBE STREAMS|TABLES [EXTENDED] | DESCRIBE FUNCTION name."""

    what: Literal["SOURCE", "STREAMS", "TABLES", "FUNCTION", "CONNECTOR"]
    name: str | None
    extended: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Explain(Statement):
    """EXPLAIN query_id | EXPLAIN statement (exactly one of the two is set)."""

    query_id: str | None
    statement: Statement | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Print(Statement):
    """PRINT topic [FROM BEGINNING] [INTERVAL n] [LIMIT n]; the topic is kept as written."""

    topic: str
    from_beginning: bool = False
    interval: int | None = None
    limit: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SetProperty(Statement):
    """SET 'name' = 'value'."""

    name: str
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UnsetProperty(Statement):
    """UNSET 'name'."""

    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DefineVariable(Statement):
    """DEFINE name = 'value' (the name as written; variables are looked up case-insensitively)."""

    name: str
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class UndefineVariable(Statement):
    """UNDEFINE name."""

    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunScript(Statement):
    """RUN SCRIPT 'path'."""

    path: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AssertTopic(Statement):
    """ASSERT [NOT EXISTS] TOPIC name [WITH (...)] [TIMEOUT d]."""

    topic: str
    exists: bool
    properties: Properties
    timeout: Duration | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AssertSchema(Statement):
    """ASSERT [NOT EXISTS] SCHEMA [SUBJECT name] [ID n] [TIMEOUT d]."""

    subject: str | None
    schema_id: int | None
    exists: bool
    timeout: Duration | None = None
