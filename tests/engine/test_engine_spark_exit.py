"""The Spark engine's child process never outlives its stop by more than its grace period."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups")

_HUNG_CHILD = textwrap.dedent(
    """
    import os, subprocess, sys, time
    os.setsid()
    from headwater.engine.spark.driver import kill_group_after
    helper = subprocess.Popen(["sleep", "60"])  # stands for the JVM and the Python workers
    print(helper.pid, flush=True)
    kill_group_after(0.5)
    time.sleep(60)  # a graceful stop that hangs
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is gone for our purpose
        return stat.read().split(") ")[-1][:1] != "Z"


def test_a_hung_stop_is_ended_by_killing_the_whole_group() -> None:
    with subprocess.Popen([sys.executable, "-c", _HUNG_CHILD], stdout=subprocess.PIPE) as child:
        _check_group_killed(child)


def _check_group_killed(child: subprocess.Popen[bytes]) -> None:
    try:
        assert child.stdout is not None
        helper = int(child.stdout.readline())
        assert child.wait(timeout=10) == -signal.SIGKILL
        deadline = time.monotonic() + 5
        while _alive(helper):
            assert time.monotonic() < deadline, "the group's other process outlived the watchdog"
            time.sleep(0.05)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
