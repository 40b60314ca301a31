"""ksqlDB's REST query-validation tests (RQTT) run through a real ``headwater server``. Does I/O.

Run ``python -m conformance.rqtt`` (corpus: ``../shared/ksql-corpus/rqtt`` next to the repository). One
in-memory embedded broker and one ``headwater server`` on it serve the whole run (its persistent
queries run on Spark in the server's child process, which starts with the first query). Each case
runs as ksqlDB's ``RestTestExecutor`` runs it: the topics its statements name are created; the
statements before the first ``SELECT`` go to ``POST /ksql`` in one request, the case's
``properties`` as ``streamsProperties``; the ``inputs`` are produced in the source's format (the
encoding of ``conformance.qtt``); then each ``SELECT`` goes to ``POST /query``. Where ksqlDB waits for its
persistent queries to process the inputs, this runner polls the query until the expected answer
appears, the answer has settled while every persistent query runs, or ``--wait-s`` passes (never
when the case expects an error). Responses are judged as ksqlDB judges them: only the keys a case
gives, ``key|starts_with`` as a prefix, ``{STATEMENT}`` as the statement's text, a query's items
position by position with ``row.columns`` compared as a multiset unless ``verifyOrder``; an
``expectedError`` by its type (``KsqlStatementErrorMessage`` = ``statement_error``), message
substring and HTTP status; ``outputs`` read back from their topics. Between cases every query is
terminated and every stream, table and type dropped, so the next case starts from an empty catalog;
each case gets topics of its own (names suffixed, mapped back in the answers), as deleting a topic
and creating it again under a materialized table crashes the server today (a known bug).

headwater's ``/query`` adds a ``{"servedBy": [...]}`` item (the answer's staleness, docs/architecture.md);
it is not one of ksqlDB's ``StreamedRow`` kinds and is left out before counting items.

Options: ``--file NAME`` (repeatable), ``--case TEXT``, ``--json PATH``, ``--ci`` (fails when a case
of ``conformance/rqtt_ci_expected.txt`` does not pass), ``--wait-s`` (default 30), ``-v`` (every failure
and skip). Prints ``N passed, N failed, N skipped``, the causes grouped, and the pull-query figure:
of the cases holding a pull query (a ``SELECT`` without ``EMIT CHANGES``), how many passed.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import copy
import json
import os
import re
import signal
import sys
import tempfile
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import TopicPartition
from google.protobuf import text_format

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
from conformance.corpus import RQTT
from headwater.engine.formats import schema_registry
from headwater.engine.formats._proto_text import message_class
from headwater.engine.formats.schema_inference import schema_facts
from headwater.engine.formats.schema_registry import HttpSchemaRegistry
from headwater.engine.persistent import QUERY_ANALYZER
from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import admin_client, consumer, create_topic, producer
from headwater.metastore.apply import apply_command
from headwater.metastore.catalog import Catalog, Source
from headwater.metastore.plan import TopicFacts, plan, topics_named
from headwater.metastore.records import CommandRecord
from headwater.sqlparse_ext import parse
from headwater.sqlparse_ext import statements as ast
from tests.support.node import Server, versions

CI_EXPECTED = Path(__file__).with_name("rqtt_ci_expected.txt")

_PUSH = re.compile(r"\bEMIT\s+CHANGES\b", re.IGNORECASE)
_LIMIT = re.compile(r"\bLIMIT\s+\d+", re.IGNORECASE)
_STATEMENT_MACRO = "{STATEMENT}"
#: Statuses of an answer worth asking again (not ready, catching up, too busy).
_RETRIABLE_STATUS = (429, 503)
#: How long an answer must stay unchanged, once every persistent query has run two micro-batches
#: after the inputs, to be final.
_SETTLE_S = 3.0
#: How long a push query is read when the case expects it to be refused.
_REFUSAL_WAIT_S = 5.0


@dataclass
class Outcome:
    """One case's verdict; ``pull``: the case holds a pull query."""

    file: str
    name: str
    verdict: str  # passed | failed | skipped
    cause: str = ""
    detail: str = ""
    pull: bool = False
    seconds: float = 0.0


# -- the corpus (pure) -----------------------------------------------------------------------------


def split_statements(statements: list[str]) -> tuple[list[str], list[str]]:
    """(admin statements, queries): as ksqlDB's runner splits them, at the first ``SELECT ``.

    Raises:
        Mismatch: a statement that is not a query follows a query (an invalid case).
    """
    first = next((i for i, s in enumerate(statements) if s.startswith("SELECT ")), len(statements))
    queries = statements[first:]
    if any(not s.startswith("SELECT ") for s in queries):
        raise Mismatch("invalid case", "a statement that is not a query follows a query")
    return statements[:first], queries


def is_pull_query(statement: str) -> bool:
    """A ``SELECT`` without ``EMIT CHANGES``."""
    return statement.lstrip().upper().startswith("SELECT") and not _PUSH.search(statement)


def has_pull_query(case: Mapping[str, Any]) -> bool:
    """Whether any statement of ``case`` is a pull query."""
    return any(is_pull_query(s) for s in case["statements"])


def skip_cause(case: Mapping[str, Any]) -> tuple[str, str] | None:
    """(cause, detail) when ``case`` needs what this runner or server does not have, else None."""
    if case.get("enabled") is False:
        return "disabled in the corpus", ""
    push = [s for s in case["statements"] if s.startswith("SELECT ") and _PUSH.search(s)]
    unlimited = [s for s in push if not _LIMIT.search(s)]
    if unlimited and "expectedError" not in case:
        # One the server refuses, as the case expects, ends at once; one it accepts is read for
        # a bounded time (``_REFUSAL_WAIT_S``) and fails the case.
        return "push queries without LIMIT (this runner cannot end them)", unlimited[0][:120]
    return None


def refusal_cause(message: str, statement: str) -> str | None:
    """The skip cause of a refusal of what a later issue brings ("not supported yet"), else None."""
    if not LATER.search(message):
        return None
    upper = statement.upper()
    if re.search(r"\bWINDOW\b|WINDOWSTART|WINDOWEND|WINDOW_TYPE", upper):
        kind = "windowed"
    elif re.search(r"\bJOIN\b", upper):
        kind = "join"
    else:
        kind = "other"
    return f"unsupported construct ({kind})"


def topics_of(case: Mapping[str, Any]) -> dict[str, int]:
    """Topic -> partitions of what ksqlDB's runner creates before a case: the case's ``topics``,
    the topics its CREATE STREAM/TABLE statements name (their PARTITIONS, else 1), and the topics of
    its inputs and outputs (1 partition)."""
    found = {t["name"]: int(t.get("partitions") or 1) for t in case.get("topics", [])}
    for text in case["statements"]:
        try:
            statements = parse(text)
        except Exception:  # noqa: BLE001, S112 - a statement the parser refuses names no topic
            continue
        for statement in statements:
            if isinstance(statement, ast.CreateSource):
                for name in topics_named(statement):
                    found.setdefault(name, int(statement.properties.get("PARTITIONS") or 1))
    for record in [*case.get("inputs", []), *case.get("outputs", [])]:
        found.setdefault(record["topic"], 1)
    return found


def source_catalog(statements: list[str], topics: Mapping[str, int]) -> Catalog:
    """The sources ``statements`` declare, planned locally (to encode inputs and decode outputs in
    their formats); a statement that does not plan is left out."""
    catalog = Catalog()
    for offset, text in enumerate(statements):
        try:
            for statement in parse(text):
                if not isinstance(
                    statement, (ast.CreateSource, ast.CreateAsSelect, ast.CreateType)
                ):
                    continue
                facts = TopicFacts(
                    {n: topics.get(n, 1) for n in topics_named(statement)},
                    schema_facts(statement, schema_registry.current()),
                )
                planned = plan(statement, catalog, facts, QUERY_ANALYZER)
                if planned.command is not None:
                    record = CommandRecord(f"c{offset}", offset, statement.text, planned.command)
                    catalog, _ = apply_command(catalog, record, offset)
        except Exception:  # noqa: BLE001, S112 - the server judges it; this is only formats
            continue
    return catalog


@dataclass(frozen=True)
class _Guess:
    """The formats of a topic no planned source names: KAFKA STRING keys, JSON values."""

    key_format: str = "KAFKA"
    value_format: str = "JSON"
    key_columns: tuple[Any, ...] = ()
    value_columns: tuple[Any, ...] = ()


def source_for_topic(catalog: Catalog, topic: str) -> Source | _Guess:
    """The first-created source on ``topic`` (its formats encode the topic's records)."""
    found = [s for s in catalog.sources.values() if s.topic == topic]
    return min(found, key=lambda s: s.created_offset) if found else _Guess()


_KAFKA_TOPIC = re.compile(r"(KAFKA_TOPIC\s*=\s*')([^']*)(')", re.IGNORECASE)
_AS_SELECT = re.compile(r"\bAS\s+SELECT\b", re.IGNORECASE)
_SINK = re.compile(
    r"^(\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:STREAM|TABLE)\s+(?:IF\s+NOT\s+EXISTS\s+)?"
    r"(`[^`]+`|\"[^\"]+\"|[\w.]+))(\s+WITH\s*\()?",
    re.IGNORECASE,
)


def suffix_topics(case: Mapping[str, Any], suffix: str) -> tuple[dict, list[tuple[str, str]]]:
    """``case`` with every topic it names renamed ``<topic><suffix>`` (KAFKA_TOPIC properties, a
    KAFKA_TOPIC added to CREATE ... AS SELECT without one, the topics of ``topics``, inputs and
    outputs), and the (new, old) texts that turn the server's answers back into the case's terms.

    The server cannot be cleaned by deleting topics between cases (a table created on a topic
    that was deleted and created again killed it with SIGSEGV), so each case gets its own topics.
    """
    renamed: dict[str, str] = {}

    def rename(topic: str) -> str:
        return renamed.setdefault(topic, f"{topic}{suffix}")

    statements = []
    for text in case["statements"]:
        new = _KAFKA_TOPIC.sub(lambda m: f"{m[1]}{rename(m[2])}{m[3]}", text)
        sink = _SINK.match(new)
        if _AS_SELECT.search(new) and "KAFKA_TOPIC" not in new.upper() and sink is not None:
            name = sink[2]
            topic = rename(name[1:-1] if name[0] in '`"' else name.upper())
            added = f"KAFKA_TOPIC='{topic}'"
            new = (
                new[: sink.end()] + f"{added}, " + new[sink.end() :]
                if sink[3]
                else new[: sink.end(1)] + f" WITH ({added})" + new[sink.end(1) :]
            )
        statements.append(new)
    out = copy.deepcopy(
        case
    )  # keeps the corpus's numbers as written (see conformance.cases._Number)
    out["statements"] = statements
    for part in ("topics", "inputs", "outputs"):
        for item in out.get(part, []):
            key = "name" if part == "topics" else "topic"
            item[key] = rename(item[key])
    back = [(n, o) for n, o in zip(statements, case["statements"], strict=True) if n != o]
    back += sorted(((new, old) for old, new in renamed.items()), key=lambda p: -len(p[0]))
    return out, back


_SCHEMA_ID = re.compile(r"((?:KEY|VALUE)_SCHEMA_ID\s*=\s*)(\d+)", re.IGNORECASE)


def renumber_schema_ids(case: dict, offset: int) -> dict:
    """``case`` with the schema ids it gives (topics' ``keySchemaId``/``valueSchemaId`` and the
    statements' ``*_SCHEMA_ID``) moved up by ``offset``: ids are forever in a registry (the
    server caches them), so cases that give the same id to different schemas get their own."""
    if not any(f"{p}SchemaId" in t for t in case.get("topics", []) for p in ("key", "value")):
        return case
    out = copy.deepcopy(case)
    out["statements"] = [
        _SCHEMA_ID.sub(lambda m: f"{m[1]}{int(m[2]) + offset}", text) for text in case["statements"]
    ]
    for topic in out.get("topics", []):
        for part in ("key", "value"):
            if f"{part}SchemaId" in topic:
                topic[f"{part}SchemaId"] = int(topic[f"{part}SchemaId"]) + offset
    return out


def restore_names(value: Any, back: list[tuple[str, str]]) -> Any:
    """``value`` (a parsed answer) with the renamed statements and topics of ``suffix_topics``
    written as the case wrote them."""
    if isinstance(value, str):
        for new, old in back:
            value = value.replace(new, old)
        return value
    if isinstance(value, list):
        return [restore_names(v, back) for v in value]
    if isinstance(value, dict):
        return {k: restore_names(v, back) for k, v in value.items()}
    return value


# -- judging responses as RestTestExecutor does (pure) ---------------------------------------------


def _canon(value: Any) -> Any:
    """A hashable form of a JSON value in which 1, 1.0 and true differ (as Jackson's do)."""
    if isinstance(value, dict):
        return ("o", tuple(sorted((k, _canon(v)) for k, v in value.items())))
    if isinstance(value, list):
        return ("a", tuple(_canon(v) for v in value))
    if isinstance(value, float):  # the corpus's numbers may be a float subclass (conformance.cases)
        return ("float", float(value))
    return (type(value).__name__, value)


def same_json(actual: Any, expected: Any) -> bool:
    """JSON equality as ``is(expected)`` sees parsed values: exact keys, order of arrays, and
    numbers of the same kind (an integer never equals a decimal)."""
    return _canon(actual) == _canon(expected)


def _cause_of(path: str) -> str:
    if "->header" in path:
        return "wrong header"
    if "->row" in path:
        return "wrong rows"
    if "->finalMessage" in path:
        return "wrong final message"
    if "->admin" in path:
        return "wrong admin response"
    return "wrong response"


def match_fields(
    actual: Any,
    expected: Mapping[str, Any],
    statements: list[str],
    idx: int,
    path: str,
    tallies: tuple[Counter[Any], Counter[Any]],
    verify_order: bool,
) -> None:
    """ksqlDB's ``matchResponseFields``: every key of ``expected`` (``key|starts_with`` compares a
    prefix) must be in ``actual`` with an equal value; nested objects recurse; unless
    ``verify_order``, ``row.columns`` values go to ``tallies`` (actual, expected) instead.

    Raises:
        Mismatch: a key is missing or a value differs.
    """
    for raw_key, raw_value in expected.items():
        key, _, operator = raw_key.partition("|")
        want = raw_value
        if isinstance(want, str) and idx < len(statements):
            want = want.replace(_STATEMENT_MACRO, statements[idx])
        here = f"{path}->{key}"
        if not isinstance(actual, dict) or key not in actual:
            shown = sorted(actual) if isinstance(actual, dict) else actual
            raise Mismatch(_cause_of(here), f"{here}: missing (got {_short(shown)})")
        got = actual[key]
        if isinstance(want, dict):
            if not isinstance(got, dict):
                raise Mismatch(_cause_of(here), f"{here}: {_short(got)}, expected an object")
            match_fields(got, want, statements, idx, here, tallies, verify_order)
        elif operator.upper() == "STARTS_WITH":  # ksqlDB's MatchOperator.valueOf
            if not (isinstance(got, str) and isinstance(want, str) and got.startswith(want)):
                raise Mismatch(
                    _cause_of(here), f"{here}: {_short(got)}, expected to start with {_short(want)}"
                )
        elif not verify_order and "query" in here and "row" in here and key.lower() == "columns":
            tallies[0][_canon(got)] += 1
            tallies[1][_canon(want)] += 1
        elif not same_json(got, want):
            raise Mismatch(_cause_of(here), f"{here}: {_short(got)}, expected {_short(want)}")


def _check_tallies(tallies: tuple[Counter[Any], Counter[Any]], path: str) -> None:
    actual, expected = tallies
    if actual != expected:
        extra = list((actual - expected).elements())
        missing = list((expected - actual).elements())
        raise Mismatch(
            "wrong rows",
            f"{path}: rows (any order) differ; unexpected "
            f"{_short([_plain(c) for c in extra])}, missing "
            f"{_short([_plain(c) for c in missing])}",
        )


def _plain(canon: Any) -> Any:
    kind, value = canon
    if kind == "o":
        return {k: _plain(v) for k, v in value}
    if kind == "a":
        return [_plain(v) for v in value]
    return value


def query_items(answer: Any) -> list[Any]:
    """The ``StreamedRow`` items of a ``/query`` answer: headwater's ``servedBy`` item left out."""
    items = answer if isinstance(answer, list) else [answer]
    return [i for i in items if not (isinstance(i, dict) and set(i) == {"servedBy"})]


def verify_query(
    items: list[Any], expected: list[Any], statements: list[str], idx: int, verify_order: bool
) -> None:
    """One ``/query`` answer against its expected items (``RqttQueryResponse.verify``).

    Raises:
        Mismatch: a different number of items, or an item that differs.
    """
    path = f"responses[{idx}]->query"
    if len(items) != len(expected):
        raise Mismatch(
            _count_cause(items, expected),
            f"{path}: {len(items)} items, expected "
            f"{len(expected)}: got {_short(items, 400)}, expected "
            f"{_short(expected, 400)}",
        )
    tallies: tuple[Counter[Any], Counter[Any]] = (Counter(), Counter())
    for i, (got, want) in enumerate(zip(items, expected, strict=True)):
        if not isinstance(want, dict):
            raise Mismatch("invalid case", f"{path}[{i}] is not a JSON object")
        match_fields(got, want, statements, idx, f"{path}[{i}]", tallies, verify_order)
    _check_tallies(tallies, path)


def _count_cause(items: list[Any], expected: list[Any]) -> str:
    def rows(xs: list[Any]) -> int:
        return sum(1 for x in xs if isinstance(x, dict) and "row" in x)

    def final(xs: list[Any]) -> bool:
        return any(isinstance(x, dict) and "finalMessage" in x for x in xs)

    if rows(items) == rows(expected) and final(items) != final(expected):
        return "final message missing" if final(expected) else "unexpected final message"
    return "missing rows" if rows(items) < rows(expected) else "extra rows"


def verify_responses(
    actual: list[tuple[str, Any]],
    expected: list[Mapping[str, Any]],
    statements: list[str],
    verify_order: bool,
) -> None:
    """Every expected response against the actual ones, in order (``verifyResponses``).

    Args:
        actual: ("admin", entity) or ("query", items) per statement answered.
        expected: the case's ``responses``.
        statements: the case's statements (for ``{STATEMENT}``).
        verify_order: the case's ``outputConditions.verifyOrder``.

    Raises:
        Mismatch: fewer responses than expected, or one that differs.
    """
    if len(actual) < len(expected):
        raise Mismatch("not enough responses", f"{len(actual)} responses, expected {len(expected)}")
    for idx, want in enumerate(expected):
        if len(want) != 1:
            raise Mismatch("invalid case", f"responses[{idx}] has {len(want)} keys")
        kind, payload = next(iter(want.items()))
        got_kind, got = actual[idx]
        if kind != got_kind:
            raise Mismatch("wrong response kind", f"responses[{idx}]: {got_kind}, expected {kind}")
        if kind == "admin":
            tallies: tuple[Counter[Any], Counter[Any]] = (Counter(), Counter())
            match_fields(
                got, payload, statements, idx, f"responses[{idx}]->admin", tallies, verify_order
            )
            _check_tallies(tallies, f"responses[{idx}]->admin")
        elif kind == "queryProto":
            verify_query_proto(got, payload, idx, verify_order)
        else:
            verify_query(got, payload, statements, idx, verify_order)


def verify_query_proto(items: list[Any], expected: list[Any], idx: int, verify_order: bool) -> None:
    """One answer in protobuf rows against its expected items (``RqttQueryProtoResponse``): as
    many items; the header's ``protoSchema`` and the final message equal; each row, decoded with
    the header's schema and printed in protobuf's text format, equal to the expected text (as a
    sorted list unless ``verify_order``).

    Raises:
        Mismatch: a different number of items, schema, final message or row.
    """
    path = f"responses[{idx}]->queryProto"
    if len(items) != len(expected):
        raise Mismatch(
            _count_cause(items, expected),
            f"{path}: {len(items)} items, expected {len(expected)}: got {_short(items, 400)}",
        )

    def header_of(xs: list[Any]) -> str | None:
        return next((x["header"].get("protoSchema") for x in xs if "header" in x), None)

    def final_of(xs: list[Any]) -> str | None:
        return next((x["finalMessage"] for x in xs if "finalMessage" in x), None)

    schema = header_of(items)
    if schema is None or schema != header_of(expected):
        raise Mismatch(
            "wrong protobuf schema", f"{path}: {schema!r}, expected {header_of(expected)!r}"
        )
    if final_of(items) != final_of(expected):
        raise Mismatch(
            "wrong final message", f"{path}: {final_of(items)!r}, expected {final_of(expected)!r}"
        )
    message = message_class(schema)
    got = []
    for item in items:
        if "row" in item:
            decoded = message()
            decoded.ParseFromString(base64.b64decode(item["row"]["protobufBytes"]))
            got.append(text_format.MessageToString(decoded))
    want = [str(x["row"]) for x in expected if "row" in x]
    if not verify_order:
        got, want = sorted(got), sorted(want)
    if got != want:
        raise Mismatch("wrong protobuf rows", f"{path}: got {got!r}, expected {want!r}")


def error_mismatch(expected: Mapping[str, Any], status: int, body: Any) -> str | None:
    """Why an error answer does not match ``expectedError`` (None when it matches): the type
    (``KsqlStatementErrorMessage`` is ksqlDB's ``statement_error``; ``KsqlErrorMessage`` any
    error), the message as a substring, the HTTP status."""
    message = _message(body)
    kind = str(expected.get("type") or "")
    got_type = body.get("@type") if isinstance(body, dict) else None
    if kind.endswith("KsqlStatementErrorMessage") and got_type != "statement_error":
        return f"type {got_type!r}, expected statement_error ({status}: {message[:300]!r})"
    want = expected.get("message")
    if want is not None and str(want) not in message:
        return f"message {message[:500]!r}, expected it to contain {str(want)[:300]!r}"
    if expected.get("status") is not None and int(expected["status"]) != status:
        return f"HTTP status {status}, expected {expected['status']} ({message[:300]!r})"
    return None


def _message(body: Any) -> str:
    if isinstance(body, dict):
        return str(body.get("message") or body)
    return str(body)


def _short(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


# -- the node: one broker and one server for the whole run -----------------------------------------


class Node:
    """An in-memory embedded broker and one ``headwater server`` on it, plus the clients a case
    needs. :meth:`close` stops both, by their own pids, and checks none of the server's process
    tree (Spark's JVM, pyspark workers) outlives it."""

    def __init__(self, folder: Path, log_path: Path) -> None:
        self.log_path = log_path
        self.broker = EmbeddedBroker(None)
        self.broker.start()
        self.settings = self.broker.settings()
        self.folder = folder
        self.server: Server | None = None
        self.leftovers: list[str] = []
        self.http = httpx.Client(timeout=120)
        self.admin = admin_client(self.settings, "rqtt-admin")
        self.producer = producer(self.settings, "rqtt")
        self.back: list[tuple[str, str]] = []  # the case's renamed texts (``suffix_topics``)
        self.cases = 0
        # ksqlDB's runner mocks a schema registry; here the server's own registry plays it (its
        # topic kept across the runner's server restarts: ids are forever)
        self.registry_topic = f"_schemas_rqtt_{uuid.uuid4().hex[:6]}"
        self.registry_client: HttpSchemaRegistry | None = None
        self.given: set[str] = set()  # subjects whose schemas the running case gives
        try:
            self.start_server()
        except BaseException:
            self.close()
            raise

    def start_server(self) -> None:
        """Start a ``headwater server`` (a new service id: an empty catalog) and warm Spark up."""
        self.server = Server(
            [
                "-b",
                self.broker.bootstrap_servers,
                "--state-dir",
                str(self.folder / f"node-{uuid.uuid4().hex[:6]}"),
                "--service-id",
                f"rqtt_{uuid.uuid4().hex[:6]}",
                # ksqlDB's RQTT server: one aggregate update per input record, and queries read
                # their sources from the beginning (its TestKsqlRestApp sets
                # ksql.streams.auto.offset.reset=earliest).
                "--set",
                "ksql.streams.cache.max.bytes.buffering=0",
                "--set",
                "ksql.streams.auto.offset.reset=earliest",
                # and serves scalable push queries (RestQueryTranslationTest)
                "--set",
                "ksql.query.push.v2.enabled=true",
                "--set",
                f"headwater.schema.registry.topic={self.registry_topic}",
            ],
            self.log_path,
        )
        self.server.wait_healthy(120)
        self.url = self.server.url
        self._mock_registry()
        self._warm_up()

    def _mock_registry(self) -> None:
        """The server's own registry set up as ksqlDB's runner's mock behaves: a case's schemas
        registered under the ids the case gives them (IMPORT mode), and no compatibility check
        between a case's schemas and what the server registers after them (NONE)."""
        base = f"{self.url}/registry"
        for path, body in (
            ("/mode?force=true", {"mode": "IMPORT"}),
            ("/config", {"compatibility": "NONE"}),
        ):
            answer = self.http.put(f"{base}{path}", json=body)
            if answer.status_code != 200:
                raise RuntimeError(f"the server's registry refused PUT {path}: {answer.text}")
        if self.registry_client is not None:
            self.registry_client.close()
        self.registry_client = HttpSchemaRegistry(base)
        schema_registry.use(self.registry_client)

    def register(
        self,
        subject: str,
        text: str,
        kind: str,
        schema_id: int | None,
        references: list[dict[str, Any]] | None = None,
    ) -> None:
        """Registers one of a case's schemas in the server's registry (under its id if given),
        after the schemas it references (each under a subject named after the reference)."""
        body: dict[str, Any] = {"schema": text, "schemaType": kind}
        if schema_id is not None:
            body["id"] = int(schema_id)
        if references:
            body["references"] = []
            for ref in references:
                ref_kind = {"AVRO": "AVRO", "JSON_SR": "JSON", "JSON": "JSON"}.get(
                    str(ref.get("format") or "AVRO").upper(), "PROTOBUF"
                )
                ref_text = (
                    ref["schema"] if isinstance(ref["schema"], str) else json.dumps(ref["schema"])
                )
                self.register(ref["name"], ref_text, ref_kind, None)
                body["references"].append(
                    {"name": ref["name"], "subject": ref["name"], "version": 1}
                )
        answer = self.http.post(f"{self.url}/registry/subjects/{subject}/versions", json=body)
        if answer.status_code != 200:
            raise RuntimeError(f"the server's registry refused {subject}'s schema: {answer.text}")

    def _warm_up(self, timeout_s: float = 180.0) -> None:
        """One persistent query until it runs, so the first case does not wait for Spark."""
        topic = f"rqtt_warm_up_{uuid.uuid4().hex[:6]}"
        self.create_topics({topic: 1})
        self.ksql(
            f"CREATE STREAM RQTT_WARM (ID STRING KEY, V INT) WITH (kafka_topic='{topic}', "
            f"value_format='JSON');\nCREATE STREAM RQTT_WARM_OUT WITH (kafka_topic="
            f"'{topic}_out') AS SELECT * FROM RQTT_WARM;"
        )
        deadline = time.monotonic() + timeout_s
        while True:
            states = self.query_states()
            if states and all(s.startswith("RUNNING") for s in states.values()):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the warm-up query did not run in {timeout_s:g} s: {states}")
            time.sleep(0.5)
        self.reset()

    def alive(self) -> bool:
        return self.server is not None and self.server.process.poll() is None

    # -- REST

    def ksql(self, text: str, properties: Mapping[str, Any] | None = None) -> tuple[int, Any]:
        """POST /ksql: (HTTP status, parsed body)."""
        return self._post("/ksql", text, properties)

    def query(self, text: str, properties: Mapping[str, Any] | None = None) -> tuple[int, Any]:
        """POST /query: (HTTP status, parsed body)."""
        return self._post("/query", text, properties)

    def _post(self, route: str, text: str, properties: Mapping[str, Any] | None) -> tuple[int, Any]:
        assert self.server is not None
        self.server.check()
        answer = self.http.post(
            f"{self.url}{route}", json={"ksql": text, "streamsProperties": dict(properties or {})}
        )
        try:
            body = answer.json()
        except ValueError:
            body = answer.text
        return answer.status_code, restore_names(body, self.back)

    def query_proto(self, text: str, properties: Mapping[str, Any]) -> tuple[int, Any]:
        """POST /query-stream asking for protobuf rows (``application/vnd.ksql.v1+protobuf``)."""
        assert self.server is not None
        answer = self.http.post(
            f"{self.url}/query-stream",
            json={"sql": text, "properties": dict(properties)},
            headers={"Accept": "application/vnd.ksql.v1+protobuf"},
        )
        try:
            body = answer.json()
        except ValueError:
            body = answer.text
        return answer.status_code, restore_names(body, self.back)

    def push(self, text: str, properties: Mapping[str, Any], timeout_s: float) -> tuple[int, Any]:
        """POST /query with a push query: the items streamed until it ends (its LIMIT) or
        ``timeout_s`` passes (then the items so far)."""
        assert self.server is not None
        deadline = time.monotonic() + timeout_s
        items: list[Any] = []
        try:
            with self.http.stream(
                "POST",
                f"{self.url}/query",
                timeout=timeout_s,
                json={"ksql": text, "streamsProperties": dict(properties)},
            ) as answer:
                if answer.status_code != 200:
                    answer.read()
                    return answer.status_code, restore_names(answer.json(), self.back)
                for line in answer.iter_lines():
                    item = line.strip().lstrip("[").rstrip("]").rstrip(",").strip()
                    if item:
                        items.append(json.loads(item))
                    if time.monotonic() > deadline:
                        break
        except httpx.ReadTimeout:
            pass
        return 200, restore_names(items, self.back)

    def query_statuses(self) -> dict[str, dict[str, Any]]:
        """Query id -> status (state, message, batches, ...) of the server's persistent queries."""
        try:
            body = self.http.get(f"{self.url}/queryStatus", timeout=5).json()
        except (httpx.HTTPError, ValueError):
            return {}
        return dict(body.get("queries") or {})

    def query_states(self) -> dict[str, str]:
        """Query id -> state (and the message of an ERROR) of the server's persistent queries."""
        return {
            q: f"{s.get('state')}: {s.get('message') or s.get('lastError') or ''}".rstrip(": ")
            for q, s in self.query_statuses().items()
        }

    # -- Kafka

    def create_topics(self, topics: Mapping[str, int]) -> None:
        for name, partitions in topics.items():
            create_topic(self.admin, self.settings, name, partitions)

    def produce(self, inputs: list[dict], catalog: Catalog) -> None:
        """The case's input records, in order, in their sources' formats."""
        for record in inputs:
            source = source_for_topic(catalog, record["topic"])
            key = encode(
                record.get("key"),
                source,
                "key",  # type: ignore[arg-type]
                self.registry_client,
                self.given,
            )
            value = encode(
                record.get("value"),
                source,
                "value",  # type: ignore[arg-type]
                self.registry_client,
                self.given,
            )
            key = windowed_input(key, record)
            headers = [
                (h["KEY"], None if h.get("VALUE") is None else base64.b64decode(h["VALUE"]))
                for h in record.get("headers") or []
            ]
            # librdkafka reads a timestamp of 0 as "now": records without one get the clock's.
            self.producer.produce(
                record["topic"],
                value,
                key,
                timestamp=int(record.get("timestamp") or 0),
                headers=headers,
            )
        if self.producer.flush(30):
            raise RuntimeError("input records not delivered in 30 s")

    def read_topic(self, topic: str, want: int, deadline: float) -> list[Any]:
        """Records of ``topic`` from the start, until ``want`` are read or ``deadline`` passes."""
        reader = consumer(self.settings, f"rqtt-read-{uuid.uuid4().hex[:6]}")
        try:
            metadata = self.admin.list_topics(topic, timeout=10).topics.get(topic)
            partitions = sorted(metadata.partitions) if metadata is not None else [0]
            reader.assign([TopicPartition(topic, p, 0) for p in partitions])
            found: list[Any] = []
            while len(found) < want and time.monotonic() < deadline:
                found.extend(m for m in reader.consume(100, 0.2) if m.error() is None)
            return found
        finally:
            reader.close()

    # -- between cases

    def reset(self) -> None:
        """Back to an empty catalog: terminate every query, drop every source and type. Topics
        stay (each case has its own, see ``suffix_topics``).

        Raises:
            RuntimeError: something would not go away.
        """
        self.back = []
        status, _ = self.ksql("TERMINATE ALL;")
        if status != 200:
            for query_id in self._listed("SHOW QUERIES;", "queries", "id"):
                self.ksql(f"TERMINATE {query_id};")
        for _ in range(5):
            sources = [("STREAM", n) for n in self._listed("SHOW STREAMS;", "streams", "name")]
            sources += [("TABLE", n) for n in self._listed("SHOW TABLES;", "tables", "name")]
            if not sources:
                break
            # Without DELETE TOPIC: DROP TABLE ... DELETE TOPIC of a materialized table killed
            # the server with SIGSEGV.
            for kind, name in reversed(sources):
                self.ksql(f"DROP {kind} IF EXISTS `{name}`;")
        else:
            raise RuntimeError(f"sources left after 5 rounds of DROP: {sources}")
        for _ in range(3):
            status, body = self.ksql("SHOW TYPES;")
            types = list((body[0].get("types") or {}) if status == 200 and body else {})
            if not types:
                return
            for name in types:
                self.ksql(f"DROP TYPE IF EXISTS `{name}`;")
        raise RuntimeError(f"types left after 3 rounds of DROP TYPE: {types}")

    def _listed(self, statement: str, key: str, field_name: str) -> list[str]:
        status, body = self.ksql(statement)
        if status != 200 or not body:
            raise RuntimeError(f"{statement} answered {status}: {_short(body)}")
        return [str(item[field_name]) for item in body[0].get(key) or []]

    def close(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL of its group), kill anything of its process tree
        still alive, then stop the broker."""
        try:
            self.stop_server()
        finally:
            self.http.close()
            if self.registry_client is not None:
                self.registry_client.close()
            self.broker.stop()

    def stop_server(self) -> None:
        if self.server is not None:
            tree = _process_tree(self.server.process.pid)
            self.server.stop()
            self.leftovers += _kill_survivors(tree)
            self.server = None


def _process_tree(root: int) -> dict[int, tuple[str, str]]:
    """pid -> (start time, command line) of ``root`` and its descendants, now."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found: dict[int, tuple[str, str]] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        identity = _identity(pid)
        if identity is not None:
            found[pid] = identity
        todo.extend(children.get(pid, []))
    return found


def _identity(pid: int) -> tuple[str, str] | None:
    try:
        started = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
        command = (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except (OSError, IndexError):
        return None
    return started, command


def _kill_survivors(tree: dict[int, tuple[str, str]]) -> list[str]:
    """SIGKILL every process of ``tree`` still alive 5 s after the server stopped (same pid and
    start time); what was found."""

    def alive() -> list[int]:
        return [
            pid for pid, (started, _) in tree.items() if (_identity(pid) or ("", ""))[0] == started
        ]

    deadline = time.monotonic() + 5
    while alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    survivors = []
    for pid in alive():
        survivors.append(f"{pid}: {tree[pid][1][:120]}")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return survivors


# -- running one case ------------------------------------------------------------------------------


@dataclass
class _Run:
    """What one case has done so far."""

    responses: list[tuple[str, Any]] = field(default_factory=list)
    failed_queries: int = 0


def run_case(node: Node, file: str, case: dict, wait_s: float) -> Outcome:
    """One case's verdict (a crash of the case is a failure, never raised)."""
    started = time.monotonic()
    outcome = Outcome(file, case["name"], "passed", pull=has_pull_query(case))
    try:
        _run_case(node, case, wait_s)
    except Skip as skip:
        outcome.verdict, outcome.cause, outcome.detail = "skipped", skip.cause, skip.detail
    except Mismatch as mismatch:
        outcome.verdict, outcome.cause, outcome.detail = "failed", mismatch.cause, mismatch.detail
    except Exception as exc:  # noqa: BLE001 - one case's crash is a failure to report
        outcome.verdict, outcome.cause = "failed", "crash"
        outcome.detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    outcome.seconds = round(time.monotonic() - started, 2)
    return outcome


def _run_case(node: Node, case: dict, wait_s: float) -> None:
    skip = skip_cause(case)
    if skip is not None:
        raise Skip(*skip)
    original: list[str] = case["statements"]  # what {STATEMENT} stands for in the responses
    node.cases += 1
    case, node.back = suffix_topics(case, f"_rq{node.cases}")
    case = renumber_schema_ids(case, node.cases * 1000)
    statements: list[str] = case["statements"]
    admin, queries = split_statements(statements)
    expected_error: Mapping[str, Any] | None = case.get("expectedError")
    properties = case.get("properties") or {}
    topics = topics_of(case)
    node.create_topics(topics)
    node.given = register_schemas(node, case)
    run = _Run()
    if admin:
        status, body = node.ksql("\n".join(admin), properties)
        if status != 200:
            _refused(body, status, expected_error, "\n".join(admin))
            return
        run.responses.extend(("admin", entity) for entity in body)
    catalog = source_catalog(admin, topics)
    batches = {q: int(s.get("batches") or 0) for q, s in node.query_statuses().items()}
    expected = case.get("responses", [])
    verify_order = bool((case.get("outputConditions") or {}).get("verifyOrder"))
    # Push queries: ksqlDB's runner reads from the beginning (auto.offset.reset=earliest), or
    # starts them first when the case waits for them to be active, then produces the inputs.
    pushed: dict[int, concurrent.futures.Future[tuple[int, Any]]] = {}
    wait_active = bool((case.get("inputConditions") or {}).get("waitForActivePushQuery"))
    push_properties = {"auto.offset.reset": "earliest", **properties}
    if wait_active:
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(queries)))
        for offset, text in enumerate(queries):
            if _PUSH.search(text):
                pushed[offset] = pool.submit(node.push, text, dict(properties), wait_s)
        pool.shutdown(wait=False)
        time.sleep(1.5)  # the consumers take their positions before the inputs are written
    node.produce(case.get("inputs", []), catalog)
    deadline = time.monotonic() + wait_s
    for offset, text in enumerate(queries):
        idx = len(admin) + offset
        want = expected[idx].get("query") if idx < len(expected) else None
        wait = expected_error is None and want is not None
        if offset in pushed:
            status, body = pushed[offset].result()
        elif _PUSH.search(text):
            limit = wait_s if expected_error is None else min(wait_s, _REFUSAL_WAIT_S)
            status, body = node.push(text, push_properties, limit)
        else:
            status, body = _ask(
                node,
                text,
                properties,
                want,
                original,
                idx,
                verify_order,
                deadline if wait else 0.0,
                batches,
            )
        if status != 200:
            _refused(body, status, expected_error, text)
            run.failed_queries += 1
            continue
        run.responses.append(("query", query_items(body)))
    if case.get("testPullWithProtoFormat"):  # each query again, its rows in protobuf
        for text in queries:
            status, body = node.query_proto(text, properties)
            if status == 200:  # ksqlDB's runner leaves a refused one out
                run.responses.append(("queryProto", query_items(body)))
    if expected_error is not None and queries:
        # ksqlDB's runner checks an expected error only against a refused statement or a query
        # that answers (failIfExpectingError): when every statement succeeds and no query
        # follows, it goes on to the outputs and responses, as below
        if len(run.responses) > len(admin) or not run.failed_queries:
            raise Mismatch(
                "error expected",
                f"expected {expected_error.get('message')!r}, the statements succeeded",
            )
        return
    _verify_outputs(node, case.get("outputs", []), catalog, deadline)
    try:
        verify_responses(run.responses, expected, original, verify_order)
    except Mismatch as mismatch:
        states = {q: s for q, s in node.query_states().items() if not s.startswith("RUNNING")}
        if states:
            mismatch.detail += f" (persistent queries not running: {states})"
        raise


def register_schemas(node: Node, case: Mapping[str, Any]) -> set[str]:
    """The schemas the case gives its topics (``keySchema``/``valueSchema``), registered as
    ksqlDB's runner registers them before the statements run; their subjects."""
    subjects = set()
    for topic in case.get("topics", []):
        for part in ("key", "value"):
            schema = topic.get(f"{part}Schema")
            fmt = str(topic.get(f"{part}Format") or topic.get("format") or "AVRO").upper()
            if schema is None or fmt in ("JSON", "KAFKA", "DELIMITED"):
                continue
            kind = {"AVRO": "AVRO", "JSON_SR": "JSON"}.get(fmt, "PROTOBUF")
            text = schema if isinstance(schema, str) and kind == "PROTOBUF" else json.dumps(schema)
            node.register(
                f"{topic['name']}-{part}",
                text,
                kind,
                topic.get(f"{part}SchemaId"),
                topic.get(f"{part}SchemaReferences"),
            )
            subjects.add(f"{topic['name']}-{part}")
    return subjects


def _ask(
    node: Node,
    text: str,
    properties: Mapping[str, Any],
    want: list[Any] | None,
    statements: list[str],
    idx: int,
    verify_order: bool,
    deadline: float,
    batches: Mapping[str, int],
) -> tuple[int, Any]:
    """POST /query; until ``deadline``, again while the answer is not the expected one, or is
    retriable, or may still change. ksqlDB's runner first waits until its persistent queries
    processed the inputs; here an answer is final once every persistent query runs and has
    completed two micro-batches more than it had when the inputs were produced (``batches``), and
    the answer has not changed for a while since."""
    last: tuple[int, Any] | None = None
    since = time.monotonic()
    while True:
        status, body = node.query(text, properties)
        if want is None or time.monotonic() >= deadline:
            return status, body
        if status == 200:
            try:
                verify_query(query_items(body), want, statements, idx, verify_order)
                return status, body
            except Mismatch:
                pass
        elif status not in _RETRIABLE_STATUS:
            return status, body
        answer = (status, _without_query_id(query_items(body)) if status == 200 else body)
        if answer != last:
            last, since = answer, time.monotonic()
        elif time.monotonic() - since > _SETTLE_S:
            statuses = node.query_statuses()
            if any(s.get("state") == "ERROR" for s in statuses.values()):
                return status, body
            if all(
                s.get("state") == "RUNNING" and int(s.get("batches") or 0) >= batches.get(q, 0) + 2
                for q, s in statuses.items()
            ):
                return status, body
        time.sleep(0.25)


def _without_query_id(items: list[Any]) -> list[Any]:
    """The items with the header's ``queryId`` (new for every query) left out."""
    return [
        {"header": {k: v for k, v in i["header"].items() if k != "queryId"}}
        if isinstance(i, dict) and isinstance(i.get("header"), dict)
        else i
        for i in items
    ]


def _refused(body: Any, status: int, expected_error: Mapping[str, Any] | None, text: str) -> None:
    """An error answer: fine when it is the expected error; a skip for what a later issue brings;
    otherwise a failure."""
    message = _message(body)
    statement = str(body.get("statementText") or text) if isinstance(body, dict) else text
    if expected_error is not None and error_mismatch(expected_error, status, body) is None:
        return
    later = refusal_cause(message, statement)
    if later is not None:
        raise Skip(later, f"{status}: {message[:300]}")
    if expected_error is not None:
        raise Mismatch("wrong error", error_mismatch(expected_error, status, body) or "")
    if status >= 500:
        raise Mismatch("server error (5xx)", f"{status}: {message[:400]} [{statement[:160]}]")
    raise Mismatch("refused a valid statement", f"{status}: {message[:400]} [{statement[:160]}]")


def _verify_outputs(node: Node, outputs: list[dict], catalog: Catalog, deadline: float) -> None:
    """The records of each output topic, in order (``verifyOutput``): key, value, timestamp."""
    by_topic: dict[str, list[dict]] = {}
    for record in outputs:
        by_topic.setdefault(record["topic"], []).append(record)
    for topic, wanted in by_topic.items():
        got = node.read_topic(topic, len(wanted), max(deadline, time.monotonic() + 5))
        if len(got) < len(wanted):
            raise Mismatch(
                "missing output records", f"{topic}: {len(got)} records, expected {len(wanted)}"
            )
        source = source_for_topic(catalog, topic)
        for index, (message, want) in enumerate(zip(got, wanted, strict=False)):
            key = decode(message.key(), source, "key")  # type: ignore[arg-type]
            value = decode(message.value(), source, "value")  # type: ignore[arg-type]
            stamp = message.timestamp()[1]
            if not (
                same(key, want.get("key"))
                and same(value, want.get("value"))
                and int(want.get("timestamp", stamp)) == stamp
            ):
                raise Mismatch(
                    "wrong output record",
                    f"{topic}[{index}]: <{key!r}, {value!r}> "
                    f"at {stamp}, expected <{want.get('key')!r}, "
                    f"{want.get('value')!r}> at {want.get('timestamp')}",
                )


# -- the report ------------------------------------------------------------------------------------


def run(
    files: list[Path], name_filter: str | None, wait_s: float, verbose: bool, log_path: Path
) -> tuple[list[Outcome], list[str], list[str]]:
    """Every case of ``files`` on one node: (outcomes, cleanup problems, survivors of the server).
    The server's output goes to ``log_path``."""
    cases = list(load_cases(files, name_filter))
    outcomes: list[Outcome] = []
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="rqtt-") as scratch:
        node = Node(Path(scratch), log_path)
        try:
            for number, (file, case) in enumerate(cases, 1):
                outcome = run_case(node, file, case, wait_s)
                outcomes.append(outcome)
                if verbose:
                    print(
                        f"[{number}/{len(cases)}] {outcome.verdict:7s} {outcome.seconds:5.1f} s "
                        f"{file}: {outcome.name}"
                        + (f" ({outcome.cause})" if outcome.cause else ""),
                        flush=True,
                    )
                if skip_cause(case) is None:
                    _between_cases(node, f"{file}: {case['name']}", problems)
        except KeyboardInterrupt:
            problems.append(f"interrupted after {len(outcomes)} of {len(cases)} cases")
        finally:
            node.close()
    return outcomes, problems, node.leftovers


def _between_cases(node: Node, after: str, problems: list[str]) -> None:
    """Clean up after a case; a server that died (during the case or its cleanup) is reported and
    replaced by a new one, on an empty catalog."""
    for attempt in (1, 2):  # a dropped connection (after a 500, say) gets a second try
        try:
            node.reset()
            break
        except Exception as exc:  # noqa: BLE001 - reported; the run goes on
            if node.alive():
                problems.append(f"after {after} (attempt {attempt}): {exc}")
    if not node.alive():
        assert node.server is not None
        problems.append(
            f"the server died ({node.server.process.returncode}) during {after} or "
            f"its cleanup; its log: {node.log_path}"
        )
        node.stop_server()
        node.start_server()


def report(outcomes: list[Outcome], verbose: bool) -> str:
    """The causes grouped (with one example each), every failure and skip with ``verbose``, the
    totals, and the pull-query figure."""
    counts = Counter(o.verdict for o in outcomes)
    lines = []
    for verdict in ("failed", "skipped"):
        causes = Counter(o.cause for o in outcomes if o.verdict == verdict)
        if causes:
            lines.append(f"{verdict} by cause:")
            for cause, n in causes.most_common():
                example = next(o for o in outcomes if o.verdict == verdict and o.cause == cause)
                lines.append(f"  {n:5d}  {cause}")
                lines.append(
                    f"         e.g. {example.file}: {example.name}: {example.detail[:240]}"
                )
    if verbose:
        for o in outcomes:
            if o.verdict != "passed":
                lines.append(f"{o.verdict.upper()} {o.file}: {o.name}: {o.cause}: {o.detail}")
    lines.append(
        f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped"
    )
    pull = [o for o in outcomes if o.pull]
    passed = sum(1 for o in pull if o.verdict == "passed")
    skipped = sum(1 for o in pull if o.verdict == "skipped")
    share = f"{100 * passed / len(pull):.1f}%" if pull else "n/a"
    lines.append(
        f"pull-query cases: {passed} of {len(pull)} passed ({share}; {skipped} of them "
        f"skipped, {len(pull) - passed - skipped} failed)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("PYTHONFAULTHANDLER", "1")  # a crashing server logs its stacks
    parser = argparse.ArgumentParser(
        prog="python -m conformance.rqtt", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--corpus", type=Path, default=RQTT, help="the rqtt folder")
    parser.add_argument("--file", action="append", help="a file name or stem (repeatable)")
    parser.add_argument("--case", help="only cases whose name contains this text")
    parser.add_argument(
        "--wait-s",
        type=float,
        default=30.0,
        help="how long a pull query may take to show the expected rows",
    )
    parser.add_argument("--json", type=Path, help="write a JSON report here")
    parser.add_argument("--server-log", type=Path, help="where the server's output goes")
    parser.add_argument(
        "--ci",
        action="store_true",
        help="fail if a case of conformance/rqtt_ci_expected.txt does not pass",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print each case as it ends, and every failure and skip",
    )
    args = parser.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"rqtt: the corpus is not at {args.corpus}", file=sys.stderr)
        return 2
    files = case_files(args.file, args.corpus)
    signal.signal(signal.SIGTERM, _interrupt)
    print(versions("pyspark", "httpx"), flush=True)
    started = time.monotonic()
    log_path = args.server_log or Path(tempfile.gettempdir()) / f"rqtt-server-{os.getpid()}.log"
    print(f"server log: {log_path}", flush=True)
    outcomes, problems, leftovers = run(files, args.case, args.wait_s, args.verbose, log_path)
    elapsed = time.monotonic() - started
    print(report(outcomes, args.verbose))
    print(f"({len(files)} files, {len(outcomes)} cases, {elapsed:.1f} s)")
    for problem in problems:
        print(f"rqtt: cleanup: {problem}", file=sys.stderr)
    for survivor in leftovers:
        print(f"rqtt: still running after the server stopped (killed): {survivor}", file=sys.stderr)
    if args.json:
        summary = Counter(o.verdict for o in outcomes)
        args.json.write_text(
            json.dumps(
                {
                    "versions": versions("pyspark", "httpx"),
                    "seconds": round(elapsed, 1),
                    "totals": dict(summary),
                    "problems": problems,
                    "leftovers": leftovers,
                    "outcomes": [asdict(o) for o in outcomes],
                },
                indent=1,
            )
        )
    if args.ci:
        return _check_ci(outcomes)
    return 0


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _check_ci(outcomes: list[Outcome]) -> int:
    expected = {
        line.strip()
        for line in CI_EXPECTED.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    ran = {f"{o.file}: {o.name}".strip() for o in outcomes}
    passed = {f"{o.file}: {o.name}".strip() for o in outcomes if o.verdict == "passed"}
    lost = sorted((expected & ran) - passed)
    for line in lost:
        print(f"rqtt --ci: expected to pass, did not: {line}", file=sys.stderr)
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
