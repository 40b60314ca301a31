"""Push queries that need state (GROUP BY, WINDOW, JOIN, PARTITION BY, HAVING), run as transient
Spark queries. Does I/O (Kafka topics, the server's Spark engine).

``SELECT ... GROUP BY ... EMIT CHANGES`` is run as ksqlDB runs a transient query: the same query a
``CREATE TABLE ... AS SELECT`` would run, writing to a hidden topic of its own, never recorded in the
command log (it belongs to one client). The engine runs it beside the server's persistent queries;
its result topic is followed like a stateless push query's source (`TopicFollower`), from its
beginning. When the client goes (LIMIT reached, disconnect, ``/close-query``), the Spark query is
stopped, its checkpoint deleted, and its topic deleted.

The transient query reads its sources from their ends as of the request (``auto.offset.reset=latest``,
the default: the offsets are taken before Spark starts, so nothing written after the request is
missed however long Spark takes), or from their beginning (``earliest``), as a push query does; the
table side of a join always from its beginning (as ksqlDB reads it).
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sqlglot import exp

from headwater.engine.expressions import format_expression, select_names
from headwater.engine.persistent import QUERY_ANALYZER
from headwater.engine.persistent.aggregate_plan import is_aggregation
from headwater.engine.push import TopicFollower, plan_push
from headwater.engine.spark.host import query_payload
from headwater.gateway.errors import KsqlError
from headwater.gateway.services import Services
from headwater.kafka import clients
from headwater.kafka.clients import create_topic
from headwater.kafka.offsets import end_offsets
from headwater.metastore.apply import apply_command
from headwater.metastore.errors import MetastoreError
from headwater.metastore.offset_reset import LATEST, source_resets
from headwater.metastore.plan import TopicFacts, plan
from headwater.metastore.records import CommandRecord
from headwater.sqlparse_ext import parse_one
from headwater.sqlparse_ext import statements as ast

log = logging.getLogger(__name__)

#: The hidden topics of transient queries start with this (never a source's name).
TOPIC_PREFIX = "_headwater-transient-"
_LIMIT = re.compile(r"\s+LIMIT\s+\d+\s*$", re.IGNORECASE)
_FROM = re.compile(r"\bFROM\b", re.IGNORECASE)
_HAVING = re.compile(r"\bHAVING\b", re.IGNORECASE)
_EMIT = re.compile(r"\bEMIT\s+(CHANGES|FINAL)\b", re.IGNORECASE)


class TransientFollower:
    """A transient Spark query and the follower of its result topic; `close` ends both."""

    def __init__(
        self, services: Services, query_id: str, topic: str, follower: TopicFollower
    ) -> None:
        self._services = services
        self.query_id = query_id
        self.topic = topic
        self._follower = follower
        self._closed = threading.Event()

    def poll(self, timeout_s: float) -> list[Any]:
        return self._follower.poll(timeout_s)

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._follower.close()
        engine = self._services.queries
        if engine is not None:
            engine.stop_transient(self.query_id)
        threading.Thread(target=self._delete_topic, name="transient-cleanup", daemon=True).start()

    def _delete_topic(self) -> None:
        engine = self._services.queries
        if engine is not None:
            engine.wait_stopped(self.query_id, timeout_s=30)
        try:
            failed = clients.delete_topics(
                self._services.admin, self._services.settings, [self.topic], names_reused=False
            )
        except Exception as exc:  # noqa: BLE001 - a leftover hidden topic is logged, not raised
            failed = {self.topic: str(exc)}
        if failed:
            log.warning("could not delete the transient topic %s: %s", self.topic, failed)


def _output_names(query: ast.Query, taken: Sequence[str] = ()) -> list[str] | None:
    """The push query's column names as a CREATE ... AS SELECT would name them (None with ``*``;
    ``taken``: its source's column names, which generated names skip)."""
    if any(
        isinstance(i, exp.Star) or (isinstance(i, exp.Column) and isinstance(i.this, exp.Star))
        for i in query.select
    ):
        return None
    return select_names(list(query.select), taken)


def _with_grouping_selected(statement: ast.Select) -> str:
    """The SELECT (without LIMIT) with every GROUP BY expression it does not select added as a
    hidden column (``HW_KEY_n``), as the CREATE TABLE ... AS SELECT needs them, and a hidden value
    column (``HW_VALUE``) when it selects only grouping expressions."""
    text = _LIMIT.sub("", statement.text.strip().rstrip(";").rstrip())
    query = statement.query
    selected = {format_expression(i.this if isinstance(i, exp.Alias) else i) for i in query.select}
    grouping = [format_expression(g) for g in query.group_by]
    missing = [g for g in grouping if g not in selected]
    one_group = not query.group_by and is_aggregation(query)
    if one_group:  # an aggregate over the whole stream: ksqlDB's transient queries allow it
        missing = ["1"]
    # only grouping expressions selected: a push query may (ksqlDB's transient queries), a
    # CREATE TABLE ... AS SELECT needs a value column; a hidden one is added, never shown
    keys_only = bool(grouping) and selected <= set(grouping)
    if not missing and not keys_only:
        return text
    ends = [int(n.meta["end"]) for item in query.select for n in item.walk() if "end" in n.meta]
    found = _FROM.search(text, (max(ends) + 1) if ends else 0)
    if found is None:
        return text
    hidden = [f"HW_KEY_{i}" for i in range(len(missing))]
    added = "".join(f", {g} AS {h}" for g, h in zip(missing, hidden, strict=True))
    if keys_only:
        added += ", COUNT(*) AS HW_VALUE"
    text = text[: found.start()] + added + " " + text[found.start() :]
    if one_group:  # GROUP BY goes before HAVING, or before the final EMIT
        having = _HAVING.search(text) if query.having is not None else None
        emit = list(_EMIT.finditer(text))
        at = having.start() if having else (emit[-1].start() if emit else len(text))
        text = f"{text[:at].rstrip()} GROUP BY 1 {text[at:]}"
    return text


_WINDOW_BOUNDS = frozenset({"WINDOWSTART", "WINDOWEND"})


def _without_window_bounds(statement: ast.Select) -> ast.Select:
    """A windowed aggregation's SELECT without its bare ``WINDOWSTART``/``WINDOWEND`` items: a push
    query may select them (ksqlDB's transient queries do), a CREATE TABLE ... AS SELECT may not
    name columns so; its windowed result's keys carry them, and the push query's reader selects
    them from there."""
    query = statement.query
    if query.window is None:
        return statement
    spans = []
    for item in query.select:
        if (
            isinstance(item, exp.Column)
            and not item.table
            and isinstance(item.this, exp.Identifier)
            and item.name.upper() in _WINDOW_BOUNDS
            and "start" in item.this.meta
        ):
            spans.append((int(item.this.meta["start"]), int(item.this.meta["end"])))
    if not spans or len(spans) == len(query.select):
        return statement
    text = statement.text
    for start, end in sorted(spans, reverse=True):
        after = re.match(r"\s*,", text[end + 1 :])
        if after is not None:  # the item and the comma after it
            text = text[:start] + text[end + 1 + after.end() :].lstrip()
        else:  # the last item: the comma before it
            before = text.rstrip()[:start].rstrip()
            text = before[:-1] + " " + text[end + 1 :].lstrip() if before.endswith(",") else text
    parsed = parse_one(text if text.rstrip().endswith(";") else f"{text};", substitution=False)
    assert isinstance(parsed, ast.Select)
    return parsed


def start_transient(
    services: Services, statement: ast.Select, properties: Mapping[str, Any], from_beginning: bool
) -> tuple[Any, TransientFollower]:
    """Starts a push query that needs state: (its plan over the result, its follower).

    Raises:
        KsqlError: the query is refused (ksqlDB's messages, as for CREATE ... AS SELECT), or the
            server runs no Spark engine.
    """
    engine = services.queries
    if engine is None and services.no_spark:
        raise KsqlError(
            "Push queries with GROUP BY, WINDOW, JOIN, PARTITION BY or HAVING run on "
            f"Spark, and this server cannot run Spark: {services.no_spark}",
            40000,
            statement_text=statement.text,
        )
    if engine is None:
        raise KsqlError(
            "Push queries with GROUP BY, WINDOW, JOIN, PARTITION BY or HAVING run on "
            "Spark, and this server runs no Spark engine.",
            40000,
            statement_text=statement.text,
        )
    catalog = services.runner.catalog
    name = f"HW_TRANSIENT_{uuid.uuid4().hex[:12].upper()}"
    topic = f"{TOPIC_PREFIX}{name.lower()}"
    select_text = _with_grouping_selected(_without_window_bounds(statement))
    try:
        parsed = parse_one(f"{select_text};", substitution=False)
        assert isinstance(parsed, ast.Select)
        shape = QUERY_ANALYZER.shape(parsed.query, catalog, name)
        kind = shape.kind.value
        create = parse_one(
            f"CREATE {kind} {name} WITH (KAFKA_TOPIC='{topic}', PARTITIONS=1, "
            f"KEY_FORMAT='JSON', VALUE_FORMAT='JSON') AS {select_text};",
            substitution=False,
        )
        planned = plan(create, catalog, TopicFacts({}, None), QUERY_ANALYZER)
        assert planned.command is not None
        offset = catalog.last_offset + 1
        local, _ = apply_command(
            catalog, CommandRecord(name, offset, create.text, planned.command), offset
        )
    except MetastoreError as exc:
        raise KsqlError(exc.message, 40001, statement_text=statement.text) from exc
    sink = local.source(name)
    assert sink is not None and sink.query_id is not None
    query = local.queries[sink.query_id]
    limit = "" if statement.query.limit is None else f" LIMIT {statement.query.limit}"
    # the push query's own columns, in its order (a CTAS puts keys first, window bounds in, and
    # needs the grouping expressions it selects for it)
    source = catalog.source(statement.query.source.name)
    taken = [c.name for c in source.columns] if source and not statement.query.joins else []
    shown = _output_names(statement.query, taken)
    listed = ", ".join(f"`{n}`" for n in shown) if shown else "*"
    reader = parse_one(f"SELECT {listed} FROM {name} EMIT CHANGES{limit};", substitution=False)
    assert isinstance(reader, ast.Select)
    push_plan = plan_push(reader, sink, local.types)
    create_topic(services.admin, services.settings, topic, sink.partitions)
    follower = TopicFollower(services.settings, sink, local.types, from_beginning=True)
    payload = query_payload(query, local)
    if not from_beginning:  # from the sources' ends as of now: what arrives after the request
        # (the table side of a join from its beginning, as ksqlDB reads it: offset_reset.py)
        leaves = [s for s in (local.source(n) for n in query.sources) if s is not None]
        payload["startingOffsets"] = {
            leaf.topic: {
                str(p): o
                for p, o in end_offsets(
                    services.settings, leaf.topic, range(leaf.partitions)
                ).items()
            }
            for leaf in leaves
            if source_resets(leaves, LATEST)[leaf.topic] == LATEST
        }
    query_id = query.id
    engine.run_transient(query_id, payload)
    log.info(
        "push query with state: transient query %s over topic %s, from %s",
        query_id,
        topic,
        payload.get("startingOffsets", "the beginning"),
    )
    return push_plan, TransientFollower(services, query_id, topic, follower)
