"""The engine's errors: one root, with ksqlDB's error codes as class attributes. Pure (no I/O).

Add a subclass here (or in the module that raises it) for each new kind of failure; the gateway maps
the root to an HTTP answer by `error_code`, so a message must say what was wrong with what the user
wrote (column, expected type, the value seen), never only an internal name.
"""

from __future__ import annotations


class EngineError(Exception):
    """Root of the engine's errors."""

    error_code = 50000
    retriable = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SerdeError(EngineError):
    """Bytes that do not fit a source's format and schema, or a value that cannot be written in it."""

    error_code = 40001


class ExpressionError(EngineError):
    """An expression that does not type-check or cannot be evaluated (bad user SQL)."""

    error_code = 40001


class CodegenError(ExpressionError):
    """An expression that type-checks but that ksqlDB refuses only when it generates its code (a
    cast between types it cannot convert): the clause names it, ``Invalid Select: ...``."""


class StatementPrepareError(ExpressionError):
    """A statement that does not fit its target before anything is evaluated (ksqlDB refuses these
    while preparing it: 'Failed to prepare statement: ...')."""


class PullQueryError(EngineError):
    """A pull query ksqlDB would refuse (unsupported clause, disabled table scan, unknown column)."""

    error_code = 40001


class SourceDropped(EngineError):
    """A push query's or PRINT's topic is being deleted (DROP ... DELETE TOPIC): it ends."""

    error_code = 40001


def record_failure(exc: BaseException) -> str:
    """What a record that could not be read or evaluated says in the processing log: an engine
    error's message as it is, any other exception (a RecursionError, a KeyError, a struct.error a
    hostile record caused) as its type and text, never a traceback."""
    if isinstance(exc, EngineError):
        return exc.message
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
