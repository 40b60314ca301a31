"""SeaweedFS as the durable broker's S3 store: argv, environment, start and readiness. Does I/O.

``weed mini`` runs master, volume, filer and S3 gateway in one process. We choose every one of its ten
ports (free, on 127.0.0.1; left to defaults it takes fixed ports that collide between two instances),
turn its phone-home telemetry, admin UI and WebDAV off, disable the Iceberg and Lance ports, and give it
a fresh random access key pair in its environment (it honours the pair of each start and keeps none, so
only the Tansu we start with the same pair can use it). Its data lives in ``<data dir>/seaweedfs``.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from headwater.kafka._ports import LOOPBACK, free_weed_ports
from headwater.kafka._process import ChildProcess
from headwater.kafka.errors import ChildDied, StartTimeout

log = logging.getLogger(__name__)

BUCKET = "tansu"
_REGION = "us-east-1"
_POLL_INTERVAL_S = 0.05
# Loopback only: never route the readiness probe through an HTTP proxy from the environment.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True, slots=True)
class S3Access:
    """How Tansu reaches the store: endpoint and key pair."""

    endpoint: str
    access_key_id: str
    secret_access_key: str

    def environment(self) -> dict[str, str]:
        """The variables of Tansu's S3 client (object_store crate): endpoint, plain HTTP, key pair."""
        return {
            "AWS_ENDPOINT": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_DEFAULT_REGION": _REGION,
        }


def weed_argv(binary: Path, data_dir: Path, socket_dir: Path, ports: dict[str, int]) -> list[str]:
    """The ``weed mini`` command line (pure)."""
    argv = [
        str(binary),
        "mini",
        f"-dir={data_dir}",
        f"-ip={LOOPBACK}",
        f"-ip.bind={LOOPBACK}",
        f"-bucket={BUCKET}",
        "-master.telemetry=false",
        "-admin.ui=false",
        "-webdav=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        # Its unix sockets default to /tmp/seaweedfs-*-<port>.sock and are left behind: keep them in a
        # folder of ours that we remove at stop.
        f"-s3.localSocket={socket_dir / 's3.sock'}",
        f"-filer.localSocket={socket_dir / 'filer.sock'}",
    ]
    argv += [f"-{flag}={port}" for flag, port in sorted(ports.items())]
    return argv


def start_seaweed(
    binary: Path, data_dir: Path, socket_dir: Path, log_path: Path, timeout_s: float
) -> tuple[ChildProcess, S3Access]:
    """Start ``weed mini`` and wait until its S3 endpoint answers.

    Args:
        binary: the ``weed`` executable.
        data_dir: the folder that holds the store's data (created if missing).
        socket_dir: a short-pathed folder for its unix sockets.
        log_path: where its output goes.
        timeout_s: how long to wait for the S3 endpoint.

    Returns:
        The running child and how to reach its S3 endpoint.

    Raises:
        ChildDied: weed exited during start-up (the message holds its log tail).
        StartTimeout: the endpoint did not answer in time (weed is stopped again).
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    ports = free_weed_ports()
    access = S3Access(
        endpoint=f"http://{LOOPBACK}:{ports['s3.port']}",
        access_key_id="hw" + secrets.token_hex(8),
        secret_access_key=secrets.token_urlsafe(30),
    )
    env = {
        "PATH": os.defpath,
        "AWS_ACCESS_KEY_ID": access.access_key_id,
        "AWS_SECRET_ACCESS_KEY": access.secret_access_key,
    }
    # cwd is the data folder: weed also looks for its *.toml configuration in the working folder.
    child = ChildProcess(
        "weed",
        weed_argv(binary, data_dir, socket_dir, ports),
        env=env,
        cwd=data_dir,
        log_path=log_path,
    )
    try:
        _wait_for_s3(child, access.endpoint, timeout_s)
    except BaseException:
        child.stop(timeout_s=5.0)
        raise
    return child, access


def _s3_answers(endpoint: str) -> bool:
    try:
        with _DIRECT.open(f"{endpoint}/healthz", timeout=1.0) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _wait_for_s3(child: ChildProcess, endpoint: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        code = child.exit_code()
        if code is not None:
            raise ChildDied(
                f"SeaweedFS (weed) exited with status {code} while starting",
                log_tail=child.log_tail(),
            )
        if _s3_answers(endpoint):
            return
        if time.monotonic() > deadline:
            raise StartTimeout(
                f"SeaweedFS's S3 endpoint {endpoint} did not answer within {timeout_s:.0f} s",
                log_tail=child.log_tail(),
            )
        time.sleep(_POLL_INTERVAL_S)
