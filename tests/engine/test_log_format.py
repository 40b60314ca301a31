"""engine/log_format.py: one JSON object a line, with the record's context; text stays text."""

from __future__ import annotations

import io
import json
import logging

import pytest

from headwater.engine.log_format import JsonFormatter, configure, formatter


def _record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("headwater.x", logging.WARNING, __file__, 1, message, args, None)
    record.__dict__.update(extra)
    return record


def test_a_record_is_one_line_of_json_with_its_context() -> None:
    line = JsonFormatter().format(
        _record("query %s failed:\n%s", "CSAS_X_1", "boom", query_id="CSAS_X_1", partition=3)
    )
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["message"] == "query CSAS_X_1 failed:\nboom"
    assert (entry["level"], entry["logger"]) == ("WARNING", "headwater.x")
    assert (entry["query_id"], entry["partition"]) == ("CSAS_X_1", 3)
    assert entry["time"].endswith("+00:00") and "statement_id" not in entry


def test_an_exception_keeps_its_traceback_and_odd_values_are_text() -> None:
    try:
        raise ValueError("bad record")
    except ValueError:
        record = logging.LogRecord(
            "headwater.y", logging.ERROR, __file__, 1, "failed %r", (object,), sys_exc_info()
        )
    record.__dict__["table"] = object()  # not JSON: written as its text, never a crash
    entry = json.loads(JsonFormatter().format(record))
    assert "ValueError: bad record" in entry["exception"]
    assert entry["table"].startswith("<object object")


def sys_exc_info():  # type: ignore[no-untyped-def]
    import sys

    return sys.exc_info()


def test_configure_replaces_the_handlers_and_refuses_unknown_formats() -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        configure("json", logging.INFO)
        stream = io.StringIO()
        (handler,) = root.handlers
        assert isinstance(handler.formatter, JsonFormatter)
        handler.setStream(stream)  # type: ignore[attr-defined]
        logging.getLogger("headwater.z").info("hello %d", 5, extra={"statement_id": "s1"})
        assert json.loads(stream.getvalue())["statement_id"] == "s1"
        assert formatter("text").format(_record("plain")).endswith("plain")
        with pytest.raises(ValueError, match="text, json"):
            formatter("xml")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
