"""The process tree of a benchmark's server, read from /proc: CPU seconds, RSS, processes by kind.

Shared by the benchmarks (not one itself).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def cpu_seconds(root: int) -> float:
    """The CPU seconds of ``root``'s whole tree (see `cpu_of`)."""
    return sum(cpu_of(pid) for pid in process_tree(root))


def rss_mb(root: int) -> float:
    """The RSS of ``root``'s whole tree in MB (summed: pages the processes share count once per
    process; see `pss_mb`)."""
    return sum(rss_kb(pid) for pid in process_tree(root)) / 1024


#: The names (/proc/<pid>/comm) `runner_forks` gives what it forks, by the module each runs; a
#: daemon's workers keep their daemon's name. The fork server itself keeps the interpreter's.
_FORKED_KINDS = {"python_streamin": "python_streaming_source_runner", "daemon": "pyspark.daemon"}


def comm(pid: int) -> str:
    """The process's name (/proc/<pid>/comm), or "" once it has ended."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def process_kind(pid: int) -> str:
    """A short name for what a process of the tree is."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "gone"
    text = " ".join(a.decode(errors="replace") for a in argv)
    if "java" in Path(argv[0].decode(errors="replace")).name:
        return "jvm"
    if "runner_forks" in text:  # the fork server, or what it forked (named by its module)
        return _FORKED_KINDS.get(comm(pid), "runner_forks")
    if "_runner_launch" in text:  # what Spark started for a forked runner (`runner_forks`)
        return "runner_launch"
    for module in ("pyspark.daemon", "python_streaming_source_runner", "pyspark.worker"):
        if module in text:
            return module
    if "multiprocessing" in text or "spawn_main" in text:
        return "spark-child"
    if "headwater" in text and "server" in text:
        return "server"
    return Path(argv[0].decode(errors="replace")).name or "?"


def cpu_of(pid: int) -> float:
    """A process's CPU seconds (user + system; 0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def rss_kb(pid: int) -> int:
    """A process's RSS in kB (0 when it is gone)."""
    return _proc_kb(f"/proc/{pid}/status", "VmRSS:")


def pss_kb(pid: int) -> int:
    """A process's PSS in kB (0 when it is gone): its RSS with each page it shares divided among
    the processes sharing it. Spark forks its Python workers and source runners from daemons, so
    their RSS counts the daemon's pages once per child; the PSS of a tree adds up to the memory it
    really holds."""
    return _proc_kb(f"/proc/{pid}/smaps_rollup", "Pss:")


def _proc_kb(path: str, field: str) -> int:
    """The kB a /proc file gives on the line starting with ``field`` (0: no such file or line)."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def pss_mb(root: int) -> float:
    """The PSS of ``root``'s whole tree in MB (see `pss_kb`)."""
    return sum(pss_kb(pid) for pid in process_tree(root)) / 1024


def processes_by_kind(root: int) -> str:
    """The tree's processes by kind: how many, and their RSS / PSS."""
    kinds: Counter[str] = Counter()
    rss: Counter[str] = Counter()
    pss: Counter[str] = Counter()
    for pid in process_tree(root):
        kind = process_kind(pid)
        kinds[kind] += 1
        rss[kind] += rss_kb(pid)
        pss[kind] += pss_kb(pid)
    return ", ".join(
        f"{k} {n} ({rss[k] / 1024:,.0f} / {pss[k] / 1024:,.0f} MB)"
        for k, n in sorted(kinds.items())
    )
