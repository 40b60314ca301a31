"""Nexmark's queries (bench.nexmark.queries) in process, against the plain-Python models
(bench.nexmark.reference): the SQL means what the benchmark says it means, before
``python -m bench.nexmark`` runs it on Spark."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import orjson
import pytest

from bench.nexmark.generator import TOPICS, Bid, GeneratorConfig, events, record
from bench.nexmark.queries import QUERIES, NexmarkQuery
from bench.nexmark.reference import MODELS, Run, actual, canonical, difference, expected, side_input
from conformance.qtt import World
from headwater.engine.formats import schema_registry
from headwater.sqlparse_ext import parse

PREFIX = "NX_"
PARTITIONS = 2  # as bench.nexmark's topics
RUNNABLE = [q for q in QUERIES if q.refused is None]
FEWER = {"q23": 1_000}  # its output grows with bids x auctions: 23,066 rows from 4,000 events


@pytest.fixture(scope="module", autouse=True)
def _process_registry() -> Iterator[None]:
    """`World` makes its own mock schema registry the process's: the one before is put back
    (else later tests find a registry where none is configured)."""
    before = schema_registry.current()
    yield
    schema_registry.use(before)


@pytest.fixture(scope="module")
def run() -> Run:
    # 100 events a second of event time: 2,500 events span 25 s, so q11's sessions (10 s gap)
    # and q12's windows (10 s) split.
    happened = list(events(GeneratorConfig(events=2_500, rate_per_s=100, seed=7)))
    bids = [e for e in happened if isinstance(e, Bid)]
    arrival = [b.date_time + 5_000 + (i * 7919) % 3_000 for i, b in enumerate(bids)]
    return Run(happened, arrival)


def head(run: Run, count: int) -> Run:
    """The run's first ``count`` events."""
    first = run.events[:count]
    return Run(first, run.arrival_ms[: sum(1 for e in first if isinstance(e, Bid))])


def run_in_process(query: NexmarkQuery, run: Run) -> list[tuple[bytes | None, bytes | None]]:
    """The query's output topic after the run's events, through the in-process engine (the
    per-record and vectorized pipelines a live query's tasks run)."""
    world = World({f"{PREFIX}{t}": PARTITIONS for t in (*TOPICS, "side")})
    for text in query.sql(PREFIX):
        for statement in parse(text):
            world.execute(statement)
    if query.side_input:
        for side_key, side_value in side_input():
            world.produce(
                f"{PREFIX}side", orjson.dumps(side_key), orjson.dumps({"V": side_value}), 0, None
            )
    arrivals = iter(run.arrival_ms)
    for event in run.events:
        kind, key, value = record(event)
        stamp = next(arrivals) if isinstance(event, Bid) else event.date_time
        world.produce(f"{PREFIX}{kind}", key, value, stamp, None)
    sink = world.catalog.source(f"{PREFIX}OUT")
    assert sink is not None
    assert world.errors == 0
    return [(r.key, r.value) for _, r in world.topics[sink.topic].records]


def test_every_query_is_written_or_says_why_not() -> None:
    names = [q.name for q in QUERIES]
    assert names == [f"q{i}" for i in range(24)]
    for query in QUERIES:
        assert (query.refused is None) == bool(query.statements), query.name
        assert (query.refused is None) == (query.name in MODELS), query.name


@pytest.mark.parametrize("query", RUNNABLE, ids=lambda q: q.name)
def test_the_query_outputs_what_its_model_says(query: NexmarkQuery, run: Run) -> None:
    run = head(run, FEWER.get(query.name, len(run.events)))
    want = expected(query.name, run)
    assert sum(want.values()) > 0, "a model with no rows proves nothing"
    got = actual(query.name, query.kind, run_in_process(query, run), run)
    assert not difference(want, got), difference(want, got)


def test_the_comparison_fails_on_a_changed_value(run: Run) -> None:
    query = next(q for q in QUERIES if q.name == "q1")
    records = run_in_process(query, run)
    key, value = records[0]
    assert value is not None
    changed = orjson.loads(value)
    changed["PRICE"] += 0.001
    records[0] = (key, orjson.dumps(changed))
    assert difference(expected("q1", run), actual("q1", "stream", records, run))


def test_a_table_is_judged_by_its_last_value_per_key() -> None:
    records = [(b"1", b'{"A": 1}'), (b"2", b'{"A": 2}'), (b"1", b'{"A": 3}'), (b"2", None)]
    got = actual("q0", "table", records, Run(()))
    assert got == Counter([canonical({"A": 3})])
