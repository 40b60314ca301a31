"""Spark's source runners forked from one warm process (`runner_forks`): the wrapper routes only the
runner's module, a forked child gets the caller's streams, environment and folder and its exit
status is the caller's, a killed caller takes its child along, and a gone server costs a slow
start, never a failed one. Real processes; a stand-in module instead of PySpark's runner."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from headwater.engine.spark import runner_forks
from headwater.engine.spark.runner_forks import RunnerForks, decode_request, encode_status

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork, /proc")

_PROBE = "hw_runner_probe"
_OTHER = "hw_other_probe"  # a module the server is not started for
_PROBE_CODE = """
import os, sys, time
if __name__ == "__main__":
    print(os.getpid(), os.getppid(), os.environ.get("PROBE"), os.getcwd(), sys.argv[1:], flush=True)
    if os.environ.get("PROBE") == "modules":
        source_rows = "headwater.engine.spark.source_rows" in sys.modules
        print(f"source_rows={source_rows} pandas={'pandas' in sys.modules}", file=sys.stderr)
    print("to stderr", file=sys.stderr, flush=True)
    if os.environ.get("PROBE") == "sleep":
        time.sleep(120)
    sys.exit(int(os.environ.get("CODE", "0")))
"""


@pytest.fixture
def forks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunnerForks]:
    (tmp_path / f"{_PROBE}.py").write_text(textwrap.dedent(_PROBE_CODE))
    (tmp_path / f"{_OTHER}.py").write_text(textwrap.dedent(_PROBE_CODE))
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(tmp_path), path) if p))
    started = runner_forks.start((_PROBE,))
    try:
        yield started
    finally:
        started.close()
    assert started.process.poll() is not None


def _env(**values: str) -> dict[str, str]:
    return {**os.environ, **values}


def _parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_the_runner_module_is_forked_with_the_callers_streams_environment_and_status(
    forks: RunnerForks, tmp_path: Path
) -> None:
    done = subprocess.run(
        [forks.python, "-m", _PROBE, "an argument", "--flag"],
        env=_env(PROBE="hello", CODE="3"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    _pid, parent, probe, cwd, args = done.stdout.split(" ", 4)
    assert int(parent) == forks.process.pid  # forked by the server, not started by the caller
    assert (probe, cwd, done.stderr, done.returncode) == ("hello", str(tmp_path), "to stderr\n", 3)
    assert args == "['an argument', '--flag']\n"
    assert Path(f"/proc/{_pid}/comm").exists() is False  # ended, and reaped by the server


def test_a_child_starts_with_the_operators_and_pyarrows_pandas_loaded(
    forks: RunnerForks, tmp_path: Path
) -> None:
    # what a worker's first task would import (~0.4 s each) comes with the fork
    done = subprocess.run(
        [forks.python, "-m", _PROBE],
        env=_env(PROBE="modules"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    loaded = done.stdout.split(" ", 4)[2]
    assert loaded == "modules"
    assert "source_rows=True pandas=True" in done.stderr


def test_other_commands_run_the_interpreter_unchanged(forks: RunnerForks) -> None:
    done = subprocess.run(
        [forks.python, "-c", "import os, sys; print(os.getppid(), sys.argv[1:])", "x"],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert done.stdout.split(None, 1) == [str(os.getpid()), "['x']\n"]
    other = subprocess.run(
        [forks.python, "-m", "json.tool", "--help"], capture_output=True, check=False, timeout=30
    )
    assert other.returncode == 0 and b"usage" in other.stdout  # a module it does not fork


def test_a_killed_caller_takes_its_child_along(forks: RunnerForks) -> None:
    with subprocess.Popen(
        [forks.python, "-m", _PROBE], env=_env(PROBE="sleep"), stdout=subprocess.PIPE, text=True
    ) as caller:
        assert caller.stdout is not None
        child = int(caller.stdout.readline().split()[0])
        assert _parent_of(child) == forks.process.pid
        assert Path(f"/proc/{child}/comm").read_text() == "hw_runner_probe\n"  # named by module
        caller.send_signal(signal.SIGTERM)  # as Spark's JVM destroys a worker
        caller.wait(10)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists():  # reaped by the server once it has ended
        assert time.monotonic() < deadline, "the forked child outlived its caller"
        time.sleep(0.05)


def test_malformed_and_refused_requests_leave_the_server_serving(forks: RunnerForks) -> None:
    socket_path = str(forks.folder / "socket")
    with socket.socket(socket.AF_UNIX) as rude:  # no descriptors, not a request
        rude.connect(socket_path)
        rude.sendall(b"\x00\x00\x00\x05hello")
        assert rude.recv(4) == b""  # closed without an answer
    launch = Path(runner_forks.__file__).with_name("_runner_launch.py")
    refused = subprocess.run(  # a module the server does not run: not forked, the client runs it
        [sys.executable, "-I", "-S", str(launch), socket_path, _OTHER, "x"],
        env=_env(CODE="5"),
        capture_output=True,
        check=False,
        timeout=30,
    )
    _pid, parent, _probe, _cwd, args = refused.stdout.decode().split(" ", 4)
    assert (refused.returncode, int(parent), args) == (5, os.getpid(), "['x']\n")
    done = subprocess.run(
        [forks.python, "-m", _PROBE],
        env=_env(CODE="0"),
        capture_output=True,
        check=False,
        timeout=30,
    )
    assert done.returncode == 0 and int(done.stdout.split()[1]) == forks.process.pid


def test_without_its_server_the_runner_starts_as_python_would(forks: RunnerForks) -> None:
    launch = Path(runner_forks.__file__).with_name("_runner_launch.py")
    socket_path = str(forks.folder / "socket")
    forks.process.terminate()
    forks.process.wait(10)
    done = subprocess.run(  # the socket file is left behind: the client falls back
        [sys.executable, "-I", "-S", str(launch), socket_path, _PROBE],
        env=_env(CODE="4"),
        capture_output=True,
        check=False,
        timeout=30,
    )
    assert done.returncode == 4
    assert int(done.stdout.split()[1]) != forks.process.pid


def test_the_server_ends_when_its_starter_closes_its_input(forks: RunnerForks) -> None:
    assert forks.process.stdin is not None
    forks.process.stdin.close()  # what the starter's death does
    assert forks.process.wait(10) == 0


def test_close_removes_the_wrapper_and_the_socket(forks: RunnerForks) -> None:
    forks.close()
    assert not forks.folder.exists()
    assert not forks.alive()


def test_the_wrapper_routes_only_the_named_modules_while_the_socket_exists() -> None:
    text = runner_forks.wrapper_script("/py thon", "/l.py", "/s/socket", ("a.b", "c"))
    assert 'case "$2" in a.b|c) shift; exec \'/py thon\' -I -S /l.py /s/socket "$@"' in text
    assert "[ -S /s/socket ]" in text
    assert text.endswith("exec '/py thon' \"$@\"\n")


def test_exit_statuses_and_requests_are_decoded() -> None:
    assert encode_status(3) == (3).to_bytes(4, "big")
    assert encode_status(-signal.SIGTERM) == (128 + signal.SIGTERM).to_bytes(4, "big")
    request = decode_request(b'{"module": "m", "args": ["x"], "env": {"A": 1}, "cwd": "/"}')
    assert (request.module, request.args, request.env, request.cwd) == ("m", ["x"], {"A": "1"}, "/")
    for bad in (
        b"[]",
        b"{",
        b'{"module": 1, "args": [], "env": {}, "cwd": "/"}',
        b'{"module": "m", "args": "x", "env": {}, "cwd": "/"}',
        b'{"module": "m"}',
    ):
        with pytest.raises(ValueError, match="not a runner request"):
            decode_request(bad)


def test_the_client_and_the_server_agree_on_not_forked() -> None:
    launch = Path(runner_forks.__file__).with_name("_runner_launch.py").read_text()
    (value,) = struct.unpack("!i", runner_forks.NOT_FORKED)
    assert f"_NOT_FORKED = {value} " in launch  # the client is stdlib-only: it cannot import it
