"""headwater's Python DB-API 2.0 (PEP 249) driver, over the ksqlDB-shaped HTTP API.

    from headwater import dbapi

    with dbapi.connect("http://node1:8088,http://node2:8088",
                       properties={"acceptable.offset.lag": 100}) as conn:
        cur = conn.cursor()
        cur.execute("SELECT * FROM orders WHERE id = ?", ["o-1"])
        print(cur.description, cur.fetchall(), cur.served_by, cur.written_by)

SELECT goes to `POST /query`, every other statement to `POST /ksql` (whose entities become tables
with the ksqlDB CLI's headers, see `entities.py`). Parameters use the qmark style; they travel apart
from the text (`"parameters"`) and the server binds them after `${...}` substitution, so a value is
always data (`headwater.sqlparse_ext.params`). Several server URLs give
failover; 429 and 503 answers are retried (see `_retry.py`). This package imports httpx but never
the server (no starlette, no uvicorn).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from ._connection import Connection
from ._cursor import Cursor
from ._errors import (
    AuthorizationError,
    ConnectionFailedError,
    DatabaseError,
    DataError,
    Error,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotFoundError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    ServiceUnavailableError,
    StatementError,
    TooManyRequestsError,
    Warning,
)
from ._http import Auth, Verify
from ._results import ColumnDescription, ServedBy, WrittenBy
from ._retry import RetryPolicy
from ._types import (
    BINARY,
    DATETIME,
    NUMBER,
    ROWID,
    STRING,
    Binary,
    Date,
    DateFromTicks,
    Time,
    TimeFromTicks,
    Timestamp,
    TimestampFromTicks,
)

__all__ = [  # noqa: RUF022 - grouped as PEP 249 groups them
    # https://peps.python.org/pep-0249/#globals
    "apilevel",
    "threadsafety",
    "paramstyle",
    "connect",
    "Connection",
    "Cursor",
    # https://peps.python.org/pep-0249/#exceptions
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
    # https://peps.python.org/pep-0249/#type-objects-and-constructors
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
    # headwater extensions
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

apilevel = "2.0"
"""PEP 249: "String constant stating the supported DB API level"."""
threadsafety = 2
"""PEP 249: 2 = "Threads may share the module and connections" (not cursors)."""
paramstyle = "qmark"
"""PEP 249: "Question mark style, e.g. ...WHERE name=?"."""

DEFAULT_URL = "http://localhost:8088"


def _split_urls(url_or_urls: str | Sequence[str]) -> list[str]:
    raw = url_or_urls.split(",") if isinstance(url_or_urls, str) else list(url_or_urls)
    return [u.strip() for u in raw if isinstance(u, str) and u.strip()]


def connect(
    url_or_urls: str | Sequence[str] = DEFAULT_URL,
    *,
    timeout: float = 30.0,
    connect_timeout: float = 5.0,
    properties: Mapping[str, Any] | None = None,
    session_variables: Mapping[str, Any] | None = None,
    auth: Auth = None,
    user: str | None = None,
    password: str | None = None,
    verify: Verify = True,
    retries: int = 2,
    max_retry_after: float = 10.0,
    transport: httpx.BaseTransport | None = None,
) -> Connection:
    """PEP 249: "Constructor for creating a connection to the database. Returns a Connection Object."

    Args:
        url_or_urls: one server URL, several (a list, or one string separated by commas), tried
            in order; the one that answers is tried first afterwards.
        timeout: seconds to wait for an answer (read, write, pool).
        connect_timeout: seconds to wait for a TCP connection before moving to the next server.
        properties: streams properties sent with every request (`{"acceptable.offset.lag": 100}`).
        session_variables: variables for substitution, sent with every request.
        auth: `(user, password)` for HTTP Basic, or any `httpx.Auth`.
        user, password: HTTP Basic credentials (the server's `authentication.method=BASIC`);
            the same as `auth=(user, password)`.
        verify: for https:// servers: True (the system's CAs), the path of a PEM CA file (e.g.
            a self-signed server certificate), an `ssl.SSLContext`, or False (no check).
        retries: extra rounds over the server list after connection failures and 503s (and the
            number of extra tries after a 429).
        max_retry_after: longest Retry-After (seconds) the driver waits; longer ones fail at once.
        transport: an httpx transport to send through instead of the network (for tests).

    Returns:
        An open Connection (no request is sent until the first statement).

    Raises:
        InterfaceError: no URL, a URL that is not http(s), both `auth` and `user`, or a CA file
            that cannot be read.

    A 401/403 answer raises `AuthorizationError` (an `OperationalError`) with the server's message.
    """
    if retries < 0:
        raise InterfaceError(f"retries must be >= 0, got {retries}")
    if user is not None:
        if auth is not None:
            raise InterfaceError("give either auth or user/password, not both")
        auth = (user, password or "")
    elif password is not None:
        raise InterfaceError("a password needs a user")
    return Connection(
        _split_urls(url_or_urls),
        timeout=timeout,
        connect_timeout=connect_timeout,
        properties=properties,
        session_variables=session_variables,
        auth=auth,
        verify=verify,
        retry=RetryPolicy(retries=retries, max_retry_after_s=max_retry_after),
        transport=transport,
    )
