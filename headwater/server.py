"""``headwater server``: the HTTP API (``headwater.gateway``) on uvicorn, over one Kafka cluster.

Does I/O: creates the command topic if missing, starts the command runner, serves until uvicorn is
told to stop (Ctrl-C or SIGTERM, which uvicorn handles), then stops the runner (writing a final
catalog snapshot).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn

from headwater.gateway.app import create_app
from headwater.gateway.services import Services, open_services
from headwater.kafka.clients import KafkaSettings


class _Server(uvicorn.Server):
    """uvicorn's server, minus re-raising the stop signal after a graceful shutdown.

    uvicorn re-raises SIGTERM/SIGINT once it has shut down, which kills the process before
    ``open_services`` can stop the runner and write the final catalog snapshot.
    """

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        stops = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in stops}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)


def serve(
    settings: KafkaSettings,
    service_id: str,
    data_dir: Path | None,
    *,
    host: str = "127.0.0.1",
    port: int = 8088,
    on_ready: Callable[[Services], None] | None = None,
) -> None:
    """Serve the HTTP API until stopped.

    Args:
        settings: how to reach Kafka.
        service_id: the ksqlDB service id (names the command topic).
        data_dir: where catalog snapshots go; None for none.
        host, port: where to listen.
        on_ready: called once the catalog is being followed, before uvicorn starts listening.
    """
    with open_services(settings, service_id, data_dir) as services:
        if on_ready is not None:
            on_ready(services)
        config = uvicorn.Config(create_app(services), host=host, port=port, log_level="warning")
        _Server(config).run()
