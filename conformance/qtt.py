"""ksqlDB's query-validation tests (QTT) run through headwater's persistent-query engine.

Run ``python -m conformance.qtt`` (corpus: ``../shared/ksql-corpus/qtt`` next to the repository).
Each case's statements are planned and applied exactly as a server does (`metastore.plan` with the
engine's query analysis, `metastore.apply`); each persistent query runs as the engine's operators
a live query's Spark tasks run (`ColumnarPipeline` for stateless queries it runs, else
`RecordPipeline`; the group / change /
aggregate stages of `AggregatePipeline`, with states held in dicts and pickled between records as
Spark's state store holds them), on topics held in memory, with ``cache.max.bytes.buffering=0``
and every input read from its beginning, as ksqlDB's own runner (one update per input record;
``auto.offset.reset=earliest``). Records are judged as ksqlDB's runner judges them: the records of every
expected output topic, in order per topic, key and value compared as JSON, timestamps when given;
``expectedException`` passes when a statement fails with a message containing the text;
``post.sources`` schemas and types are compared too.

Options: ``--file NAME`` (repeatable, a file name or stem), ``--case TEXT`` (cases whose name
contains it), ``--jobs N`` (processes), ``--json PATH`` (a report for comparing runs),
``--ci`` (fails when a case listed in ``conformance/qtt_ci_expected.txt`` does not pass: a regression), ``-v`` (every failure with its detail), ``--spark`` (then replays the passed cases'
stateless query stages in one Spark job, through what a live query's source task runs, and their
aggregations through Spark's stateful operators, and compares the rows: `conformance.qtt_spark`;
with ``--ci`` a difference fails the run). Prints ``N passed,
N failed, N skipped`` and the causes grouped.

ksqlDB's test functions (TEST_UDF, TEST_UDAF, BAD_UDF, ...: its runner loads them from its test
jar) are ported to Python in ``tests/ksql_functions``; each process loads that folder as an
extension folder before its first case, and calls its modules' ``reset()`` before each case
(`_load_test_functions`).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import sys
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Collection, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from conformance.cases import (
    LATER,
    Mismatch,
    Skip,
    case_files,
    decode,
    encode,
    load_cases,
    same,
    windowed_input,
)
from conformance.corpus import QTT
from conformance.stages import RecordedStage, recorded_stages, stage_payload
from headwater.engine.errors import EngineError
from headwater.engine.formats import schema_registry
from headwater.engine.formats.own_registry import mock_registry
from headwater.engine.formats.schema_inference import schema_facts
from headwater.engine.formats.schema_registry import RegisteredSchema
from headwater.engine.formats.serde import serde_of
from headwater.engine.formats.windows import split_windowed_key, window_size_ms
from headwater.engine.functions.extensions import Loaded, load_folder
from headwater.engine.insert_values import evaluate_insert_values
from headwater.engine.partitioner import partition_for
from headwater.engine.persistent import QUERY_ANALYZER, InputRecord, OutputRecord, RecordPipeline
from headwater.engine.persistent.aggregate_run import (
    AggregatePipeline,
    LocalAggregation,
    is_aggregate_statement,
)
from headwater.engine.persistent.columnar_run import ColumnarPipeline, output_batch, refusal
from headwater.engine.persistent.join_run import JoinPipeline, LocalJoin
from headwater.engine.persistent.query_run import ProcessingError
from headwater.gateway.locate import located_message
from headwater.metastore.apply import apply_command
from headwater.metastore.catalog import Catalog, Query, Source
from headwater.metastore.codec import source_from_dict
from headwater.metastore.errors import MetastoreError
from headwater.metastore.format_defaults import KSQLDB_DEFAULTS, FormatDefaults, format_defaults
from headwater.metastore.plan import TopicFacts, plan, topics_named
from headwater.metastore.records import CommandRecord
from headwater.sqlparse_ext import ParseError, parse
from headwater.sqlparse_ext import statements as ast

CI_EXPECTED = Path(__file__).with_name("qtt_ci_expected.txt")
TEST_FUNCTIONS = Path(__file__).resolve().parents[1] / "tests" / "ksql_functions"

#: Formats headwater does not read yet.
_LATER_FORMATS: tuple[str, ...] = ()


@dataclass
class Outcome:
    """One case's verdict."""

    file: str
    name: str
    verdict: str  # passed | failed | skipped
    cause: str = ""
    detail: str = ""
    #: with ``--spark``: the case's stateless query stages as `qtt_spark` replays them (pickled)
    stages: bytes | None = field(default=None, repr=False, compare=False)


# -- running one case ------------------------------------------------------------------------------


@dataclass
class _Topic:
    partitions: int
    records: list[tuple[int, InputRecord]] = field(default_factory=list)  # (partition, record)

    def append(
        self,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        headers: tuple[tuple[str, bytes | None], ...] = (),
    ) -> InputRecord:
        offset = sum(1 for p, _ in self.records if p == partition)
        record = InputRecord(key, value, timestamp, partition, offset, headers)
        self.records.append((partition, record))
        return record


class World:
    """A catalog, topics in memory and the running queries of one case (also used by
    bench.nexmark's tests to run Nexmark's queries in process)."""

    def __init__(
        self, topics: Mapping[str, int], formats: FormatDefaults = KSQLDB_DEFAULTS
    ) -> None:
        self.formats = formats  # the case's ksql.persistence.default.format.* (or ksqlDB's)
        self.catalog = Catalog()
        self.topics: dict[str, _Topic] = {n: _Topic(p) for n, p in topics.items()}
        self.pipelines: dict[str, RecordPipeline | _Columnar | LocalAggregation | LocalJoin] = {}
        self.log: list[tuple[str, InputRecord]] = []  # every record written, in order
        self.offset = 0
        self.errors = 0
        # a mock registry per case, as ksqlDB's runner, with the rules of the node's own registry
        self.registry = mock_registry()
        self.given: set[str] = set()  # the subjects whose schemas the case gives
        #: with ``--spark``: per stateless or aggregating query, what its stage was given and
        #: gave (`qtt_spark`)
        self.stages: dict[str, RecordedStage] | None = None
        schema_registry.use(self.registry)

    def execute(self, statement: ast.Statement) -> None:
        if isinstance(statement, ast.InsertValues):
            self._insert_values(statement)
            return
        if not isinstance(
            statement,
            (
                ast.CreateSource,
                ast.AlterSource,
                ast.CreateAsSelect,
                ast.InsertInto,
                ast.Drop,
                ast.CreateType,
                ast.DropType,
                ast.Terminate,
            ),
        ):
            raise Skip(f"statement {type(statement).__name__}")
        if isinstance(statement, ast.CreateSource):
            statement = _unchecked_partitions(statement, self.topics)
            # ksqlDB's runner creates the topics its source statements name (one partition
            # unless PARTITIONS says otherwise), as a user would before running them.
            for name in topics_named(statement):
                self.topics.setdefault(
                    name, _Topic(int(statement.properties.get("PARTITIONS") or 1))
                )
        named = topics_named(statement)
        facts = TopicFacts(
            {n: self.topics[n].partitions for n in named if n in self.topics},
            schema_facts(statement, self.registry),
        )
        planned = plan(statement, self.catalog, facts, QUERY_ANALYZER, defaults=self.formats)
        if planned.command is None:
            return
        if planned.create_topic is not None:
            name, partitions = planned.create_topic
            self.topics.setdefault(name, _Topic(partitions))
        record = CommandRecord(f"c{self.offset}", self.offset, statement.text, planned.command)
        before = set(self.catalog.queries)
        self.catalog, _message = apply_command(self.catalog, record, self.offset)
        self.offset += 1
        for query_id in set(self.catalog.queries) - before:
            query = self.catalog.queries[query_id]
            after: RecordPipeline | _Columnar | LocalAggregation
            if is_aggregate_statement(query.statement_text):
                after = LocalAggregation(AggregatePipeline.for_query(query, self.catalog))
            else:
                after = RecordPipeline.for_query(query, self.catalog)
            if isinstance(after, RecordPipeline) and refusal(after.compiled, after.sink) is None:
                after = _Columnar(ColumnarPipeline(after))  # as a live query's tasks run it
            if after.compiled.join is not None:
                self.pipelines[query_id] = LocalJoin(
                    JoinPipeline(query_id, after.compiled.join, self.catalog.types), after
                )
            else:
                self.pipelines[query_id] = after
            if self.stages is not None:
                self._record_stage(query)
            self._catch_up(query_id)
        for query_id in before - set(self.catalog.queries):
            self.pipelines.pop(query_id, None)
        if planned.delete_topic is not None:
            self.topics.pop(planned.delete_topic, None)

    def _record_stage(self, query: Query) -> None:
        """Records a new query's stage for the Spark replay, with the shape of its plan."""
        assert self.stages is not None
        pipeline = self.pipelines[query.id]
        if isinstance(pipeline, (RecordPipeline, _Columnar)):
            self.stages[query.id] = RecordedStage(stage_payload(query, self.catalog))
            return
        from headwater.engine.spark.aggregation import STATE_BUCKETS

        shape, after = (
            ("join", pipeline.after) if isinstance(pipeline, LocalJoin) else ("", pipeline)
        )
        buckets = 0
        if isinstance(after, LocalAggregation):
            windowed = after.compiled.window is not None
            kind = "windowed" if windowed else "table" if after.pipeline.table_source else "stream"
            shape = f"{shape}+{kind}" if shape else kind
            buckets = 0 if windowed else STATE_BUCKETS  # as `driver._start` decides them
        payload = stage_payload(query, self.catalog, buckets=buckets)
        self.stages[query.id] = RecordedStage(payload, shape)

    def _insert_values(self, statement: ast.InsertValues) -> None:
        source = self.catalog.source(statement.target)
        if source is None:
            raise EngineError(
                f"Cannot insert values into an unknown stream/table: `{statement.target}`"
                + self.catalog.alternatives(statement.target)
            )
        insert = evaluate_insert_values(statement, source, self.catalog.types)
        serde = serde_of(source, self.catalog.types)
        key = serde.serialize_key(insert.key)
        value = serde.serialize_value(insert.value)
        self.produce(source.topic, key, value, insert.rowtime or 0, None)

    def _catch_up(self, query_id: str) -> None:
        """A query started after records were written reads them from the beginning."""
        pipeline = self.pipelines[query_id]
        for topic, record in list(self.log):
            if topic in _topics_of(pipeline):
                self._run(query_id, pipeline, record, topic)

    def produce(
        self,
        topic_name: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int,
        partition: int | None,
        headers: tuple[tuple[str, bytes | None], ...] = (),
    ) -> None:
        topic = self.topics.setdefault(topic_name, _Topic(1))
        if partition is None:
            partition = 0 if key is None else partition_for(key, topic.partitions)
        record = topic.append(partition, key, value, timestamp, headers)
        self.log.append((topic_name, record))
        for query_id, pipeline in list(self.pipelines.items()):
            if topic_name in _topics_of(pipeline):
                self._run(query_id, pipeline, record, topic_name)

    def _run(
        self,
        query_id: str,
        pipeline: RecordPipeline | _Columnar | LocalAggregation | LocalJoin,
        record: InputRecord,
        topic: str,
    ) -> None:
        if isinstance(pipeline, LocalJoin):
            outputs, errors = pipeline.process_topic(topic, [record])
        else:
            outputs, errors = pipeline.process([record])
        if self.stages is not None and query_id in self.stages:
            rows = output_batch(outputs, errors).to_pylist()
            self.stages[query_id].calls.append(((record,), rows))
            self.stages[query_id].topics.append(topic)
        self.errors += len(errors)
        for out in outputs:
            self._emit(pipeline.sink.topic, out)

    def _emit(self, topic: str, out: OutputRecord) -> None:
        self.produce(topic, out.key, out.value, out.timestamp, out.partition)


class _Columnar:
    """A stateless query on the vectorized path (`ColumnarPipeline`), read as records."""

    def __init__(self, pipeline: ColumnarPipeline) -> None:
        self.pipeline = pipeline
        self.compiled = pipeline.compiled
        self.sink = pipeline.records.sink

    def process(
        self, records: list[InputRecord]
    ) -> tuple[list[OutputRecord], list[ProcessingError]]:
        return self.pipeline.process_records(records)


def _topics_of(
    pipeline: RecordPipeline | _Columnar | LocalAggregation | LocalJoin,
) -> Collection[str]:
    if isinstance(pipeline, LocalJoin):
        return pipeline.topics
    return (pipeline.compiled.source.topic,)


@functools.cache
def _installed_test_functions() -> Loaded:
    loaded = load_folder(TEST_FUNCTIONS)
    if loaded.problems:
        raise RuntimeError(f"qtt: ksqlDB's test functions: {'; '.join(loaded.problems)}")
    return loaded


def _load_test_functions() -> None:
    """Installs ksqlDB's test functions (``TEST_FUNCTIONS``), once per process, and resets what
    they keep between calls (a module's ``reset()``): ksqlDB gives each query new instances."""
    for source in _installed_test_functions().modules:
        reset = getattr(sys.modules[source.module_name], "reset", None)
        if reset is not None:
            reset()


def run_case(file: str, case: dict, record: bool = False) -> Outcome:
    """One case's verdict; with ``record``, a passed case carries its stateless stages (`stages`)."""
    _load_test_functions()
    name = case["name"]
    try:
        world = _run_case(case, record)
    except Skip as skip:
        return Outcome(file, name, "skipped", skip.cause, skip.detail)
    except Mismatch as mismatch:
        return Outcome(file, name, "failed", mismatch.cause, mismatch.detail)
    except Exception as exc:  # noqa: BLE001 - a crash of one case is a failure to report, not to raise
        return Outcome(
            file,
            name,
            "failed",
            "crash",
            "".join(traceback.format_exception_only(type(exc), exc)).strip(),
        )
    stages = recorded_stages(world) if record and world is not None else None
    return Outcome(file, name, "passed", stages=stages)


def _run_case(case: dict, record: bool = False) -> World | None:
    """Runs one case; the world it ran in (None when it passed by failing as expected)."""
    if case.get("enabled") is False:
        raise Skip("disabled in the corpus")
    statements_text = "\n".join(case["statements"])
    if any(
        f"'{f}'" in statements_text.upper() or f"={f}" in statements_text.upper().replace(" ", "")
        for f in _LATER_FORMATS
    ):
        raise Skip("format PROTOBUF")
    expected_error = case.get("expectedException")
    topics = {t["name"]: int(t.get("partitions", 1)) for t in case.get("topics", [])}
    world = World(topics, format_defaults(case.get("properties") or {}, {}))
    if record:
        world.stages = {}
    try:
        statements = parse(statements_text)
    except ParseError as error:
        if expected_error is not None and _message_matches(error, expected_error):
            return None
        if expected_error is not None:
            raise Mismatch(
                "wrong error", f"expected {expected_error.get('message')!r}, got {error.message!r}"
            ) from error
        raise Mismatch("does not parse", str(error)) from error
    _register_schemas(case, world, statements)
    statement_index = 0
    try:
        for statement_index, statement in enumerate(statements):
            try:
                world.execute(statement)
            except (MetastoreError, EngineError) as error:
                _locate(error, statement)
                raise
    except Skip:
        raise
    except (MetastoreError, EngineError, ParseError) as error:
        if expected_error is not None and _message_matches(error, expected_error):
            return None
        if _later_construct(error):
            raise Skip("unsupported construct", _message(error)) from error
        if _UNKNOWN_FUNCTION.search(_message(error)):
            raise Mismatch("unknown function", _message(error)) from error
        if expected_error is not None:
            raise Mismatch(
                "wrong error",
                f"expected {expected_error.get('message')!r}, got {_message(error)!r}",
            ) from error
        raise Mismatch(
            "refused a valid statement", f"statement {statement_index + 1}: {_message(error)}"
        ) from error
    _feed_inputs(world, case.get("inputs", []))
    if expected_error is not None:
        raise Mismatch(
            "error expected", f"expected {expected_error.get('message')!r}, nothing failed"
        )
    _judge_outputs(world, case.get("outputs", []))
    _judge_post(world, case.get("post", {}))
    return world


# -- the schemas ksqlDB's runner registers before a case runs ----------------------------------------


def _java_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as an unsigned 32-bit value."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_map_order(names: list[str]) -> list[str]:
    """``names`` in the order a Java ``HashMap`` they were put into in that order iterates them
    (by bucket, then in insertion order), as ksqlDB's runner registers its topics' schemas."""
    capacity = 16
    while len(names) > capacity * 3 // 4:
        capacity *= 2

    def bucket(name: str) -> int:
        h = _java_hash(name)
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(names, key=bucket)  # stable: a bucket keeps its insertion order


def _register_schemas(case: dict, world: World, statements: list[ast.Statement]) -> None:
    """Registers the schemas ksqlDB's runner registers before running a case, in its order
    (TestExecutorUtil.initializeTopics): the schemas the case gives its topics (under the ids it
    gives), and, for topics a CREATE STREAM/TABLE declares columns for, the schema of those
    columns where the case gives none; key then value, topic by topic in HashMap order. The
    registry numbers schemas as it meets them, so ids the statements name match ksqlDB's."""
    actions: dict[str, dict[str, Any]] = {}
    for topic in case.get("topics", []):
        found = actions.setdefault(topic["name"], {})
        for part in ("key", "value"):
            schema = topic.get(f"{part}Schema")
            if schema is None:
                continue
            fmt = str(topic.get(f"{part}Format") or "AVRO").upper()
            if fmt in ("KAFKA", "DELIMITED"):
                continue  # schemaless: the records are written as the source's format says
            # ksqlDB's runner registers a JSON topic's schema as a JSON schema (SerdeUtil)
            kind = {"AVRO": "AVRO", "JSON_SR": "JSON", "JSON": "JSON"}.get(fmt, "PROTOBUF")
            text = schema if isinstance(schema, str) and kind == "PROTOBUF" else json.dumps(schema)
            given = topic.get(f"{part}SchemaId")
            found[part] = functools.partial(
                _register_given,
                world,
                f"{topic['name']}-{part}",
                RegisteredSchema(kind, text),
                given,
                topic.get(f"{part}SchemaReferences") or [],
            )
    for topic, part, register in _declared_schemas(world, statements):
        found = actions.setdefault(topic, {})
        found.setdefault(part, register)
    for topic in java_hash_map_order(list(actions)):
        for part in ("key", "value"):
            register = actions[topic].get(part)
            if register is not None:
                register()


def _register_given(
    world: World,
    subject: str,
    schema: RegisteredSchema,
    schema_id: int | None,
    references: list[dict[str, Any]],
) -> None:
    """Registers a schema the case gives. One that references others is skipped: the engine
    does not read schema references yet (the registry takes them)."""
    world.given.add(subject)
    if references:
        raise Skip("unsupported construct", "schema references are not supported yet (the engine)")
    world.registry.register(subject, schema, schema_id)


def _declared_schemas(world: World, statements: list[ast.Statement]) -> list[tuple[str, str, Any]]:
    """(topic, part, what registers its schema) for each CREATE STREAM/TABLE with declared
    columns in a format with registered schemas, as headwater's serde would write them."""
    found: list[tuple[str, str, Any]] = []
    for statement in statements:
        if not isinstance(statement, ast.CreateSource) or not statement.columns:
            continue
        try:
            planned = plan(statement, Catalog(), TopicFacts({}, {}), defaults=world.formats)
        except (MetastoreError, EngineError, ParseError):
            continue
        if planned.command is None or "source" not in planned.command:
            continue
        source = source_from_dict(planned.command["source"])
        try:
            serde = serde_of(source)
        except EngineError:
            continue
        for part in ("key", "value"):
            found.append((source.topic, part, functools.partial(serde.register_schemas, (part,))))
    return found


def _locate(error: MetastoreError | EngineError, statement: ast.Statement) -> None:
    """Words ``error``'s message as the server does: ksqlDB's position prefix where it has one."""
    offset = getattr(error, "offset", None)
    node = getattr(error, "node", None)
    if offset is None and node is not None:
        starts = [int(n.meta["start"]) for n in node.walk() if "start" in n.meta]
        offset = min(starts) if starts else None
    error.message = located_message(statement, _message(error), offset)


def _message(error: Exception) -> str:
    return str(getattr(error, "message", None) or error)


def _message_matches(error: Exception, expected: Mapping[str, Any]) -> bool:
    wanted = expected.get("message")
    return wanted is None or wanted in _message(error)


#: A function the function table lacks: a failure (functions are this engine's to compute).
_UNKNOWN_FUNCTION = re.compile(r"Can't find any functions|Unknown function|Function '\w+' does not")


def _unchecked_partitions(
    statement: ast.CreateSource, topics: Mapping[str, Any]
) -> ast.CreateSource:
    """``statement`` as ksqlDB's QTT harness runs it: without TopicCreateInjector (only the
    format, source-property and schema injectors), so a CREATE STREAM/TABLE's PARTITIONS is never
    checked against a topic that exists (the harness made it from the case's ``topics``, one
    partition unless they say otherwise). ksqlDB's server checks it, as headwater's does (RQTT)."""
    named = topics_named(statement)
    if not any(n in topics for n in named):
        return statement
    if "PARTITIONS" not in statement.properties:
        return statement
    kept = tuple((k, v) for k, v in statement.properties.items() if k.upper() != "PARTITIONS")
    return replace(statement, properties=ast.Properties(kept))


def _later_construct(error: Exception) -> bool:
    return bool(LATER.search(_message(error)))


# -- inputs and outputs as the corpus writes them --------------------------------------------------


def _source_for_topic(world: World, topic: str) -> Source | None:
    found = [s for s in world.catalog.sources.values() if s.topic == topic]
    return min(found, key=lambda s: s.created_offset) if found else None


def _feed_inputs(world: World, inputs: list[dict]) -> None:
    for record in inputs:
        topic = record["topic"]
        source = _source_for_topic(world, topic)
        if source is None:
            raise Skip("input topic without a source")
        key = encode(record.get("key"), source, "key", world.registry, world.given)
        value = encode(record.get("value"), source, "value", world.registry, world.given)
        key = windowed_input(key, record)
        headers = tuple(
            (
                h["KEY"],
                None if h.get("VALUE") is None else __import__("base64").b64decode(h["VALUE"]),
            )
            for h in record.get("headers", []) or []
        )
        world.produce(
            topic,
            key,
            value,
            int(record.get("timestamp", 0) or 0),
            record.get("partition"),
            headers,
        )


def _judge_outputs(world: World, outputs: list[dict]) -> None:
    expected: dict[str, list[dict]] = defaultdict(list)
    windowed_topics = {s.topic for s in world.catalog.sources.values() if s.windowed}
    for record in outputs:
        if "window" in record and record["topic"] not in windowed_topics:
            raise Skip("windowed output")
        expected[record["topic"]].append(record)
    for topic, wanted in expected.items():
        held = world.topics.get(topic)
        actual = [] if held is None else [r for _, r in held.records]
        sink = next((s for s in world.catalog.sources.values() if s.topic == topic), None)
        for index, want in enumerate(wanted):
            if index >= len(actual):
                raise Mismatch(
                    "missing record",
                    f"{topic}: {len(actual)} records, expected "
                    f"{len(wanted)}; first missing: {want}",
                )
            got = actual[index]
            key_bytes = got.key
            if sink is not None and sink.windowed and key_bytes is not None:
                session = sink.windowed == "SESSION"
                key_bytes, start, end = split_windowed_key(key_bytes, session, window_size_ms(sink))
                window = {"start": start, "end": end, "type": "session" if session else "time"}
                if want.get("window") != window:
                    raise Mismatch(
                        "wrong window",
                        f"{topic}[{index}]: window {window}, expected {want.get('window')}",
                    )
            key = decode(key_bytes, sink, "key")
            value = decode(got.value, sink, "value")
            if not same(key, want.get("key")):
                raise Mismatch(
                    "wrong key", f"{topic}[{index}]: key {key!r}, expected {want.get('key')!r}"
                )
            if not same(value, want.get("value")):
                raise Mismatch(
                    "wrong value",
                    f"{topic}[{index}]: value {value!r}, expected {want.get('value')!r}",
                )
            if "timestamp" in want and int(want["timestamp"]) != got.timestamp:
                raise Mismatch(
                    "wrong timestamp",
                    f"{topic}[{index}]: timestamp {got.timestamp}, expected {want['timestamp']}",
                )
        if len(actual) > len(wanted):
            raise Mismatch(
                "extra record",
                f"{topic}: {len(actual)} records, expected "
                f"{len(wanted)}; first extra: {actual[len(wanted)]}",
            )


def _judge_post(world: World, post: Mapping[str, Any]) -> None:
    for wanted in post.get("sources", []):
        source = world.catalog.source(
            wanted["name"].upper()
            if wanted["name"].upper() in world.catalog.sources
            else wanted["name"]
        )
        if source is None:
            raise Mismatch("post: missing source", wanted["name"])
        kind = wanted.get("type")
        if kind and kind.upper() != source.kind.value:
            raise Mismatch("post: wrong source type", f"{source.name} is {source.kind.value}")
        schema = wanted.get("schema")
        if schema:
            want = _schema_columns(schema)
            got = [(c.name, c.type, c.key) for c in source.columns]
            if want is not None and want != got:
                raise Mismatch("post: wrong schema", f"{source.name}: {got}, expected {want}")
        key_format = (wanted.get("keyFormat") or {}).get("format")
        if key_format and key_format != source.key_format:
            raise Mismatch("post: wrong key format", f"{source.key_format}, expected {key_format}")


def _schema_columns(schema: str) -> list[tuple[str, str, bool]] | None:
    try:
        statement = parse(f"CREATE STREAM X ({schema}) WITH (kafka_topic='x', format='JSON');")[0]
    except ParseError:
        return None
    assert isinstance(statement, ast.CreateSource)
    return [(c.name, c.type.sql(), c.key) for c in statement.columns]


# -- the report ------------------------------------------------------------------------------------


def _run_file(path: str, name_filter: str | None, record: bool = False) -> list[Outcome]:
    return [run_case(stem, case, record) for stem, case in load_cases([Path(path)], name_filter)]


def run(
    files: list[Path], name_filter: str | None = None, jobs: int = 1, record: bool = False
) -> list[Outcome]:
    """Every case of ``files``, in file order (``record``: see `run_case`)."""
    if jobs <= 1:
        return [o for f in files for o in _run_file(str(f), name_filter, record)]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        results = pool.map(
            _run_file, [str(f) for f in files], [name_filter] * len(files), [record] * len(files)
        )
        return [o for batch in results for o in batch]


def report(outcomes: list[Outcome], verbose: bool) -> str:
    counts = Counter(o.verdict for o in outcomes)
    lines = []
    for verdict in ("failed", "skipped"):
        causes = Counter(o.cause for o in outcomes if o.verdict == verdict)
        if causes:
            lines.append(f"{verdict} by cause:")
            lines.extend(f"  {n:5d}  {cause}" for cause, n in causes.most_common())
    if verbose:
        for o in outcomes:
            if o.verdict == "failed":
                lines.append(f"FAILED {o.file}: {o.name}: {o.cause}: {o.detail}")
    lines.append(
        f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conformance.qtt", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--corpus", type=Path, default=QTT, help="the qtt folder")
    parser.add_argument("--file", action="append", help="a file name or stem (repeatable)")
    parser.add_argument("--case", help="only cases whose name contains this text")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--json", type=Path, help="write a JSON report here")
    parser.add_argument(
        "--ci",
        action="store_true",
        help="fail if a case of conformance/qtt_ci_expected.txt does not pass",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print every failure")
    parser.add_argument(
        "--spark",
        action="store_true",
        help=(
            "also replay the passed cases' stateless stages and aggregations on Spark "
            "(conformance.qtt_spark)"
        ),
    )
    args = parser.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"qtt: the corpus is not at {args.corpus}", file=sys.stderr)
        return 2
    files = case_files(args.file, args.corpus)
    started = time.monotonic()
    outcomes = run(files, args.case, args.jobs, record=args.spark)
    status = 0
    print(report(outcomes, args.verbose))
    print(f"({len(files)} files, {time.monotonic() - started:.1f} s)")
    if args.spark:
        from conformance.qtt_spark import replay
        from conformance.qtt_spark import report as spark_report

        replayed = replay([(case_id(o), o.stages) for o in outcomes if o.stages])
        print(spark_report(replayed, args.verbose))
        if args.ci and replayed.differences:
            print("qtt: cases give other rows on Spark than in process", file=sys.stderr)
            status = 1
    if args.json:
        body = [{k: v for k, v in asdict(o).items() if k != "stages"} for o in outcomes]
        args.json.write_text(json.dumps(body, indent=1))
    if args.ci:
        return _check_ci(outcomes) or status
    return status


def ci_expected() -> list[str]:
    """The cases that must keep passing (``CI_EXPECTED``), each as ``file stem: case name``."""
    lines = [line.strip() for line in CI_EXPECTED.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def case_id(outcome: Outcome) -> str:
    """``outcome``'s case as the CI list names it: ``file stem: case name``."""
    return f"{outcome.file}: {outcome.name}".strip()


def _check_ci(outcomes: list[Outcome]) -> int:
    expected = set(ci_expected())
    passed = {case_id(o) for o in outcomes if o.verdict == "passed"}
    lost = sorted(expected - passed)
    for line in lost:
        print(f"qtt --ci: expected to pass, did not: {line}", file=sys.stderr)
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
