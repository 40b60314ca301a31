"""The metastore's errors: one root, structured fields, ksqlDB error codes as class attributes.

No I/O.
"""

from __future__ import annotations


class MetastoreError(Exception):
    """Root of every error the metastore raises.

    Attributes:
        error_code: ksqlDB's error code (HTTP status x 100 + n).
        retriable: whether the same request may succeed if sent again unchanged.
    """

    error_code = 40001
    retriable = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ValidationError(MetastoreError):
    """A statement is not valid against the catalog snapshot it was checked on.

    Attributes:
        offset: where in the statement's text the fault is (a character offset), when known.
    """

    def __init__(self, message: str, offset: int | None = None) -> None:
        super().__init__(message)
        self.offset = offset


class SourceExists(ValidationError):
    """A stream or table of that name already exists."""


class UnknownSource(ValidationError):
    """No stream or table of that name exists."""

    error_code = 40001


class TypeExists(ValidationError):
    """A custom type of that name already exists."""


class UnknownType(ValidationError):
    """No custom type of that name exists."""


class SourceInUse(ValidationError):
    """A source cannot be dropped or replaced while queries read or write it."""


class TopicError(ValidationError):
    """The Kafka topic a statement names is missing or does not fit the statement."""


class TooManyPersistentQueries(ValidationError):
    """A persistent query beyond ``ksql.query.persistent.active.limit``: a request error, as in
    ksqlDB (``KsqlStatementException.Problem.REQUEST``: 400 with code 40000)."""

    error_code = 40000


class CommandConflict(MetastoreError):
    """Another command was appended to the log after ours was validated; submit again."""

    error_code = 50000
    retriable = True


class CommandTimeout(MetastoreError):
    """The command log did not answer in time (catch-up or commit)."""

    error_code = 50301
    retriable = True


class UnreadableRecord(MetastoreError):
    """A command-log record this server cannot apply (a format from the future, corrupt bytes)."""

    error_code = 50000
