"""Which push queries ksqlDB serves as *scalable* push queries (``ScalablePushUtil``). Pure.

With ``ksql.query.push.v2.enabled`` (off by default, as in ksqlDB; a request may set it), ksqlDB
answers a push query from the running persistent query that writes its source, instead of starting
a Kafka consumer of its own, when the query:

- reads one stream or table (no join) that exactly one persistent query writes;
- has no GROUP BY, WINDOW, HAVING or PARTITION BY, and says EMIT CHANGES;
- reads from the end (``auto.offset.reset`` is ``latest``, or unset);
- names neither ROWPARTITION nor ROWOFFSET.

Its query id then starts with ``SCALABLE_PUSH_QUERY_``, which is how clients tell the two apart.
headwater serves both kinds the same way (a consumer of the source's topic from its end, which gives
the rows a scalable push query gives); the id says which kind ksqlDB would have made it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlglot import exp

from headwater.engine.push import stateful_clauses
from headwater.metastore.catalog import Catalog
from headwater.metastore.offset_reset import KEYS as RESET_KEYS
from headwater.sqlparse_ext.sqltypes import identifier_name
from headwater.sqlparse_ext.statements import Select

ENABLED_KEY = "ksql.query.push.v2.enabled"
PREFIX = "SCALABLE_PUSH_QUERY_"
_DISALLOWED = frozenset({"ROWPARTITION", "ROWOFFSET"})


def _flag(value: Any) -> bool:
    return value is True or str(value).strip().lower() == "true"


def is_scalable(
    statement: Select,
    catalog: Catalog,
    overrides: Mapping[str, Any],
    server: Mapping[str, Any],
) -> bool:
    """Whether ksqlDB would serve this push query as a scalable push query."""
    enabled = overrides.get(ENABLED_KEY, server.get(ENABLED_KEY, False))
    query = statement.query
    if not _flag(enabled) or query.emit != "CHANGES" or stateful_clauses(query):
        return False
    reset = next(
        (str(p[k]).strip().lower() for p in (overrides, server) for k in RESET_KEYS if p.get(k)),
        "latest",
    )
    if reset != "latest":
        return False
    writers = [q for q in catalog.queries.values() if q.sink == query.source.name]
    if len(writers) != 1:
        return False
    named = {
        identifier_name(c.this)
        for node in (*query.select, query.where)
        if node is not None
        for c in node.find_all(exp.Column)
        if not isinstance(c.this, exp.Star)
    }
    return not named & _DISALLOWED
