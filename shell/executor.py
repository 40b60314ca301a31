"""Runs statement text through the DB-API driver and yields typed results. Does I/O: the network
(only through `headwater.dbapi`) and, for RUN SCRIPT, reading the script file.

The text is split and checked locally first with `headwater.sqlparse_ext.parse` (with the
session's variables, so `${name}` works as on the server), then each statement runs in order:
- client-side statements, as ksqlDB's CLI handles them itself: SET/UNSET change the connection's
  streams properties (sent as `streamsProperties` on later requests); DEFINE/UNDEFINE change its
  session variables (sent as `sessionVariables`, substituted by the server with the same
  `sqlparse_ext` rules the local check uses); SHOW VARIABLES is answered from the session (SHOW
  PROPERTIES by the server, which merges the session's properties sent with it); RUN SCRIPT 'file'
  runs a file (relative to the working folder) the same way;
- SELECT goes to `/query`; its rows, header and `servedBy` come back as one `Rows` result
  (a push query, `EMIT CHANGES`, as a `RowStream` read while it runs); PRINT goes to `/query`
  too, its text lines coming back as a `TextStream` read while it runs;
- everything else goes to `/ksql`; each entity becomes an `Entity` result.
The first failure raises `StatementFailed` (after the results of the statements before it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headwater import dbapi
from headwater.dbapi.entities import EntityTable, entity_table
from headwater.sqlparse_ext import ParseError, parse
from headwater.sqlparse_ext import statements as st

__all__ = [
    "CATALOG_CHANGES",
    "Entity",
    "Executor",
    "Message",
    "Result",
    "RowStream",
    "Rows",
    "StatementFailed",
    "TextStream",
]

MAX_SCRIPT_DEPTH = 8
CATALOG_CHANGES = (
    st.CreateSource,
    st.CreateAsSelect,
    st.Drop,
    st.CreateType,
    st.DropType,
    st.AlterSource,
    st.Terminate,
    st.InsertInto,
)
"""Statements after which the completer's catalog names are refreshed."""


@dataclass(frozen=True, slots=True)
class Message:
    """A line of text answering a client-side statement ("Successfully changed ...")."""

    text: str


@dataclass(frozen=True, slots=True)
class Entity:
    """One `/ksql` entity, with its table view (None for kinds without one)."""

    entity: Mapping[str, Any]
    table: EntityTable | None


@dataclass(frozen=True, slots=True)
class Rows:
    """A finished `/query` answer: columns, rows, and who served which partition at what lag."""

    columns: tuple[str, ...]
    types: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    query_id: str | None = None
    served_by: tuple[dbapi.ServedBy, ...] = ()
    final_message: str | None = None
    written_by: tuple[dbapi.WrittenBy, ...] = ()


@dataclass(frozen=True, slots=True)
class RowStream:
    """A running push query: its columns and an iterator of rows (closed when left)."""

    columns: tuple[str, ...]
    types: tuple[str, ...]
    rows: Iterator[tuple[Any, ...]] = field(compare=False)
    query_id: str | None = None


@dataclass(frozen=True, slots=True)
class TextStream:
    """A running PRINT: an iterator of its text lines (closed when left)."""

    lines: Iterator[str] = field(compare=False)
    query_id: str | None = None


Result = Message | Entity | Rows | RowStream | TextStream


class StatementFailed(Exception):
    """A statement that failed, located in the text it came from.

    Attributes:
        message: the server's (or the parser's) message.
        source_name: where the text came from ("<stdin>", "<command line>", a file path).
        source_text: that whole text (to print the failing line).
        line, column: the statement's start, or the error's own position when known (1-based,
            in `source_text`).
        statement_text: the failing statement.
        error_code: ksqlDB's code, when there is one.
        has_position: the position is the error's own (a parse error), not just the statement's.
        ran_nothing: the text did not parse, so none of its statements ran.
    """

    def __init__(
        self,
        message: str,
        *,
        source_name: str,
        source_text: str,
        line: int,
        column: int,
        statement_text: str,
        error_code: int | None = None,
        has_position: bool = False,
        ran_nothing: bool = False,
    ) -> None:
        super().__init__(message)
        self.ran_nothing = ran_nothing
        self.message = message
        self.source_name = source_name
        self.source_text = source_text
        self.line = line
        self.column = column
        self.statement_text = statement_text
        self.error_code = error_code
        self.has_position = has_position


def _located(stmt: st.Statement, line: int | None, column: int | None) -> tuple[int, int, bool]:
    """An error position relative to the statement's text, made absolute in the source."""
    if line is None or column is None or line < 1 or column < 1:
        return stmt.line, stmt.column, False
    if line == 1:
        return stmt.line, stmt.column + column - 1, True
    return stmt.line + line - 1, column, True


class Executor:
    """Runs statements on one DB-API connection, keeping the session on it."""

    def __init__(self, connection: dbapi.Connection, *, cwd: Path | None = None) -> None:
        self.connection = connection
        self.cwd = cwd or Path.cwd()
        self._depth = 0

    def variables(self) -> dict[str, str]:
        """The session's variables, as text."""
        return {k: str(v) for k, v in self.connection.session_variables.items()}

    def _same_variable(self, name: str) -> list[str]:
        """The defined names equal to `name` ignoring case (variables are case-insensitive)."""
        return [k for k in self.connection.session_variables if k.upper() == name.upper()]

    def statements(self, text: str, source_name: str = "<input>") -> list[st.Statement]:
        """Split and check `text` locally.

        Raises:
            StatementFailed: it does not parse (with the parser's line and column).
        """
        try:
            return parse(text, self.variables())
        except ParseError as exc:
            raise StatementFailed(
                exc.message,
                source_name=source_name,
                source_text=text,
                line=exc.line,
                column=exc.column,
                statement_text=exc.statement_text,
                error_code=exc.error_code,
                has_position=True,
                ran_nothing=True,
            ) from exc

    def run(self, text: str, source_name: str = "<input>") -> Iterator[tuple[st.Statement, Result]]:
        """Run every statement of `text`, yielding (statement, result) pairs as they come.

        Raises:
            StatementFailed: the text does not parse (nothing runs), or a statement failed (the
                ones before it ran).
        """
        for statement in self.statements(text, source_name):
            try:
                yield from ((statement, r) for r in self._run_one(statement))
            except dbapi.Error as exc:
                line, column, exact = _located(statement, exc.line, exc.column)
                raise StatementFailed(
                    f"authentication failed: {exc.message}"
                    if isinstance(exc, dbapi.AuthorizationError)
                    else exc.message,
                    source_name=source_name,
                    source_text=text,
                    line=line,
                    column=column,
                    statement_text=statement.text,
                    error_code=exc.error_code,
                    has_position=exact and exc.error_code == 40001,
                ) from exc
            except OSError as exc:  # RUN SCRIPT: the file
                raise StatementFailed(
                    f"cannot read the script: {exc.strerror or exc}",
                    source_name=source_name,
                    source_text=text,
                    line=statement.line,
                    column=statement.column,
                    statement_text=statement.text,
                ) from exc

    # -- one statement ------------------------------------------------------------------------------

    def _run_one(self, statement: st.Statement) -> Iterator[Result]:
        conn = self.connection
        if isinstance(statement, st.SetProperty):
            old = conn.properties.get(statement.name)
            conn.set_property(statement.name, statement.value)
            was = f" from '{old}'" if old is not None else ""
            yield Message(
                f"Successfully changed local property '{statement.name}'{was} "
                f"to '{statement.value}'."
            )
        elif isinstance(statement, st.UnsetProperty):
            old = conn.properties.get(statement.name)
            conn.unset_property(statement.name)
            was = f" (value was '{old}')" if old is not None else " (it was not set)"
            yield Message(f"Successfully unset local property '{statement.name}'{was}.")
        elif isinstance(statement, st.DefineVariable):
            for same in self._same_variable(statement.name):
                conn.unset_variable(same)
            conn.set_variable(statement.name, statement.value)
        elif isinstance(statement, st.UndefineVariable):
            defined = self._same_variable(statement.name)
            if not defined:
                yield Message(f"Variable '{statement.name}' is undefined")
            for name in defined:
                conn.unset_variable(name)
        elif isinstance(statement, st.Show) and statement.what in _LOCAL_SHOWS:
            local = _LOCAL_SHOWS[statement.what](self, statement.text)
            yield Entity(local, entity_table(local))
        elif isinstance(statement, st.RunScript):
            yield from self._run_script(statement.path)
        elif isinstance(statement, st.Select):
            yield self._query(statement)
        elif isinstance(statement, st.Print):
            cursor = conn.cursor()
            try:
                cursor.execute(statement.written)
            except BaseException:
                cursor.close()
                raise
            yield TextStream(_closing_lines(cursor), cursor.query_id)
        else:
            cursor = conn.cursor()
            try:
                cursor.execute(statement.written)
                for entity in cursor.entities:
                    yield Entity(entity, entity_table(entity))
            finally:
                cursor.close()

    def query_entities(self, text: str) -> list[Mapping[str, Any]]:
        """The entities the server answers ``text`` (one statement) with, as they came."""
        cursor = self.connection.cursor()
        try:
            cursor.execute(text)
            return list(cursor.entities)
        finally:
            cursor.close()

    def _query(self, statement: st.Select) -> Rows | RowStream:
        cursor = self.connection.cursor()
        cursor.execute(statement.written)
        description = cursor.description or ()
        columns = tuple(d.name for d in description)
        types = tuple(d.type_code for d in description)
        if statement.query.emit == "CHANGES":
            return RowStream(columns, types, _closing(cursor), cursor.query_id)
        try:
            rows = tuple(cursor.fetchall())
            return Rows(
                columns,
                types,
                rows,
                cursor.query_id,
                cursor.served_by,
                cursor.final_message,
                cursor.written_by,
            )
        finally:
            cursor.close()

    def _run_script(self, path: str) -> Iterator[Result]:
        if self._depth >= MAX_SCRIPT_DEPTH:
            raise dbapi.ProgrammingError(f"RUN SCRIPT nests deeper than {MAX_SCRIPT_DEPTH} files")
        file = self.cwd / Path(path).expanduser()
        text = file.read_text(encoding="utf-8")
        self._depth += 1
        try:
            for _statement, result in self.run(text, str(path)):
                yield result
        finally:
            self._depth -= 1

    # -- answered from the session -------------------------------------------------------------------

    def _variables(self, statement_text: str) -> dict[str, Any]:
        return {
            "@type": "variables",
            "statementText": statement_text,
            "variables": [{"name": k, "value": v} for k, v in sorted(self.variables().items())],
            "warnings": [],
        }


_LOCAL_SHOWS = {"VARIABLES": Executor._variables}


def _closing(cursor: dbapi.Cursor) -> Iterator[tuple[Any, ...]]:
    """The cursor's rows, closing it when the iterator is closed or exhausted."""
    try:
        yield from cursor
    finally:
        cursor.close()


def _closing_lines(cursor: dbapi.Cursor) -> Iterator[str]:
    """PRINT's lines, closing the cursor (which ends the PRINT on the server) when left."""
    try:
        for (line,) in cursor:
            yield str(line)
    finally:
        cursor.close()
