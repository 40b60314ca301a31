"""The race: headwater's CSAS against bytewax and a plain loop, on one broker, in one run.

Run ``python -m bench.race [--records N] [--samples N] [--skip NAME ...]`` (default 300,000 records,
100 latency samples; about 3 minutes, plus ~30 s the first time to build bytewax's environment). It
starts an in-memory embedded broker and runs each contender in turn, alone on the machine, on the
peers' filter + projection workload (`bench/_workloads.py`: JSON records on 2 partitions,
``WHERE amount > 50``, four columns out, one arithmetic, one upper-case):

- **loop**: a hand-written consumer (`bench/_race_loop.py`: confluent-kafka batches and orjson, one
  process): what the broker lets anyone reach on this machine, the limit;
- **bytewax** 0.21.1 (`bench/_race_bytewax.py`), installed from PyPI into a scratch virtual
  environment (``~/.cache/headwater-bench/bytewax-0.21.1``) the first time;
- **headwater**: a ``headwater server`` (Spark started with it, ``headwater.engine.start=startup``, and
  its background warm-up finished)
  running the workload's CSAS, exactly once.

Then the count workload (``--count-records``, default 300,000, over 1,000 keys; then ``--big-keys``
records, default 1,000,000, one per key): a count per record key, kept as a table; each contender
writes its running counts under their keys (headwater's ``CREATE TABLE ... AS SELECT id, COUNT(*)``,
bytewax's keyed ``stateful_map``, the loop's dict), and the run is timed from the first record produced
until the latest count of every key adds up to the records produced: records/s in and CPU per 1k
records, as bench.aggregates measures headwater alone. ``--skip-count`` leaves it out (the 1M-key run
takes headwater ~5 minutes).

Each contender reads its own input topic and writes its own output topic. Started, it gets one record
(cold start: started, or CSAS accepted, to that record's output); then the N records are produced as
fast as this process can (the same for every contender) and timed to the last output: records/s in,
sustained, and CPU seconds of the contender's whole process tree per 1k outputs over that span; then
produce -> output p50/p99 (``--samples`` records at 20/s), and peak RSS. Then issue 30's ratios beside
their targets: headwater's records/s over the loop's, its CPU per record over bytewax's, its p50 over
bytewax's, and its count throughput over bytewax's on both key counts. Absolute figures move from machine to machine; the ratios are the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson
from confluent_kafka import Producer, TopicPartition

from bench._processes import cpu_seconds, rss_mb
from bench._server import BenchServer
from bench._workloads import TX_QUERY, TX_STREAM, produce_all, produce_tx, tx_passing, tx_record
from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import admin_client, consumer, create_topic, producer

BYTEWAX = "0.21.1"
_BENCH = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Result:
    """One contender's figures."""

    name: str
    rate: float  # input records per second, steady
    cpu_per_1k: float  # CPU seconds per 1k outputs, steady
    cold_s: float
    p50_ms: float
    p99_ms: float
    rss_mb: float


@dataclass(frozen=True)
class CountResult:
    """One contender's figures on the count workload."""

    name: str
    keys: int
    rate: float  # input records per second, from the first produced to every key's final count
    cpu_per_1k: float  # CPU seconds per 1k input records over that span
    cold_s: float
    rss_mb: float


@dataclass
class Contender:
    """A running contender: the root of its process tree, and how to stop it."""

    name: str
    root: int
    stop: Callable[[], None]
    started: float  # when it was started (for headwater: when its CSAS was accepted)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--skip", action="append", default=[], choices=["loop", "bytewax"])
    parser.add_argument("--count-records", type=int, default=300_000)
    parser.add_argument("--big-keys", type=int, default=1_000_000)
    parser.add_argument("--skip-count", action="store_true")
    args = parser.parse_args(argv)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, {args.records:,} records")
    starters = {"loop": _loop, "bytewax": _bytewax, "headwater": _headwater}
    results: dict[str, Result] = {}
    counts: dict[tuple[str, int], CountResult] = {}
    with EmbeddedBroker(None) as broker, tempfile.TemporaryDirectory() as scratch:
        for name, start in starters.items():
            if name in args.skip:
                continue
            results[name] = _race(broker, name, start, Path(scratch), args.records, args.samples)
            _print(results[name])
        runs = (
            [] if args.skip_count else [(args.count_records, 1000), (args.big_keys, args.big_keys)]
        )
        for records, keys in runs:
            print(f"count workload: {records:,} records over {keys:,} keys", flush=True)
            for name, start in starters.items():
                if name in args.skip:
                    continue
                found = _count_race(broker, name, start, Path(scratch), records, keys)
                counts[name, keys] = found
                _print_count(found)
    _ratios(results)
    _count_ratios(counts)
    return 0


def _race(
    broker: EmbeddedBroker,
    name: str,
    start: Callable[[EmbeddedBroker, str, str, Path], Contender],
    scratch: Path,
    records: int,
    samples: int,
) -> Result:
    settings = broker.settings()
    source, sink = f"in_{name}", f"OUT_{name.upper()}"
    writer = _topics(broker, name, source, sink)
    contender = start(broker, source, sink, scratch)
    try:
        reader = consumer(settings, f"race-{uuid.uuid4().hex[:6]}", fetch_wait_max_ms=10)
        reader.assign([TopicPartition(sink, p, 0) for p in range(2)])
        cold = _latencies(writer, reader, source, 1, contender.started)[0]  # running, warm
        expected = tx_passing(records)
        cpu_first, first = cpu_seconds(contender.root), time.monotonic()
        produce_tx(writer, records, source)
        produced = time.monotonic() - first
        seen, peak, last_sample = 0, 0.0, 0.0
        while seen < expected:
            seen += sum(1 for m in reader.consume(10_000, 0.05) if m.error() is None)
            now = time.monotonic()
            if now - last_sample > 0.5:
                peak, last_sample = max(peak, rss_mb(contender.root)), now
            if now - first > 900:
                raise SystemExit(f"{name}: {seen} of {expected} outputs after 900 s")
        last, cpu_last = time.monotonic(), cpu_seconds(contender.root)
        latencies = _latencies(writer, reader, source, samples)
        reader.close()
        peak = max(peak, rss_mb(contender.root))
    finally:
        contender.stop()
    print(f"  {name}: producing the {records:,} records took {produced:.1f} s", flush=True)
    latencies.sort()
    return Result(
        name,
        records / (last - first),
        (cpu_last - cpu_first) / expected * 1000,
        cold,
        statistics.median(latencies) * 1000,
        latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        peak,
    )


def _topics(broker: EmbeddedBroker, name: str, source: str, sink: str) -> Producer:
    """Creates a contender's input topic and, unless it is headwater's (a CSAS or CTAS creates its
    own), its output topic, 2 partitions each; the producer that writes its input."""
    settings = broker.settings()
    admin = admin_client(settings, "bench")
    create_topic(admin, settings, source, 2)
    if name != "headwater":
        create_topic(admin, settings, sink, 2)
    return producer(settings, "bench")


def _count_race(
    broker: EmbeddedBroker,
    name: str,
    start: Callable[..., Contender],
    scratch: Path,
    records: int,
    keys: int,
) -> CountResult:
    """The count workload for one contender: one warm-up record, then ``records`` records over
    ``keys`` keys, timed until every key's latest count adds up to what was produced."""
    settings = broker.settings()
    source, sink = f"count{keys}_in_{name}", f"COUNT{keys}_{name.upper()}"
    writer = _topics(broker, name, source, sink)
    contender = start(broker, source, sink, scratch, "count")
    try:
        reader = consumer(settings, f"race-{uuid.uuid4().hex[:6]}", fetch_wait_max_ms=10)
        reader.assign([TopicPartition(sink, p, 0) for p in range(2)])
        latest: dict[bytes | None, int] = {}
        writer.produce(source, tx_record(0)[1], b"warm")
        writer.flush()
        _follow_counts(reader, latest, 1, contender.started + 300, name, contender.root)
        cold = time.monotonic() - contender.started
        cpu_first, first = cpu_seconds(contender.root), time.monotonic()
        produce_all(
            writer, source, ((f"c{i % keys}".encode(), tx_record(i)[1]) for i in range(records))
        )
        writer.flush()
        deadline = first + max(900.0, records / 500)
        peak = _follow_counts(reader, latest, records + 1, deadline, name, contender.root)
        last, cpu_last = time.monotonic(), cpu_seconds(contender.root)
        reader.close()
    finally:
        contender.stop()
    return CountResult(
        name, keys, records / (last - first), (cpu_last - cpu_first) / records * 1000, cold, peak
    )


def _follow_counts(
    reader: object,
    latest: dict[bytes | None, int],
    want: int,
    deadline: float,
    name: str,
    root: int,
) -> float:
    """Reads counts (``{"N": n}`` per key) until the latest of every key add up to ``want``;
    the peak RSS of ``root``'s process tree meanwhile."""
    total, peak, last_sample = sum(latest.values()), 0.0, 0.0
    while total < want:
        for m in reader.consume(20_000, 0.05):  # type: ignore[attr-defined]
            if m.error() is not None:
                continue
            n = int(orjson.loads(m.value())["N"]) if m.value() else 0
            total += n - latest.get(m.key(), 0)
            latest[m.key()] = n
        now = time.monotonic()
        if now - last_sample > 0.5:
            peak, last_sample = max(peak, rss_mb(root)), now
        if now > deadline:
            raise SystemExit(f"{name}: counts add up to {total:,} of {want:,} at the deadline")
    return max(peak, rss_mb(root))


def _latencies(
    writer: object, reader: object, topic: str, samples: int, since: float | None = None
) -> list[float]:
    """Produce -> output for ``samples`` passing records at 20 per second (``since``: measured
    from then instead of from each record's produce, waiting up to 5 minutes)."""
    latencies: list[float] = []
    for i in range(samples):
        key = f"lat{i}-{uuid.uuid4().hex[:4]}".encode()
        value = orjson.dumps({"ITEM": "x", "AMOUNT": 99, "PRICE": 1.5, "NOTE": ""})
        sent = time.monotonic() if since is None else since
        writer.produce(topic, value, key)  # type: ignore[attr-defined]
        writer.flush()  # type: ignore[attr-defined]
        found = False
        while not found and time.monotonic() - sent < (30 if since is None else 300):
            for m in reader.consume(100, 0.01):  # type: ignore[attr-defined]
                found = found or (m.error() is None and m.key() == key)
        latencies.append(time.monotonic() - sent)
        time.sleep(max(0.0, 0.05 - (time.monotonic() - sent)))
    return latencies


# -- the contenders -------------------------------------------------------------------------------


def _process(argv: list[str], scratch: Path, env: dict[str, str] | None = None) -> Contender:
    log = open(scratch / f"{Path(argv[0]).name}-{uuid.uuid4().hex[:4]}.log", "wb")  # noqa: SIM115
    started = time.monotonic()
    process = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, cwd=_BENCH
    )

    def stop() -> None:
        process.kill()
        process.wait(10)
        log.close()

    return Contender(Path(argv[0]).name, process.pid, stop, started)


def _loop(
    broker: EmbeddedBroker, source: str, sink: str, scratch: Path, workload: str = "filter"
) -> Contender:
    return _process(
        [
            sys.executable,
            "-m",
            "bench._race_loop",
            broker.bootstrap_servers,
            source,
            sink,
            workload,
        ],
        scratch,
        {"PYTHONPATH": str(_BENCH.parent)},
    )


def _bytewax(
    broker: EmbeddedBroker, source: str, sink: str, scratch: Path, workload: str = "filter"
) -> Contender:
    python = _bytewax_python()
    return _process(
        [str(python), "-m", "bytewax.run", "_race_bytewax:flow"],
        scratch,
        {
            "RACE_BOOTSTRAP": broker.bootstrap_servers,
            "RACE_INPUT": source,
            "RACE_OUTPUT": sink,
            "RACE_WORKLOAD": workload,
            "PYTHONPATH": str(_BENCH),
        },
    )


def _bytewax_python() -> Path:
    """bytewax's Python, in a virtual environment of its own (made the first time)."""
    home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    venv = home / "headwater-bench" / f"bytewax-{BYTEWAX}"
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"installing bytewax {BYTEWAX} into {venv} ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", f"bytewax[kafka]=={BYTEWAX}", "orjson"],
            check=True,
        )
    return python


def _headwater(
    broker: EmbeddedBroker, source: str, sink: str, scratch: Path, workload: str = "filter"
) -> Contender:
    folder = scratch / f"headwater-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    began = time.monotonic()
    server = BenchServer(
        broker.bootstrap_servers, folder, ("--set", "headwater.engine.start=startup")
    )
    server.wait_for_spark(began)
    server.wait_for_warm_up(began)  # its stateful warm-up would share the cores with the run
    print(
        f"  headwater: server healthy and Spark warm {time.monotonic() - began:.1f} s after start"
    )
    stream = f"tx_{source}"
    server.ksql(
        TX_STREAM.replace("kafka_topic='tx'", f"kafka_topic='{source}'").replace(
            "CREATE STREAM tx ", f"CREATE STREAM {stream} "
        )
    )
    accepted = time.monotonic()
    if workload == "count":
        query = f"CREATE TABLE {sink} AS SELECT id, COUNT(*) AS n FROM {stream} GROUP BY id;"
    else:
        query = TX_QUERY.replace("CREATE STREAM tx_big", f"CREATE STREAM {sink}").replace(
            " FROM tx ", f" FROM {stream} "
        )
    server.ksql(query, {"auto.offset.reset": "earliest"})
    return Contender("headwater", server.process.pid, server.stop, accepted)


# -- the report -----------------------------------------------------------------------------------


def _print(r: Result) -> None:
    print(
        f"{r.name:>10}: {r.rate:,.0f} records/s in, {r.cpu_per_1k:.4f} CPU s per 1k outputs "
        f"(steady), cold start {r.cold_s:.1f} s, produce -> output p50 {r.p50_ms:.0f} ms / p99 "
        f"{r.p99_ms:.0f} ms, peak RSS {r.rss_mb:,.0f} MB",
        flush=True,
    )


def _ratios(results: dict[str, Result]) -> None:
    ours = results.get("headwater")
    loop, peer = results.get("loop"), results.get("bytewax")
    if ours is None:
        return
    print("issue 30's targets (ratios in this run):")
    if loop is not None:
        ratio = ours.rate / loop.rate
        print(
            f"  records/s vs the plain loop: {ratio:.2f}x (target >= 0.95x) {_verdict(ratio >= 0.95)}"
        )
        cpu = ours.cpu_per_1k / loop.cpu_per_1k
        print(f"  CPU per record vs the plain loop: {cpu:.1f}x (target <= 2x) {_verdict(cpu <= 2)}")
    if peer is not None:
        cpu = ours.cpu_per_1k / peer.cpu_per_1k
        print(f"  CPU per record vs bytewax: {cpu:.2f}x (target <= 0.5x) {_verdict(cpu <= 0.5)}")
        p50 = ours.p50_ms / peer.p50_ms
        print(
            f"  produce -> output p50 vs bytewax: {p50:.2f}x (target <= 1.0x) {_verdict(p50 <= 1)}"
        )
        cold = ours.cold_s
        print(
            f"  CSAS to first output, Spark warm: {cold:.1f} s (target <= 3 s) {_verdict(cold <= 3)}"
        )


def _print_count(r: CountResult) -> None:
    print(
        f"{r.name:>10}: {r.rate:,.0f} records/s in, {r.cpu_per_1k:.4f} CPU s per 1k records, "
        f"first count {r.cold_s:.1f} s after start, peak RSS {r.rss_mb:,.0f} MB",
        flush=True,
    )


def _count_ratios(counts: dict[tuple[str, int], CountResult]) -> None:
    for (name, keys), ours in sorted(counts.items()):
        peer = counts.get(("bytewax", keys))
        if name != "headwater" or peer is None:
            continue
        ratio = ours.rate / peer.rate
        print(
            f"  COUNT per key over {keys:,} keys, records/s vs bytewax: {ratio:.2f}x "
            f"(target >= 1.0x) {_verdict(ratio >= 1)}"
        )


def _verdict(met: bool) -> str:
    return "met" if met else "NOT MET"


if __name__ == "__main__":
    sys.exit(main())
