"""A stateless persistent query, record by record: decode, filter, re-key, project, encode. Pure.

One :class:`RecordPipeline` is built per query and input batch handler (in the Spark worker that
reads a Kafka partition, in the conformance runner, in tests) and maps raw Kafka records to the raw
records the sink writes. The order of the output is the order of the input, so a replayed batch
yields the same records in the same order (the sink's exactly-once rule rests on that).

A record without a value (a null value) is written on without one, under its key (as ksqlDB does),
unless the query has a WHERE clause, which drops it. A record that cannot be decoded, whose timestamp
cannot be read, or whose result cannot be written in the sink's format is skipped and reported as a :class:`ProcessingError`, the entry
ksqlDB's processing log would record; it never stops the query. Expressions that fail on a row
(division by zero, a bad cast) give NULL, as in ksqlDB. Each record is processed inside one boundary
that catches any exception it causes (a RecursionError, a KeyError as well as a SerdeError): the
record is skipped and reported, and the query goes on with the next one (`skipped`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from headwater.engine.errors import EngineError, record_failure
from headwater.engine.formats.serde import RowSerde
from headwater.engine.formats.windows import split_windowed_key, window_size_ms, windowed_key
from headwater.engine.functions import user_index
from headwater.engine.functions.registry import FUNCTIONS
from headwater.engine.functions.types import STRING, EvalFailure
from headwater.engine.partitioner import PartitionMemo
from headwater.engine.persistent.query_plan import CompiledQuery, compile_query
from headwater.engine.record_headers import header_columns, with_headers
from headwater.metastore.catalog import Catalog, Query, Source, SourceKind
from headwater.sqlparse_ext import parse_one
from headwater.sqlparse_ext import statements as ast

#: In a joined table's row: the key's previous joined row (its view), or None (see `join_run`).
OLD_ROW = "\0old"


class InputRecord(NamedTuple):
    """One record read from a source topic.

    A named tuple rather than a frozen dataclass: one is made for every record a query reads, and
    a frozen dataclass's ``__init__`` (an ``object.__setattr__`` per field) cost three times a
    tuple's: 15% of a stateless query's Python worker samples (bench.profile_queries)."""

    key: bytes | None
    value: bytes | None
    timestamp: int
    partition: int
    offset: int
    headers: tuple[tuple[str, bytes | None], ...] = ()
    #: the row already decoded (a join's output): then ``value`` is only None (deleted) or not
    row: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class OutputRecord:
    """One record for the sink topic, with the input position it came from."""

    key: bytes | None
    value: bytes | None
    timestamp: int
    partition: int
    source_partition: int
    source_offset: int
    source_seq: int = 0  # orders several outputs of one input record (a table row's undo, add)
    source_rank: int = 0  # an aggregate's batch order (`aggregate_run.rank_records`)

    def order(self) -> tuple[int, int, int, int]:
        """The order the sink writes a batch's records in: the order they were computed in."""
        return (self.source_rank, self.source_partition, self.source_offset, self.source_seq)


@dataclass(frozen=True, slots=True)
class ProcessingError:
    """A record the query skipped, as ksqlDB's processing log records it; or (kind
    ``function``) a Python function that raised on a record, which went on with NULL there.

    Attributes:
        kind: ``deserialization``, ``processing`` (evaluating the query on the row failed),
            ``timestamp``, ``serialization`` or ``function``.
    """

    query_id: str
    kind: str
    message: str
    topic: str
    partition: int
    offset: int


def parse_persistent(statement_text: str) -> tuple[ast.Query, str]:
    """The SELECT and the sink name of a CREATE ... AS SELECT or INSERT INTO ... SELECT."""
    statement = parse_one(statement_text, substitution=False)  # substituted when submitted
    if isinstance(statement, ast.CreateAsSelect):
        return statement.query, statement.name
    if isinstance(statement, ast.InsertInto):
        return statement.query, statement.target
    raise EngineError(f"not a persistent query: {statement_text!r}")


class RecordPipeline:
    """The per-record work of one persistent query."""

    def __init__(
        self, query_id: str, compiled: CompiledQuery, sink: Source, custom_types: Mapping[str, Any]
    ) -> None:
        self.query_id = query_id
        self.compiled = compiled
        self.sink = sink
        self._reader = RowReader(compiled.source, custom_types)
        self.source_serde = self._reader.serde
        self.sink_serde = RowSerde.for_source(sink, custom_types)
        self._sink_time = None if sink.timestamp_column is None else timestamp_reader(sink)
        self._value_names = [c.name for c in compiled.value_columns]
        self._table_functions = compiled.table_functions
        #: a windowed sink (the query reads a windowed stream): each key keeps its record's window
        self._sink_session = sink.windowed == "SESSION" if sink.windowed else None
        #: the sink partition of a key (keys repeat: Kafka's murmur2 in Python once per key)
        self._partition_of = PartitionMemo(sink.partitions)

    @classmethod
    def for_query(cls, query: Query, catalog: Catalog) -> RecordPipeline:
        """The pipeline of a query the catalog holds (its sink exists there)."""
        select, sink_name = parse_persistent(query.statement_text)
        sink = catalog.source(sink_name)
        if sink is None:
            raise EngineError(f"query {query.id}: its sink {sink_name} is not in the catalog")
        return cls(query.id, compile_query(select, catalog, sink_name), sink, dict(catalog.types))

    def process(
        self, records: Iterable[InputRecord]
    ) -> tuple[list[OutputRecord], list[ProcessingError]]:
        """The sink records of ``records`` (in input order), and the records skipped."""
        out: list[OutputRecord] = []
        errors: list[ProcessingError] = []
        source = self.compiled.source
        for record in records:
            self._one(record, out, errors)
            if user_index.failures_pending():
                errors.extend(
                    function_failures(self.query_id, source.topic, record.partition, record.offset)
                )
        return out, errors

    def _one(
        self, record: InputRecord, out: list[OutputRecord], errors: list[ProcessingError]
    ) -> None:
        """One record's sink records (into ``out``), or why it was skipped (into ``errors``)."""
        source = self.compiled.source
        keep = self.compiled.row_filter
        table = self.compiled.kind is SourceKind.TABLE
        stage = "deserialization"
        if table and record.key is None:
            return  # a table's record without a key: ksqlDB drops it
        try:
            value = self._reader.value(record)
            if value is None and keep is not None and not table:
                return  # WHERE drops records without a value, as ksqlDB's filter does
            view = self._reader.view(record, value)
            stage = "processing"
            old = view.pop(OLD_ROW, None) if record.row is not None else None
            if keep is not None and value is not None and keep(view) is not True:
                if table:  # a row filtered out of a table is a row deleted from it
                    value = None
                else:
                    return
            if (
                keep is not None
                and table
                and value is None
                and record.row is not None
                and (old is None or keep(old) is not True)
            ):
                # a join's table sends its old rows too (ksqlDB enables it): a row that did
                # not pass before and does not now changes nothing downstream
                return
            if self._table_functions:
                if value is None:
                    return  # nothing to explode
                views = self._exploded(view)
            else:
                views = [view]
            records_out = []
            for seq, each in enumerate(views):
                stage = "serialization"
                records_out.append(self._output(record, each, value, seq))
        except Exception as exc:  # noqa: BLE001 - the record's boundary: see `skipped`
            errors.append(
                skipped(self.query_id, exc, stage, source.topic, record.partition, record.offset)
            )
            return
        out.extend(records_out)

    def _output(
        self,
        record: InputRecord,
        view: Mapping[str, Any],
        value: Mapping[str, Any] | None,
        seq: int,
    ) -> OutputRecord:
        """The sink record of one (decoded, filtered) row. Raises for a row it cannot write."""
        keys, values, names = self.compiled.keys, self.compiled.values, self._value_names
        rowtime = view["ROWTIME"]
        if value is None:  # key expressions over the (missing) value give NULL
            new_key = [
                None if reads else f(view) for f, reads in zip(keys, self.compiled.key_reads_value)
            ]
        else:
            new_key = [f(view) for f in keys]
        partition_key = None
        if record.key is None and not self.compiled.partition_by:
            key_bytes = None  # a null key stays null (not an object of NULLs)
        else:
            key_bytes = self.sink_serde.serialize_key(new_key)
            if self._sink_session is not None and "WINDOWSTART" in view:
                # Kafka Streams places a windowed key by the key alone (WindowedStreamPartitioner)
                partition_key = key_bytes or b""
                window = (view["WINDOWSTART"], view["WINDOWEND"])
                key_bytes = windowed_key(partition_key, window, self._sink_session)
        if value is None:
            # A record without a value goes on, still without one, under its new key
            return OutputRecord(
                key_bytes,
                None,
                rowtime,
                self._partition(key_bytes, record.partition, partition_key),
                record.partition,
                record.offset,
                seq,
            )
        row = {name: f(view) for name, f in zip(names, values)}
        value_bytes = self.sink_serde.serialize_value(row)
        if self._sink_time is not None:
            row.update(zip([c.name for c in self.compiled.key_columns], new_key))
            try:
                rowtime = self._sink_time(row)
            except Exception as exc:  # the record's fault, reported as such
                raise RecordError("timestamp", _message(exc)) from exc
        return OutputRecord(
            key_bytes,
            value_bytes,
            rowtime,
            self._partition(key_bytes, record.partition, partition_key),
            record.partition,
            record.offset,
            seq,
        )

    def _exploded(self, view: dict[str, Any]) -> list[dict[str, Any]]:
        """The rows of the table functions (ksqlDB's flat map: the i-th output row has each
        function's i-th value, NULL for those with fewer; none when all are empty)."""
        produced = [f.rows(view) for f in self._table_functions]
        rows = []
        for i in range(max((len(p) for p in produced), default=0)):
            each = dict(view)
            for function, values in zip(self._table_functions, produced, strict=True):
                each[function.name] = values[i] if i < len(values) else None
            rows.append(each)
        return rows

    def _partition(
        self, key: bytes | None, source_partition: int, partition_key: bytes | None = None
    ) -> int:
        """Keyed records go where Kafka's partitioner puts them (a windowed key by its key alone,
        ``partition_key``); keyless ones stay in step with their input partition, so a replayed
        batch lands where it landed before."""
        if key is None:
            return source_partition % self.sink.partitions
        return self._partition_of(key if partition_key is None else partition_key)


class RowReader:
    """Decodes a source record into the row expressions read: its columns (key, value, headers) and
    ``ROWTIME`` (the record's timestamp, or the source's TIMESTAMP column), ``ROWPARTITION``,
    ``ROWOFFSET``."""

    def __init__(self, source: Source, custom_types: Mapping[str, Any]) -> None:
        self.source = source
        self.serde = RowSerde.for_source(source, custom_types)
        self._key_names = self.serde.key_names
        self._header_columns = header_columns(source)
        self._time = timestamp_reader(source)
        #: a windowed source's keys end with their window: (session?, time windows' size)
        self._window = (
            (source.windowed == "SESSION", window_size_ms(source)) if source.windowed else None
        )

    def value(self, record: InputRecord) -> Mapping[str, Any] | None:
        """The decoded value of ``record`` (None: it has none)."""
        if record.row is not None:
            return None if record.value is None else record.row
        return self.serde.deserialize_value(record.value)

    def view(self, record: InputRecord, value: Mapping[str, Any] | None) -> dict[str, Any]:
        """The row of ``record``, whose value ``value`` is already decoded.

        Raises:
            RecordError: the key cannot be decoded (``deserialization``) or the timestamp not
                read (``timestamp``).
        """
        if record.row is not None:
            return dict(record.row)
        window = None
        try:
            data = record.key
            if self._window is not None and data is not None:
                data, start, end = split_windowed_key(data, *self._window)
                window = (start, end)
            key = self.serde.deserialize_key(data)
        except Exception as exc:  # the record's fault, reported as such
            raise RecordError("deserialization", _message(exc)) from exc
        view = dict(value or {})
        if window is not None:
            view["WINDOWSTART"], view["WINDOWEND"] = window
        view.update(zip(self._key_names, key))
        if self._header_columns:
            view = with_headers(view, self._header_columns, record.headers)
        try:
            view["ROWTIME"] = record.timestamp if self._time is None else self._time(view)
        except Exception as exc:  # the record's fault, reported as such
            raise RecordError("timestamp", _message(exc)) from exc
        view["ROWPARTITION"] = record.partition
        view["ROWOFFSET"] = record.offset
        return view


class RecordError(EngineError):
    """A record an operator skips: ``kind`` is the processing log's error type."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def function_failures(
    query_id: str, topic: str, partition: int, offset: int
) -> list[ProcessingError]:
    """The processing-log entries of the Python functions that raised on one record (each gave
    NULL there, and the record went on, as ksqlDB's UDFs do)."""
    return [
        ProcessingError(query_id, "function", message, topic, partition, offset)
        for message in user_index.take_failures()
    ]


def skipped(
    query_id: str, exc: Exception, stage: str, topic: str, partition: int, offset: int
) -> ProcessingError:
    """The processing-log entry of a record a per-record boundary skips.

    Every operator runs each record inside ``try: ... except Exception`` and hands what it caught
    here: whatever a record causes (bytes that do not decode, a value nested too deep, an expression
    that raises where it should give NULL, a bug a strange value finds) skips that record only and
    is reported with its position, never fails the task (Spark would retry the same record forever).

    Args:
        query_id: the query's id.
        exc: what the record caused.
        stage: the processing log's error type when ``exc`` is not a `RecordError` (which has one).
        topic: the source topic.
        partition: the record's partition.
        offset: the record's offset.
    """
    kind = exc.kind if isinstance(exc, RecordError) else stage
    return ProcessingError(query_id, kind, _message(exc), topic, partition, offset)


def _message(exc: BaseException) -> str:
    """An error's message, never blank; the type is named too for exceptions no operator raises
    on purpose."""
    if isinstance(exc, (EvalFailure, ValueError, TypeError)) and str(exc):
        return str(exc)
    return record_failure(exc) or type(exc).__name__


def timestamp_reader(source: Source) -> Any:
    """row -> ms since the epoch from the source's TIMESTAMP column, or None without one."""
    name = source.timestamp_column
    if name is None:
        return None
    column = source.column(name)
    pattern = str(source.property("TIMESTAMP_FORMAT"))
    resolved = FUNCTIONS["STRINGTOTIMESTAMP"]([STRING, STRING])
    assert resolved is not None
    parse = resolved[1]

    def read(row: Mapping[str, Any]) -> int:
        value = row.get(name)
        if value is None:
            raise EngineError(f"the TIMESTAMP column {name} is NULL")
        if column is not None and column.type == "STRING":
            return int(parse(value, pattern))
        if int(value) < 0:
            raise EngineError(f"the TIMESTAMP column {name} is negative: {value}")
        return int(value)

    return read
