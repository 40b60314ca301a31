"""Waiting until a file is replaced, without waking up while it is not. Does I/O.

The end watcher (`shared_ends`) replaces its file (write, then rename) whenever an end moves, and an
idle query's source waits for that (`kafka_source`). Polling the file's change time every 20 ms cost
each waiting process ~0.5% of a core on this machine (a wake-up costs ~0.1 ms of CPU here), ten idle
queries 5%. On Linux the wait is an inotify watch on the file's folder (a rename into it wakes it;
nothing else does), through libc: the standard library has no inotify and the packages that wrap it
(watchdog, watchfiles) run threads that poll on their own timer. Elsewhere, or when inotify is not
available (a container without it, the per-user watch limit reached), it polls the change time.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import select
import sys
import time

log = logging.getLogger(__name__)

_IN_MOVED_TO = 0x00000080
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = 0o2000000
#: How often the fallback looks at the file's change time.
POLL_S = 0.02


def changed_at(path: str) -> tuple[int, int]:
    """When the file at ``path`` last changed, and which file it is ((0, 0): unreadable). A file
    replaced by a rename is a new inode, so this tells it even within the clock's resolution."""
    try:
        status = os.stat(path)
    except OSError:
        return (0, 0)
    return (status.st_mtime_ns, status.st_ino)


class FileChange:
    """Waits for one file to be replaced (see the module docstring). Not thread-safe; ``close``
    gives the inotify descriptor back."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = _watch(os.path.dirname(os.path.abspath(path)) or ".")

    @property
    def polling(self) -> bool:
        """True when it polls (no inotify here)."""
        return self._fd < 0

    def wait(self, since: tuple[int, int], timeout_s: float) -> tuple[int, int]:
        """Block until the file's ``changed_at`` differs from ``since``, or ``timeout_s`` passed;
        returns its ``changed_at`` now."""
        deadline = time.monotonic() + timeout_s
        while (now := changed_at(self.path)) == since:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if self._fd < 0:
                time.sleep(min(POLL_S, left))
                continue
            readable, _, _ = select.select([self._fd], [], [], left)
            if readable:
                _drain(self._fd)
        return now

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _watch(folder: str) -> int:
    """An inotify descriptor watching renames into ``folder``; -1 when inotify is not available."""
    if not sys.platform.startswith("linux"):
        return -1
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fd = int(libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
    except (OSError, AttributeError):
        return -1
    if fd < 0:
        log.info("inotify is not available (%s): polling", os.strerror(ctypes.get_errno()))
        return -1
    if libc.inotify_add_watch(fd, os.fsencode(folder), _IN_MOVED_TO) < 0:
        log.info("cannot watch %s (%s): polling", folder, os.strerror(ctypes.get_errno()))
        os.close(fd)
        return -1
    return fd


def _drain(fd: int) -> None:
    """Read the events waiting (what they say does not matter: the change time does)."""
    try:
        while os.read(fd, 4096):
            pass
    except OSError as exc:
        if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
            raise
