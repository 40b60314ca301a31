"""The gateway's own error: an answer of the HTTP API in ksqlDB's error shape. Pure.

Other packages' root errors are mapped in ``app.EXCEPTION_HANDLERS``; this one carries everything
the body needs (code, message, statement, position, earlier entities, retriable).
"""

from __future__ import annotations

from typing import Any

Entity = dict[str, Any]
"""One JSON object of an answer."""


class KsqlError(Exception):
    """An error answer of the HTTP API, in ksqlDB's shape.

    Attributes:
        message: what went wrong.
        error_code: ksqlDB's code (HTTP status x 100 + n).
        statement_text: the statement it is about ('' for the request as a whole).
        entities: the entities answered for the statements before the failing one.
        line, column: the position of the failing statement (or of the parse error) when known.
        kind: ``statement_error`` or ``generic_error``.
        retriable: whether the same request may succeed if sent again.
    """

    def __init__(
        self,
        message: str,
        error_code: int,
        *,
        statement_text: str = "",
        entities: tuple[Entity, ...] = (),
        line: int | None = None,
        column: int | None = None,
        kind: str = "statement_error",
        retriable: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.error_code = error_code
        self.statement_text = statement_text
        self.entities = entities
        self.line = line
        self.column = column
        self.kind = kind
        self.retriable = retriable

    def body(self) -> Entity:
        """ksqlDB's error body of this error (also the ``errorMessage`` of a streamed answer)."""
        return error_body(
            self.error_code,
            self.message,
            kind=self.kind,
            statement_text=self.statement_text,
            entities=self.entities,
            line=self.line,
            column=self.column,
        )


def error_body(
    error_code: int,
    message: str,
    *,
    kind: str = "statement_error",
    statement_text: str = "",
    entities: tuple[Entity, ...] | list[Entity] = (),
    line: int | None = None,
    column: int | None = None,
) -> Entity:
    """ksqlDB's error body: ``@type``, ``error_code``, ``message``, ``statementText``,
    ``entities``, and the position when known."""
    body: Entity = {
        "@type": kind,
        "error_code": error_code,
        "message": message,
        "statementText": statement_text,
        "entities": list(entities),
    }
    if line is not None:
        body["line"] = line
    if column is not None:
        body["column"] = column
    return body


def bad_request(message: str, error_code: int = 40000) -> KsqlError:
    """A request-level error (bad body), as a ``generic_error``."""
    return KsqlError(message, error_code, kind="generic_error")
