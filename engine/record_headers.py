"""Header columns: a source's columns read from its records' Kafka headers. Pure.

``C ARRAY<STRUCT<KEY STRING, VALUE BYTES>> HEADERS`` holds every header of the record, in order
(an empty list when it has none); ``C BYTES HEADER('k')`` the value of the last header named
``k`` (NULL when there is none), as ksqlDB reads them. Persistent queries, pull queries over
streams and push queries fill them the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from headwater.metastore.catalog import Source

#: (column name, all headers?, the header key of a single-header column)
HeaderColumn = tuple[str, bool, str | None]


def header_columns(source: Source) -> tuple[HeaderColumn, ...]:
    """The source's header columns (none for most sources)."""
    return tuple(
        (c.name, c.headers, c.header_key)
        for c in source.columns
        if c.headers or c.header_key is not None
    )


def with_headers(
    row: Mapping[str, Any],
    columns: Sequence[HeaderColumn],
    headers: Sequence[tuple[str, Any]] | Mapping[str, Any] | None,
) -> dict[str, Any]:
    """``row`` with its header columns set from the record's ``headers`` (as a Kafka client
    gives them: (key, value) pairs in order)."""
    out = dict(row)
    found = list(headers.items() if isinstance(headers, Mapping) else headers or ())
    for name, everything, key in columns:
        if everything:
            out[name] = [{"KEY": k, "VALUE": v} for k, v in found]
        else:
            out[name] = next((v for k, v in reversed(found) if k == key), None)
    return out
