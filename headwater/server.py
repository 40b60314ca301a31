"""``headwater server``: one node: the HTTP API (``headwater.gateway``) over one Kafka.

Does I/O. With no ``bootstrap.servers`` the node starts the embedded broker itself, durable in
``<state dir>/broker`` (in memory with ``--in-memory``), and stops it on exit. It locks its state
folder (two servers on one folder would corrupt each other's stores), creates the command topic if
missing, loads the catalog (snapshot + tail), starts materializing tables, and serves until told to
stop (Ctrl-C or SIGTERM); then it stops the runner (writing a final catalog snapshot), closes the
stores and stops the broker it started.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
import shutil
import ssl
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

from starlette.applications import Starlette

from headwater.cluster.settings import ClusterSettings
from headwater.cluster.tls import PeerTls, client_context
from headwater.config import ConfigError, ServerConfig, as_text, defaults, heartbeat_settings
from headwater.engine.formats import schema_registry
from headwater.engine.formats.own_registry import OwnSchemaRegistry
from headwater.engine.formats.schema_registry import SchemaRegistry
from headwater.engine.functions.extensions import load_folder
from headwater.engine.functions.user_index import set_call_limit
from headwater.engine.spark.java import java_problem
from headwater.engine.spark.settings import EngineSettings
from headwater.gateway.app import create_app
from headwater.gateway.auth import Authentication, BadCredentialsFile, load_credentials
from headwater.gateway.schema_registry_api import PREFIX as REGISTRY_PREFIX
from headwater.gateway.services import Limits, PullSettings, Services
from headwater.gateway.startup import open_services
from headwater.http_server import check_port, serve_app, settings_from_env
from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import KafkaSettings
from headwater.localnode import NODE_FILE
from headwater.registry.log import DEFAULT_TOPIC as DEFAULT_REGISTRY_TOPIC
from headwater.registry.log import RegistryLog
from headwater.registry.operations import Limits as RegistryLimits
from headwater.sqlparse_ext.limits import ParseLimits

log = logging.getLogger(__name__)


class StateDirInUse(RuntimeError):
    """Another server holds the state folder."""


def default_state_dir() -> Path:
    """Where a node keeps its state by default: ``$XDG_DATA_HOME/headwater/node``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "headwater" / "node"


@dataclass(frozen=True, slots=True)
class Node:
    """A running node, as ``on_ready`` sees it."""

    url: str
    bootstrap_servers: str
    state_dir: Path | None
    embedded_broker: str | None
    services: Services

    def serving(self, service_id: str) -> str:
        """Where it serves, its Kafka and its state, in one line (``serving http://... (...)``)."""
        kafka = (
            f"embedded broker {self.bootstrap_servers}, {self.embedded_broker}"
            if self.embedded_broker
            else f"Kafka {self.bootstrap_servers}"
        )
        where = f"state in {self.state_dir}" if self.state_dir else "in memory"
        return f"serving {self.url} ({kafka}; service id {service_id}; {where})"


@contextmanager
def _announced(path: Path, node: Node, service_id: str) -> Iterator[None]:
    """Keep ``path`` (``localnode.NODE_FILE``) saying where this node serves while it does, for
    the shell that finds it running; removed when it stops (a crash leaves a file whose pid is
    gone, which readers ignore)."""
    said = {"pid": os.getpid(), "url": node.url, "serving": node.serving(service_id)}
    scratch = path.with_name(f".{path.name}.{os.getpid()}")
    scratch.write_text(json.dumps(said), encoding="utf-8")
    scratch.replace(path)
    try:
        yield
    finally:
        try:
            if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
                path.unlink()
        except (OSError, ValueError):
            pass


@contextmanager
def _locked(state_dir: Path) -> Iterator[None]:
    state_dir.mkdir(parents=True, exist_ok=True)
    handle: IO[str] = open(state_dir / "server.lock", "a+", encoding="utf-8")  # noqa: SIM115
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            raise StateDirInUse(
                f"the state folder {state_dir} is in use by another headwater server (pid {holder});"
                " stop it or choose another --state-dir"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        handle.close()


def limits_of(config: ServerConfig) -> Limits:
    """The gateway's request bounds from the server's settings."""
    return Limits(
        max_body_bytes=config.max_body_bytes,
        catch_up_timeout_s=config.command_timeout_ms / 1000,
        pull_max_concurrent=config.pull_max_concurrent_requests,
        pull_queue_size=config.pull_queue_size,
        parse=ParseLimits(
            max_statement_chars=config.statement_max_chars,
            max_tokens=config.statement_max_tokens,
            max_depth=config.statement_max_depth,
            max_statements=config.request_max_statements,
        ),
        scan_max_concurrent=config.pull_scan_max_concurrent,
        body_read_timeout_s=config.body_read_timeout_ms / 1000,
        persistent_query_limit=config.persistent_active_limit,
    )


def pull_settings_of(config: ServerConfig) -> PullSettings:
    """The server-wide pull-query settings."""
    return PullSettings(
        table_scan_enabled=config.pull_table_scan_enabled,
        range_scan_enabled=config.pull_range_scan_enabled,
        limit_clause_enabled=config.pull_limit_clause_enabled,
        max_allowed_offset_lag=config.pull_max_allowed_offset_lag,
        timeout_ms=config.pull_timeout_ms,
        scan_max_rows=config.pull_scan_max_rows,
    )


def cluster_settings_of(config: ServerConfig) -> ClusterSettings:
    """The server's cluster settings (every server is a cluster of one or more)."""
    return ClusterSettings(
        self_id=config.advertised,
        tags=dict(config.client_tags),
        num_standby_replicas=config.standby_replicas,
        rack_tags=config.rack_tags,
        heartbeat=heartbeat_settings(config),
        lag_report_interval_ms=config.lag_report_interval_ms,
        auth_secret=config.auth_secret,
        peers=config.peers,
        tls=PeerTls(config.tls_ca_file, config.tls_cert_file) if config.tls else None,
    )


def authentication_of(config: ServerConfig) -> Authentication | None:
    """How clients authenticate (None: ``authentication.method=NONE``), the credentials file read.

    Raises:
        ConfigError: the credentials file cannot be read or has a malformed line.
    """
    if config.auth_method != "BASIC" or not config.auth_credentials_file:
        return None
    try:
        users = load_credentials(Path(config.auth_credentials_file))
    except BadCredentialsFile as exc:
        raise ConfigError(f"authentication.basic.credentials.file: {exc}") from None
    if not users:
        log.warning(
            "%s lists no user: every request but the open paths will be refused",
            config.auth_credentials_file,
        )
    return Authentication(config.auth_realm, users, config.auth_roles, config.auth_skip_paths)


def check_tls(config: ServerConfig) -> None:
    """Load the listener's certificate and key, and the peers' CA file, once before anything
    starts, so that a wrong path or password is a clear error instead of a server's traceback.

    Raises:
        ConfigError: a file cannot be read, is not PEM, or the key does not fit or decrypt.
    """
    if not config.tls or config.tls_cert_file is None:
        return
    try:
        server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        # never "" for a password: OpenSSL would prompt on the terminal for an encrypted key
        server.load_cert_chain(
            config.tls_cert_file, config.tls_key_file, config.tls_key_password or ""
        )
        client_context(PeerTls(config.tls_ca_file, config.tls_cert_file))
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"TLS files (ssl.certificate.location, ssl.key.location, ssl.ca.location): {exc}"
        ) from None


def _load_extensions(config: ServerConfig, state_dir: Path) -> None:
    """Loads the Python functions of ``ksql.extension.dir`` (default ``<state dir>/ext``); a
    module that fails is logged and left out, the server starts with the rest."""
    if not config.udfs_enabled:
        return
    set_call_limit(config.function_call_timeout_ms)
    folder = Path(config.extension_dir) if config.extension_dir else state_dir / "ext"
    loaded = load_folder(folder)
    if loaded.functions:
        log.info(
            "Python functions from %s: %s",
            folder,
            ", ".join(sorted(loaded.functions)),
        )


def engine_settings_of(
    config: ServerConfig,
    state_dir: Path,
    service_id: str,
    registry_env: Mapping[str, str] | None = None,
) -> EngineSettings:
    """How the server runs persistent queries (checkpoints and Spark's log under the state dir)."""
    root = Path(config.checkpoint_root) if config.checkpoint_root else state_dir / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    (state_dir / "logs").mkdir(parents=True, exist_ok=True)
    return EngineSettings(
        master=config.spark_master,
        checkpoint_root=str(root),
        log_file=str(state_dir / "logs" / "spark.log"),
        log_format=config.log_format,
        trigger_interval_ms=config.trigger_interval_ms,
        start_at_startup=config.engine_start == "startup",
        max_records_per_batch=config.max_records_per_batch,
        jvm_options=config.engine_jvm_options,
        buffering=config.cache_max_bytes_buffering > 0,
        max_queries=config.persistent_active_limit,
        processing_log_topic=f"{service_id}ksql_processing_log",
        # Executors elsewhere (a standalone master) find the schema registry as local ones do.
        extra=tuple(
            (f"spark.executorEnv.{name}", value)
            for name, value in (
                registry_env
                if registry_env is not None
                else {schema_registry.URL_ENV: config.schema_registry_url or ""}
            ).items()
            if value
        ),
    )


@dataclass(frozen=True, slots=True)
class _Registry:
    """The schema registry a server uses, serves (``log``), and hands to its Spark processes
    through the environment (``env``)."""

    client: SchemaRegistry | None = None
    log: RegistryLog | None = None
    env: Mapping[str, str] = field(default_factory=dict)


def _schema_registry(config: ServerConfig, settings: KafkaSettings, stack: ExitStack) -> _Registry:
    """The registry of ``ksql.schema.registry.url``; unset, this server's own (served under
    /registry, kept in its topic) unless ``headwater.schema.registry.enabled`` is false. Made this
    process's registry, and handed to the processes it starts (Spark's) through the environment:
    they reach the server's own over HTTP with a token that stands for a user."""
    env: dict[str, str] = {}
    if config.schema_registry_url or not config.schema_registry_enabled:
        client = schema_registry.from_url(config.schema_registry_url)
        if config.schema_registry_url:
            env[schema_registry.URL_ENV] = config.schema_registry_url
        found = _Registry(client, None, env)
    else:
        log_ = RegistryLog(settings, config.schema_registry_topic or DEFAULT_REGISTRY_TOPIC)
        log_.start()
        stack.callback(log_.stop)
        if not log_.wait_until_current(30.0):
            log.warning("the schema registry's topic was not read to its end within 30 s")
        host = config.host if config.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        env[schema_registry.URL_ENV] = f"{config.scheme}://{host}:{config.port}{REGISTRY_PREFIX}"
        env[schema_registry.TOKEN_ENV] = secrets.token_hex(16)
        if config.tls_ca_file:
            env[schema_registry.CA_ENV] = config.tls_ca_file
        found = _Registry(OwnSchemaRegistry(log_, registry_limits_of(config)), log_, env)
    schema_registry.use(found.client)
    for name in (schema_registry.URL_ENV, schema_registry.TOKEN_ENV, schema_registry.CA_ENV):
        os.environ.pop(name, None)
    os.environ.update(env)
    return found


def registry_limits_of(config: ServerConfig) -> RegistryLimits:
    """What one client may make the server's own schema registry hold."""
    return RegistryLimits(
        max_schema_bytes=config.schema_registry_max_schema_bytes,
        max_versions_per_subject=config.schema_registry_max_versions,
        max_schemas=config.schema_registry_max_schemas,
        max_total_bytes=config.schema_registry_max_total_bytes,
    )


def _end_push_queries(app: Starlette) -> None:
    """Ends the running push queries, so that their responses finish (their clients see the
    stream end) instead of being cut when the HTTP server's graceful wait runs out."""
    registry = app.state.push_queries
    for query_id in registry.running():
        registry.close(query_id)


def _accepting(services: Services) -> None:
    """The socket listens: peers' heartbeats reach this server from now on (``ClusterAgent``)."""
    if services.cluster is not None:
        services.cluster.accepting()


def serve(
    config: ServerConfig,
    *,
    in_memory: bool = False,
    on_ready: Callable[[Node], None] | None = None,
) -> None:
    """Run a node until stopped.

    Args:
        config: the node's settings (``state_dir`` None: :func:`default_state_dir`).
        in_memory: keep nothing: the embedded broker in memory, stores in memory, no snapshots.
        on_ready: called once the catalog is loaded, before the HTTP server starts listening.

    The HTTP server is ``HEADWATER_HTTP_SERVER``'s (default granian: HTTP/1.1 and HTTP/2
    cleartext on one port; see :func:`headwater.http_server.settings_from_env`). It stops
    gracefully on SIGINT/SIGTERM: the running push queries end, open requests get 5 s.

    Raises:
        UnknownHttpServer: an ``HEADWATER_HTTP_*`` variable names no known choice.
        UnsupportedTls: ``ssl.key.password`` with granian, which cannot read encrypted keys.
        PortInUse: the HTTP port is taken.
        ConfigError: the credentials file or a TLS file cannot be read.
        StateDirInUse: another server holds the state folder.
        BrokerError: the embedded broker did not start.
        KafkaEdgeError: Kafka is unreachable.
    """
    no_spark = java_problem(os.environ) if config.persistent_queries_enabled else None
    if no_spark is not None:
        log.warning(
            "persistent queries and push queries with state are refused on this server "
            "(they run on Spark): %s. Everything else works.",
            no_spark,
        )
    http = replace(
        settings_from_env(os.environ, host=config.host, port=config.port),
        tls_cert_file=config.tls_cert_file,
        tls_key_file=config.tls_key_file,
        tls_key_password=config.tls_key_password,
    )
    authentication = authentication_of(config)
    check_tls(config)
    check_port(config.host, config.port)  # before anything starts: one clear line, not a panic
    with ExitStack() as stack:
        state_dir: Path | None = None
        if in_memory:
            scratch = Path(tempfile.mkdtemp(prefix="headwater-node-"))
            stack.callback(shutil.rmtree, scratch, True)
        else:
            state_dir = Path(config.state_dir) if config.state_dir else default_state_dir()
            stack.enter_context(_locked(state_dir))
        _load_extensions(config, state_dir or scratch)
        bootstrap = config.bootstrap_servers
        embedded: str | None = None
        settings = KafkaSettings(bootstrap) if bootstrap else None
        if settings is None:
            broker = EmbeddedBroker(None if state_dir is None else state_dir / "broker", port=0)
            stack.enter_context(broker)
            settings = broker.settings()
            bootstrap = broker.bootstrap_servers
            embedded = broker.describe()
        assert bootstrap is not None
        registry = _schema_registry(config, settings, stack)
        services = stack.enter_context(
            open_services(
                settings,
                config.service_id,
                state_dir,
                stores_dir=state_dir if state_dir is not None else scratch,
                stores_in_memory=in_memory,
                limits=limits_of(config),
                pull=pull_settings_of(config),
                advertised=config.advertised,
                cluster=cluster_settings_of(config),
                engine=engine_settings_of(
                    config, state_dir or scratch, config.service_id, registry.env
                )
                if config.persistent_queries_enabled and no_spark is None
                else None,
                registry=registry.client,
                schema_registry=registry.log,
                schema_registry_limits=registry_limits_of(config),
                properties=as_text(config),
                defaults=defaults(),
                no_spark=no_spark,
            )
        )
        node = Node(
            f"{config.scheme}://{config.host}:{config.port}",
            bootstrap,
            state_dir,
            embedded,
            services,
        )
        if on_ready is not None:
            on_ready(node)
        if state_dir is not None:
            stack.enter_context(_announced(state_dir / NODE_FILE, node, config.service_id))
        app = create_app(
            services,
            authentication=authentication,
            local_token=registry.env.get(schema_registry.TOKEN_ENV),
        )
        serve_app(
            app,
            http,
            on_started=lambda: _accepting(services),
            on_stopping=lambda: _end_push_queries(app),
        )
