"""Submitting a statement through the command log (docs/architecture.md, "The command log", steps 1-4).

Does I/O (Kafka). One submission at a time per server (a lock); across servers the protocol and the
runner's compare-and-append rule decide. Each attempt:

1. a transactional producer with ``transactional.id`` = the service id calls ``init_transactions``
   (fencing any other server mid-submission) and ``begin_transaction``;
2. the command topic's end is read (read to end of partition, never ListOffsets) and the local
   runner is waited on until it has decided everything below it;
3. the statement is planned against that catalog snapshot, with the facts about its topics looked
   up now (a missing topic with PARTITIONS is created here, before the commit); a persistent query
   gets the offsets it starts at (``auto.offset.reset``, see ``offset_reset.py``: the ends of the
   sources it reads from their end, read from fetches now);
4. the record, with a fresh command id, the end offset as its validated offset, and the format
   version, is produced and committed; then the runner's decision for that id is awaited.

A conflict (another record landed in between) starts a new attempt with a new id, a bounded number of
times. A commit that failed or timed out may still land later (the embedded broker does not fence or
abort reliably), so before planning again every earlier attempt's id is looked up: if one of them
was applied, that is the answer. A late copy can never be applied as well, because its validated
offset is then behind the log.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

from headwater.kafka import clients
from headwater.kafka.errors import EndOffsetsUnavailable, KafkaEdgeError
from headwater.kafka.offsets import end_offsets
from headwater.metastore.catalog import Catalog
from headwater.metastore.errors import CommandConflict, CommandTimeout, ValidationError
from headwater.metastore.format_defaults import KSQLDB_DEFAULTS, FormatDefaults
from headwater.metastore.offset_reset import LATEST, source_resets
from headwater.metastore.plan import (
    NO_ACTIVE_LIMIT,
    Plan,
    QueryAnalyzer,
    TopicFacts,
    plan,
    topics_named,
)
from headwater.metastore.records import CommandRecord, encode, new_command_id
from headwater.metastore.replay import CommandState, Outcome
from headwater.metastore.runner import CommandRunner
from headwater.sqlparse_ext import statements as ast

#: What the schema registry says of a statement's topics (see TopicFacts.schemas); None: no registry.
SchemaFacts = Callable[[ast.Statement], Mapping[str, Any] | None]
#: Waits until the cluster's other live servers have applied a command id; returns those that did
#: not confirm in time (a topic is deleted only once every server has stopped reading it).
PeersApplied = Callable[[str], list[str]]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Submitted:
    """The answer to a submitted statement.

    Attributes:
        command_id: the id of the applied command ('' when nothing had to change).
        sequence_number: its offset in the command log (ksqlDB's commandSequenceNumber), or the
            offset of the last record decided when nothing changed.
        message: ksqlDB's status message ("Stream created", ...).
        catalog: the catalog right after the command.
        attempts: how many attempts it took.
        warnings: what the answer should warn of (a topic DROP ... DELETE TOPIC could not delete).
    """

    command_id: str
    sequence_number: int
    message: str
    catalog: Catalog
    attempts: int
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SubmitSettings:
    """Timeouts and bounds of a submission.

    Attributes:
        active_query_limit: ``ksql.query.persistent.active.limit``: the most persistent queries
            the catalog may hold; a CREATE ... AS SELECT or INSERT INTO ... SELECT beyond it is
            refused when it is validated (the catalog is shared: one count for the service).
    """

    max_attempts: int = 5
    catch_up_timeout_ms: int = 10000
    outcome_timeout_ms: int = 10000
    retry_backoff_ms: int = 50
    active_query_limit: int = NO_ACTIVE_LIMIT


#: The longest pause between two attempts of one submission.
_MAX_PAUSE_S = 2.0


@dataclass(frozen=True, slots=True)
class _Lost:
    """An attempt that did not take effect, to be retried.

    Attributes:
        end: the command log's end it validated against (None: it failed before reading it).
        reason: why, for the log and the final error.
    """

    end: int | None
    reason: str


class CommandSubmitter:
    """Submits catalog statements for one server."""

    def __init__(
        self,
        settings: clients.KafkaSettings,
        service_id: str,
        topic: str,
        runner: CommandRunner,
        admin: AdminClient,
        *,
        submitted_by: str = "",
        limits: SubmitSettings | None = None,
        analyze: QueryAnalyzer | None = None,
        schema_facts: SchemaFacts | None = None,
        peers_applied: PeersApplied | None = None,
    ) -> None:
        self._settings = settings
        self._service_id = service_id
        self._topic = topic
        self._runner = runner
        self._admin = admin
        self._submitted_by = submitted_by
        self._limits = limits or SubmitSettings()
        self._analyze = analyze
        self._schema_facts = schema_facts
        self._peers_applied = peers_applied
        self._lock = threading.Lock()

    def submit(
        self,
        statement: ast.Statement,
        offset_reset: str | None = None,
        formats: FormatDefaults = KSQLDB_DEFAULTS,
    ) -> Submitted:
        """Validate, append and apply ``statement``.

        Args:
            statement: the statement.
            offset_reset: the ``auto.offset.reset`` it runs with (``earliest``, ``latest`` or None:
                unset), for a persistent query (see ``offset_reset.py``).
            formats: the formats of a CREATE STREAM/TABLE whose WITH clause names none.

        Raises:
            ValidationError: the statement is invalid against the catalog (nothing was appended).
            CommandConflict: every attempt lost a race with another server's command.
            CommandTimeout: the log or the local runner did not answer in time.
        """
        with self._lock:
            return self._submit(statement, offset_reset, formats)

    def _submit(
        self, statement: ast.Statement, offset_reset: str | None, formats: FormatDefaults
    ) -> Submitted:
        attempt_ids: list[str] = []
        lost = _Lost(None, "")
        for attempt in range(1, self._limits.max_attempts + 1):
            started = time.monotonic()
            answer = self._attempt(statement, attempt, attempt_ids, offset_reset, formats)
            if isinstance(answer, Submitted):
                return answer
            lost = answer
            log.warning(
                "command submission attempt %d lost: %s",
                attempt,
                lost.reason,
                extra={"statement_id": attempt_ids[-1] if attempt_ids else None},
            )
            if attempt < self._limits.max_attempts:
                self._yield_to_others(lost, attempt, time.monotonic() - started)
        raise CommandConflict(
            f"the statement lost {self._limits.max_attempts} races with statements from other "
            f"servers, or the command log did not confirm it (last: {lost.reason}); try again"
        )

    def _yield_to_others(self, lost: _Lost, attempt: int, took_s: float) -> None:
        """Give way after a lost attempt: another server's submission is most likely under way
        (it fenced this one, or its record landed first). Wait for the log to move past the end this
        attempt validated against (its record landing, or this attempt's late one), for a jittered
        pause that grows with the attempts and with how long an attempt takes here. Two servers that
        fence each other then stop retrying in step: one waits while the other commits, instead of
        fencing it again (CI saw two servers each lose 5 rounds of that)."""
        backoff_s = self._limits.retry_backoff_ms / 1000
        pause = retry_pause(attempt, took_s, backoff_s, random.uniform(0.5, 1.5))
        if lost.end is None:
            time.sleep(pause)
        else:
            self._runner.wait_for_position(lost.end + 1, pause)

    def _attempt(
        self,
        statement: ast.Statement,
        attempt: int,
        attempt_ids: list[str],
        offset_reset: str | None = None,
        formats: FormatDefaults = KSQLDB_DEFAULTS,
    ) -> Submitted | _Lost:
        """One attempt of steps 1-4; a ``_Lost`` means "try again"."""
        end: int | None = None
        producer = clients.producer(
            self._settings, "command-submitter", transactional_id=self._service_id
        )
        try:
            try:
                clients.init_transactions(producer, self._settings)  # step 1: fences others
                producer.begin_transaction()
                end = self._catch_up()  # step 2
                earlier = self._earlier_outcome(attempt_ids)
                if earlier is not None:
                    self._abort(producer)
                    return self._answer(earlier, attempt)
                catalog = self._runner.catalog
                planned = plan(
                    statement,
                    catalog,
                    self._facts(statement),
                    self._analyze,  # step 3
                    self._limits.active_query_limit,
                    formats,
                )
                if planned.command is None:
                    self._abort(producer)
                    # Nothing to append: the answer is as of the last record decided.
                    done = self._runner.position - 1
                    return Submitted("", done, planned.message, catalog, attempt)
                command = self._with_start_offsets(planned.command, catalog, offset_reset)
                self._prepare(planned)
            except ValidationError:
                self._abort(producer)
                raise
            except (KafkaEdgeError, KafkaException) as exc:
                if isinstance(exc, KafkaEdgeError) and not exc.retriable:
                    self._abort(producer)
                    raise ValidationError(str(exc)) from exc
                self._abort(producer)
                return _Lost(end, f"Kafka refused the transaction ({exc})")
            command_id = new_command_id()
            attempt_ids.append(command_id)
            if not self._append(producer, command_id, end, statement, command):  # step 4
                # Outcome unknown: the next attempt catches up and looks this id up first.
                return _Lost(end, "its commit did not confirm (another server fenced it?)")
        finally:
            clients.close_producer(producer, self._settings.commit_transaction_timeout_ms / 1000)
        wait_s = self._limits.outcome_timeout_ms / 1000
        outcome = self._runner.wait_for_outcome(command_id, wait_s)
        if outcome is None:
            return _Lost(end, f"the command runner did not decide it within {wait_s:g} s")
        if outcome.state is CommandState.SUCCESS:
            return self._answer(outcome, attempt, self._finish(planned, command_id))
        if not outcome.conflict:
            raise ValidationError(outcome.message)
        return _Lost(end, "another server's statement landed first")

    def _catch_up(self) -> int:
        """Step 2: the log's end, once the local runner has decided everything below it."""
        try:
            end = end_offsets(
                self._settings,
                self._topic,
                [0],
                start_offsets={0: self._runner.position},  # every record, as the runner reads
                timeout_ms=self._limits.catch_up_timeout_ms,
            )[0]
        except KafkaEdgeError as exc:
            raise CommandTimeout(f"could not read the end of the command topic: {exc}") from exc
        if not self._runner.wait_for_position(end, self._limits.catch_up_timeout_ms / 1000):
            reason = self._runner.reason or "the command runner is behind"
            raise CommandTimeout(
                f"Timed out waiting for the command runner to reach offset {end} ({reason})"
            )
        return end

    def _earlier_outcome(self, attempt_ids: list[str]) -> Outcome | None:
        """The decision on an earlier attempt that was applied, or that failed for good."""
        for command_id in attempt_ids:
            outcome = self._runner.outcome(command_id)
            if outcome is not None and (
                outcome.state is CommandState.SUCCESS or not outcome.conflict
            ):
                return outcome
        return None

    def _answer(self, outcome: Outcome, attempt: int, warnings: tuple[str, ...] = ()) -> Submitted:
        if outcome.state is not CommandState.SUCCESS:
            raise ValidationError(outcome.message)
        return Submitted(
            outcome.command_id,
            outcome.offset,
            outcome.message,
            self._runner.catalog,
            attempt,
            warnings,
        )

    def _with_start_offsets(
        self, command: Mapping[str, Any], catalog: Catalog, offset_reset: str | None
    ) -> Mapping[str, Any]:
        """A ``start_query`` command with the offsets its query starts at: each partition's end,
        read from fetches now, of every source it reads from its end; other commands unchanged."""
        if command.get("type") != "start_query":
            return command
        query = command["query"]
        sources = [s for s in (catalog.source(n) for n in query.get("sources", ())) if s]
        resets = source_resets(sources, offset_reset)
        starts: dict[str, dict[str, int]] = {}
        for source in sources:
            if resets[source.topic] != LATEST or source.topic in starts:
                continue
            try:
                ends = end_offsets(
                    self._settings,
                    source.topic,
                    range(source.partitions),
                    timeout_ms=self._limits.catch_up_timeout_ms,
                )
            except EndOffsetsUnavailable as exc:
                raise CommandTimeout(
                    f"could not read the end of {source.name}'s topic, where the "
                    f"query starts (auto.offset.reset=latest): {exc}"
                ) from exc
            starts[source.topic] = {str(p): ends[p] for p in sorted(ends)}
        if not starts:
            return command
        return {**command, "query": {**query, "startOffsets": starts}}

    def _facts(self, statement: ast.Statement) -> TopicFacts:
        names = topics_named(statement)
        schemas = None if self._schema_facts is None else self._schema_facts(statement)
        if not names:
            return TopicFacts({}, schemas)
        try:
            metadata = self._admin.list_topics(
                timeout=self._settings.topic_operation_timeout_ms / 1000
            )
        except KafkaException as exc:
            raise CommandTimeout(f"could not list Kafka topics: {exc}") from exc
        return TopicFacts(
            {
                n: len(metadata.topics[n].partitions)
                for n in names
                if n in metadata.topics and metadata.topics[n].error is None
            },
            schemas,
        )

    def _prepare(self, planned: Plan) -> None:
        if planned.create_topic is not None:
            name, partitions = planned.create_topic
            clients.create_topic(self._admin, self._settings, name, partitions)

    def _finish(self, planned: Plan, command_id: str) -> tuple[str, ...]:
        """After the command applied: delete the topic of DROP ... DELETE TOPIC, once no server
        reads it (this one stopped when it applied the command; peers are asked). Returns warnings."""
        topic = planned.delete_topic
        if topic is None:
            return ()
        waiting = self._peers_applied(command_id) if self._peers_applied is not None else []
        if waiting:
            warning = (
                f"The topic {topic} was not deleted: the servers {', '.join(waiting)} did "
                "not confirm in time that they stopped reading it. Delete it once they have."
            )
            return (warning,)
        failed = clients.delete_topics(self._admin, self._settings, [topic])
        if topic in failed:
            log.warning("could not delete topic %s: %s", topic, failed[topic])
            return (f"The topic {topic} could not be deleted: {failed[topic]}",)
        return ()

    def _append(
        self,
        producer: Producer,
        command_id: str,
        validated_offset: int,
        statement: ast.Statement,
        command: Any,
    ) -> bool:
        """Produce and commit the record; False when the commit's outcome is unknown."""
        record = CommandRecord(
            command_id=command_id,
            validated_offset=validated_offset,
            statement_text=statement.text.strip(),
            command=command,
            submitted_by=self._submitted_by,
        )
        producer.produce(self._topic, value=encode(record), partition=0)
        try:
            clients.commit_transaction(producer, self._settings)
        except (KafkaEdgeError, KafkaException) as exc:
            # Outcome unknown: the record may still land (the embedded broker shows even a fenced
            # producer's records). The runner will tell.
            log.info("command %s: commit did not confirm (%s)", command_id, exc)
            return False
        return True

    def _abort(self, producer: Producer) -> None:
        try:
            clients.abort_transaction(producer, self._settings)
        except (KafkaEdgeError, KafkaException) as exc:
            log.debug("abort after a failed attempt: %s", exc)


def retry_pause(attempt: int, took_s: float, backoff_s: float, jitter: float) -> float:
    """How long to give way after lost attempt number ``attempt`` (1, 2, ...), which took
    ``took_s``: ``jitter`` (drawn from 0.5-1.5) times the longer of ``backoff_s`` and ``took_s``,
    doubled per attempt, at most ``_MAX_PAUSE_S``. Scaling by the attempt's own duration is what
    lets a rival's whole attempt (fence, catch up, plan, commit) fit in the pause."""
    growth: float = 2.0 ** (attempt - 1)
    return min(jitter * max(backoff_s, took_s) * growth, _MAX_PAUSE_S)
