"""Push queries that need no state: a filter and projection over one source's topic, served from a
Kafka consumer with the pull queries' compiler (no Spark query). Does I/O (Kafka) in `TopicFollower`
only; the planning is pure.

``SELECT ... FROM s [WHERE ...] EMIT CHANGES [LIMIT n]`` reads ``s``'s topic from its end (ksqlDB's
``auto.offset.reset=latest``, the default) or from its beginning (``earliest``), every partition,
without a consumer group or commits, and yields each record that passes the WHERE, projected, as it
arrives. A table's changelog is read the same way (each change is a row). What needs state (GROUP BY,
WINDOW, JOIN, PARTITION BY, HAVING) is refused here.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from headwater.engine.errors import PullQueryError, SourceDropped, record_failure
from headwater.engine.formats.serde import RowSerde
from headwater.engine.formats.windows import split_windowed_key, window_size_ms
from headwater.engine.persistent.aggregate_plan import is_aggregation
from headwater.engine.pull.query import PullPlan, Row, plan_pull, row_failed, row_view
from headwater.engine.record_headers import header_columns, with_headers
from headwater.kafka.clients import KafkaSettings, consumer, poll_batch
from headwater.kafka.offsets import start_positions
from headwater.metastore.catalog import Source, SourceKind
from headwater.sqlparse_ext.statements import Query, Select

log = logging.getLogger(__name__)

_STATEFUL = ("JOIN", "WINDOW", "GROUP BY", "PARTITION BY", "HAVING")


def plan_push(select: Select, source: Source, custom_types: Mapping[str, Any]) -> PullPlan:
    """Checks a push query (``EMIT CHANGES``) that needs no state and plans it as a filter and
    projection over the source's records.

    Raises:
        PullQueryError: a clause that needs state (not supported yet), or what a pull query over
            the same source would refuse.
    """
    query = select.query
    needing_state = stateful_clauses(query)
    if needing_state:
        raise PullQueryError(
            f"Push queries with {', '.join(needing_state)} need state, which "
            "headwater does not run for push queries yet (it will, as transient "
            "Spark queries): create a table or stream AS SELECT and query it"
        )
    as_stream = dataclasses.replace(source, kind=SourceKind.STREAM)
    return plan_pull(dataclasses.replace(query, emit=None), as_stream, custom_types, push=True)


def stateful_clauses(query: Query) -> list[str]:
    """What makes a push query need state (then it runs as a transient Spark query), or []."""
    present = dict(
        zip(
            _STATEFUL,
            (query.joins, query.window, query.group_by, query.partition_by, query.having),
            strict=True,
        )
    )
    found = [clause for clause, given in present.items() if given]
    if not found and is_aggregation(query):
        found = ["aggregate functions"]
    return found


class TopicFollower:
    """A consumer of every partition of ``source``'s topic, from its end or its beginning.

    The start is fixed when the constructor returns (the ends are read from fetches, see
    `start_positions`): every record written after that is delivered, none written before it
    (with ``from_beginning=False``). So a push query's header is sent only after this.

    Raises:
        KafkaEdgeError: the ends could not be read within ``start_timeout_ms``.
    """

    def __init__(
        self,
        settings: KafkaSettings,
        source: Source,
        custom_types: Mapping[str, Any],
        *,
        from_beginning: bool,
        start_timeout_ms: int = 10000,
    ) -> None:
        self.source = source
        self._serde = RowSerde.for_source(source, custom_types)
        self._window_size = window_size_ms(source)
        self.starts = start_positions(
            settings,
            source.topic,
            range(source.partitions),
            from_beginning=from_beginning,
            timeout_ms=start_timeout_ms,
        )
        self._consumer = consumer(settings, "push-query", fetch_wait_max_ms=20)
        self._consumer.assign(self.starts)
        self.skipped = 0
        self._headers = header_columns(source)

    def poll(self, timeout_s: float) -> list[tuple[Row, bool]]:
        """The records that arrived within ``timeout_s``, each with whether it is a table's
        tombstone (a deleted row: its value columns NULL). A stream's tombstones, a table's
        records without a key and undecodable records are left out."""
        if self._consumer.retired():
            raise SourceDropped(
                f"{self.source.name} was dropped and its topic "
                f"{self.source.topic} deleted: the push query ends"
            )
        rows: list[tuple[Row, bool]] = []
        table = self.source.kind is SourceKind.TABLE
        for message in poll_batch(self._consumer, 500, timeout_s):
            if message.error() is not None:
                continue
            try:
                key = self._key(message.key())
                value = self._serde.deserialize_value(message.value())
            except Exception as exc:  # noqa: BLE001 - the record's boundary: skipped, never the query
                self.skipped += 1
                log.warning(
                    "push query on %s skips the record at partition %s, offset %s: %s",
                    self.source.topic,
                    message.partition(),
                    message.offset(),
                    record_failure(exc),
                )
                continue
            if table and all(k is None for k in key):
                continue  # ksqlDB drops a table's records without a key
            tombstone = value is None
            if tombstone and not table:
                continue
            columns = dict.fromkeys(self._serde.value_names) if value is None else value
            if self._headers and value is not None:
                columns = with_headers(columns, self._headers, message.headers())
            _kind, timestamp = message.timestamp()
            rows.append(
                (
                    Row(
                        key,
                        columns,
                        int(timestamp),
                        int(message.partition() or 0),
                        int(message.offset() or 0),
                    ),
                    tombstone,
                )
            )
        return rows

    def _key(self, data: bytes | None) -> tuple[Any, ...]:
        """The key columns, and a windowed source's window bounds after them."""
        if not self.source.windowed:
            return self._serde.deserialize_key(data)
        if data is None:
            return (*self._serde.deserialize_key(None), None, None)
        inner, start, end = split_windowed_key(
            data, self.source.windowed == "SESSION", self._window_size
        )
        return (*self._serde.deserialize_key(inner), start, end)

    def close(self) -> None:
        self._consumer.close()


def push_rows(
    plan: PullPlan, rows: list[tuple[Row, bool]], sent: int
) -> tuple[list[tuple[list[Any], bool]], bool]:
    """The rows that pass the WHERE (a tombstone always passes: the row it deletes may have),
    projected, each with its tombstone flag, up to the LIMIT (``sent`` rows were sent before); and
    whether the LIMIT is reached."""
    left = None if plan.limit is None else plan.limit - sent
    out: list[tuple[list[Any], bool]] = []
    keep, projection, keys = plan.filter, plan.projection, plan.key_names
    for row, tombstone in rows:
        if left is not None and len(out) >= left:
            break
        try:
            view = row_view(row, keys)
            if not tombstone and keep is not None and keep(view) is not True:
                continue
            selected = [f(view) for f in projection]
        except Exception as exc:  # noqa: BLE001 - the row's boundary: skipped, never the query
            row_failed("push query", plan.source.name, row, exc)
            continue
        out.append((selected, tombstone))
    return out, left is not None and len(out) >= left
