"""Spark's Python processes forked from one warm process, not started one by one. Does I/O.

Spark starts a Python process for every query source: PySpark's
``python_streaming_source_runner``, which plans the source's offsets. Spark starts it as
``python -m <module>`` (``createSimpleWorker``, not from PySpark's forking daemon), and the module
imports pyspark and pyarrow: ~63 MB of its own per query source (10 idle queries: 0.63 GB of the
node's 1.6 GB, bench.persistent_queries). PySpark's daemons (one per worker module, kept for the
session) are started the same way: ~35 MB each. Forked from a process that has imported all that,
each shares those pages and owns only what it changes.

- **The fork server** (``python -m headwater.engine.spark.runner_forks SOCKET MODULE...``) imports
  the modules it may run, headwater's Kafka source and PySpark's worker, freezes its heap out of
  the collector (`gc.freeze`: a child's collections then do not write to the shared pages), and
  listens on a Unix socket in a private folder. For each request it forks a child that takes the
  request's standard streams, arguments, environment and working folder and runs the module as
  ``__main__``; when the child exits it answers the exit status; when the request's connection
  closes first, it kills the child. It exits when its standard input closes (the process that
  started it stopped or died).
- **Forking after pyarrow's import**: pyarrow starts native threads when imported (jemalloc's
  background thread, Arrow's pools). Both register at-fork handlers (Arrow's "at-fork facility",
  ARROW-17975; jemalloc's prefork/postfork) so a forked child may use them; PySpark's own daemon
  imports its worker module after forking only because it cannot know the module.
- **The wrapper** (`wrapper_script`) is the ``PYSPARK_PYTHON`` Spark is given: for the modules the
  server runs it executes `_runner_launch` (a stdlib-only client that passes its streams over the
  socket and exits with the child's status); for everything else (the daemons' workers are forked
  by the daemons) it executes the real interpreter, unchanged.
- **Failure is a slow start, never a failed one**: with the server gone, the wrapper and the client
  fall back to ``python -m <module>``.

`start` is the driver's side: it writes the wrapper, starts the server and waits for its socket.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import runpy
import selectors
import shlex
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: The module Spark starts per query source.
SOURCE_RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"
#: PySpark's forking daemon: Spark starts one per worker module (the tasks' ``pyspark.worker``,
#: and the data source planners'), each ~35 MB of its own when started afresh, kept for the
#: session; forked from the server, its workers share the server's pages too.
DAEMON = "pyspark.daemon"
#: What the driver's server runs.
SPARK_MODULES = (SOURCE_RUNNER, DAEMON)
#: What the server imports besides the modules it runs: what they load first (the source, the
#: tasks' worker module, and the operators a source task runs: ~0.4 s for each new Python worker
#: otherwise, on the path of a query's first micro-batch; a streaming source runner never uses
#: them, and shares their pages with the server).
_PRELOAD = (
    "headwater.engine.spark.kafka_source",
    "pyspark.worker",
    "headwater.engine.spark.source_rows",
)
_LAUNCH = Path(__file__).with_name("_runner_launch.py")
#: The answer to a request the server did not fork (a module it does not run, a failed fork): the
#: client then runs the module itself. Never an exit status (those are 0-255).
NOT_FORKED = struct.pack("!i", -1)
_MAX_REQUEST = 1 << 20  # an environment is a few kB; a larger request is refused
_READY_S = 30.0  # the longest the server may take to import and listen


def wrapper_script(python: str, launch: str, socket_path: str, modules: Sequence[str]) -> str:
    """The text of the executable Spark runs as Python: ``modules`` go to the fork server at
    ``socket_path`` (through the client ``launch``) while it listens, anything else to ``python``."""
    py, client, path = shlex.quote(python), shlex.quote(launch), shlex.quote(socket_path)
    cases = "|".join(shlex.quote(m) for m in modules)
    return (
        "#!/bin/sh\n"
        "# headwater (engine/spark/runner_forks.py): Spark's Python. The modules below are forked\n"
        "# from a warm process; everything else runs as it would.\n"
        f'if [ "$1" = "-m" ] && [ "$#" -ge 2 ] && [ -S {path} ]; then\n'
        f'  case "$2" in {cases}) shift; exec {py} -I -S {client} {path} "$@" ;; esac\n'
        "fi\n"
        f'exec {py} "$@"\n'
    )


def encode_status(returncode: int) -> bytes:
    """A child's end as the client's exit status: its code, or 128 + the signal that killed it."""
    return struct.pack("!i", returncode if returncode >= 0 else 128 - returncode)


@dataclass(frozen=True, slots=True)
class Request:
    """What a client asks the server to run, and with what."""

    module: str
    args: list[str]
    env: dict[str, str]
    cwd: str


def decode_request(body: bytes) -> Request:
    """A client's request from its JSON; `ValueError` when it is not one."""
    try:
        fields = json.loads(body)
        module, args, env, cwd = fields["module"], fields["args"], fields["env"], fields["cwd"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not a runner request: {exc}") from None
    if (
        isinstance(module, str)
        and isinstance(args, list)
        and isinstance(cwd, str)
        and isinstance(env, dict)
    ):
        environment = {str(k): str(v) for k, v in env.items()}
        return Request(module, [str(a) for a in args], environment, cwd)
    raise ValueError("not a runner request: module, args, env and cwd have the wrong types")


# -- the driver's side ----------------------------------------------------------------------------


class RunnerForks:
    """A running fork server and the wrapper that routes to it; `close` stops the server (its
    children end with their JVM sockets) and removes its folder."""

    def __init__(self, folder: Path, process: subprocess.Popen[bytes]) -> None:
        self.folder = folder
        self.process = process
        self.python = str(folder / "python")

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdin is not None:
            self.process.stdin.close()
        for name in ("python", "socket"):
            (self.folder / name).unlink(missing_ok=True)
        try:
            self.folder.rmdir()
        except OSError:
            pass


def start(modules: Sequence[str] = SPARK_MODULES, python: str = sys.executable) -> RunnerForks:
    """Start a fork server for ``modules`` and write its wrapper; `RuntimeError` if it does not
    listen within 30 s (its stopped process is cleaned up)."""
    folder = Path(tempfile.mkdtemp(prefix="headwater-runners-"))  # mode 0700: this user's only
    socket_path = folder / "socket"
    wrapper = folder / "python"
    wrapper.write_text(wrapper_script(python, str(_LAUNCH), str(socket_path), modules))
    wrapper.chmod(0o700)
    process = subprocess.Popen(
        [python, "-m", __name__, str(socket_path), *modules],
        stdin=subprocess.PIPE,  # closed when this process ends: the server then exits
        close_fds=True,
    )
    forks = RunnerForks(folder, process)
    deadline = time.monotonic() + _READY_S
    while not socket_path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            forks.close()
            raise RuntimeError(f"the source runners' fork server did not start: {process.args!r}")
        time.sleep(0.02)
    return forks


# -- the server -----------------------------------------------------------------------------------


def _read_request(conn: socket.socket) -> tuple[Request, list[int]]:
    """One request and its three descriptors from a new connection; `ValueError` when malformed."""
    conn.settimeout(5.0)
    data, fds, _flags, _addr = socket.recv_fds(conn, 65536, 3)
    try:
        if len(fds) != 3 or len(data) < 4:
            raise ValueError("a request carries its three standard streams and a length")
        (size,) = struct.unpack("!I", data[:4])
        if size > _MAX_REQUEST:
            raise ValueError(f"a request of {size} bytes (at most {_MAX_REQUEST})")
        body = data[4:]
        while len(body) < size:
            part = conn.recv(size - len(body))
            if not part:
                raise ValueError("the request ended early")
            body += part
        return decode_request(body), fds
    except (ValueError, OSError):
        for fd in fds:
            os.close(fd)
        raise


def _child(request: Request, fds: list[int]) -> None:
    """In the forked child: become ``python -m <module>`` with the request's streams and
    environment; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.environ.clear()
        os.environ.update(request.env)
        os.chdir(request.cwd)
        for entry in reversed(request.env.get("PYTHONPATH", "").split(os.pathsep)):
            if entry and entry not in sys.path:
                sys.path.insert(0, entry)
        sys.stdout.reconfigure(write_through=True)  # type: ignore[union-attr]
        sys.argv = [request.module, *request.args]
        _name_process(request.module.rsplit(".", 1)[-1])
        try:
            runpy.run_module(request.module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - the child's last word goes to the JVM's log
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code & 0xFF)


def _name_process(name: str) -> None:
    """The process's name in ``ps`` and /proc/<pid>/comm (its command line stays the server's)."""
    try:
        with open("/proc/self/comm", "w") as comm:
            comm.write(name[:15])
    except OSError:
        pass  # not Linux: the name only helps people and benchmarks tell children apart


def _warm_pyarrow() -> None:
    """pyarrow imports pandas on its first conversion of Python values (to tell pandas objects
    apart): ~0.2 s, done here once rather than in every forked worker's first task."""
    import pyarrow

    pyarrow.array([0])


def serve(socket_path: str, modules: Sequence[str]) -> None:
    """The fork server's loop (see the module docstring); returns when standard input closes."""
    for name in (*modules, *_PRELOAD):
        importlib.import_module(name)
    _warm_pyarrow()
    gc.collect()
    gc.freeze()
    selector = selectors.DefaultSelector()
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_write)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    partial = socket_path + ".new"
    listener.bind(partial)
    listener.listen(64)
    os.rename(partial, socket_path)  # the socket appears only once it accepts
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_read, selectors.EVENT_READ, "reap")
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "parent")
    children: dict[int, socket.socket] = {}  # pid -> its client's connection
    by_conn: dict[socket.socket, int] = {}
    while True:
        for key, _events in selector.select():
            if key.data == "parent":
                if not os.read(sys.stdin.fileno(), 4096):
                    return
            elif key.data == "accept":
                conn, _ = listener.accept()
                try:
                    request, fds = _read_request(conn)
                except (ValueError, OSError) as exc:
                    print(f"runner_forks: refused a request: {exc}", file=sys.stderr, flush=True)
                    conn.close()
                    continue
                try:
                    if request.module not in modules:
                        raise OSError(f"{request.module!r} is not one of {list(modules)}")
                    pid = os.fork()
                except OSError as exc:  # the client runs it itself: a slower start
                    print(f"runner_forks: not forked: {exc}", file=sys.stderr, flush=True)
                    _not_forked(conn, fds)
                    continue
                if pid == 0:
                    selector.close()
                    listener.close()
                    for other in by_conn:
                        other.close()
                    conn.close()
                    os.close(wake_read)
                    os.close(wake_write)
                    _child(request, fds)
                for fd in fds:
                    os.close(fd)
                conn.setblocking(False)
                children[pid] = conn
                by_conn[conn] = pid
                selector.register(conn, selectors.EVENT_READ, "client")
            elif key.data == "client":
                conn = key.fileobj  # type: ignore[assignment]
                try:
                    still_there = conn.recv(1)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    still_there = b""
                if not still_there:  # the client is gone (the JVM destroyed it): so is its child
                    selector.unregister(conn)  # reaped (and closed) when the child has ended
                    pid = by_conn[conn]
                    try:
                        os.kill(pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            else:  # a child ended
                try:
                    while os.read(wake_read, 512):
                        pass
                except BlockingIOError:
                    pass
                _reap(children, by_conn, selector)


def _not_forked(conn: socket.socket, fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)
    try:
        conn.sendall(NOT_FORKED)
    except OSError:
        pass
    conn.close()


def _reap(
    children: dict[int, socket.socket],
    by_conn: dict[socket.socket, int],
    selector: selectors.BaseSelector,
) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is None:
            continue
        del by_conn[conn]
        try:
            selector.unregister(conn)
        except KeyError:  # unregistered when its client left
            pass
        try:
            conn.setblocking(True)
            conn.sendall(encode_status(os.waitstatus_to_exitcode(status)))
        except OSError:
            pass
        conn.close()


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2:])
