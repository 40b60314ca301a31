"""The HTTP server under the gateway's ASGI app: one seam over granian, hypercorn and uvicorn.

Does I/O (a listening socket, an event loop, signal handlers). ksqlDB's clients speak HTTP/2
cleartext with prior knowledge (h2c) to ``/query-stream`` and ``/inserts-stream`` and HTTP/1.1 to
the rest, on one port; uvicorn speaks HTTP/1.1 only. granian (the default) and hypercorn answer
both on one port: a connection opening with HTTP/2's preface is HTTP/2, any other is HTTP/1.1
(hypercorn also honours ``Upgrade: h2c``, granian answers such a request over HTTP/1.1).
granian won ``bench/pull_qps.py`` among the two (HTTP/1.1 as fast as uvicorn, HTTP/2 about a
quarter less CPU per query than hypercorn's); its embedded server (the one an app built in this
process needs) is still marked experimental upstream, so hypercorn and uvicorn stay one
environment variable away: ``HEADWATER_HTTP_SERVER`` (:func:`settings_from_env`). All three serve
HTTPS with ``tls_cert_file``/``tls_key_file`` (HTTP/2 then by ALPN where the server offers it);
granian cannot read an encrypted key (:class:`UnsupportedTls`).

Every kind runs on an event loop this module makes (asyncio's unless ``loop`` says uvloop),
stops gracefully on SIGINT/SIGTERM (received in the main thread; never re-raised, so the caller
can stop its services afterwards) or :meth:`HttpServer.stop`, calls ``on_started`` once the
socket is listening and ``on_stopping`` when a stop begins (so that endless responses, push
queries, can end cleanly before the server waits for open requests).
"""

from __future__ import annotations

import asyncio
import enum
import errno
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp

log = logging.getLogger(__name__)

ENV_VAR = "HEADWATER_HTTP_SERVER"
"""The environment variable that chooses the HTTP server (``hypercorn``, ``uvicorn``, ``granian``)."""
LOOP_ENV_VAR = "HEADWATER_HTTP_LOOP"
"""... the event loop (``auto``, the default: uvloop when installed; ``asyncio``; ``uvloop``)."""
UVICORN_HTTP_ENV_VAR = "HEADWATER_UVICORN_HTTP"
"""... uvicorn's HTTP/1.1 parser (``auto``: httptools when installed, ``h11``, ``httptools``)."""

OnStarted = Callable[[], None]
OnStopping = Callable[[], None]


class HttpServerKind(enum.StrEnum):
    """Which server runs the app."""

    HYPERCORN = "hypercorn"
    """HTTP/1.1 and h2c (prior knowledge and upgrade) on one port; pure Python (h11, h2)."""
    UVICORN = "uvicorn"
    """HTTP/1.1 only (h11, or httptools when installed)."""
    GRANIAN = "granian"
    """HTTP/1.1 and h2c prior knowledge on one port; Rust (hyper), embedded mode."""


DEFAULT_KIND = HttpServerKind.GRANIAN


class LoopKind(enum.StrEnum):
    """The event loop (``auto``: uvloop when it is installed, else asyncio's)."""

    AUTO = "auto"
    ASYNCIO = "asyncio"
    UVLOOP = "uvloop"


@dataclass(frozen=True, slots=True)
class HttpServerSettings:
    """Where and how to serve.

    Attributes:
        host: the address to listen on.
        port: the TCP port (0: any free port; :attr:`HttpServer.port` tells which).
        kind: which server.
        loop: which event loop (``auto``, the default: uvloop, a dependency, 6% more pull
            queries per second than asyncio's under granian in bench/pull_qps.py).
        log_level: the servers' own loggers' level (``warning``: errors and warnings only).
        graceful_timeout_s: how long a stop waits for open requests (push queries) before
            cancelling them.
        backlog: the listening socket's queue of connections not yet accepted.
        uvicorn_http: uvicorn's HTTP/1.1 parser (``auto``, ``h11``, ``httptools``).
        header_read_timeout_s: how long a client may take to send a request's headers before
            the connection is closed (granian; half-open requests must not pile up).
        max_connections: connections open at once (granian's backpressure: a connection holds its
            permit from accept to close, so the next one waits in the listen ``backlog``, and
            beyond that the kernel turns new ones away; uvicorn answers 503 beyond it, counting
            connections and requests in flight; hypercorn has no such limit).
        max_header_bytes: the largest header block an HTTP/2 client may send (granian).
        tls_cert_file: a PEM certificate (chain): serve HTTPS (None: cleartext).
        tls_key_file: the PEM private key of ``tls_cert_file``.
        tls_key_password: the key's password, when it is encrypted.
    """

    host: str = "127.0.0.1"
    port: int = 8088
    kind: HttpServerKind = DEFAULT_KIND
    loop: LoopKind = LoopKind.AUTO
    log_level: str = "warning"
    graceful_timeout_s: float = 5.0
    backlog: int = 2048
    uvicorn_http: str = "auto"
    header_read_timeout_s: float = 5.0
    max_connections: int = 2048
    max_header_bytes: int = 64 * 1024
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_key_password: str | None = None

    def __post_init__(self) -> None:
        if self.tls_key_password is not None and self.kind is HttpServerKind.GRANIAN:
            # granian 2.8 aborts the process (a Rust panic) on every encrypted PEM key format
            # OpenSSL writes (PKCS#8 v1 and v2, traditional): refused here, before it starts.
            raise UnsupportedTls(
                "granian cannot read an encrypted key (ssl.key.password): serve with "
                f"{ENV_VAR}=hypercorn or {ENV_VAR}=uvicorn, or use an unencrypted key file "
                "readable only by the server's user"
            )


class UnknownHttpServer(ValueError):
    """``HEADWATER_HTTP_SERVER`` names no known server."""


class UnsupportedTls(ValueError):
    """The chosen HTTP server cannot serve TLS as configured."""


def settings_from_env(environ: Mapping[str, str], *, host: str, port: int) -> HttpServerSettings:
    """The settings for ``host:port`` with the server, loop and parser the environment chooses
    (``HEADWATER_HTTP_SERVER``, ``HEADWATER_HTTP_LOOP``, ``HEADWATER_UVICORN_HTTP``; unset or
    empty: the defaults).

    Raises:
        UnknownHttpServer: a variable names no known choice.
    """
    uvicorn_http = _choice(environ, UVICORN_HTTP_ENV_VAR, ("auto", "h11", "httptools"))
    return HttpServerSettings(
        host=host,
        port=port,
        kind=HttpServerKind(_choice(environ, ENV_VAR, tuple(HttpServerKind), DEFAULT_KIND)),
        loop=LoopKind(_choice(environ, LOOP_ENV_VAR, tuple(LoopKind), LoopKind.AUTO)),
        uvicorn_http=uvicorn_http,
    )


def _choice(
    environ: Mapping[str, str], name: str, known: tuple[str, ...], default: str = "auto"
) -> str:
    value = environ.get(name, "").strip().lower()
    if not value:
        return default
    if value not in known:
        raise UnknownHttpServer(f"{name}={value!r}: expected one of {', '.join(known)}")
    return value


class HttpServer:
    """An ASGI app served on one port until :meth:`stop` or SIGINT/SIGTERM.

    ``run`` blocks (call it in the main thread for the signals, or in any thread and stop it
    with :meth:`stop`); :attr:`started` is set once the socket listens.
    """

    def __init__(self, app: ASGIApp, settings: HttpServerSettings) -> None:
        self.app = app
        self.settings = settings
        self.started = threading.Event()
        self.port = settings.port  # with port 0: the bound port once started (not granian's)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._stop_requested = threading.Event()
        self._on_stopping: OnStopping | None = None

    def run(
        self, on_started: OnStarted | None = None, on_stopping: OnStopping | None = None
    ) -> None:
        """Serve until stopped; returns after the graceful shutdown (signals are not re-raised).

        Args:
            on_started: called (on the event loop) once the socket listens.
            on_stopping: called (on the event loop) when a stop begins, before the server waits
                up to ``graceful_timeout_s`` for open requests.
        """
        self._on_stopping = on_stopping
        with asyncio.Runner(loop_factory=_loop_factory(self.settings.loop)) as runner:
            runner.run(self._main(on_started))

    def stop(self) -> None:
        """Ask a running server to stop (from any thread); ``run`` then returns."""
        self._stop_requested.set()
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stopping.set)

    async def _main(self, on_started: OnStarted | None) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        if self._stop_requested.is_set():
            return

        def ready() -> None:
            self.started.set()
            if on_started is not None:
                on_started()

        serve = _BACKENDS[self.settings.kind]
        with _stop_on_signals(self._loop, self._stopping):
            await serve(self, ready)

    async def until_stopping(self) -> None:
        """Returns once a stop is requested, after calling ``on_stopping``."""
        assert self._stopping is not None, "the server is not running"
        await self._stopping.wait()
        if self._on_stopping is not None:
            try:
                self._on_stopping()
            except Exception:  # the server stops all the same
                log.exception("on_stopping failed")

    @property
    def stop_requested(self) -> bool:
        """Whether a stop was requested."""
        return self._stop_requested.is_set() or bool(self._stopping and self._stopping.is_set())


class PortInUse(RuntimeError):
    """The HTTP port is taken (granian would only panic with a Rust backtrace)."""


def check_port(host: str, port: int) -> None:
    """Bind ``host:port`` once, as the server will (address reuse on, so a port in TIME_WAIT
    passes), and let it go.

    Raises:
        PortInUse: something listens there already.
    """
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise PortInUse(f"cannot listen on {host} port {port}: {exc.strerror}") from None
            raise PortInUse(
                f"port {port} on {host} is already in use (another server listens "
                "there): stop it, or choose another port with --port"
            ) from None


def serve_app(
    app: ASGIApp,
    settings: HttpServerSettings,
    *,
    on_started: OnStarted | None = None,
    on_stopping: OnStopping | None = None,
) -> None:
    """Serve ``app`` until SIGINT/SIGTERM (see :meth:`HttpServer.run`)."""
    HttpServer(app, settings).run(on_started, on_stopping)


def _loop_factory(kind: LoopKind) -> Callable[[], asyncio.AbstractEventLoop] | None:
    if kind is LoopKind.ASYNCIO:
        return None
    try:
        import uvloop
    except ImportError:
        if kind is LoopKind.UVLOOP:
            raise
        return None
    return uvloop.new_event_loop


@contextmanager
def _stop_on_signals(loop: asyncio.AbstractEventLoop, stopping: asyncio.Event) -> Iterator[None]:
    """SIGINT/SIGTERM set ``stopping`` (main thread only); the previous handlers come back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stops = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.getsignal(sig) for sig in stops}
    for sig in stops:
        loop.add_signal_handler(sig, stopping.set)
    try:
        yield
    finally:
        for sig in stops:
            loop.remove_signal_handler(sig)
            signal.signal(sig, previous[sig])


# -- the servers ---------------------------------------------------------------------------------


async def _hypercorn(server: HttpServer, ready: OnStarted) -> None:
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    settings = server.settings
    config = Config()
    config.bind = [f"{settings.host}:{settings.port}"]
    config.loglevel = settings.log_level.upper()
    config.accesslog = None
    config.graceful_timeout = settings.graceful_timeout_s
    config.backlog = settings.backlog
    # hypercorn closes a connection after 1,000 requests by default; ksqlDB's clients send every
    # request of a session over one HTTP/2 connection (and uvicorn has no such limit).
    config.keep_alive_max_requests = 2**62
    if settings.tls_cert_file is not None:
        config.certfile, config.keyfile = settings.tls_cert_file, settings.tls_key_file
        config.keyfile_password = settings.tls_key_password
    # Bound here so that port 0 tells its port; hypercorn serves a duplicate of the descriptor
    # (and closes that one), this function closes its own.
    sockets = config.create_sockets()
    bound = sockets.secure_sockets or sockets.insecure_sockets
    server.port = bound[0].getsockname()[1]
    config.bind = [f"fd://{os.dup(sock.fileno())}" for sock in bound]

    async def until_stopped() -> None:
        # hypercorn awaits the trigger once every socket is listening: the moment we are ready.
        ready()
        await server.until_stopping()

    try:
        await serve(server.app, config, shutdown_trigger=until_stopped)  # type: ignore[arg-type]
    except Exception:
        if not server.stop_requested:
            raise
        # hypercorn 0.18 lets a connection's error escape when it closes an HTTP/2 stream
        # still answering at shutdown (its task group is already shutting down): the stop
        # itself went through, so it is logged, not raised.
        log.warning("hypercorn: errors while closing connections at shutdown", exc_info=True)
    finally:
        for sock in bound:
            sock.close()


async def _uvicorn(server: HttpServer, ready: OnStarted) -> None:
    import uvicorn

    settings = server.settings
    config = uvicorn.Config(
        server.app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        backlog=settings.backlog,
        http=settings.uvicorn_http,
        limit_concurrency=settings.max_connections,
        timeout_graceful_shutdown=max(1, round(settings.graceful_timeout_s)),
        lifespan="on",
        ssl_certfile=settings.tls_cert_file,
        ssl_keyfile=settings.tls_key_file,
        ssl_keyfile_password=settings.tls_key_password,
    )
    instance = _uvicorn_class()(config)

    async def watch() -> None:
        while not instance.started:
            if instance.should_exit:
                return
            await asyncio.sleep(0.01)
        if instance.servers and instance.servers[0].sockets:
            server.port = instance.servers[0].sockets[0].getsockname()[1]
        ready()
        await server.until_stopping()
        instance.should_exit = True

    watcher = asyncio.create_task(watch())
    try:
        await instance.serve()
    finally:
        watcher.cancel()


def _uvicorn_class() -> type[Any]:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, its signal handling left to :class:`HttpServer` (uvicorn would
        re-raise SIGTERM/SIGINT once shut down, killing the process before the caller's cleanup)."""

        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return Server


async def _granian(server: HttpServer, ready: OnStarted) -> None:
    from granian.constants import HTTPModes, Interfaces
    from granian.http import HTTP1Settings, HTTP2Settings
    from granian.log import LogLevels
    from granian.server.embed import Server

    settings = server.settings
    instance = Server(
        server.app,
        address=settings.host,
        port=settings.port,
        interface=Interfaces.ASGI,
        http=HTTPModes.auto,
        backlog=settings.backlog,
        log_level=LogLevels(settings.log_level),
        log_access=False,
        websockets=False,
        backpressure=settings.max_connections,
        http1_settings=HTTP1Settings(
            header_read_timeout=round(settings.header_read_timeout_s * 1000)
        ),
        http2_settings=HTTP2Settings(max_headers_size=settings.max_header_bytes),
        **_granian_tls(settings),
    )
    instance.workers_kill_timeout = max(1, round(settings.graceful_timeout_s))
    logging.getLogger("_granian").addFilter(_not_experimental)  # after granian's own log setup

    def on_startup() -> None:
        # granian calls its startup hooks before its socket accepts connections (under uvloop
        # a client could be refused in between): ready once a connection goes through
        asyncio.get_running_loop().create_task(_when_listening(settings.host, settings.port, ready))

    instance.on_startup(on_startup)

    async def watch() -> None:
        await server.until_stopping()
        instance.stop()  # type: ignore[no-untyped-call]  # granian leaves Server.stop unannotated

    watcher = asyncio.create_task(watch())
    try:
        await instance.serve()
    except TimeoutError:
        if not server.stop_requested:
            raise
        # granian 2.8's embedded server raises when a worker outlives workers_kill_timeout.
        log.warning(
            "granian: requests still open after %s s at shutdown", settings.graceful_timeout_s
        )
    finally:
        watcher.cancel()


def _granian_tls(settings: HttpServerSettings) -> dict[str, Any]:
    """granian's TLS arguments (none for cleartext)."""
    if settings.tls_cert_file is None:
        return {}
    from pathlib import Path

    return {
        "ssl_cert": Path(settings.tls_cert_file),
        "ssl_key": Path(settings.tls_key_file) if settings.tls_key_file else None,
        "ssl_key_password": settings.tls_key_password,
    }


async def _when_listening(host: str, port: int, ready: OnStarted, timeout_s: float = 10.0) -> None:
    """Call ``ready`` once ``host:port`` accepts a TCP connection (or after ``timeout_s``)."""
    address = "127.0.0.1" if host in ("", "0.0.0.0") else "::1" if host == "::" else host
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        try:
            _, writer = await asyncio.open_connection(address, port)
        except OSError:
            await asyncio.sleep(0.005)
            continue
        writer.close()
        break
    ready()


def _not_experimental(record: logging.LogRecord) -> bool:
    """Drops granian's "Embedded server is experimental!" warning, logged at every start (the
    choice is documented here and in the README; it would read as a fault in a server's log)."""
    return "experimental" not in record.getMessage()


_BACKENDS: dict[HttpServerKind, Callable[[HttpServer, OnStarted], Coroutine[Any, Any, None]]] = {
    HttpServerKind.HYPERCORN: _hypercorn,
    HttpServerKind.UVICORN: _uvicorn,
    HttpServerKind.GRANIAN: _granian,
}
