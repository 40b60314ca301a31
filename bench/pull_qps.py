"""Benchmark: pull queries over HTTP on loopback against a bare Starlette endpoint, on one server
and forwarded in a 3-server cluster (issue 17's table).

Starts an in-memory embedded broker (Tansu) in this process, a ``headwater server`` on it (``-b``,
its own --state-dir: LMDB table stores, as a durable node has; ``--store memory`` for the in-memory
store), creates ``T (ID STRING PRIMARY KEY, V BIGINT)`` over a 4-partition topic, produces --rows
rows (keys ``k000000``...) straight to the topic, and waits until the last row of every partition
answers. Then, per workload, --clients concurrent keep-alive connections send its query to /query
for --duration seconds after a --warmup, and it prints QPS, the latency percentiles seen by the
client, and the CPU the server used per query:

- ``key``: ``SELECT * FROM T WHERE ID = '<random key>';`` (one row);
- ``in10``: ``... WHERE ID IN (<10 random keys>);`` (ten rows, from every partition);
- ``range100``: ``... WHERE ID >= 'k<n>' AND ID < 'k<n + 100>';`` (a hundred rows);
- ``forwarded``: two more servers join the first one's cluster; key lookups sent to the first
  server for keys whose partition another server holds (so every one is forwarded), beside key
  lookups it answers itself, on the same cluster in the same run.

In the same run a bare Starlette endpoint (on the same HTTP server with the same settings as the
server's, through ``headwater.http_server``; one process) parses the same requests and answers
JSON arrays of the same shape and size, driven by the same client; the table at the end sets each
workload beside it. Issue targets: key lookups >= 50% of the bare endpoint's QPS (>= 3,000 qps),
p99 <= 5 ms at 8 clients; forwarded lookups >= 35%; forwarded p50 within 1 ms of local.

The HTTP server under both (headwater's and the bare endpoint) is ``--http-server`` (hypercorn,
uvicorn or granian; ``--http-loop``, ``--uvicorn-http`` choose the event loop and uvicorn's parser),
passed to them as ``HEADWATER_HTTP_*`` variables (``headwater.http_server.settings_from_env``).

The load generator (``--client raw``: one asyncio loop writing HTTP/1.1 requests on 8 sockets, the
cheapest client Python has; ``--client h2``: the same over HTTP/2 cleartext with prior knowledge,
one connection per client, framed by the ``h2`` package; ``--client httpx``: 8 threads, each with
its own ``httpx.Client``) runs on the same machine and competes with the servers for its CPUs: on
a 2-CPU machine every number is lower than where client and server have cores of their own.
``--py-spy PATH`` then samples the server for --profile-seconds under key lookups and prints where
its time goes; ``--profile-queries`` times the pull path in process (no HTTP) and profiles it.

This module does I/O (child processes, sockets, temporary folders); it is never collected by pytest.

Run from the repository root: ``python -m bench.pull_qps [--rows N] [--clients C] [--duration S]``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from headwater.http_server import (
    DEFAULT_KIND,
    ENV_VAR,
    LOOP_ENV_VAR,
    UVICORN_HTTP_ENV_VAR,
    HttpServerKind,
    LoopKind,
)
from headwater.kafka.clients import KafkaSettings
from tests.support.node import (
    Server,
    free_port,
    ksql,
    percentile,
    produce_rows,
    versions,
    wait_visible,
)

TABLE = "T"
TOPIC = "bench_pull"
PARTITIONS = 4


# -- the bare endpoint (run in a child process: ``python -m bench.pull_qps --serve-bare PORT``) -----


BARE_MODES = ("plain", "threadpool", "parse", "parse+threadpool")


def serve_bare(port: int, mode: str = "plain") -> None:
    """A bare Starlette JSON endpoint on the HTTP server ``headwater.server.serve`` would use (the
    ``HEADWATER_HTTP_*`` variables), configured as it does.

    ``mode`` adds one piece of headwater's pull path at a time (for ``--breakdown``): the hop to
    the worker threads (``run_in_threadpool``, as ``gateway.query`` does), the SQL parse on the
    event loop (``headwater.sqlparse_ext.parse``), or both.
    """
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from headwater.http_server import serve_app, settings_from_env
    from headwater.sqlparse_ext import parse

    def answer(keys: list[str]) -> bytes:
        return json.dumps(
            [
                {
                    "header": {
                        "queryId": "query_0123456789abcdef",
                        "schema": "`ID` STRING KEY, `V` BIGINT",
                        "servedBy": [
                            {
                                "partition": 0,
                                "host": f"127.0.0.1:{port}",
                                "position": 25000,
                                "lag": 0,
                            }
                        ],
                    }
                },
                *({"row": {"columns": [key, 1]}} for key in keys),
            ]
        ).encode()

    def keys_of(text: str) -> list[str]:
        """The keys a workload's query reads (a range: the hundred keys from its low bound)."""
        quoted = text.split("'")[1::2]
        if ">=" in text:
            low = int(quoted[0][1:])
            return [f"k{i:06d}" for i in range(low, low + RANGE_ROWS)]
        return quoted

    async def query(request: Request) -> Response:
        text = json.loads(await request.body())["ksql"]
        if "parse" in mode:
            parse(text, {})
        keys = keys_of(text)
        body = await run_in_threadpool(answer, keys) if "threadpool" in mode else answer(keys)
        return Response(body, media_type="application/json")

    app = Starlette(routes=[Route("/query", query, methods=["POST"])])
    serve_app(app, settings_from_env(os.environ, host="127.0.0.1", port=port))


class Bare:
    """A bare endpoint child process on a free port."""

    def __init__(self, mode: str) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.pull_qps",
                "--serve-bare",
                str(self.port),
                "--bare-mode",
                mode,
            ],
            cwd=Path(__file__).resolve().parents[1],
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.post(f"http://127.0.0.1:{self.port}/query", content=_body("k0"), timeout=1.0)
                return
            except httpx.HTTPError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the bare endpoint did not start") from None
                time.sleep(0.05)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# -- load generators -----------------------------------------------------------------------------


@dataclass
class Load:
    """What one timed run saw."""

    seconds: float = 0.0
    server_cpu: float = float("nan")  # CPU seconds the server process used during the run
    loop_cpu: float = float("nan")  # ... of which its main thread (uvicorn's event loop)
    client_cpu: float = float("nan")  # CPU seconds this (client) process used during the run
    peer_cpu: float = 0.0  # ... of server_cpu, what the other servers of a cluster used
    latencies: list[float] = field(default_factory=list)
    errors: collections.Counter[str] = field(default_factory=collections.Counter)

    @property
    def qps(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds else 0.0

    def line(self, label: str) -> str:
        values = sorted(self.latencies)
        errors = sum(self.errors.values())
        shown = f", errors {errors} {dict(self.errors.most_common(3))}" if errors else ", 0 errors"
        count = max(1, len(values))
        return (
            f"{label}: {self.qps:,.0f} queries/s over {self.seconds:.1f} s; latency p50 "
            f"{percentile(values, 50) * 1000:.2f} ms, p90 {percentile(values, 90) * 1000:.2f} ms, "
            f"p99 {percentile(values, 99) * 1000:.2f} ms, max {values[-1] * 1000:.1f} ms "
            f"(n={len(values):,}){shown}\n    CPU: server {self.server_cpu / self.seconds:.2f} cores, "
            f"{self.server_cpu / count * 1e6:.0f} us/query (event loop thread "
            f"{self.loop_cpu / count * 1e6:.0f}, other threads "
            f"{(self.server_cpu - self.loop_cpu - self.peer_cpu) / count * 1e6:.0f}"
            + (f", the other servers {self.peer_cpu / count * 1e6:.0f}" if self.peer_cpu else "")
            + f"); client {self.client_cpu / self.seconds:.2f}"
            f" cores, {self.client_cpu / count * 1e6:.0f} us/query"
        )


RANGE_ROWS = 100
IN_KEYS = 10


def _key_name(i: int) -> str:
    return f"k{i:06d}"


def _body(text: str) -> bytes:
    return json.dumps({"ksql": text}).encode()


@dataclass(frozen=True)
class Workload:
    """A kind of pull query: a name, its label in the table, and a random request body."""

    name: str
    label: str
    make: Callable[[random.Random], bytes]


def workloads(rows: int) -> dict[str, Workload]:
    """The single-server workloads over ``rows`` rows."""

    def key(rng: random.Random) -> bytes:
        return _body(f"SELECT * FROM {TABLE} WHERE ID = '{_key_name(rng.randrange(rows))}';")

    def in10(rng: random.Random) -> bytes:
        listed = ", ".join(f"'{_key_name(rng.randrange(rows))}'" for _ in range(IN_KEYS))
        return _body(f"SELECT * FROM {TABLE} WHERE ID IN ({listed});")

    def range100(rng: random.Random) -> bytes:
        low = rng.randrange(max(1, rows - RANGE_ROWS))
        return _body(
            f"SELECT * FROM {TABLE} WHERE ID >= '{_key_name(low)}' "
            f"AND ID < '{_key_name(low + RANGE_ROWS)}';"
        )

    return {
        w.name: w
        for w in (
            Workload("key", "key lookup", key),
            Workload("in10", f"IN ({IN_KEYS} keys)", in10),
            Workload("range100", f"range ({RANGE_ROWS} rows)", range100),
        )
    }


def keys_workload(name: str, label: str, keys: Sequence[str]) -> Workload:
    """Key lookups of these keys only (the forwarded and local sets of the cluster stage)."""
    return Workload(
        name, label, lambda rng: _body(f"SELECT * FROM {TABLE} WHERE ID = '{rng.choice(keys)}';")
    )


async def _raw_worker(port: int, workload: Workload, seed: int, stop_at: float, load: Load) -> None:
    rng = random.Random(seed)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = f"POST /query HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
    clock = time.perf_counter
    try:
        while clock() < stop_at:
            body = workload.make(rng)
            request = f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body
            start = clock()
            writer.write(request)
            header = await reader.readuntil(b"\r\n\r\n")
            status = header[9:12]
            length = 0
            for line in header.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            answer = await reader.readexactly(length)
            elapsed = clock() - start
            if status != b"200":
                load.errors[f"HTTP {status.decode()}"] += 1
            elif b'"row"' not in answer:
                load.errors["no row"] += 1
            else:
                load.latencies.append(elapsed)
    finally:
        writer.close()


def run_raw(port: int, clients: int, workload: Workload, seconds: float, seed: int) -> Load:
    """``clients`` keep-alive connections on one asyncio loop, one request in flight on each."""
    load = Load()

    async def main() -> None:
        stop_at = time.perf_counter() + seconds
        start = time.perf_counter()
        await asyncio.gather(
            *(_raw_worker(port, workload, seed + i, stop_at, load) for i in range(clients))
        )
        load.seconds = time.perf_counter() - start

    asyncio.run(main())
    return load


def run_httpx(port: int, clients: int, workload: Workload, seconds: float, seed: int) -> Load:
    """``clients`` threads, each with its own keep-alive ``httpx.Client``."""
    load = Load()
    lock = threading.Lock()
    url = f"http://127.0.0.1:{port}/query"
    stop_at = time.perf_counter() + seconds

    def worker(index: int) -> None:
        rng = random.Random(seed + index)
        latencies: list[float] = []
        errors: collections.Counter[str] = collections.Counter()
        clock = time.perf_counter
        headers = {"Content-Type": "application/json"}
        with httpx.Client(timeout=10.0) as client:
            while clock() < stop_at:
                body = workload.make(rng)
                start = clock()
                response = client.post(url, content=body, headers=headers)
                elapsed = clock() - start
                if response.status_code != 200:
                    errors[f"HTTP {response.status_code}"] += 1
                elif b'"row"' not in response.content:
                    errors["no row"] += 1
                else:
                    latencies.append(elapsed)
        with lock:
            load.latencies.extend(latencies)
            load.errors.update(errors)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    load.seconds = time.perf_counter() - start
    return load


async def _h2_worker(port: int, workload: Workload, seed: int, stop_at: float, load: Load) -> None:
    import h2.config
    import h2.connection
    import h2.events

    rng = random.Random(seed)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    connection.initiate_connection()
    writer.write(connection.data_to_send())
    clock = time.perf_counter
    try:
        while clock() < stop_at:
            body = workload.make(rng)
            stream = connection.get_next_available_stream_id()
            headers = [
                (":method", "POST"),
                (":path", "/query"),
                (":scheme", "http"),
                (":authority", f"127.0.0.1:{port}"),
                ("content-type", "application/json"),
                ("content-length", str(len(body))),
            ]
            start = clock()
            connection.send_headers(stream, headers)
            connection.send_data(stream, body, end_stream=True)
            writer.write(connection.data_to_send())
            status, answer, ended = b"", bytearray(), False
            while not ended:
                data = await reader.read(65536)
                if not data:
                    raise ConnectionError("the server closed the HTTP/2 connection")
                for event in connection.receive_data(data):
                    if isinstance(event, h2.events.ResponseReceived):
                        status = dict(event.headers).get(b":status", b"")
                    elif isinstance(event, h2.events.DataReceived):
                        answer += event.data
                        connection.acknowledge_received_data(event.flow_controlled_length, stream)
                    elif isinstance(event, h2.events.StreamEnded) and event.stream_id == stream:
                        ended = True
                    elif isinstance(event, h2.events.StreamReset):
                        raise ConnectionError(f"stream reset: {event.error_code}")
                writer.write(connection.data_to_send())
            elapsed = clock() - start
            if status != b"200":
                load.errors[f"HTTP {status.decode()}"] += 1
            elif b'"row"' not in answer:
                load.errors["no row"] += 1
            else:
                load.latencies.append(elapsed)
    finally:
        writer.close()


def run_h2(port: int, clients: int, workload: Workload, seconds: float, seed: int) -> Load:
    """``clients`` HTTP/2 cleartext connections (prior knowledge) on one asyncio loop, one
    request in flight on each."""
    load = Load()

    async def main() -> None:
        stop_at = time.perf_counter() + seconds
        start = time.perf_counter()
        await asyncio.gather(
            *(_h2_worker(port, workload, seed + i, stop_at, load) for i in range(clients))
        )
        load.seconds = time.perf_counter() - start

    asyncio.run(main())
    return load


CLIENTS = {"raw": run_raw, "h2": run_h2, "httpx": run_httpx}


def cpu_seconds(pid: int, thread: int | None = None) -> float:
    """User + system CPU seconds of a process (all its threads), or of one thread (Linux /proc)."""
    path = f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat"
    fields = Path(path).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    port: int, pid: int, args: argparse.Namespace, workload: Workload, others: Sequence[int] = ()
) -> Load:
    """A warm-up run (discarded), then the timed run, with the CPU both sides used (``others``:
    more server processes whose CPU counts as the server's, as in a cluster)."""
    run = CLIENTS[args.client]
    run(port, args.clients, workload, args.warmup, args.seed)
    pids = (pid, *others)
    server = sum(cpu_seconds(p) for p in pids)
    peers = sum(cpu_seconds(p) for p in others)
    loop, client = cpu_seconds(pid, pid), cpu_seconds(os.getpid())
    load = run(port, args.clients, workload, args.duration, args.seed + 1000)
    load.server_cpu = sum(cpu_seconds(p) for p in pids) - server
    load.peer_cpu = sum(cpu_seconds(p) for p in others) - peers
    load.loop_cpu = cpu_seconds(pid, pid) - loop
    load.client_cpu = cpu_seconds(os.getpid()) - client
    return load


# -- profiling -------------------------------------------------------------------------------------


def profile(py_spy: str, pid: int, port: int, args: argparse.Namespace, out: Path) -> None:
    """Sample the server with py-spy under load; print inclusive and self time per function."""
    raw = out
    command = [
        py_spy,
        "record",
        "--pid",
        str(pid),
        "--duration",
        str(args.profile_seconds),
        "--format",
        "raw",
        "--output",
        str(raw),
        "--rate",
        "250",
        "--gil",
    ]
    sampler = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)
        CLIENTS[args.client](
            port, args.clients, workloads(args.rows)["key"], args.profile_seconds + 1, args.seed + 7
        )
        _, err = sampler.communicate(timeout=args.profile_seconds + 60)
    finally:
        if sampler.poll() is None:
            sampler.terminate()
            sampler.wait()
    if not raw.exists():
        print(f"py-spy wrote no profile: {err.decode(errors='replace')[-500:]}")
        return
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        frames = [_short(f) for f in stack.split(";")]
        total += count
        for frame in set(frames):
            inclusive[frame] += count
        own[frames[-1]] += count
    print(
        f"py-spy --gil: {total:,} samples of the thread holding the server's GIL over "
        f"{args.profile_seconds} s (collapsed stacks in {raw})"
    )
    print("  inclusive (% of GIL samples; the frames every request shares left out):")
    for frame, count in inclusive.most_common(80):
        share = count / total
        if (
            share < 0.85
            and share >= 0.02
            and any(
                part in frame
                for part in (
                    "gateway/",
                    "engine/",
                    "store/",
                    "sqlparse_ext/",
                    "metastore/",
                    "starlette/",
                    "h11/",
                    "anyio/",
                    "Parser.parse ",
                    "TokenizerCore.tokenize ",
                )
            )
        ):
            print(f"    {100 * share:5.1f}%  {frame}")
    print("  self (% of GIL samples), top 15:")
    for frame, count in own.most_common(15):
        print(f"    {100 * count / total:5.1f}%  {frame}")


def _short(frame: str) -> str:
    """``function (path/to/file.py:line)`` -> ``function (package/file.py)``."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "/work/main/", "lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
    return f"{name} ({path})"


def _one_select(text: str) -> Any:
    from headwater.gateway.ksql import KsqlRequest

    return KsqlRequest(text).statements()[0]


def profile_in_process(settings: KafkaSettings, folder: Path, args: argparse.Namespace) -> None:
    """The pull path without HTTP, one thread: a second node's services on the same catalog (its
    own LMDB stores, restored from the topic), then the request decoded, looked up in the plan
    cache (parsed and planned on a miss), run and rendered, timed per stage and profiled with
    cProfile; and the same queries through the parser and planner every time, for comparison."""
    import cProfile
    import pstats

    from headwater.gateway.ksql import decode_request
    from headwater.gateway.pull import execute_prepared, prepare_pull, run_pull
    from headwater.gateway.query import _array, query_items
    from headwater.gateway.startup import open_services

    rng = random.Random(args.seed + 99)
    key = workloads(args.rows)["key"]
    bodies = [key.make(rng) for _ in range(args.profile_queries)]
    texts = [json.loads(b)["ksql"] for b in bodies]

    def serve(body: bytes) -> bytes:  # what gateway.query does for a pull query, synchronously
        decoded = decode_request(body)
        lookup = services.plans.lookup(decoded, services)
        prepared = lookup.prepared
        if prepared is None:
            statement = decoded.statements()[0]
            prepared = prepare_pull(services, statement, {})
            services.plans.learn(lookup, statement, prepared, services)
        return _array(query_items(execute_prepared(services, prepared, {})))

    with open_services(settings, "bench", folder, stores_dir=folder) as services:
        deadline = time.monotonic() + 300
        while True:  # until this node's stores have restored the table
            try:
                answers = [run_pull(services, _one_select(t), {}) for t in texts[-50:]]
                if all(a.rows for a in answers):
                    break
            except Exception:  # noqa: BLE001, S110  (still restoring: 50302)
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("the in-process node did not restore the table")
            time.sleep(0.2)
        clock = time.perf_counter
        n = len(bodies)
        start = clock()
        for text in texts:
            _array(query_items(run_pull(services, _one_select(text), {})))
        uncached = (clock() - start) / n
        start = clock()
        for body in bodies:
            serve(body)
        cached = (clock() - start) / n
        print(
            f"in process, one thread, no HTTP ({n:,} queries): {cached * 1e6:.0f} us per query "
            f"through the plan cache ({1 / cached:,.0f} queries/s on one core), "
            f"{uncached * 1e6:.0f} us parsed and planned every time; plan cache "
            f"{services.plans.stats()}"
        )
        profiler = cProfile.Profile()
        profiler.enable()
        for body in bodies:
            serve(body)
        profiler.disable()
    stats = pstats.Stats(profiler)
    total = sum(entry[2] for entry in stats.stats.values())  # type: ignore[attr-defined]
    rows = []
    for (path, line, name), (_cc, calls, tottime, cumulative, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if "/site-packages/" in path or not path.startswith(
            str(Path(__file__).resolve().parents[1])
        ):
            continue
        rows.append(
            (cumulative, calls, tottime, f"{name} ({'/'.join(Path(path).parts[-2:])}:{line})")
        )
    print(
        f"  cProfile, headwater's own functions by cumulative time (profiled total "
        f"{total / n * 1e6:.0f} us/query; profiling inflates small calls):"
    )
    for cumulative, calls, tottime, label in sorted(rows, reverse=True)[: args.profile_top]:
        print(
            f"    {cumulative / n * 1e6:6.0f} us/query (self {tottime / n * 1e6:4.0f})  "
            f"{calls / n:4.1f} calls  {label}"
        )


# -- the run -------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--duration", type=float, default=10.0, help="timed seconds per endpoint")
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--client", choices=sorted(CLIENTS), default="raw")
    parser.add_argument("--store", choices=("lmdb", "memory"), default="lmdb")
    parser.add_argument(
        "--http-server",
        choices=[k.value for k in HttpServerKind],
        default=DEFAULT_KIND.value,
        help="the HTTP server under both endpoints",
    )
    parser.add_argument(
        "--http-loop",
        choices=[k.value for k in LoopKind],
        default="auto",
        help="its event loop (auto: uvloop when installed, as headwater server)",
    )
    parser.add_argument(
        "--uvicorn-http",
        choices=("auto", "h11", "httptools"),
        default="auto",
        help="uvicorn's HTTP/1.1 parser (auto: httptools when installed)",
    )
    parser.add_argument(
        "--workloads",
        default="key,in10,range100,forwarded",
        help="which to run, comma-separated: key, in10, range100, forwarded",
    )
    parser.add_argument(
        "--no-bare",
        dest="bare",
        action="store_false",
        help="skip the bare endpoint (headwater's numbers only)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--py-spy",
        default=shutil.which("py-spy"),
        help="py-spy executable: profile the server afterwards (default: on PATH)",
    )
    parser.add_argument("--profile-seconds", type=int, default=5)
    parser.add_argument(
        "--profile-queries",
        type=int,
        default=3000,
        help="queries of the in-process cProfile stage (0: skip it)",
    )
    parser.add_argument("--profile-top", type=int, default=22)
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="also time the bare endpoint plus the threadpool hop and/or the SQL parse",
    )
    parser.add_argument("--serve-bare", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--bare-mode", choices=BARE_MODES, default="plain", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_bare:
        serve_bare(args.serve_bare, args.bare_mode)
        return

    from headwater.kafka.broker import EmbeddedBroker

    # The servers started below (child processes) read these.
    os.environ[ENV_VAR] = args.http_server
    os.environ[LOOP_ENV_VAR] = args.http_loop
    os.environ[UVICORN_HTTP_ENV_VAR] = args.uvicorn_http
    print(
        versions(
            "starlette",
            "uvicorn",
            "hypercorn",
            "granian",
            "h11",
            "h2",
            "httptools",
            "uvloop",
            "httpx",
            "lmdb",
        )
    )
    print(
        f"HTTP server: {args.http_server} (loop {args.http_loop}, uvicorn parser "
        f"{args.uvicorn_http}); client {args.client}"
    )
    print(
        f"{args.clients} concurrent clients ({args.client}) on the same machine as the server: "
        "client and server share the CPUs"
    )
    chosen = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = set(chosen) - {*workloads(args.rows), "forwarded"}
    if unknown:
        parser.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    work = Path(tempfile.mkdtemp(prefix="bench-pull-"))
    table: list[tuple[str, Load, Load | None, str]] = []
    try:
        with EmbeddedBroker(None, port=0) as broker, httpx.Client(timeout=30.0) as client:
            store_args = (
                ["--in-memory"] if args.store == "memory" else ["--state-dir", str(work / "node")]
            )
            server = Server(
                ["-b", broker.bootstrap_servers, "--service-id", "bench", *store_args],
                work / "server.log",
            )
            with server:
                server.wait_healthy()
                ksql(
                    client,
                    server.url,
                    f"CREATE TABLE {TABLE} (ID STRING PRIMARY KEY, V BIGINT) WITH (kafka_topic='{TOPIC}', "
                    f"partitions={PARTITIONS}, value_format='JSON');",
                )
                count, last, seconds = produce_rows(
                    broker.settings(), TOPIC, ((_key_name(i), {"V": i}) for i in range(args.rows))
                )
                start = time.perf_counter()
                wait_visible(client, server.url, TABLE, last.values(), server=server)
                print(
                    f"table {TABLE}: {count:,} rows over {PARTITIONS} partitions ({args.store} store); "
                    f"produced in {seconds:.1f} s, restored {time.perf_counter() - start:.1f} s later"
                )
                single = workloads(args.rows)
                with Bare("plain") if args.bare else contextlib.nullcontext() as bare:
                    for name in (n for n in chosen if n in single):
                        workload = single[name]
                        served = measure(server.port, server.process.pid, args, workload)
                        print(served.line(f"headwater {workload.label:<18}"))
                        baseline = None
                        if bare is not None:
                            baseline = measure(bare.port, bare.process.pid, args, workload)
                            print(baseline.line(f"bare      {workload.label:<18}"))
                        table.append((workload.label, served, baseline, TARGETS.get(name, "")))
                    if args.breakdown:
                        for mode in BARE_MODES[1:]:
                            with Bare(mode) as extra:
                                print(
                                    measure(
                                        extra.port, extra.process.pid, args, single["key"]
                                    ).line(f"bare + {mode}")
                                )
                    if args.py_spy:
                        out = Path(tempfile.gettempdir()) / "bench_pull_qps.collapsed"
                        profile(args.py_spy, server.process.pid, server.port, args, out)
                    else:
                        print(
                            "py-spy not found: no profile of the server (pip install py-spy; "
                            "--py-spy PATH)"
                        )
                    if "forwarded" in chosen:
                        key_bare = None
                        if bare is not None:
                            key_bare = next(
                                (b for label, _, b, _ in table if label == single["key"].label),
                                None,
                            )
                            if key_bare is None:
                                key_bare = measure(bare.port, bare.process.pid, args, single["key"])
                        table.extend(cluster_stage(args, broker, server, client, work, key_bare))
            if args.profile_queries:
                profile_in_process(broker.settings(), work / "in-process", args)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_table(table, args)


TARGETS = {"key": ">= 50% and >= 3,000 qps, p99 <= 5 ms", "forwarded": ">= 35%"}


def cluster_stage(
    args: argparse.Namespace,
    broker: Any,
    first: Server,
    client: httpx.Client,
    work: Path,
    bare_key: Load | None,
) -> list[tuple[str, Load, Load | None, str]]:
    """Two more servers join ``first``'s cluster; then key lookups sent to ``first``, forwarded
    (keys of partitions another server is active for) and local, on the same cluster."""
    others = [
        Server(
            [
                "-b",
                broker.bootstrap_servers,
                "--service-id",
                "bench",
                "--state-dir",
                str(work / f"node{i}"),
            ],
            work / f"server{i}.log",
        )
        for i in (2, 3)
    ]
    try:
        for other in others:
            other.wait_healthy()
        local, forwarded = _split_keys(client, first, others, args.rows)
        print(
            f"3-server cluster: of {len(local) + len(forwarded):,} sampled keys, {len(local):,} "
            f"answered by the first server itself and {len(forwarded):,} forwarded"
        )
        pids = [o.process.pid for o in others]
        rows = []
        near = keys_workload("local", "key lookup, local", local)
        far = keys_workload("forwarded", "key lookup, forwarded", forwarded)
        served_local = measure(first.port, first.process.pid, args, near, pids)
        print(served_local.line("cluster   key lookup, local    "))
        served_far = measure(first.port, first.process.pid, args, far, pids)
        print(served_far.line("cluster   key lookup, forwarded"))
        # forwarding's own cost shows at one client (at eight, the CPUs queue every request)
        one = argparse.Namespace(**{**vars(args), "clients": 1})
        alone_local = measure(first.port, first.process.pid, one, near, pids)
        alone_far = measure(first.port, first.process.pid, one, far, pids)
        difference = (
            percentile(sorted(alone_far.latencies), 50)
            - percentile(sorted(alone_local.latencies), 50)
        ) * 1000
        print(
            f"one client: local p50 {percentile(sorted(alone_local.latencies), 50) * 1000:.2f} "
            f"ms, forwarded p50 {percentile(sorted(alone_far.latencies), 50) * 1000:.2f} ms: "
            f"forwarding adds {difference:.2f} ms (target < 1 ms)"
        )
        rows.append(("3 servers: key, local", served_local, bare_key, ""))
        rows.append(
            (
                "3 servers: forwarded",
                served_far,
                bare_key,
                f"{TARGETS['forwarded']}; +{difference:.2f} ms p50 at 1 client (< 1 ms)",
            )
        )
        return rows
    finally:
        for other in others:
            other.stop()


def _split_keys(
    client: httpx.Client,
    first: Server,
    others: Sequence[Server],
    rows: int,
    sample: int = 400,
    timeout_s: float = 120.0,
) -> tuple[list[str], list[str]]:
    """Keys the first server answers itself, and keys it forwards, once the cluster has settled
    (the same split twice in a row, some keys forwarded)."""
    rng = random.Random(5)
    keys = [_key_name(rng.randrange(rows)) for _ in range(sample)]
    deadline = time.monotonic() + timeout_s
    previous = None
    while True:
        split: tuple[list[str], list[str]] = ([], [])
        for key in keys:
            answer = client.post(
                f"{first.url}/query", json={"ksql": f"SELECT * FROM {TABLE} WHERE ID = '{key}';"}
            )
            items = answer.json() if answer.status_code == 200 else []
            hosts = {
                s["host"] for i in items if "header" in i for s in i["header"].get("servedBy", ())
            }
            if answer.status_code == 200 and any("row" in i for i in items) and hosts:
                split[hosts != {f"127.0.0.1:{first.port}"}].append(key)
        if split[1] and previous == split and len(split[0]) + len(split[1]) == sample:
            return split
        previous = split
        for server in (first, *others):
            server.check()
        if time.monotonic() > deadline:
            raise TimeoutError("the cluster did not settle: no stable split of keys by server")
        time.sleep(2.0)


def print_table(table: list[tuple[str, Load, Load | None, str]], args: argparse.Namespace) -> None:
    """The figures of the run, one line per workload, headwater beside the bare endpoint."""
    if not table:
        return
    print(
        f"\nbench.pull_qps ({args.clients} clients, {args.client} client, {args.http_server}/"
        f"{args.http_loop}; CPU = server CPU per query, all servers of a cluster)"
    )
    header = (
        f"{'workload':<24} {'qps':>7} {'p50 ms':>7} {'p99 ms':>7} {'CPU us':>7} | "
        f"{'bare qps':>8} {'p50 ms':>7} {'p99 ms':>7} {'CPU us':>7} | {'ratio':>5}  target"
    )
    print(header)
    print("-" * len(header))
    for label, served, bare, target in table:
        line = f"{label:<24} {_cells(served)} | "
        if bare is None:
            line += f"{'':>8} {'':>7} {'':>7} {'':>7} | {'':>5}"
        else:
            ratio = served.qps / bare.qps if bare.qps else float("nan")
            line += f"{_cells(bare, 8)} | {100 * ratio:>4.0f}%"
        print(f"{line}  {target}".rstrip())


def _cells(load: Load, width: int = 7) -> str:
    values = sorted(load.latencies)
    count = max(1, len(values))
    return (
        f"{load.qps:>{width},.0f} {percentile(values, 50) * 1000:>7.2f} "
        f"{percentile(values, 99) * 1000:>7.2f} {load.server_cpu / count * 1e6:>7.0f}"
    )


if __name__ == "__main__":
    main()
