"""Rendering of results and errors as text: tables (as ksqlDB's CLI and pgcli print them), JSON
and CSV, the staleness footer of pull answers, and errors with a caret under the failing column.
Pure: no I/O (the caller prints, and decides on a pager with `needs_pager`).

Tables are drawn by cli_helpers (pgcli's table and CSV writer, over tabulate). `/ksql` entities
use the driver's table views (`headwater.dbapi.entities`), so the shell shows the same
headers a program gets in `cursor.description`.
"""

from __future__ import annotations

import base64
import csv
import datetime
import decimal
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cli_helpers.tabular_output import TabularOutputFormatter

from headwater import dbapi
from headwater.sqlparse_ext.sqltypes import format_double

from .config import OutputFormat
from .executor import Entity, Message, Result, Rows, RowStream, StatementFailed

__all__ = [
    "OutputFormat",
    "Rendered",
    "cell",
    "needs_pager",
    "render",
    "render_error",
    "render_stream_header",
    "render_stream_row",
    "staleness",
]

_TABLES = TabularOutputFormatter()
_TABLE_STYLE = "psql"


@dataclass(frozen=True, slots=True)
class Rendered:
    """Text for standard output, and a note for standard error (CSV's staleness line)."""

    text: str
    note: str | None = None


def cell(value: Any) -> str:
    """One value as a table or CSV cell: `null`, `true`/`false`, JSON for arrays, maps, structs."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple | Mapping):
        return json.dumps(_jsonable(value), separators=(",", ":"))
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, float):
        return format_double(value)  # as ksqlDB's CLI: Java's Double.toString
    if isinstance(value, decimal.Decimal):
        return format(value, "f")  # its scale, never an exponent (12.50, 0.00000001)
    return str(value)


def _jsonable(value: Any) -> Any:
    """Plain JSON values (decimals as numbers, times as ISO text, bytes as base64)."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bytes | bytearray | memoryview | datetime.date | datetime.time):
        return cell(value)
    return value


def _dumps(value: Any) -> str:
    return json.dumps(_jsonable(value), indent=2)


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    cells = [[cell(v) for v in row] for row in rows]
    lines = _TABLES.format_output(  # no number parsing: it would round 6 digits (-122.421)
        cells,
        list(headers),
        format_name=_TABLE_STYLE,
        preserve_whitespace=True,
        disable_numparse=True,
    )
    return "\n".join(lines)


def _csv(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(headers)
    writer.writerows([cell(v) for v in row] for row in rows)
    return buffer.getvalue().rstrip("\n")


def staleness(
    served_by: Sequence[dbapi.ServedBy],
    row_count: int,
    written_by: Sequence[dbapi.WrittenBy] = (),
) -> str:
    """The footer of a pull answer: how many rows, per partition who served it, where, how far
    behind, and how current the persistent queries writing the table are (a replica without lag
    is still behind a query that is starting or behind its sources). Staleness is never hidden:
    an answer without `servedBy` says so."""
    rows = f"{row_count} row{'s' if row_count != 1 else ''}"
    writers = "".join(f"; {_writer(w)}" for w in written_by)
    if not served_by:
        return (
            f"({rows}; the server did not report which replica served it: staleness unknown"
            f"{writers})"
        )
    parts = []
    for s in sorted(served_by, key=lambda s: s.partition):
        position = "?" if s.position is None else str(s.position)
        lag = "unknown" if s.lag is None else str(s.lag)
        parts.append(f"partition {s.partition}: {s.host} at position {position}, lag {lag}")
    if len(parts) == 1:
        return f"({rows}; served by {parts[0]}{writers})"
    lines = [f"   {p}" for p in parts] + [f"   {_writer(w)}" for w in written_by]
    return f"({rows}; served by:\n" + "\n".join(lines) + ")"


def _writer(w: dbapi.WrittenBy) -> str:
    """A writing query's part of the footer: its state and how many source records it has not
    processed yet."""
    lag = "unknown" if w.lag is None else str(w.lag)
    if w.state == "RUNNING":
        return f"written by {w.query_id}, {lag} source records behind"
    return f"written by {w.query_id}, {w.state}: its rows may be missing (source lag {lag})"


def _served_json(served_by: Sequence[dbapi.ServedBy]) -> list[dict[str, Any]]:
    return [
        {"partition": s.partition, "host": s.host, "position": s.position, "lag": s.lag}
        for s in served_by
    ]


def _rows(result: Rows, fmt: OutputFormat) -> Rendered:
    footer = staleness(result.served_by, len(result.rows), result.written_by)
    if fmt is OutputFormat.JSON:
        return Rendered(
            _dumps(
                {
                    "queryId": result.query_id,
                    "columns": [
                        {"name": n, "type": t}
                        for n, t in zip(result.columns, result.types, strict=True)
                    ],
                    "rows": [dict(zip(result.columns, r, strict=True)) for r in result.rows],
                    "servedBy": _served_json(result.served_by),
                    "writtenBy": [
                        {"queryId": w.query_id, "state": w.state, "lag": w.lag}
                        for w in result.written_by
                    ],
                }
            )
        )
    if fmt is OutputFormat.CSV:
        return Rendered(_csv(result.columns, result.rows), footer)
    return Rendered(_table(result.columns, result.rows) + "\n" + footer)


def _describe(entity: Mapping[str, Any], table_text: str) -> str:
    """DESCRIBE as ksqlDB's CLI prints it: the name, the fields, then the extended details."""
    description = entity.get("sourceDescription") or {}
    lines = [f"{'Name':<20} : {description.get('name', '')}"]
    if description.get("extended"):
        for label, key in (
            ("Type", "type"),
            ("Timestamp field", "timestamp"),
            ("Key format", "keyFormat"),
            ("Value format", "valueFormat"),
            ("Kafka topic", "topic"),
            ("Statement", "statement"),
        ):
            value = description.get(key)
            lines.append(f"{label:<20} : {value if value not in (None, '') else 'Not set'}")
    lines.append(table_text)
    if not description.get("extended"):
        lines.append(
            "For runtime statistics and query details run: DESCRIBE <Stream,Table> EXTENDED;"
        )
        return "\n".join(lines)
    for title, key in (
        ("Queries that read from this", "readQueries"),
        ("Queries that write from this", "writeQueries"),
    ):
        kind = str(description.get("type", "source")).upper()
        queries = description.get(key) or []
        lines += ["", f"{title} {kind}", "-" * (len(title) + len(kind) + 1)]
        lines += [
            f"{q.get('id')} ({q.get('state', 'UNKNOWN')}) : {q.get('queryString', '')}"
            for q in queries
        ] or ["(none)"]
    lines += [
        "",
        "Runtime statistics",
        "------------------",
        description.get("statistics") or "(none)",
        description.get("errorStats") or "",
    ]
    return "\n".join(line for line in lines).rstrip()


def _explain(entity: Mapping[str, Any], table_text: str) -> str:
    """EXPLAIN as ksqlDB's CLI prints it: the query, its fields, sources, sinks and plan."""
    query = entity.get("queryDescription") or {}
    hosts = ", ".join(f"{h}: {s}" for h, s in (query.get("ksqlHostQueryStatus") or {}).items())
    lines = [
        f"{'ID':<20} : {query.get('id') or '(not running: EXPLAIN of a statement)'}",
        f"{'Query Type':<20} : {query.get('queryType', '')}",
        f"{'SQL':<20} : {query.get('statementText', '')}",
    ]
    if hosts:
        lines.append(f"{'Host Query Status':<20} : {hosts}")
    lines += [
        "",
        table_text,
        "",
        "Sources that this query reads from:",
        "-----------------------------------",
        *(query.get("sources") or []),
        "",
        "Sinks that this query writes to:",
        "-------------------------------",
        *(query.get("sinks") or []),
        "",
        "Execution plan",
        "--------------",
        query.get("executionPlan", ""),
    ]
    if query.get("statistics"):
        lines += ["", "Runtime statistics", "------------------", query["statistics"]]
    errors = query.get("queryErrors") or []
    if errors:
        lines += [
            "",
            "Errors",
            "------",
            *(f"{e.get('type')}: {e.get('errorMessage')}" for e in errors),
        ]
    return "\n".join(lines)


def _describe_function(entity: Mapping[str, Any]) -> str:
    """DESCRIBE FUNCTION as ksqlDB's CLI prints it: the function, then each variation."""
    lines = [
        f"{'Name':<12}: {entity.get('name', '')}",
        f"{'Author':<12}: {entity.get('author', '')}",
        f"{'Version':<12}: {entity.get('version', '')}",
        f"{'Overview':<12}: {entity.get('description', '')}",
        f"{'Type':<12}: {entity.get('type', '')}",
        f"{'Jar':<12}: {entity.get('path', '')}",
        f"{'Variations':<12}: ",
    ]
    for variant in entity.get("functions") or []:
        arguments = variant.get("arguments") or []
        shown = ", ".join(
            f"{a.get('name', '')} {a.get('type', '')}{'...' if a.get('isVariadic') else ''}"
            for a in arguments
        )
        lines += [
            "",
            f"\t{'Variation':<12}: {entity.get('name', '')}({shown})",
            f"\t{'Returns':<12}: {variant.get('returnType', '')}",
        ]
        if variant.get("description"):
            lines.append(f"\t{'Description':<12}: {variant['description']}")
    return "\n".join(lines)


def _entity(result: Entity, fmt: OutputFormat) -> Rendered:
    entity, table = result.entity, result.table
    if fmt is OutputFormat.TABLE and entity.get("@type") == "describe_function":
        return Rendered(_describe_function(entity))
    if fmt is OutputFormat.JSON or table is None:
        return Rendered(_dumps(entity))
    if fmt is OutputFormat.CSV:
        return Rendered(_csv(table.columns, table.rows))
    kind = entity.get("@type")
    if kind == "currentStatus":
        message = (entity.get("commandStatus") or {}).get("message") or "Done"
        return Rendered(_table(["Message"], [[message]]))
    text = _table(table.columns, table.rows)
    if kind == "sourceDescription":
        return Rendered(_describe(entity, text))
    if kind == "queryDescription":
        return Rendered(_explain(entity, text))
    return Rendered(text)


def render(result: Result, fmt: OutputFormat) -> Rendered:
    """A finished result as text (RowStream: see `render_stream_header`/`render_stream_row`).

    Args:
        result: what the executor yielded.
        fmt: table, json or csv.

    Returns:
        The text to print, and an optional note for standard error.
    """
    if isinstance(result, Message):
        if fmt is OutputFormat.JSON:
            return Rendered(json.dumps({"@type": "message", "message": result.text}))
        return Rendered(result.text) if fmt is OutputFormat.TABLE else Rendered("", result.text)
    if isinstance(result, Rows):
        return _rows(result, fmt)
    if isinstance(result, Entity):
        return _entity(result, fmt)
    raise TypeError(f"render() takes a finished result, not {type(result).__name__}")


_STREAM_WIDTH = 16


def render_stream_header(result: RowStream, fmt: OutputFormat) -> str:
    """The first line(s) of a push query's output."""
    if fmt is OutputFormat.JSON:
        return ""
    if fmt is OutputFormat.CSV:
        return _csv(result.columns, [])
    names = "|".join(f"{n:<{_STREAM_WIDTH}}" for n in result.columns)
    rule = "+" + "+".join("-" * _STREAM_WIDTH for _ in result.columns) + "+"
    return f"{rule}\n|{names}|\n{rule}"


def render_stream_row(result: RowStream, row: Sequence[Any], fmt: OutputFormat) -> str:
    """One row of a push query, printed as it arrives."""
    if fmt is OutputFormat.JSON:
        return json.dumps(_jsonable(dict(zip(result.columns, row, strict=True))))
    if fmt is OutputFormat.CSV:
        return _csv([], [row]).lstrip("\n")
    return "|" + "|".join(f"{cell(v):<{_STREAM_WIDTH}}" for v in row) + "|"


def render_error(error: StatementFailed, *, script: bool = False) -> str:
    """An error for people: the message, and where it is (the line and a caret under the column
    for parse errors; the statement otherwise). In a script, which statement failed comes first."""
    out: list[str] = []
    if script and error.ran_nothing:
        out.append(f"{error.source_name}: does not parse (line {error.line}); nothing ran")
    elif script:
        out.append(f"{error.source_name}: the statement at line {error.line} failed")
    code = f" (error {error.error_code})" if error.error_code and not error.has_position else ""
    lines = error.source_text.splitlines()
    located = error.has_position and 1 <= error.line <= len(lines)
    message = error.message
    if located:  # the line and its caret show the statement: not its text again
        message = message.split("\nStatement: ", 1)[0]
    out.append(f"Error: {message}{code}")
    if located:
        source = lines[error.line - 1].expandtabs(1)
        out.append(f"  {source}")
        out.append("  " + " " * max(error.column - 1, 0) + "^")
    elif error.statement_text:
        first, *rest = error.statement_text.strip().splitlines() or [""]
        out.append(f"Statement: {first}" + (" ..." if rest else ""))
    return "\n".join(out)


def needs_pager(text: str, columns: int, lines: int) -> bool:
    """Whether `text` is taller or wider than a terminal of `columns` x `lines`."""
    rows = text.splitlines()
    return len(rows) > max(lines - 2, 1) or any(len(r) > columns for r in rows)
