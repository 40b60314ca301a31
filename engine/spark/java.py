"""Whether this machine can run Spark: Java 17 or newer, found as Spark finds it. Does I/O.

Spark's launcher runs ``$JAVA_HOME/bin/java`` when ``JAVA_HOME`` is set, else ``java`` on the
``PATH``; :func:`java_problem` looks in the same place and runs ``java -version`` once (what
``scripts/test`` checks too), so a server without Java says so when it starts instead of starting
persistent queries that fail over and over with py4j's ``[JAVA_GATEWAY_EXITED]``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping

__all__ = ["MIN_JAVA", "java_problem"]

MIN_JAVA = 17
"""The oldest Java that Spark 4 runs on."""

_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')
_HINT = (
    "install Java 17 or newer (Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set "
    "JAVA_HOME to one"
)


def java_problem(environ: Mapping[str, str], timeout_s: float = 20.0) -> str | None:
    """What keeps Spark from starting here, in one sentence, or None when Java is fine.

    Args:
        environ: the environment Spark would get (``JAVA_HOME``, ``PATH``).
        timeout_s: how long ``java -version`` may take.
    """
    home = environ.get("JAVA_HOME", "").strip()
    if home:
        java = os.path.join(home, "bin", "java")
        if not os.access(java, os.X_OK):
            return f"Java was not found: JAVA_HOME={home} has no bin/java; {_HINT}"
    else:
        on_path = shutil.which("java", path=environ.get("PATH", ""))
        if on_path is None:
            return f"Java was not found on the PATH (JAVA_HOME is not set); {_HINT}"
        java = on_path
    try:
        done = subprocess.run(
            [java, "-version"],
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout_s,
            env=dict(environ),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{java} -version failed ({exc}); {_HINT}"
    found = _VERSION.search(done.stderr + done.stdout)
    if done.returncode != 0 or found is None:
        first = (done.stderr or done.stdout).strip().splitlines()[:1]
        return (
            f"{java} -version failed ({first[0] if first else f'exit {done.returncode}'}); {_HINT}"
        )
    major = int(found.group(1))
    if major == 1 and found.group(2):  # "1.8.0_392": Java 8
        major = int(found.group(2))
    if major < MIN_JAVA:
        return f"Java {major} found ({java}), Spark needs {MIN_JAVA} or newer; {_HINT}"
    return None
