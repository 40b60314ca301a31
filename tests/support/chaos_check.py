"""The verdicts of the chaos soak (bench/chaos.py), as pure functions over what it recorded. No I/O.

Every written value is unique (a sequence number), so a value names the write it came from. At
the end the runner reads each topic whole (``LogRecord``: partition, offset, key, value), which
tells, for every value, where it really landed, acknowledged or not.

- Lost writes: an acknowledged INSERT whose record is not in the topic where the acknowledgement
  said, or whose key the table (read after the cluster settled) holds at an older value.
- Stale answers: a pull answer whose ``servedBy`` reports a lag above the bound asked for; or whose
  row is older than the bound allows. The row for key k came from the record at offset o; the
  next record of k in the log, at offset n, had not been applied, so the serving replica's position
  was at most n. The partition's end when the query was sent was at least 1 + the highest offset
  acknowledged before then, e, so the replica lagged by at least e - n; beyond the bound is stale.
  A row older than the answer's own reported position (n < position) is counted too. Beside the
  verdict, ``lag_underestimates`` says by how much each reported lag fell short of the lag the
  acknowledged writes prove (their end when the query was sent - the reported position).
- DDL: a stream whose last acknowledged CREATE or DROP is not reflected in the final catalog.
- Persistent query output: each input value exactly once in the output (duplicates, missing).
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One record of a topic, as read back at the end."""

    partition: int
    offset: int
    key: str
    value: int


@dataclass(frozen=True, slots=True)
class Ack:
    """An acknowledged INSERT: its key and value, where the server said it landed, and when the
    request was sent and answered (monotonic seconds)."""

    key: str
    value: int
    partition: int
    offset: int
    sent: float
    acked: float


@dataclass(frozen=True, slots=True)
class Served:
    """One ``servedBy`` item of a pull answer."""

    partition: int
    host: str
    position: int
    lag: int


@dataclass(frozen=True, slots=True)
class Read:
    """A pull query by key that was answered (200): its row's value, None when no row."""

    key: str
    sent: float
    done: float
    served: tuple[Served, ...]
    value: int | None


@dataclass(frozen=True, slots=True)
class DdlOp:
    """A CREATE or DROP STREAM as the client saw it: ``outcome`` is "ok" (acknowledged),
    "refused" (a 4xx statement error: not applied) or "unknown" (an error or no answer)."""

    name: str
    action: str  # "CREATE" | "DROP"
    outcome: str  # "ok" | "refused" | "unknown"


class Log:
    """A topic read back whole: where each value landed and each key's offsets."""

    def __init__(self, records: Iterable[LogRecord]) -> None:
        self.at: dict[tuple[int, int], LogRecord] = {}
        self.of_value: dict[int, LogRecord] = {}  # the latest record of each value
        self.partition_of: dict[str, int] = {}
        offsets: dict[str, list[int]] = defaultdict(list)
        for r in records:
            self.partition_of[r.key] = r.partition
            self.at[(r.partition, r.offset)] = r
            if r.value not in self.of_value or self.of_value[r.value].offset < r.offset:
                self.of_value[r.value] = r
            offsets[r.key].append(r.offset)
        self.key_offsets = {k: sorted(v) for k, v in offsets.items()}

    def next_of_key(self, key: str, after: int) -> int | None:
        """The offset of ``key``'s first record after offset ``after`` (None: there is none)."""
        offsets = self.key_offsets.get(key, [])
        i = bisect.bisect_right(offsets, after)
        return offsets[i] if i < len(offsets) else None


def lost_writes(
    acks: Iterable[Ack], log: Log, tables: Mapping[str, Mapping[str, int]]
) -> list[str]:
    """Why each lost acknowledged write is lost (empty: none lost).

    Args:
        acks: the acknowledged writes.
        log: the table's topic, read back whole.
        tables: per server, the table read at the end ({key: value}).
    """
    lost = []
    for ack in acks:
        record = log.at.get((ack.partition, ack.offset))
        if record is None or (record.key, record.value) != (ack.key, ack.value):
            found = log.of_value.get(ack.value)
            where = f"found at {found.partition}/{found.offset}" if found else "not in the topic"
            lost.append(
                f"{ack.key}={ack.value} acknowledged at {ack.partition}/{ack.offset}: "
                f"{'that offset holds ' + repr(record) if record else 'no such record'}, "
                f"{where}"
            )
            continue
        for server, table in tables.items():
            value = table.get(ack.key)
            held = log.of_value.get(value) if value is not None else None
            if held is None or held.offset < ack.offset:
                lost.append(
                    f"{ack.key}={ack.value} (offset {ack.offset}): the table on {server} "
                    f"holds {value} (offset {held.offset if held else None})"
                )
    return lost


class AckedEnds:
    """Per partition, the end offset the acknowledged writes prove by each moment: 1 + the highest
    offset acknowledged by then (the partition's true end was at least that)."""

    def __init__(self, acks: Iterable[Ack]) -> None:
        self._by: dict[int, tuple[list[float], list[int]]] = {}
        for ack in sorted(acks, key=lambda a: a.acked):
            times, highest = self._by.setdefault(ack.partition, ([], []))
            times.append(ack.acked)
            highest.append(max(ack.offset, highest[-1] if highest else -1))

    def at(self, partition: int, when: float) -> int:
        times, highest = self._by.get(partition, ([], []))
        i = bisect.bisect_right(times, when)
        return highest[i - 1] + 1 if i else 0


def stale_answers(
    reads: Iterable[Read], acks: Iterable[Ack], log: Log, bound: int, t0: float = 0.0
) -> list[str]:
    """Why each pull answer beyond its staleness bound is (empty: none); times are given from
    ``t0``."""
    ends = AckedEnds(acks)
    stale = []
    for read in reads:
        for s in read.served:
            if s.lag > bound:
                stale.append(
                    f"{read.key}: {s.host} reported partition {s.partition} lag {s.lag} > {bound}"
                )
        record = log.of_value.get(read.value) if read.value is not None else None
        if read.value is not None and (record is None or record.key != read.key):
            stale.append(f"{read.key}: answered {read.value}, which was never written to that key")
            continue
        unseen = log.next_of_key(read.key, record.offset if record else -1)
        if unseen is None:
            continue  # the answer is the key's latest record
        partition = log.partition_of[read.key]
        position = max((s.position for s in read.served if s.partition == partition), default=0)
        if position > unseen:
            stale.append(
                f"{read.key}: answered {read.value} at position {position}, which "
                f"includes the newer record at offset {unseen}"
            )
            continue
        end = ends.at(partition, read.sent)
        if end - unseen > bound:
            by = ", ".join(f"{s.host} at position {s.position}, lag {s.lag}" for s in read.served)
            stale.append(
                f"{read.key}: answered {read.value} (offset "
                f"{record.offset if record else None}) while offset {unseen} of the "
                f"key and {end} records were acknowledged: lag >= {end - unseen} > "
                f"{bound} (sent at t={read.sent - t0:.1f} s; partition {partition} "
                f"served by {by})"
            )
    return stale


def lag_underestimates(reads: Iterable[Read], acks: Iterable[Ack]) -> list[int]:
    """Per answered partition, by how many records the reported lag fell short of the lag the
    acknowledged writes prove (acknowledged end when sent - reported position); 0 when it did not."""
    ends = AckedEnds(acks)
    return [
        max(0, ends.at(s.partition, read.sent) - s.position - s.lag)
        for read in reads
        for s in read.served
    ]


def ddl_mismatches(ops: Iterable[DdlOp], final: Mapping[str, set[str]]) -> list[str]:
    """Streams whose last acknowledged CREATE/DROP a server's final catalog does not reflect.

    Args:
        ops: the DDL statements in the order they were sent.
        final: per server, the names of the streams in its catalog at the end (only names the ops
            touched are compared).
    """
    expected: dict[str, bool | None] = {}  # exists? None: unknown
    for op in ops:
        if op.outcome == "ok":
            expected[op.name] = op.action == "CREATE"
        elif op.outcome == "unknown":
            expected[op.name] = None
        # "refused": not applied, nothing changes
    wrong = []
    for server, names in final.items():
        for name, exists in sorted(expected.items()):
            if exists is not None and (name in names) != exists:
                wrong.append(
                    f"{server}: {name} {'missing' if exists else 'still there'} after "
                    f"an acknowledged {'CREATE' if exists else 'DROP'}"
                )
    return wrong


@dataclass(frozen=True, slots=True)
class OutputCheck:
    """A persistent query's output against its input: each input value exactly once."""

    inputs: int
    outputs: int
    duplicates: int
    missing: int
    unexpected: int
    examples: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.duplicates == self.missing == self.unexpected == 0


def check_output(inputs: Iterable[int], outputs: Iterable[int]) -> OutputCheck:
    """Compare a pass-through query's output values with its input values."""
    wanted = set(inputs)
    counts = Counter(outputs)
    duplicates = sorted(v for v, n in counts.items() if n > 1)
    missing = sorted(wanted - counts.keys())
    unexpected = sorted(counts.keys() - wanted)
    examples = tuple(
        [f"duplicate {v} (x{counts[v]})" for v in duplicates[:3]]
        + [f"missing {v}" for v in missing[:3]]
        + [f"unexpected {v}" for v in unexpected[:3]]
    )
    return OutputCheck(
        len(wanted),
        sum(counts.values()),
        sum(counts[v] - 1 for v in duplicates),
        len(missing),
        len(unexpected),
        examples,
    )


def digests_agree(digests: Mapping[str, str | None]) -> bool:
    """Whether every server answered the same catalog digest."""
    values = set(digests.values())
    return len(values) == 1 and None not in values
