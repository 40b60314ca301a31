"""One child process of the embedded broker: spawn, watch, stop by pid. Does I/O (processes, log files).

Children never outlive us:
- a graceful stop sends a signal (SIGTERM unless told) to the child's pid, waits, then SIGKILLs it
  and reaps it;
- on Linux each child asks the kernel for SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``,
  set between fork and exec), so a ``kill -9`` of our process takes the children with it. The signal
  follows the *thread* that forked the child: start brokers from a thread that lives as long as they do
  (the main thread, in practice);
- each child runs in its own session, so a Ctrl-C in a terminal reaches only us, and we stop the
  children in order (the broker before its object store).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_TAIL_BYTES = 4000


def _death_signal_hook() -> Callable[[], None] | None:
    """A preexec function that makes the child die with its parent (Linux), or None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:  # pragma: no cover - every Linux has a libc
        return None
    # Resolved here, in the parent: between fork and exec only async-signal-safe calls belong.
    prctl = ctypes.CDLL(libc_name, use_errno=True).prctl
    parent_pid = os.getpid()

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return hook


class ChildProcess:
    """A started child process with its output in a log file.

    Args:
        name: short name for messages ("tansu", "weed").
        argv: program and arguments.
        env: the child's whole environment (nothing is inherited).
        cwd: working folder of the child.
        log_path: file that receives the child's stdout and stderr (appended to).
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        log_path: Path,
    ) -> None:
        self.name = name
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as out:
            out.write(f"--- headwater starts: {' '.join(argv)}\n".encode())
            out.flush()
            self._log_start = out.tell()
            self._popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(env),
                cwd=cwd,
                start_new_session=True,
                preexec_fn=_death_signal_hook(),  # noqa: PLW1509  (one prctl call: async-signal-safe)
            )
        log.info("started %s, pid %d, log %s", name, self._popen.pid, log_path)

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self._popen.pid

    def exit_code(self) -> int | None:
        """The exit status if the child has ended (reaping it), else None."""
        return self._popen.poll()

    def log_tail(self, max_bytes: int = _TAIL_BYTES) -> str:
        """The end of what this child wrote since it was started."""
        try:
            with self.log_path.open("rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(self._log_start, size - max_bytes))
                data = f.read()
        except OSError:
            return ""
        return data.decode("utf-8", errors="replace").strip()

    def stop(self, timeout_s: float, stop_signal: signal.Signals = signal.SIGTERM) -> None:
        """Send `stop_signal` to the child, wait up to `timeout_s`, then SIGKILL it; always reaps it."""
        if self._popen.poll() is not None:
            return
        began = time.monotonic()
        self._popen.send_signal(stop_signal)
        try:
            self._popen.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            log.warning(
                "%s (pid %d) did not stop within %.1f s of %s: killing it",
                self.name,
                self.pid,
                timeout_s,
                stop_signal.name,
            )
            self.kill()
        else:
            log.info("%s (pid %d) stopped in %.2f s", self.name, self.pid, time.monotonic() - began)

    def kill(self) -> None:
        """SIGKILL the child and reap it."""
        if self._popen.poll() is None:
            self._popen.kill()
        self._popen.wait()
