"""Stands in for ``python -m MODULE`` by asking a warm fork server to run MODULE. Stdlib only.

Spark starts one ``python -m pyspark.sql.streaming.python_streaming_source_runner`` per query
source; the wrapper of `runner_forks` runs this file instead (``python -I -S`` this file, the
server's socket, MODULE). It sends the fork server its environment, working folder and standard
streams (the JVM's pipes), and waits: the fork server forks a child that runs MODULE with them,
and answers the child's exit status, which this process exits with. If this process is killed (the
JVM destroys its worker), the fork server kills the child. If the fork server cannot be reached,
or answers that it did not fork (a module it does not run, a failed fork), this process becomes
``python -m MODULE`` itself: a slower start, never a failed one.

Run by path, without ``site`` and without headwater's package: it must not import anything but
the standard library.
"""

import json
import os
import socket
import struct
import sys

_NOT_FORKED = -1  # the server's answer when it did not fork (runner_forks.NOT_FORKED)


def _fallback(module: str, args: list[str]) -> None:
    os.execv(sys.executable, [sys.executable, "-m", module, *args])


def main(argv: list[str]) -> int:
    path, module, args = argv[1], argv[2], argv[3:]
    request = json.dumps(
        {"module": module, "args": args, "env": dict(os.environ), "cwd": os.getcwd()}
    )
    body = request.encode()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        socket.send_fds(conn, [struct.pack("!I", len(body)) + body], [0, 1, 2])
    except OSError:
        conn.close()
        _fallback(module, args)
    answer = b""
    while len(answer) < 4:
        try:
            part = conn.recv(4 - len(answer))
        except InterruptedError:
            continue
        if not part:
            return 1  # the fork server is gone: the child, if any, ends with the JVM's socket
        answer += part
    status: int = struct.unpack("!i", answer)[0]
    if status == _NOT_FORKED:
        conn.close()
        _fallback(module, args)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
