"""The PEP 249 exception tree, headwater's driver errors under it, and the map from ksqlDB error
bodies to them. No I/O.

The tree copies PEP 249 exactly (Warning, Error, InterfaceError, DatabaseError and its six
subclasses). Driver-specific errors subclass the PEP class a generic caller catches
(`StatementError` is a ProgrammingError, `ServiceUnavailableError` an OperationalError, ...). Every
error carries the structured fields of a ksqlDB error body: `error_code`, `message`,
`statement_text`, `line`, `column` (headwater's position extension), `http_status`, `entities`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "AuthorizationError",
    "ConnectionFailedError",
    "DataError",
    "DatabaseError",
    "Error",
    "IntegrityError",
    "InterfaceError",
    "InternalError",
    "NotFoundError",
    "NotSupportedError",
    "OperationalError",
    "ProgrammingError",
    "ServiceUnavailableError",
    "StatementError",
    "TooManyRequestsError",
    "Warning",
    "error_from_body",
]


class Warning(Exception):
    """PEP 249: "Exception raised for important warnings like data truncations while inserting"."""


class Error(Exception):
    """PEP 249: "Exception that is the base class of all other error exceptions".

    Attributes:
        message: the server's (or the driver's) message.
        error_code: ksqlDB's error code (HTTP status x 100 + n), e.g. 40001; None when unknown.
        statement_text: the statement the error is about, when the server names it.
        line, column: 1-based position of the error in the statement, when the server knows it.
        http_status: the HTTP status of the answer, None when no answer came.
        entities: results of the statements the server ran before the failing one.
        retriable: whether the same request may succeed if sent again later.
    """

    retriable: bool = False

    def __init__(
        self,
        message: str,
        *,
        error_code: int | None = None,
        statement_text: str | None = None,
        line: int | None = None,
        column: int | None = None,
        http_status: int | None = None,
        entities: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.error_code = error_code
        self.statement_text = statement_text
        self.line = line
        self.column = column
        self.http_status = http_status
        self.entities = tuple(entities)

    def __str__(self) -> str:
        details = []
        if self.error_code is not None:
            details.append(f"error {self.error_code}")
        if self.line is not None:
            details.append(f"line {self.line}" + (f":{self.column}" if self.column else ""))
        text = self.message + (f" ({', '.join(details)})" if details else "")
        if self.statement_text:
            text += f"\nStatement: {self.statement_text.strip()}"
        return text


class InterfaceError(Error):
    """PEP 249: "errors that are related to the database interface rather than the database"."""


class DatabaseError(Error):
    """PEP 249: "Exception raised for errors that are related to the database"."""


class DataError(DatabaseError):
    """PEP 249: "errors that are due to problems with the processed data"."""


class OperationalError(DatabaseError):
    """PEP 249: "errors that are related to the database's operation and not necessarily under
    the control of the programmer, e.g. an unexpected disconnect occurs"."""


class IntegrityError(DatabaseError):
    """PEP 249: "Exception raised when the relational integrity of the database is affected"."""


class InternalError(DatabaseError):
    """PEP 249: "Exception raised when the database encounters an internal error"."""


class ProgrammingError(DatabaseError):
    """PEP 249: "Exception raised for programming errors, e.g. table not found or already
    exists, syntax error in the SQL statement, wrong number of parameters specified"."""


class NotSupportedError(DatabaseError):
    """PEP 249: "in case a method or database API was used which is not supported"."""


class StatementError(ProgrammingError):
    """ksqlDB 40000/40001/40002: the request or a statement in it is invalid."""


class NotFoundError(ProgrammingError):
    """ksqlDB 40400: the stream, table, query or resource does not exist."""


class AuthorizationError(OperationalError):
    """ksqlDB 40100/40300: the credentials are missing, wrong or not allowed."""


class TooManyRequestsError(OperationalError):
    """ksqlDB 42900: the server's request queue is full (still so after the driver's retries)."""

    retriable = True


class ServiceUnavailableError(OperationalError):
    """ksqlDB 503xx: catch-up timeout, not ready, shutting down (on every server tried)."""

    retriable = True


class ConnectionFailedError(OperationalError):
    """No server could be reached, or an answer was cut off (after the driver's retries)."""

    retriable = True


# error_code -> class; codes not listed fall back on their HTTP status class (_BY_STATUS).
_BY_CODE: dict[int, type[Error]] = {
    40000: StatementError,
    40001: StatementError,
    40002: StatementError,
    40100: AuthorizationError,
    40300: AuthorizationError,
    40400: NotFoundError,
    42900: TooManyRequestsError,
    50000: InternalError,
    50301: ServiceUnavailableError,
    50302: ServiceUnavailableError,
    50303: ServiceUnavailableError,
}
_BY_STATUS: dict[int, type[Error]] = {
    400: StatementError,
    401: AuthorizationError,
    403: AuthorizationError,
    404: NotFoundError,
    429: TooManyRequestsError,
    500: InternalError,
    503: ServiceUnavailableError,
}


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def error_from_body(http_status: int | None, body: object) -> Error:
    """Build the exception for a ksqlDB error body (`statement_error`/`generic_error`).

    Args:
        http_status: the answer's HTTP status (None for an `errorMessage` inside a 200 stream).
        body: the decoded JSON body, or the raw text when it was not JSON.

    Returns:
        The matching Error subclass instance, with the body's fields.
    """
    fields: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
    code = _int_or_none(fields.get("error_code"))
    if code is None and http_status is not None:
        code = http_status * 100
    message = fields.get("message")
    if not isinstance(message, str) or not message:
        text = body.strip() if isinstance(body, str) else ""
        message = text[:500] or f"the server answered HTTP {http_status}"
    cls = _BY_CODE.get(code or 0) or _BY_STATUS.get(http_status or 0)
    if cls is None:
        status = http_status or (code // 100 if code else 500)
        cls = ProgrammingError if 400 <= status < 500 else OperationalError
    entities = fields.get("entities")
    statement = fields.get("statementText")
    return cls(
        message,
        error_code=code,
        statement_text=statement if isinstance(statement, str) else None,
        line=_int_or_none(fields.get("line")),
        column=_int_or_none(fields.get("column")),
        http_status=http_status,
        entities=[e for e in entities if isinstance(e, Mapping)]
        if isinstance(entities, list)
        else (),
    )
