"""Where a query starts reading its sources: ksqlDB's ``auto.offset.reset`` rules. Pure, no I/O.

The value is the statement's own (``SET 'auto.offset.reset'='earliest';`` in the shell, sent with
the request as ``streamsProperties``, either as ``auto.offset.reset`` or
``ksql.streams.auto.offset.reset``), else the server's ``ksql.streams.auto.offset.reset``, else
unset. A persistent query then reads each source (as ksqlDB's source builders and ``JoinNode`` do):

- with a value: every source from there (``earliest``: its beginning; ``latest``: its end),
  except the table side of a join, always read from its beginning (the join needs the whole table);
- unset: a stream from its end, a table from its beginning.

The submitter (``submit.py``) turns ``latest`` into each partition's end offset, read from fetches
when the statement is validated, and records those offsets with the query in the command log, so
every server and every restart starts the query at the same place; once the query has a checkpoint
it resumes from that instead. A push query reads from its end unless the value is ``earliest``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from headwater.metastore.catalog import Source, SourceKind
from headwater.metastore.errors import ValidationError

EARLIEST = "earliest"
LATEST = "latest"
#: The property's names, the first winning when a request gives both.
KEYS = ("auto.offset.reset", "ksql.streams.auto.offset.reset")


def check_reset(value: object) -> str:
    """``value`` as ``earliest`` or ``latest`` (any case, surrounding blanks ignored).

    Raises:
        ValidationError: any other value (ksqlDB's message for ``none``).
    """
    text = str(value).strip().lower()
    if text == "none":
        raise ValidationError("'none' is not valid for this property within KSQL")
    if text not in (EARLIEST, LATEST):
        raise ValidationError(
            f"Invalid value {value!r} for configuration auto.offset.reset: "
            "String must be one of: earliest, latest"
        )
    return text


def offset_reset(overrides: Mapping[str, Any], server: Mapping[str, Any]) -> str | None:
    """The ``auto.offset.reset`` a statement runs with: the request's, else the server's, else
    None (unset). An empty value counts as unset.

    Raises:
        ValidationError: a value that is not ``earliest`` or ``latest``.
    """
    for properties in (overrides, server):
        for key in KEYS:
            value = properties.get(key)
            if value is not None and str(value).strip():
                return check_reset(value)
    return None


def source_resets(sources: Iterable[Source], reset: str | None) -> dict[str, str]:
    """Topic -> ``earliest`` or ``latest`` for each source a persistent query reads (see the
    module docstring); a topic read twice (a self-join) from its beginning if either side is."""
    listed = list(sources)
    join = len(listed) > 1
    found: dict[str, str] = {}
    for source in listed:
        table = source.kind is SourceKind.TABLE
        if table and (join or reset is None):
            where = EARLIEST
        else:
            where = reset or LATEST
        found[source.topic] = EARLIEST if EARLIEST in (where, found.get(source.topic)) else where
    return found
