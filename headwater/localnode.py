"""``headwater`` with no subcommand: find the local node, or start one, for the shell. Does I/O.

The local node is ``headwater server`` on http://127.0.0.1:8088 with the default state folder (so
its streams, tables and rows survive between sessions). If something already answers ``/info``
there, the shell uses it and leaves it alone; otherwise this starts the node as a child process
(its log in ``<state dir>/server.log``), waits until it is healthy, and stops it (SIGTERM, by its
process id) when the shell exits. Where the node's Kafka listens comes from the file the running
node keeps in its state folder (``node.json``), never from a log an older node wrote.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

LOCAL_URL = "http://127.0.0.1:8088"
NODE_FILE = "node.json"
"""In a node's state folder while it serves: its pid, URL and where it serves (``serving``)."""


class LocalNodeError(RuntimeError):
    """The local node could not be started (the message includes the end of its log)."""


@dataclass
class LocalNode:
    """A node the shell uses: one it found running, or one it started (``process`` set)."""

    url: str
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    def stop(self, timeout_s: float = 30.0, *, wait: bool = True) -> None:
        """Stop the node if this process started it (SIGTERM, then SIGKILL after ``timeout_s``).

        With ``wait=False`` the node finishes its graceful stop on its own (its broker takes a few
        seconds to close its store) while the caller goes on; starting it again waits for it.
        """
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        if not wait:
            return
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def answering(url: str, timeout_s: float = 1.0) -> bool:
    """Whether a headwater (or ksqlDB) server answers ``GET /info`` at ``url`` (one that asks for
    credentials, ``authentication.method=BASIC``, answers too: the shell then says it refused)."""
    try:
        response = httpx.get(f"{url}/info", timeout=timeout_s)
    except httpx.HTTPError:
        return False
    if response.status_code == 401:
        challenge: str = response.headers.get("WWW-Authenticate", "")
        return challenge.lower().startswith("basic")
    return response.status_code == 200 and "KsqlServerInfo" in response.text


def healthy(url: str, timeout_s: float = 1.0) -> bool:
    """Whether the server at ``url`` reports itself healthy."""
    try:
        response = httpx.get(f"{url}/healthcheck", timeout=timeout_s)
    except httpx.HTTPError:
        return False
    return response.status_code == 200


def ensure_local_node(
    state_dir: Path, url: str = LOCAL_URL, *, start_timeout_s: float = 60.0
) -> LocalNode:
    """The local node at ``url``: found, or started on ``state_dir``.

    Raises:
        LocalNodeError: the node exited or did not become healthy in time.
    """
    if answering(url):
        return LocalNode(url)
    port = url.rsplit(":", 1)[-1]
    if _taken(int(port)):
        raise LocalNodeError(
            f"port {port} on 127.0.0.1 is already in use by something that is not "
            "a headwater server: stop it, or start the local node on another "
            "port with --port (e.g. headwater --port 8089)"
        )
    _wait_for_previous(state_dir, start_timeout_s)
    state_dir.mkdir(parents=True, exist_ok=True)
    log_path = state_dir / "server.log"
    exe = Path(sys.executable).with_name("headwater")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "headwater.cli"]
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [
                *command,
                "server",
                "--port",
                port,
                "--state-dir",
                str(state_dir),
                # Spark starts with the node, in the background: a user's first CREATE ... AS
                # SELECT starts in seconds rather than after Spark's ~20 s cold start
                "--set",
                "headwater.engine.start=startup",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in the shell must not reach the node
        )
    node = LocalNode(url, process, log_path)
    deadline = time.monotonic() + start_timeout_s
    while not healthy(url):
        if process.poll() is not None or time.monotonic() > deadline:
            node.stop()
            raise LocalNodeError(
                f"the local node did not start (see {log_path}):\n{_tail(log_path)}"
            )
        time.sleep(0.1)
    return node


def _taken(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _wait_for_previous(state_dir: Path, timeout_s: float) -> None:
    """Wait while a node that is stopping (its HTTP server gone, its process not yet) still holds
    the state folder (``server.lock`` names its pid)."""
    try:
        pid = int((state_dir / "server.lock").read_text(encoding="utf-8").strip() or "0")
    except (OSError, ValueError):
        return
    deadline = time.monotonic() + timeout_s
    while pid > 0 and time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        except PermissionError:  # someone else's process: not ours to wait for
            return
        if _ended(pid):
            return
        time.sleep(0.1)


def _ended(pid: int) -> bool:
    """Whether ``pid`` has exited but not been reaped (a zombie: our own child, stopped without
    waiting, is one until we reap it here)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return True
    except ChildProcessError:  # not our child
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state == "Z"


def announcement(node: LocalNode, state_dir: Path) -> str | None:
    """The node's own words about where it serves, where its Kafka listens and where its state
    is, from the file it keeps in its state folder while it serves (``NODE_FILE``); None when the
    node at ``node.url`` is not the one on ``state_dir`` (never an old node's address)."""
    try:
        said = json.loads((state_dir / NODE_FILE).read_text(encoding="utf-8"))
        pid, url, serving = int(said["pid"]), str(said["url"]), str(said["serving"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if url.rstrip("/") != node.url.rstrip("/") or not _alive(pid):
        return None
    return serving


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _ended(pid)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
