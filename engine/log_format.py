"""How a server and its Spark child write their logs: human-readable text, or one JSON object a line.

``--log-format json`` (``headwater server``) makes every record one line of JSON for a log shipper:
``{"time", "level", "logger", "message"}``, the context the record carries (``query_id``,
``partition``, ``statement_id``, ``table``, ``topic``: passed as ``extra=`` by the code that logs),
and ``exception`` with the traceback when there is one. The Spark child process writes the same
format to its log file. No I/O beyond the handler given.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any, Final

import orjson

FORMATS: Final = ("text", "json")
TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: The context a record may carry (``log.warning(..., extra={"query_id": q})``), in this order.
CONTEXT: Final = ("query_id", "statement_id", "table", "topic", "partition", "server")


class JsonFormatter(logging.Formatter):
    """One JSON object a line (never a newline inside: JSON escapes it)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in CONTEXT:
            found = record.__dict__.get(key)
            if found is not None:
                entry[key] = found
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return orjson.dumps(entry, default=str).decode()


def formatter(log_format: str, text_format: str = TEXT_FORMAT) -> logging.Formatter:
    """The formatter of ``log_format`` (``text`` or ``json``).

    Raises:
        ValueError: another format.
    """
    if log_format == "json":
        return JsonFormatter()
    if log_format == "text":
        return logging.Formatter(text_format)
    raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {log_format!r}")


def configure(log_format: str, level: int, text_format: str = TEXT_FORMAT) -> None:
    """Send the root logger's records to stderr in ``log_format``, at ``level`` and above
    (replacing the handlers it had, as ``logging.basicConfig(force=True)``)."""
    handler = logging.StreamHandler()
    handler.setFormatter(formatter(log_format, text_format))
    logging.basicConfig(level=level, handlers=[handler], force=True)
