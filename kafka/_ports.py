"""Loopback ports for the embedded broker's processes. Does I/O (binds sockets briefly).

A port is "free" when we can bind it on 127.0.0.1 with SO_REUSEADDR (as the servers do, so a port in
TIME_WAIT counts as free). Between our probe and the child's bind another process may take the port;
callers that chose a port themselves retry the start once on a bind failure.
"""

from __future__ import annotations

import contextlib
import socket

LOOPBACK = "127.0.0.1"

# SeaweedFS 4.48 quirk: `weed mini`'s maintenance worker dials the admin server's gRPC port at
# admin http port + 10000, ignoring -admin.port.grpc (seen in its log: "dial tcp: address 70235:
# invalid port", retried every few seconds). We therefore always give it that very port.
WEED_ADMIN_GRPC_OFFSET = 10000
_MAX_PORT = 65535


def _bound_socket(port: int) -> socket.socket | None:
    """A socket bound to 127.0.0.1:port (0 picks one), or None when the port is taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((LOOPBACK, port))
    except OSError:
        sock.close()
        return None
    return sock


def port_is_free(port: int) -> bool:
    """Whether `port` can be bound on 127.0.0.1 right now."""
    sock = _bound_socket(port)
    if sock is None:
        return False
    sock.close()
    return True


def free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports (all held open together while choosing)."""
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        while len(ports) < count:
            sock = _bound_socket(0)
            if sock is None:  # pragma: no cover - the kernel always has an ephemeral port for us
                raise OSError("no free loopback port")
            stack.callback(sock.close)
            ports.append(int(sock.getsockname()[1]))
        return ports


def free_port() -> int:
    """One free loopback port."""
    return free_ports(1)[0]


_WEED_PORT_FLAGS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
)


def free_weed_ports() -> dict[str, int]:
    """The ten ports of `weed mini`, by flag name, all free and distinct (see WEED_ADMIN_GRPC_OFFSET).

    Every socket stays bound until all ten are chosen, so the kernel never hands out one port twice.
    """
    with contextlib.ExitStack() as stack:

        def hold(port: int) -> int | None:
            sock = _bound_socket(port)
            if sock is None:
                return None
            stack.callback(sock.close)
            return int(sock.getsockname()[1])

        admin = None
        for _ in range(100):
            candidate = hold(0)
            if (
                candidate is not None
                and candidate + WEED_ADMIN_GRPC_OFFSET <= _MAX_PORT
                and hold(candidate + WEED_ADMIN_GRPC_OFFSET) is not None
            ):
                admin = candidate
                break
        if admin is None:  # pragma: no cover - ephemeral ranges always hold ports below 55536
            raise OSError("no free loopback port pair for the SeaweedFS admin server")
        ports = {name: hold(0) for name in _WEED_PORT_FLAGS}
        chosen = {name: port for name, port in ports.items() if port is not None}
        if len(chosen) != len(_WEED_PORT_FLAGS):  # pragma: no cover
            raise OSError("no free loopback ports for SeaweedFS")
        chosen["admin.port"] = admin
        chosen["admin.port.grpc"] = admin + WEED_ADMIN_GRPC_OFFSET
        return chosen
