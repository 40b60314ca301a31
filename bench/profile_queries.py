"""Where a persistent query's CPU goes: the filter + projection workload under py-spy.

Run ``python -m bench.profile_queries`` (about 2 minutes; needs py-spy, ``pip install py-spy``, and
the right to trace the server's processes: root, or ``ptrace_scope`` 0). It starts an in-memory
embedded broker and one ``headwater server`` on it, runs the peers' filter + projection query
(`bench._workloads`), and while ``--records`` records (default 300,000) go through it:

1. reads every process of the server's tree from /proc: CPU seconds per kind of process (the server,
   Spark's JVM, its Python workers, the source runners that plan each micro-batch, the Spark child
   that runs the sinks);
2. samples the Python stacks of the whole tree with py-spy (``--rate``, only threads that hold the GIL: the Python that runs) and puts each
   sample in the first category its stack meets from the innermost frame out: consume (librdkafka
   polls, the source's read loop), decode, expressions, encode, operators (the per-record pipeline),
   Arrow (rows to Arrow batches and back), produce (the sink's producer), py4j, Spark's Python
   (serializers, worker loop, planning), other.

The JVM's CPU is not sampled (py-spy sees Python only): its share comes from part 1.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench._processes import cpu_of, process_kind, process_tree
from bench._server import bench_node, wait_records
from bench._workloads import (
    TX_QUERY,
    TX_SINK,
    TX_STREAM,
    produce_all,
    produce_tx,
    tx_passing,
    tx_record,
)
from bench.aggregates import Aggregate, start_aggregate, start_join
from headwater.kafka.clients import producer

#: (category, what a frame's text contains): tried in order on each frame, innermost first.
CATEGORIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("produce", ("engine/spark/sink.py",)),
    ("py4j", ("py4j/",)),
    (
        "decode",
        (
            "deserialize_",
            "json/decoder",
            "loads (",
            "decode_",
            "has_float",
            "json_columns",
            "_check_depth",
        ),
    ),
    ("encode", ("serialize_", "encode", "write_object", "_double_json", "json/encoder")),
    ("expressions", ("engine/_compiler.py", "engine/expressions.py", "engine/functions/")),
    ("operators", ("engine/persistent/",)),
    ("Arrow", ("pyarrow/", "_arrow (")),
    ("consume", ("confluent_kafka", "_read_range", "poll_batch", "kafka/clients.py")),
    ("end probe", ("ends (", "latestOffset")),
    ("Spark's Python", ("pyspark/",)),
)


def category(stack: list[str]) -> str:
    """The category of one sampled stack (frames outermost first)."""
    for frame in reversed(stack):
        for name, marks in CATEGORIES:
            if any(mark in frame for mark in marks):
                return name
    return "other"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    parser.add_argument("--top", type=int, default=15, help="innermost frames to list")
    parser.add_argument(
        "--workload",
        choices=("filter", "count", "windowed", "join"),
        default="filter",
        help="filter + projection (default), or bench.aggregates' COUNT/SUM per key, its "
        "windowed COUNT/SUM (TUMBLING 1 minute) or its stream-table LEFT JOIN",
    )
    parser.add_argument(
        "--keys",
        type=int,
        default=1000,
        help="distinct keys of count and windowed, rows of the join's table (default 1000)",
    )
    args = parser.parse_args(argv)
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        raise SystemExit("py-spy is not installed: pip install py-spy")
    print(f"python {platform.python_version()}, {os.cpu_count()} cores")
    with bench_node() as (broker, server), tempfile.TemporaryDirectory() as scratch:
        writer = producer(broker.settings(), "bench")
        if args.workload == "filter":
            server.ksql(TX_STREAM)
            server.ksql(TX_QUERY)
            key, value = tx_record(99)
            writer.produce("tx", value, key)
            writer.flush()
            wait_records(broker, TX_SINK, 1, 180)  # the query runs: Spark has started
        elif args.workload == "join":
            joined_source = start_join(broker, server, "prof", args.keys)
        else:
            aggregated = start_aggregate(broker, server, "prof", args.workload == "windowed")
        raw = Path(os.environ.get("HW_PROFILE_RAW") or Path(scratch) / "profile.txt")
        spying = subprocess.Popen(
            [
                spy,
                "record",
                "-p",
                str(server.process.pid),
                "--subprocesses",
                "--format",
                "raw",
                "--rate",
                str(args.rate),
                "--full-filenames",
                "-o",
                str(raw),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(2)  # py-spy attaches
        before = {pid: (process_kind(pid), cpu_of(pid)) for pid in process_tree(server.process.pid)}
        started = time.monotonic()
        if args.workload == "filter":
            produce_tx(writer, args.records)
            wait_records(broker, TX_SINK, 1 + tx_passing(args.records), 600)
        elif args.workload == "join":
            produce_all(writer, joined_source, Aggregate.records(args.records, args.keys))
            wait_records(broker, "PROF", 1 + args.records, 1800)
        else:
            produce_all(writer, aggregated.source, aggregated.records(args.records, args.keys))
            aggregated.wait(args.records + 1, 1800)
        elapsed = time.monotonic() - started
        by_kind: dict[str, float] = {}
        for pid in process_tree(server.process.pid):
            kind, was = before.get(pid, (process_kind(pid), 0.0))
            by_kind[kind] = by_kind.get(kind, 0.0) + cpu_of(pid) - was
        spying.send_signal(signal.SIGINT)
        spying.wait(60)
        samples = _read_raw(raw)
    what = {
        "filter": "filter + projection",
        "count": "COUNT/SUM per key",
        "windowed": "windowed COUNT/SUM per key",
        "join": "stream-table LEFT JOIN",
    }[args.workload]
    if args.workload != "filter":
        what += f" over {args.keys:,} keys"
    _report(what, args.records, elapsed, by_kind, samples, args.top, args.rate)
    return 0


def _read_raw(path: Path) -> Counter[tuple[str, ...]]:
    stacks: Counter[tuple[str, ...]] = Counter()
    if not path.exists():
        raise SystemExit("py-spy wrote nothing (can it trace this process? run as root)")
    for line in path.read_text().splitlines():
        text, _, count = line.rpartition(" ")
        if text and count.isdigit():
            stacks[tuple(text.split(";"))] += int(count)
    return stacks


#: Innermost frames of a thread that waits (py-spy's idle detection misses blocking socket reads).
WAITING = (
    "readinto (",
    "select (",
    "Condition.wait",
    "CallbackServer.run",
    "FinalizerWorker.run",
    "accumulators.py",
    "manager (",
    "accept (",
    "sleep (",
    "recv (",
)


def process_of(stack: tuple[str, ...]) -> str:
    """The kind of process a stack was sampled in (its innermost ``process`` frame)."""
    frames = [f for f in stack if f.startswith("process ")]
    text = frames[-1] if frames else ""
    for mark, kind in (
        ("pyspark.daemon", "Python workers"),
        ("worker", "Python workers"),
        ("python_streaming_source_runner", "source runners"),
        ("-c from multiprocessing", "Spark child (driver, sinks)"),
        ("spawn", "Spark child (driver, sinks)"),
        ("headwater server", "server"),
    ):
        if mark in text:
            return kind
    return "other"


def _report(
    what: str,
    records: int,
    elapsed: float,
    by_kind: dict[str, float],
    samples: Counter[tuple[str, ...]],
    top: int,
    rate: int,
) -> None:
    cpu = sum(by_kind.values())
    print(
        f"{what}, {records:,} records: {records / elapsed:,.0f} records/s, "
        f"{cpu:.1f} CPU s = {cpu / records * 1000:.4f} s per 1k records"
    )
    print("CPU by process (from /proc):")
    for kind, seconds in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:32} {seconds:7.1f} s  {seconds / cpu * 100:5.1f}%")
    running = Counter({s: n for s, n in samples.items() if not any(w in s[-1] for w in WAITING)})
    total = sum(running.values())
    if not total:
        print("py-spy sampled nothing")
        return
    print(
        f"Python samples that ran ({total:,} of {sum(samples.values()):,}: the rest waited), "
        f"by process and category, {rate} Hz:"
    )
    by_process: dict[str, Counter[str]] = {}
    leaves: Counter[str] = Counter()
    for stack, n in running.items():
        by_process.setdefault(process_of(stack), Counter())[category(list(stack))] += n
        leaves[_short(stack[-1])] += n
    for kind, cats in sorted(by_process.items(), key=lambda kv: -sum(kv[1].values())):
        share = sum(cats.values())
        print(f"  {kind} ({share / total * 100:.1f}%, {share / rate:.1f} s):")
        for name, n in cats.most_common():
            print(f"    {name:16} {n / total * 100:5.1f}%")
    print(f"innermost frames, top {top}:")
    for frame, n in leaves.most_common(top):
        print(f"  {n / total * 100:5.1f}%  {frame}")


def _short(frame: str) -> str:
    for marker in ("site-packages/", "/work/", "lib/python3"):
        if marker in frame:
            head, _, tail = frame.partition("(")
            return f"{head}({tail.split(marker, 1)[-1]}"
    return frame


if __name__ == "__main__":
    sys.exit(main())
