"""What the shell says while a persistent query it created is starting. Pure.

A CREATE ... AS SELECT or INSERT INTO ... SELECT is answered as soon as the command log has it, as
in ksqlDB; the query then starts on Spark, which on a node that has not started Spark yet takes
tens of seconds. The interactive shell follows the new query's state (EXPLAIN) and shows one line,
updated in place, saying what it waits for and for how long, until the query is RUNNING (its first
micro-batch done), in ERROR, or `FOLLOW_LIMIT_S` has passed; Ctrl-C stops the waiting, never the
query.

A push query with state (GROUP BY, WINDOW, JOIN, ...) runs as a transient Spark query, which starts
the same way; its rows come only once it runs. When no row has come for `PUSH_QUIET_S`, the shell
looks the push query up in SHOW QUERIES (queryType PUSH): while it is PENDING the same kind of line
says so, replaced by the rows when they come; a push query that reads its topic directly is
RUNNING at once, and nothing is shown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: How long the shell follows a starting query before it gives the prompt back.
FOLLOW_LIMIT_S = 180.0
#: How long a push query may be silent before the shell asks whether it is still starting.
PUSH_QUIET_S = 1.0

_CREATED = re.compile(r"query ID: ([A-Za-z0-9_]+)")


def created_query_id(entity: Mapping[str, Any]) -> str | None:
    """The id of the persistent query a statement's answer says it created, if any."""
    status = entity.get("commandStatus")
    if not isinstance(status, Mapping) or status.get("status") != "SUCCESS":
        return None
    found = _CREATED.search(str(status.get("message") or ""))
    return found.group(1) if found else None


def starting_line(query_id: str, state: str, seconds: float) -> str:
    """The line shown while ``query_id`` starts (``state`` as EXPLAIN reports it)."""
    if state == "PENDING":
        what = "waiting for Spark to start it and finish its first micro-batch"
    else:
        what = f"its state is {state or 'not known yet'}"
    return f"Query {query_id} is starting: {what} ({seconds:.0f} s; Ctrl-C stops waiting)"


def started_line(query_id: str, seconds: float) -> str:
    """The line that replaces `starting_line` once the query runs."""
    return f"Query {query_id} is running (started in {seconds:.0f} s)."


def description_state(entities: list[Mapping[str, Any]]) -> tuple[str, str]:
    """(state, last error) of a query from the entities of ``EXPLAIN <query id>``."""
    for entity in entities:
        description = entity.get("queryDescription")
        if isinstance(description, Mapping):
            errors = description.get("queryErrors") or []
            message = str(errors[-1].get("errorMessage", "")) if errors else ""
            return str(description.get("state") or ""), message
    return "", ""


def push_state(entities: list[Mapping[str, Any]], query_id: str) -> str:
    """The state SHOW QUERIES gives push query ``query_id`` ('' when it does not list it)."""
    for entity in entities:
        for query in entity.get("queries") or ():
            if isinstance(query, Mapping) and query.get("id") == query_id:
                return str(query.get("state") or "")
    return ""


def push_starting_line(query_id: str, seconds: float) -> str:
    """The line shown while a push query's Spark query starts, before its first row."""
    return (
        f"Push query {query_id} is starting: waiting for Spark to start it and finish its first "
        f"micro-batch ({seconds:.0f} s; Ctrl-C stops the query)"
    )


def push_started_line(query_id: str, seconds: float) -> str:
    """The line that replaces `push_starting_line` once the push query runs."""
    return (
        f"Push query {query_id} is running (started in {seconds:.0f} s); its rows come as "
        "records arrive."
    )
