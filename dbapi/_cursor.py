"""The PEP 249 cursor. Does I/O through its connection's transport; keeps all iteration state
(the current result set, rows already read but not yet fetched) on itself, so a fetch that fails
part-way loses nothing already received.

A push query (`SELECT ... EMIT CHANGES`) and PRINT are read lazily, with no read timeout: execute
returns once the server has answered (the header, for a push query), each fetch reads only as many
rows as it returns (waiting for them to arrive), and closing the cursor (or its connection, or
executing another statement on it) ends the query on the server: `POST /close-query` to the server
that runs it, then the connection is dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, Self

from headwater.sqlparse_ext.params import ParameterError, bind, leading_keyword, to_json

from ._errors import Error, InterfaceError, ProgrammingError, Warning
from ._http import HttpTransport, Streamed
from ._results import (
    ColumnDescription,
    LinesResult,
    QueryResult,
    ResultSet,
    ServedBy,
    TableResult,
    WrittenBy,
)
from .entities import entity_table

__all__ = ["Cursor"]

Row = tuple[Any, ...]


class Connection(Protocol):
    """What a cursor uses of its connection (`_connection.Connection`; declared here so that the
    connection module imports this one and not the other way round)."""

    _transport: HttpTransport

    @property
    def closed(self) -> bool: ...

    @property
    def session_variables(self) -> Mapping[str, Any]: ...

    def _request_body(self, sql: str, parameters: list[Any] | None = None) -> dict[str, Any]: ...

    def _note_entities(self, entities: Iterable[Mapping[str, Any]]) -> None: ...

    def _note_written(self, items: Iterable[Any]) -> None: ...

    def set_variable(self, name: str, value: Any) -> None: ...

    def unset_variable(self, name: str) -> None: ...


WRITTEN_HEADER = "Headwater-Written-Offsets"
"""Where `/ksql`'s INSERT ... VALUES rows landed (its entities do not say: ksqlDB answers none)."""


def _written(header: str | None) -> list[Any]:
    """The items of the `WRITTEN_HEADER` (none when it is missing or malformed)."""
    if not header:
        return []
    try:
        items = json.loads(header)
    except ValueError:
        return []
    return items if isinstance(items, list) else []


_VARIABLE_WORDS = re.compile(r"\b(?:UN)?DEFINE\b", re.IGNORECASE)


def _keep_variables(
    connection: Connection, operation: str, parameters: Sequence[Any] | None
) -> None:
    """Apply the operation's DEFINE/UNDEFINE statements to the connection's session (the server
    applies them for the rest of one request only, as ksqlDB does; a session keeps them, as
    ksqlDB's CLI does), so later statements of this connection see the variables."""
    if not _VARIABLE_WORDS.search(operation):
        return
    from headwater.sqlparse_ext import ParseError, parse
    from headwater.sqlparse_ext import statements as st

    variables = {
        k: v if isinstance(v, str) else str(v) for k, v in connection.session_variables.items()
    }
    try:
        statements = parse(operation, variables, parameters=parameters)
    except ParseError:  # the server ran it, so this cannot happen but with a stale variable
        return
    for statement in statements:
        if isinstance(statement, st.DefineVariable | st.UndefineVariable):
            for same in [
                k for k in connection.session_variables if k.upper() == statement.name.upper()
            ]:
                connection.unset_variable(same)
        if isinstance(statement, st.DefineVariable):
            connection.set_variable(statement.name, statement.value)


class Cursor:
    """A cursor over one connection: runs statements and fetches their rows.

    SELECT statements (the first keyword after comments) go to `/query`; every other statement to
    `/ksql`, whose entities become tables (see `entities.py`), one result set per statement
    (`nextset()` moves on). Besides PEP 249's attributes a cursor exposes `entity`/`entities` (the
    raw `/ksql` answer), `query_id`, `served_by`, `extras` and `final_message` (of a `/query`).
    """

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self.arraysize: int = 1
        """PEP 249: "the number of rows to fetch at a time with .fetchmany()". Default 1."""
        self.messages: list[tuple[type[Exception], str]] = []
        """PEP 249 extension: warnings the server attached to the last statement."""
        self.lastrowid: None = None
        """PEP 249 extension: ksqlDB has no row ids, so always None."""
        self.entities: tuple[Mapping[str, Any], ...] = ()
        self._results: list[ResultSet] = []
        self._pending: list[Row] = []
        self._stalled = False
        self._rowcount_total: int | None = None
        self._closed = False
        self._running: tuple[Streamed, QueryResult | LinesResult] | None = None

    # -- PEP 249 attributes ------------------------------------------------------------------------

    @property
    def connection(self) -> Connection:
        """PEP 249 extension: "the Connection object on which the cursor was created"."""
        return self._connection

    @property
    def description(self) -> tuple[ColumnDescription, ...] | None:
        """PEP 249: "a sequence of 7-item sequences" (name, type_code, display_size, internal_size,
        precision, scale, null_ok), or None "for operations that do not return rows".

        type_code is the ksqlDB type string ("BIGINT", "DECIMAL(10, 2)", "ARRAY<STRING>"); compare
        it with the type objects (`NUMBER`, `STRING`, ...). DECIMAL columns fill precision/scale.
        """
        return self._results[0].description if self._results else None

    @property
    def rowcount(self) -> int:
        """PEP 249: "the number of rows that the last .execute*() produced"; -1 "in case no
        .execute*() has been performed on the cursor or the rowcount of the last operation cannot
        be determined". A `/query` result's count is known once all its rows are read."""
        if self._rowcount_total is not None:
            return self._rowcount_total
        return self._results[0].rowcount if self._results else -1

    # -- headwater extensions ----------------------------------------------------------------------

    @property
    def entity(self) -> Mapping[str, Any] | None:
        """The raw `/ksql` entity of the current result set (None for a `/query` result)."""
        current = self._results[0] if self._results else None
        return current.entity if isinstance(current, TableResult) else None

    def _query(self) -> QueryResult | None:
        current = self._results[0] if self._results else None
        return current if isinstance(current, QueryResult) else None

    @property
    def query_id(self) -> str | None:
        """The queryId of the current `/query` header (for PRINT, the id the server gave it)."""
        current = self._results[0] if self._results else None
        if isinstance(current, QueryResult | LinesResult):
            return current.query_id
        return None

    @property
    def served_by(self) -> tuple[ServedBy, ...]:
        """Per partition, which server answered the pull query, at what position and lag
        (headwater's `servedBy`, from the answer's header)."""
        query = self._query()
        return query.served_by if query else ()

    @property
    def written_by(self) -> tuple[WrittenBy, ...]:
        """The persistent queries writing the table the pull query read, each with its state
        and lag (headwater's `writtenBy`): the answer is only as fresh as they are."""
        query = self._query()
        return query.written_by if query else ()

    @property
    def extras(self) -> tuple[Any, ...]:
        """Items of the `/query` answer of kinds the driver does not know, as they came."""
        query = self._query()
        return tuple(query.extras) if query else ()

    @property
    def final_message(self) -> str | None:
        """The `/query` answer's finalMessage, once read."""
        query = self._query()
        return query.final_message if query else None

    # -- PEP 249 methods ---------------------------------------------------------------------------

    def close(self) -> None:
        """PEP 249: "Close the cursor now (rather than whenever __del__ is called)"; afterwards
        "an Error (or subclass) exception will be raised if any operation is attempted"."""
        self._discard()
        self._closed = True

    def execute(self, operation: str, parameters: Sequence[Any] | None = None) -> Cursor:
        """PEP 249: "Prepare and execute a database operation (query or command)"; "parameters may
        be provided as sequence" and "will be bound to variables in the operation" (qmark `?`).

        Args:
            operation: one statement, or (for `/ksql`) several separated by `;`.
            parameters: one value per `?` placeholder; None binds nothing.

        Returns:
            This cursor (a common extension), so `cur.execute(...).fetchall()` works.

        Raises:
            ProgrammingError: bad parameters or an invalid statement; OperationalError when no
                server answers; other PEP 249 errors as the server reports them.
        """
        self._check_open()
        self._discard()
        self._rowcount_total = None
        bound = self._parameters(operation, parameters)
        sql = operation
        connection = self._connection
        body = connection._request_body(sql, bound)
        keyword = leading_keyword(sql)
        if keyword == "SELECT":
            push = _emits_changes(sql, connection.session_variables, parameters)
            items = connection._transport.stream_items("/query", body, follow=push)
            result = QueryResult(items)
            self._results = [result]
            if push:
                self._running = (items, result)
            return self
        if keyword == "PRINT":
            lines = connection._transport.stream_lines("/query", body)
            printed = LinesResult(lines, lines.headers.get("x-query-id"))
            self._results = [printed]
            self._running = (lines, printed)
            return self
        try:
            answer, headers = connection._transport.request_json_with_headers(
                "POST", "/ksql", body, idempotent=False
            )
        except Error as exc:
            connection._note_entities(exc.entities)
            raise
        if not isinstance(answer, list) or not all(isinstance(e, Mapping) for e in answer):
            raise InterfaceError(f"the /ksql answer is not a list of entities: {answer!r:.200}")
        connection._note_entities(answer)
        connection._note_written(_written(headers.get(WRITTEN_HEADER)))
        _keep_variables(connection, operation, parameters)
        self.entities = tuple(answer)
        self._results = [TableResult(e, entity_table(e)) for e in answer]
        self.messages = [
            (Warning, str(w.get("message")))
            for e in answer
            for w in e.get("warnings") or []
            if isinstance(w, Mapping)
        ]
        return self

    def executemany(self, operation: str, seq_of_parameters: Sequence[Sequence[Any]]) -> None:
        """PEP 249: "Prepare a database operation (query or command) and then execute it against
        all parameter sequences or mappings found in the sequence seq_of_parameters".

        The result sets of the last execution stay on the cursor; rowcount is the sum of the
        executions' counts, or -1 if one of them is unknown.
        """
        total = 0
        for parameters in seq_of_parameters:
            self.execute(operation, parameters)
            count = self.rowcount
            total = -1 if count < 0 or total < 0 else total + count
        self._rowcount_total = total

    def fetchone(self) -> Row | None:
        """PEP 249: "Fetch the next row of a query result set, returning a single sequence, or None
        when no more data is available"."""
        rows = self._fetch(1)
        return rows[0] if rows else None

    def fetchmany(self, size: int | None = None) -> list[Row]:
        """PEP 249: "Fetch the next set of rows of a query result, returning a sequence of
        sequences"; "the number of rows to fetch per call is specified by the parameter. If it is
        not given, the cursor's arraysize determines the number of rows to be fetched"."""
        return self._fetch(self.arraysize if size is None else size)

    def fetchall(self) -> list[Row]:
        """PEP 249: "Fetch all (remaining) rows of a query result, returning them as a sequence of
        sequences"."""
        return self._fetch(None)

    def nextset(self) -> bool | None:
        """PEP 249: "make the cursor skip to the next available set, discarding any remaining rows
        from the current set. If there are no more sets, the method returns None"."""
        self._check_open()
        if not self._results:
            raise ProgrammingError("no result set: execute a statement first")
        if self._running is not None and self._running[1] is self._results[0]:
            self._end_running()
        self._results.pop(0).close()
        self._pending.clear()
        self._stalled = False
        return True if self._results else None

    def setinputsizes(self, sizes: Sequence[Any]) -> None:
        """PEP 249: "Implementations are free to have this method do nothing". It does nothing."""

    def setoutputsize(self, size: int, column: int | None = None) -> None:
        """PEP 249: "Implementations are free to have this method do nothing". It does nothing."""

    def __iter__(self) -> Iterator[Row]:
        """PEP 249 extension: "Return self to make cursors compatible to the iteration protocol"."""
        return self

    def __next__(self) -> Row:
        """PEP 249 extension: "Return the next row from the currently executing SQL statement
        using the same semantics as .fetchone()", raising StopIteration at the end."""
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise InterfaceError("the cursor is closed")
        if self._connection.closed:
            raise InterfaceError("the connection is closed")

    def _discard(self) -> None:
        self._end_running()
        for result in self._results:
            result.close()
        self._results = []
        self._pending = []
        self._stalled = False
        self.entities = ()
        self.messages = []

    def _end_running(self) -> None:
        """End a push query or PRINT that may still run on the server: `/close-query` to its
        server (it then ends its answer), and drop the connection either way."""
        running, self._running = self._running, None
        if running is None:
            return
        stream, result = running
        if result.running and result.query_id:
            self._connection._transport.close_query(stream.server_url, result.query_id)
        result.close()

    @staticmethod
    def _parameters(operation: str, parameters: Sequence[Any] | None) -> list[Any] | None:
        """The parameters as the request carries them, apart from the text: the server binds
        them after substituting `${...}` variables, so a value is data whatever it contains."""
        if not isinstance(operation, str):
            raise ProgrammingError(f"the operation must be a str, not {type(operation).__name__}")
        if parameters is None:
            return None
        try:
            bind(operation, parameters)  # the count and every value checked before sending
            return [to_json(value) for value in parameters]
        except ParameterError as exc:
            raise ProgrammingError(str(exc)) from exc

    def _fetch(self, size: int | None) -> list[Row]:
        """Up to `size` rows (all when None): rows read stay in `_pending` if reading fails."""
        self._check_open()
        if not self._results or self._results[0].description is None:
            raise ProgrammingError("the last statement produced no result set to fetch from")
        if size is not None and size < 0:
            raise ProgrammingError(f"fetch size must be >= 0, got {size}")
        result = self._results[0]
        try:
            # After a failed read, first hand out the rows read before it, then read on (and fail).
            while not self._stalled and (size is None or len(self._pending) < size):
                row = result.next_row()
                if row is None:
                    break
                self._pending.append(row)
        except Error:
            self._stalled = bool(self._pending)
            raise
        count = len(self._pending) if size is None else size
        rows, self._pending = self._pending[:count], self._pending[count:]
        self._stalled = self._stalled and bool(self._pending)
        return rows


def _emits_changes(
    sql: str, variables: Mapping[str, Any], parameters: Sequence[Any] | None = None
) -> bool:
    """Whether `sql` is one push query (`EMIT CHANGES`), as the parser reads it (False when it
    does not parse: the server then says why)."""
    from headwater.sqlparse_ext import ParseError, parse
    from headwater.sqlparse_ext import statements as st

    try:
        statements = parse(sql, {k: str(v) for k, v in variables.items()}, parameters=parameters)
    except (ParseError, ValueError):
        return False
    return (
        len(statements) == 1
        and isinstance(statements[0], st.Select)
        and statements[0].query.emit == "CHANGES"
    )
