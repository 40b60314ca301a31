"""PEP 249 module interface of headwater.dbapi: globals, exception tree, type objects,
constructors, and the rule that importing the driver never loads the server."""

from __future__ import annotations

import datetime
import subprocess
import sys
import time

import pytest

import headwater.dbapi
from headwater import dbapi


def test_globals() -> None:
    assert dbapi.apilevel == "2.0"
    assert dbapi.threadsafety in (0, 1, 2, 3)
    assert dbapi.paramstyle == "qmark"
    assert callable(dbapi.connect)


def test_both_import_forms_give_the_driver_and_its_whole_api() -> None:
    # `import headwater.dbapi` and `from headwater import dbapi` are the forms users write; the
    # public API is the PEP 249 names plus headwater's extensions, each one present.
    assert headwater.dbapi is dbapi
    assert dbapi.__all__[-10:] == [
        "AuthorizationError",
        "ColumnDescription",
        "ConnectionFailedError",
        "NotFoundError",
        "RetryPolicy",
        "ServedBy",
        "ServiceUnavailableError",
        "StatementError",
        "TooManyRequestsError",
        "WrittenBy",
    ]
    assert len(dbapi.__all__) == 28 + 10
    for name in dbapi.__all__:
        assert hasattr(dbapi, name), name


def test_all_lists_every_pep_249_name() -> None:
    pep = {
        "apilevel",
        "threadsafety",
        "paramstyle",
        "connect",
        "Connection",
        "Cursor",
        "Warning",
        "Error",
        "InterfaceError",
        "DatabaseError",
        "DataError",
        "OperationalError",
        "IntegrityError",
        "InternalError",
        "ProgrammingError",
        "NotSupportedError",
        "Date",
        "Time",
        "Timestamp",
        "DateFromTicks",
        "TimeFromTicks",
        "TimestampFromTicks",
        "Binary",
        "STRING",
        "BINARY",
        "NUMBER",
        "DATETIME",
        "ROWID",
    }
    assert pep <= set(dbapi.__all__)
    assert dbapi.__all__.index("apilevel") == 0  # PEP-grouped: globals first


@pytest.mark.parametrize(
    ("child", "parent"),
    [
        ("Warning", Exception),
        ("Error", Exception),
        ("InterfaceError", "Error"),
        ("DatabaseError", "Error"),
        ("DataError", "DatabaseError"),
        ("OperationalError", "DatabaseError"),
        ("IntegrityError", "DatabaseError"),
        ("InternalError", "DatabaseError"),
        ("ProgrammingError", "DatabaseError"),
        ("NotSupportedError", "DatabaseError"),
        ("StatementError", "ProgrammingError"),
        ("NotFoundError", "ProgrammingError"),
        ("AuthorizationError", "OperationalError"),
        ("TooManyRequestsError", "OperationalError"),
        ("ServiceUnavailableError", "OperationalError"),
        ("ConnectionFailedError", "OperationalError"),
    ],
)
def test_exception_tree_copies_pep_249(child: str, parent: object) -> None:
    cls = getattr(dbapi, child)
    base = getattr(dbapi, parent) if isinstance(parent, str) else parent
    assert cls.__bases__ == (base,)


def test_warning_is_not_an_error() -> None:
    assert not issubclass(dbapi.Warning, dbapi.Error)
    assert not issubclass(dbapi.Error, dbapi.Warning)


def test_errors_carry_structured_fields_and_read_well() -> None:
    error = dbapi.ProgrammingError(
        "line 1:8: mismatched input 'FRM'",
        error_code=40001,
        statement_text="SELECT FRM t;",
        line=1,
        column=8,
        http_status=400,
    )
    assert (error.error_code, error.line, error.column, error.http_status) == (40001, 1, 8, 400)
    assert error.message == "line 1:8: mismatched input 'FRM'"
    assert str(error) == (
        "line 1:8: mismatched input 'FRM' (error 40001, line 1:8)\nStatement: SELECT FRM t;"
    )
    assert str(dbapi.InterfaceError("closed")) == "closed"
    assert dbapi.TooManyRequestsError("x").retriable and not dbapi.StatementError("x").retriable


@pytest.mark.parametrize(
    ("type_object", "codes", "others"),
    [
        ("STRING", ["STRING", "VARCHAR"], ["BIGINT", "BYTES", "ARRAY<STRING>"]),
        ("NUMBER", ["INT", "INTEGER", "BIGINT", "DOUBLE", "DECIMAL(10, 2)"], ["STRING", "DATE"]),
        ("DATETIME", ["DATE", "TIME", "TIMESTAMP"], ["BIGINT", "STRING"]),
        ("BINARY", ["BYTES"], ["STRING"]),
        ("ROWID", [], ["STRING", "BIGINT", "BYTES"]),
    ],
)
def test_type_objects_compare_equal_to_their_type_codes(
    type_object: str, codes: list[str], others: list[str]
) -> None:
    obj = getattr(dbapi, type_object)
    for code in codes:
        assert obj == code and code == obj, code
    for code in others:
        assert obj != code, code
    assert obj != 5


def test_constructors() -> None:
    assert dbapi.Date(2024, 5, 1) == datetime.date(2024, 5, 1)
    assert dbapi.Time(12, 30) == datetime.time(12, 30)
    assert dbapi.Timestamp(2024, 5, 1, 12) == datetime.datetime(2024, 5, 1, 12)
    ticks = time.mktime((2024, 5, 1, 12, 30, 15, 0, 0, -1))
    assert dbapi.DateFromTicks(ticks) == datetime.date(2024, 5, 1)
    assert dbapi.TimeFromTicks(ticks) == datetime.time(12, 30, 15)
    assert dbapi.TimestampFromTicks(ticks) == datetime.datetime(2024, 5, 1, 12, 30, 15)
    assert dbapi.Binary(b"ab") == b"ab"
    assert dbapi.Binary(bytearray(b"ab")) == b"ab"
    assert dbapi.Binary("é") == "é".encode()


def test_importing_the_driver_does_not_load_the_server() -> None:
    code = (
        "import sys, headwater.dbapi; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'starlette', 'uvicorn'} "
        "or m.split('.')[:2] in (['headwater', 'gateway'], ['headwater', 'engine'])); "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.parametrize("urls", [[], "", "ftp://host:1", ["localhost:8088"]])
def test_connect_refuses_unusable_urls(urls: object) -> None:
    with pytest.raises(dbapi.InterfaceError):
        dbapi.connect(urls)  # type: ignore[arg-type]


def test_connect_accepts_a_comma_separated_list() -> None:
    with dbapi.connect("http://a:1, http://b:2/") as conn:
        assert conn.urls == ("http://a:1", "http://b:2")
        assert conn.server_url == "http://a:1"
