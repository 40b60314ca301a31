"""Runs text (a REPL entry, a script, `-e` statements) and prints what comes back: results on
standard output (through a pager when interactive and bigger than the terminal), notes and errors
on standard error. Does I/O: the terminal, and the network through `Executor`.

Used alike by the REPL (`repl.py`) and by `headwater run` (`main.py`); the difference is
`interactive`: a script prints which statement failed and stops, and is never paged; at a terminal,
a statement that created a persistent query is followed until the query runs (`progress.py`).
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

import click

from headwater import dbapi
from headwater.sqlparse_ext import statements as st

from .executor import (
    CATALOG_CHANGES,
    Entity,
    Executor,
    Result,
    RowStream,
    StatementFailed,
    TextStream,
)
from .format import (
    OutputFormat,
    needs_pager,
    render,
    render_error,
    render_stream_header,
    render_stream_row,
)
from .progress import (
    FOLLOW_LIMIT_S,
    PUSH_QUIET_S,
    created_query_id,
    description_state,
    push_started_line,
    push_starting_line,
    push_state,
    started_line,
    starting_line,
)

__all__ = ["Runner"]

_FOLLOW_POLL_S = 0.5
_CLEAR_LINE = "\r\033[K"  # back to the start of the line, and clear it (a progress line)


class Runner:
    """Prints the results of text run through one `Executor`.

    Attributes:
        output: the current output format (the REPL's `output` command changes it).
    """

    def __init__(
        self,
        executor: Executor,
        output: OutputFormat,
        *,
        interactive: bool,
        pager: bool = True,
        on_statement: Callable[[st.Statement, bool], None] | None = None,
        stdout: TextIO | None = None,
        progress: bool | None = None,
    ) -> None:
        """
        Args:
            executor: runs the statements.
            output: table, json or csv.
            interactive: a person at a terminal (paging allowed; errors do not name the script).
            pager: page long or wide output (only when interactive and stdout is a terminal).
            on_statement: called after each statement that ran, with whether it changed the
                catalog (the REPL refreshes completion names then).
            stdout: where results go (click's stdout when None).
            progress: follow a query a statement created until it runs (`progress`); by
                default when interactive on a terminal.
        """
        self.executor = executor
        self.output = output
        self.interactive = interactive
        self.pager = pager
        self._on_statement = on_statement
        self._stdout = stdout
        self.progress = (interactive and sys.stderr.isatty()) if progress is None else progress

    def run(self, text: str, source_name: str = "<input>") -> bool:
        """Run every statement of `text`; False after the first failure (which is printed)."""
        last: st.Statement | None = None
        try:
            for statement, result in self.executor.run(text, source_name):
                if statement is not last and last is not None:
                    self._after(last)
                last = statement
                self._show(result)
        except StatementFailed as exc:
            click.echo(render_error(exc, script=not self.interactive), err=True)
            return False
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            return False
        finally:
            if last is not None:
                self._after(last)
        return True

    def _after(self, statement: st.Statement) -> None:
        if self._on_statement is not None:
            self._on_statement(statement, isinstance(statement, CATALOG_CHANGES))

    # -- printing -----------------------------------------------------------------------------------

    def _echo(self, text: str) -> None:
        click.echo(text, file=self._stdout)

    def _show(self, result: Result) -> None:
        if isinstance(result, RowStream):
            self._stream(result)
            return
        if isinstance(result, TextStream):
            self._print_topic(result)
            return
        rendered = render(result, self.output)
        if rendered.text:
            if self._should_page(rendered.text):
                click.echo_via_pager(rendered.text + "\n")
            else:
                self._echo(rendered.text)
        if rendered.note:
            click.echo(rendered.note, err=True)
        if self.progress and isinstance(result, Entity):
            query_id = created_query_id(result.entity)
            if query_id is not None:
                self._follow_start(query_id)

    def _follow_start(self, query_id: str) -> None:
        """One line, updated in place, while the query the last statement created starts."""
        began = time.monotonic()
        shown = False
        try:
            while True:
                try:
                    state, error = description_state(
                        self.executor.query_entities(f"EXPLAIN {query_id};")
                    )
                except dbapi.Error:
                    state, error = "", ""  # the server is busy: the next look may answer
                seconds = time.monotonic() - began
                if state == "RUNNING":
                    if shown:
                        click.echo(_CLEAR_LINE + started_line(query_id, seconds), err=True)
                    return
                if state == "ERROR":
                    click.echo(f"{_CLEAR_LINE}Query {query_id} failed to start: {error}", err=True)
                    return
                if seconds > FOLLOW_LIMIT_S:
                    click.echo(
                        f"{_CLEAR_LINE}Query {query_id} is still starting after {seconds:.0f} s; "
                        "SHOW QUERIES shows its state.",
                        err=True,
                    )
                    return
                click.echo(
                    _CLEAR_LINE + starting_line(query_id, state, seconds), err=True, nl=False
                )
                shown = True
                time.sleep(_FOLLOW_POLL_S)
        except KeyboardInterrupt:
            click.echo(
                f"{_CLEAR_LINE}Stopped waiting: query {query_id} goes on starting (SHOW QUERIES shows "
                "its state).",
                err=True,
            )

    def _should_page(self, text: str) -> bool:
        if not (self.interactive and self.pager and self._stdout is None):
            return False
        if not sys.stdout.isatty():
            return False
        size = shutil.get_terminal_size()
        return needs_pager(text, size.columns, size.lines)

    def _stream(self, result: RowStream) -> None:
        """A push query: rows printed as they arrive, until it ends or Ctrl-C; while a push query
        with state starts on Spark and no row has come, a line says so (`progress`)."""
        header = render_stream_header(result, self.output)
        if header:
            self._echo(header)
        watch = None
        if self.progress and result.query_id:
            watch = _PushStartWatch(self.executor, result.query_id)
            watch.start()
        try:
            for row in result.rows:
                if watch is not None:
                    watch.first_row()
                    watch = None
                self._echo(render_stream_row(result, row, self.output))
        except KeyboardInterrupt:
            click.echo(_CLEAR_LINE + "Query terminated", err=True)
        except dbapi.Error as exc:
            click.echo(f"{_CLEAR_LINE}Error: {exc.message}", err=True)
        finally:
            if watch is not None:
                watch.first_row()
            close = getattr(result.rows, "close", None)
            if close is not None:
                close()

    def _print_topic(self, result: TextStream) -> None:
        """PRINT: its lines as they arrive (whatever the output format), until it ends or
        Ctrl-C; then "Topic printing ceased", as ksqlDB's CLI says."""
        try:
            for line in result.lines:
                self._echo(line)
        except KeyboardInterrupt:
            pass
        except dbapi.Error as exc:
            click.echo(f"Error: {exc.message}", err=True)
        finally:
            close = getattr(result.lines, "close", None)
            if close is not None:
                close()
        click.echo("Topic printing ceased", err=True)


class _PushStartWatch(threading.Thread):
    """Says what a push query waits for while it starts on Spark and no row has come (see
    `progress`). The rows are read on the caller's thread (Ctrl-C lands there); this thread only
    looks the query up and writes one line to stderr, which `first_row` clears."""

    def __init__(self, executor: Executor, query_id: str) -> None:
        super().__init__(name="push-start-watch", daemon=True)
        self._executor = executor
        self._query_id = query_id
        self._began = time.monotonic()
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._shown = False

    def first_row(self) -> None:
        """A row came (or the query ended): stop, and clear the line if one is shown."""
        with self._lock:
            self._done.set()
            if self._shown:
                click.echo(_CLEAR_LINE, err=True, nl=False)
                self._shown = False

    def run(self) -> None:
        if self._done.wait(PUSH_QUIET_S):
            return
        while not self._done.is_set():
            try:
                state = push_state(self._executor.query_entities("SHOW QUERIES;"), self._query_id)
            except dbapi.Error:
                state = "?"  # the server is busy: the next look may answer
            seconds = time.monotonic() - self._began
            with self._lock:
                if self._done.is_set():
                    return
                if state in ("", "RUNNING") or seconds > FOLLOW_LIMIT_S:
                    if self._shown and state == "RUNNING":
                        click.echo(
                            _CLEAR_LINE + push_started_line(self._query_id, seconds), err=True
                        )
                    elif self._shown:
                        click.echo(_CLEAR_LINE, err=True, nl=False)
                    self._shown = False
                    return
                if state == "ERROR":
                    click.echo(
                        f"{_CLEAR_LINE}Push query {self._query_id} failed to start on Spark "
                        "(the server's log says why); it ends when you press Ctrl-C",
                        err=True,
                    )
                    self._shown = False
                    return
                if state != "?" or self._shown:
                    text = push_starting_line(self._query_id, seconds)
                    click.echo(_CLEAR_LINE + text, err=True, nl=False)
                    self._shown = True
            self._done.wait(_FOLLOW_POLL_S)
