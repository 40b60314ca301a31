"""The server's settings: one table of known keys, read from a properties file and ``--set``. Pure.

ksqlDB reads a Java properties file (``ksql-server.properties``); so do we, with ksqlDB's names where
ksqlDB has the setting. Every key must be in :data:`SETTINGS`: a misspelt key is an error naming the
closest known one, never silently ignored. Values are checked and converted here, once, at the entry
point, and the frozen :class:`ServerConfig` is passed down.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from headwater.cluster.liveness import HeartbeatSettings
from headwater.engine.spark.settings import JVM_OPTIONS


class ConfigError(ValueError):
    """A setting that is unknown, or whose value does not fit."""


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError("expected true or false")


def _int(low: int, high: int = 2**63 - 1) -> Callable[[str], int]:
    def convert(text: str) -> int:
        value = int(text.strip())
        if not low <= value <= high:
            raise ValueError(f"expected an integer in [{low}, {high}]")
        return value

    return convert


def _text(text: str) -> str:
    return text.strip()


def _optional_text(text: str) -> str | None:
    return text.strip() or None


def _offset_reset(text: str) -> str | None:
    value = text.strip().lower()
    if value and value not in ("earliest", "latest"):
        raise ValueError(
            "expected earliest or latest ('none' is not valid within KSQL), or "
            "nothing: streams from their end, tables from their beginning"
        )
    return value or None


_FORMATS = ("KAFKA", "JSON", "JSON_SR", "AVRO", "PROTOBUF", "PROTOBUF_NOSR", "DELIMITED", "NONE")


def _format_name(text: str) -> str:
    value = text.strip().upper()
    if value not in _FORMATS:
        raise ValueError(f"expected one of {', '.join(_FORMATS)}")
    return value


def _optional_format_name(text: str) -> str | None:
    return _format_name(text) if text.strip() else None


ENGINE_STARTS = ("first-query", "startup")


def _log_format(text: str) -> str:
    value = text.strip().lower()
    if value not in ("text", "json"):
        raise ValueError("expected text or json")
    return value


def _engine_start(text: str) -> str:
    value = text.strip().lower()
    if value not in ENGINE_STARTS:
        raise ValueError(f"expected {' or '.join(ENGINE_STARTS)}")
    return value


_SERVICE_ID = re.compile(r"[A-Za-z0-9._-]+")


def _service_id(text: str) -> str:
    value = text.strip()
    if not _SERVICE_ID.fullmatch(value):
        raise ValueError("use letters, digits, '.', '_' and '-' (it names Kafka topics)")
    return value


def _list(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


def _auth_method(text: str) -> str:
    value = text.strip().upper()
    if value not in ("NONE", "BASIC"):
        raise ValueError("expected NONE or BASIC")
    return value


def _optional_listener(text: str) -> tuple[str, int] | None:
    return _listener(text) if text.strip() else None


def _listener(text: str) -> tuple[str, int]:
    match = re.fullmatch(r"(?:https?://)?\[?([^\]/]+?)\]?:(\d+)/?", text.strip())
    if match is None:
        raise ValueError("expected http://HOST:PORT or https://HOST:PORT")
    port = int(match.group(2))
    if not 0 <= port <= 65535:
        raise ValueError("a port is 0..65535")
    return match.group(1), port


@dataclass(frozen=True, slots=True)
class Setting:
    """One known key: its field in ServerConfig, converter, and what it means."""

    key: str
    field: str
    convert: Callable[[str], Any]
    doc: str


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "bootstrap.servers",
        "bootstrap_servers",
        _optional_text,
        "Kafka cluster host:port[,...]; unset: start the embedded broker in the state dir.",
    ),
    Setting(
        "ksql.service.id",
        "service_id",
        _service_id,
        "Servers with the same service id share one catalog (and command topic).",
    ),
    Setting(
        "listeners",
        "listener",
        _listener,
        "Where the HTTP API listens (http://HOST:PORT, or https://HOST:PORT with ssl.*).",
    ),
    Setting(
        "state.dir",
        "state_dir",
        _optional_text,
        "Catalog snapshots, table stores and the embedded broker's data.",
    ),
    Setting(
        "ksql.extension.dir",
        "extension_dir",
        _optional_text,
        "The folder of Python function modules (headwater.functions) loaded at start-up; "
        "unset: <state.dir>/ext.",
    ),
    Setting(
        "ksql.udfs.enabled",
        "udfs_enabled",
        _bool,
        "Load the Python functions of ksql.extension.dir (false: none are loaded).",
    ),
    Setting(
        "headwater.functions.call.timeout.ms",
        "function_call_timeout_ms",
        _int(0),
        "How long one call of a Python function may run in a persistent query (Spark's "
        "workers) before it is stopped: NULL for that record, logged; 0: no limit.",
    ),
    Setting(
        "ksql.query.pull.table.scan.enabled",
        "pull_table_scan_enabled",
        _bool,
        "Allow pull queries without a key condition to scan whole tables.",
    ),
    Setting(
        "ksql.query.pull.range.scan.enabled",
        "pull_range_scan_enabled",
        _bool,
        "Answer a range condition on a STRING or BYTES key (WHERE K < 'x') with a range scan "
        "in key order; false: such a query needs table scans.",
    ),
    Setting(
        "ksql.query.pull.limit.clause.enabled",
        "pull_limit_clause_enabled",
        _bool,
        "Allow LIMIT in pull queries; false: a pull query with one is refused.",
    ),
    Setting(
        "ksql.query.pull.max.allowed.offset.lag",
        "pull_max_allowed_offset_lag",
        _int(0),
        "Server-wide bound on how many records a pull answer may lag behind its topic.",
    ),
    Setting(
        "ksql.query.pull.max.concurrent.requests",
        "pull_max_concurrent_requests",
        _int(1),
        "Pull queries executed at once; more wait in a bounded queue.",
    ),
    Setting(
        "ksql.query.pull.queue.size",
        "pull_queue_size",
        _int(0),
        "Pull queries allowed to wait; beyond it the answer is 429 with Retry-After.",
    ),
    Setting(
        "ksql.server.request.max.bytes",
        "max_body_bytes",
        _int(1024),
        "Largest request body accepted (larger ones get 413).",
    ),
    Setting(
        "ksql.server.command.response.timeout.ms",
        "command_timeout_ms",
        _int(1),
        "How long a statement waits for the command log (and catch-up) before 50301.",
    ),
    Setting(
        "ksql.server.request.body.timeout.ms",
        "body_read_timeout_ms",
        _int(1),
        "How long a request body may take to arrive; slower ones get 408.",
    ),
    Setting(
        "ksql.statement.max.chars",
        "statement_max_chars",
        _int(0),
        "Longest statement accepted, in characters (0: no bound); longer ones get 400.",
    ),
    Setting(
        "ksql.statement.max.tokens",
        "statement_max_tokens",
        _int(0),
        "Most tokens one statement may have (0: no bound); more get 400 before parsing.",
    ),
    Setting(
        "ksql.statement.max.depth",
        "statement_max_depth",
        _int(0),
        "Deepest nesting of a statement's expressions (0: no bound); deeper gets 400.",
    ),
    Setting(
        "ksql.request.max.statements",
        "request_max_statements",
        _int(0),
        "Most statements one request may carry (0: no bound).",
    ),
    Setting(
        "ksql.query.pull.timeout.ms",
        "pull_timeout_ms",
        _int(1),
        "Time budget of one pull query; a request may set less. Beyond it the query stops with 408.",
    ),
    Setting(
        "ksql.query.pull.table.scan.max.rows",
        "pull_scan_max_rows",
        _int(0),
        "Most rows a table scan may return (0: no bound); a request may set less.",
    ),
    Setting(
        "ksql.query.pull.table.scan.max.concurrent",
        "pull_scan_max_concurrent",
        _int(1),
        "Table and stream scans run at once; more wait in the pull queue (429 when it is full).",
    ),
    Setting(
        "ksql.advertised.listener",
        "advertised_listener",
        _optional_listener,
        "How peers reach this server (http://HOST:PORT); unset: the listener's address.",
    ),
    Setting(
        "cluster.peers",
        "peers",
        _list,
        "Comma-separated host:port of servers to contact before the members topic names them.",
    ),
    Setting(
        "num.standby.replicas",
        "standby_replicas",
        _int(0, 16),
        "Standby replicas per table partition, on other servers.",
    ),
    Setting(
        "rack.aware.assignment.tags",
        "rack_tags",
        _list,
        "Comma-separated tag names standbys are spread over (KIP-708).",
    ),
    Setting(
        "ksql.heartbeat.send.interval.ms",
        "heartbeat_send_interval_ms",
        _int(1),
        "How often a server sends a heartbeat to each peer.",
    ),
    Setting(
        "ksql.heartbeat.check.interval.ms",
        "heartbeat_check_interval_ms",
        _int(1),
        "How often a server decides which peers are alive.",
    ),
    Setting(
        "ksql.heartbeat.window.ms",
        "heartbeat_window_ms",
        _int(1),
        "How far back received heartbeats count.",
    ),
    Setting(
        "ksql.heartbeat.missed.threshold.ms",
        "heartbeat_missed_threshold",
        _int(2),
        "Missed heartbeats in a row after which a peer is down (a count, ksqlDB's name).",
    ),
    Setting(
        "ksql.heartbeat.received.threshold.ms",
        "heartbeat_received_threshold",
        _int(1),
        "Heartbeats in a row after which a down peer is up again (a count, ksqlDB's name).",
    ),
    Setting(
        "ksql.lag.reporting.send.interval.ms",
        "lag_report_interval_ms",
        _int(1),
        "How often a server posts its store lags to its peers.",
    ),
    Setting(
        "cluster.auth.secret",
        "auth_secret",
        _optional_text,
        "Secret signing heartbeats, lag reports and forwarded queries; unset: the service's "
        "servers generate one and share it through Kafka (internal traffic is signed either way).",
    ),
    Setting(
        "authentication.method",
        "auth_method",
        _auth_method,
        "NONE, or BASIC: clients must send HTTP Basic credentials of a user of "
        "authentication.basic.credentials.file.",
    ),
    Setting(
        "authentication.basic.credentials.file",
        "auth_credentials_file",
        _optional_text,
        "The users for BASIC: lines 'user: password[,role...]', the password plain or "
        "sha256:<hex>.",
    ),
    Setting(
        "authentication.realm",
        "auth_realm",
        _text,
        "The realm a 401 names in its WWW-Authenticate header.",
    ),
    Setting(
        "authentication.roles",
        "auth_roles",
        _list,
        "Comma-separated roles a user needs one of (*: any listed user).",
    ),
    Setting(
        "authentication.skip.paths",
        "auth_skip_paths",
        _list,
        "Comma-separated paths open without credentials (* wildcards); /healthcheck is "
        "always open.",
    ),
    Setting(
        "ssl.certificate.location",
        "tls_cert_file",
        _optional_text,
        "PEM certificate (chain) of the listener; set: the API and internal traffic use TLS.",
    ),
    Setting(
        "ssl.key.location",
        "tls_key_file",
        _optional_text,
        "PEM private key of ssl.certificate.location.",
    ),
    Setting(
        "ssl.key.password",
        "tls_key_password",
        _optional_text,
        "Password of an encrypted ssl.key.location.",
    ),
    Setting(
        "ssl.ca.location",
        "tls_ca_file",
        _optional_text,
        "PEM CA certificates peers' certificates are verified with; unset: the system's CAs "
        "and ssl.certificate.location itself (one self-signed certificate for all servers).",
    ),
    Setting(
        "spark.master",
        "spark_master",
        _text,
        "Where persistent queries run: local[*] (in the server's Spark), or spark://HOST:PORT.",
    ),
    Setting(
        "ksql.query.persistent.enabled",
        "persistent_queries_enabled",
        _bool,
        "Run persistent queries on this server (false: it only serves and submits).",
    ),
    Setting(
        "ksql.query.persistent.active.limit",
        "persistent_active_limit",
        _int(1, 2**31 - 1),
        "Most persistent queries (CREATE ... AS SELECT, INSERT INTO ... SELECT) the service "
        "may hold; one more is refused (400) until a TERMINATE frees a slot. Each is a Python "
        "process of ~120-140 MB on the server that runs them all: 20 run on 2 cores in ~4 GB "
        "(ksqlDB's default, 2147483647, is for threads, not processes).",
    ),
    Setting(
        "headwater.query.checkpoint.root",
        "checkpoint_root",
        _optional_text,
        "Query checkpoints; unset: <state.dir>/checkpoints (a cluster needs a shared path).",
    ),
    Setting(
        "headwater.log.format",
        "log_format",
        _log_format,
        "How the server and its Spark process write their logs: text (for people) or json (one "
        "JSON object a line, with query id, partition and statement id where known, for log "
        "shippers). --log-format sets it too.",
    ),
    Setting(
        "headwater.engine.start",
        "engine_start",
        _engine_start,
        "When this server starts Spark: first-query (when it has a persistent query to run: a "
        "node without one never pays for a JVM, ~0.8 GB) or startup (at once, in the "
        "background, warmed up: the first CREATE ... AS SELECT then starts in seconds, not "
        "~20 s). The local node the shell starts uses startup.",
    ),
    Setting(
        "headwater.engine.jvm.options",
        "engine_jvm_options",
        _text,
        "The options of Spark's JVM (its driver, and a standalone master's executors). The "
        "default compiles with C1 only and collects with the serial collector: that JVM moves "
        "batches between Python processes, and the C2 compiler and G1's threads spent more CPU "
        "than its work. Empty: the JVM's own defaults.",
    ),
    Setting(
        "headwater.query.trigger.interval.ms",
        "trigger_interval_ms",
        _int(0),
        "How often an idle persistent query looks for new records (0: continuously).",
    ),
    Setting(
        "headwater.query.max.records.per.batch",
        "max_records_per_batch",
        _int(1),
        "Admission control: the most records one micro-batch of a query reads. A query that "
        "catches up pays Spark's cost per micro-batch once per this many records.",
    ),
    Setting(
        "ksql.schema.registry.url",
        "schema_registry_url",
        _optional_text,
        "The schema registry of the AVRO, PROTOBUF and JSON_SR formats (Confluent's REST "
        "API); unset: this server's own (served under /registry), unless "
        "headwater.schema.registry.enabled is false (then those formats are refused).",
    ),
    Setting(
        "headwater.schema.registry.enabled",
        "schema_registry_enabled",
        _bool,
        "Serve Confluent's schema registry API under /registry, its schemas kept in the "
        "headwater.schema.registry.topic topic.",
    ),
    Setting(
        "headwater.schema.registry.topic",
        "schema_registry_topic",
        _optional_text,
        "The compacted topic of this service's schema registry (Confluent's name: _schemas, so "
        "one registry's topic can be read by the other).",
    ),
    Setting(
        "headwater.schema.registry.max.schema.bytes",
        "schema_registry_max_schema_bytes",
        _int(1),
        "The largest schema text the registry takes (larger ones: 422).",
    ),
    Setting(
        "headwater.schema.registry.max.versions.per.subject",
        "schema_registry_max_versions",
        _int(1),
        "The most versions a subject may have (soft-deleted ones included).",
    ),
    Setting(
        "headwater.schema.registry.max.schemas",
        "schema_registry_max_schemas",
        _int(1),
        "The most distinct schemas (ids) the registry holds.",
    ),
    Setting(
        "headwater.schema.registry.max.total.bytes",
        "schema_registry_max_total_bytes",
        _int(1),
        "The most bytes of schema text the registry holds (every server keeps all of it in "
        "memory).",
    ),
    Setting(
        "ksql.query.push.v2.enabled",
        "push_v2_enabled",
        _bool,
        "Name push queries that ksqlDB would serve as scalable push queries (one stream written "
        "by one persistent query, read from its end) SCALABLE_PUSH_QUERY_..., as ksqlDB does; "
        "headwater serves both kinds from the source's topic.",
    ),
    Setting(
        "ksql.persistence.default.format.key",
        "default_key_format",
        _format_name,
        "The key format of a CREATE STREAM/TABLE whose WITH clause names none.",
    ),
    Setting(
        "ksql.persistence.default.format.value",
        "default_value_format",
        _optional_format_name,
        "The value format of a CREATE STREAM/TABLE whose WITH clause names none (unset: it "
        "must name one).",
    ),
    Setting(
        "ksql.streams.auto.offset.reset",
        "auto_offset_reset",
        _offset_reset,
        "Where queries start reading when a statement does not SET 'auto.offset.reset': "
        "earliest or latest; unset: persistent queries read streams from their end and tables "
        "from their beginning, push queries from the end (also as auto.offset.reset).",
    ),
    Setting(
        "ksql.streams.cache.max.bytes.buffering",
        "cache_max_bytes_buffering",
        _int(0),
        "0: an aggregate writes one update per input record (ksqlDB's tests); more: one "
        "update per key per micro-batch (ksqlDB's default, 10485760).",
    ),
)
"""Every key a properties file or ``--set`` may use."""

_BY_KEY = {s.key: s for s in SETTINGS}
_ALIASES = {"auto.offset.reset": "ksql.streams.auto.offset.reset"}
"""Keys ksqlDB also accepts without their ``ksql.streams.`` prefix."""

HIDDEN = frozenset({"cluster.auth.secret", "ssl.key.password"})
"""Keys whose values :func:`as_text` never shows (SHOW PROPERTIES lists the settings)."""

TAG_PREFIX = "client.tag."
"""``client.tag.<name>=<value>``: this server's tags (any name), for rack-aware standbys."""


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """A server's settings, checked. Field defaults are the documented defaults."""

    bootstrap_servers: str | None = None
    service_id: str = "default_"
    listener: tuple[str, int] = ("127.0.0.1", 8088)
    state_dir: str | None = None
    extension_dir: str | None = None
    udfs_enabled: bool = True
    function_call_timeout_ms: int = 10_000
    pull_table_scan_enabled: bool = True
    pull_range_scan_enabled: bool = True
    pull_limit_clause_enabled: bool = True
    pull_max_allowed_offset_lag: int = 2**63 - 1
    pull_max_concurrent_requests: int = 8
    pull_queue_size: int = 256
    max_body_bytes: int = 1 << 20
    command_timeout_ms: int = 10_000
    body_read_timeout_ms: int = 30_000
    statement_max_chars: int = 100_000
    statement_max_tokens: int = 20_000
    statement_max_depth: int = 200
    request_max_statements: int = 1_000
    pull_timeout_ms: int = 60_000
    pull_scan_max_rows: int = 0
    pull_scan_max_concurrent: int = 2
    advertised_listener: tuple[str, int] | None = None
    peers: tuple[str, ...] = ()
    standby_replicas: int = 1
    rack_tags: tuple[str, ...] = ()
    client_tags: tuple[tuple[str, str], ...] = ()
    heartbeat_send_interval_ms: int = 100
    heartbeat_check_interval_ms: int = 200
    heartbeat_window_ms: int = 2000
    heartbeat_missed_threshold: int = 3
    heartbeat_received_threshold: int = 2
    lag_report_interval_ms: int = 200
    auth_secret: str | None = None
    auth_method: str = "NONE"
    auth_credentials_file: str | None = None
    auth_realm: str = "headwater"
    auth_roles: tuple[str, ...] = ("*",)
    auth_skip_paths: tuple[str, ...] = ()
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_key_password: str | None = None
    tls_ca_file: str | None = None
    spark_master: str = "local[*]"
    persistent_queries_enabled: bool = True
    persistent_active_limit: int = 20
    checkpoint_root: str | None = None
    engine_start: str = "first-query"
    engine_jvm_options: str = JVM_OPTIONS
    log_format: str = "text"
    trigger_interval_ms: int = 100
    max_records_per_batch: int = 200_000
    cache_max_bytes_buffering: int = 10_485_760
    auto_offset_reset: str | None = None
    push_v2_enabled: bool = False
    default_key_format: str = "KAFKA"
    default_value_format: str | None = None
    schema_registry_url: str | None = None
    schema_registry_enabled: bool = True
    schema_registry_topic: str | None = "_schemas"
    schema_registry_max_schema_bytes: int = 1_000_000
    schema_registry_max_versions: int = 1_000
    schema_registry_max_schemas: int = 100_000
    schema_registry_max_total_bytes: int = 256_000_000

    @property
    def host(self) -> str:
        """The address the HTTP API listens on."""
        return self.listener[0]

    @property
    def port(self) -> int:
        """The HTTP port."""
        return self.listener[1]

    @property
    def tls(self) -> bool:
        """Whether the listener (and so internal traffic) uses TLS."""
        return self.tls_cert_file is not None

    @property
    def scheme(self) -> str:
        """``https`` with TLS, else ``http``."""
        return "https" if self.tls else "http"

    @property
    def advertised(self) -> str:
        """``host:port`` where peers reach this server."""
        host, port = self.advertised_listener or self.listener
        return f"{host}:{port}"


_FIELDS = {f.name for f in fields(ServerConfig)}
assert all(s.field in _FIELDS for s in SETTINGS), "every setting names a ServerConfig field"


def defaults() -> dict[str, str]:
    """Each key with its default as text (for ``--help`` and the README)."""
    return as_text(ServerConfig())


def as_text(config: ServerConfig) -> dict[str, str]:
    """Each key with its value in ``config`` as text, as a properties file writes it (a set
    :data:`HIDDEN` one as ``[hidden]``)."""
    shown: dict[str, str] = {}
    for setting in SETTINGS:
        value = getattr(config, setting.field)
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], int):
            value = f"{config.scheme}://{value[0]}:{value[1]}"
        elif isinstance(value, tuple):
            value = ",".join(value)
        elif isinstance(value, bool):
            value = str(value).lower()
        shown[setting.key] = (
            "" if value is None else "[hidden]" if setting.key in HIDDEN else str(value)
        )
    return shown


def parse_properties(text: str, origin: str = "properties") -> dict[str, str]:
    """A Java properties text as a dict: ``key=value`` or ``key: value`` lines, ``#``/``!`` comments,
    a trailing backslash continues a line. Escapes other than line continuation are not supported.

    Raises:
        ConfigError: For a line with no key.
    """
    result: dict[str, str] = {}
    logical: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip() if pending else raw.strip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if not pending:
            start = number
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        logical.append((start, pending + line))
        pending = ""
    if pending:
        logical.append((start, pending))
    for number, line in logical:
        match = re.match(r"([^=:\s]+)\s*(?:[=:]\s*|\s+|$)(.*)$", line.strip())
        if match is None:
            raise ConfigError(f"{origin}, line {number}: expected key=value, found {line!r}")
        result[match.group(1)] = match.group(2).strip()
    return result


def load(
    file: Path | None = None,
    overrides: Iterable[str] = (),
    **explicit: Any,
) -> ServerConfig:
    """The config from a properties file, then ``--set key=value`` items, then explicit options.

    Args:
        file: a properties file, or None.
        overrides: ``key=value`` texts (``--set``), applied after the file.
        explicit: ServerConfig fields given as command-line options (None values are ignored);
            these win over the file and ``--set``.

    Raises:
        ConfigError: For an unknown key (naming the closest known one), a malformed item, or a value
            that does not fit (naming the key and what was expected).
    """
    items: list[tuple[str, str, str]] = []
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read config file {file}: {exc.strerror or exc}") from None
        items += [(k, v, str(file)) for k, v in parse_properties(text, str(file)).items()]
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected key=value")
        items.append((key.strip(), value, "--set"))
    values: dict[str, Any] = {}
    tags: dict[str, str] = {}
    https = False
    for key, value, origin in items:
        if key in ("listeners", "ksql.advertised.listener"):
            https = https or value.strip().lower().startswith("https://")
        if key.startswith(TAG_PREFIX) and len(key) > len(TAG_PREFIX):
            tags[key[len(TAG_PREFIX) :]] = value.strip()
            continue
        setting = _BY_KEY.get(_ALIASES.get(key, key))
        if setting is None:
            raise ConfigError(f"{origin}: unknown setting {key!r}{_did_you_mean(key)}")
        try:
            values[setting.field] = setting.convert(value)
        except ValueError as exc:
            raise ConfigError(f"{origin}: {key}={value!r}: {exc}") from None
    if tags:
        values["client_tags"] = tuple(sorted(tags.items()))
    values.update({k: v for k, v in explicit.items() if v is not None})
    unknown = set(values) - _FIELDS
    if unknown:
        raise ConfigError(f"not settings: {', '.join(sorted(unknown))}")
    config = ServerConfig(**values)
    if https and not config.tls:
        raise ConfigError(
            "an https:// listener needs ssl.certificate.location and ssl.key.location"
        )
    if config.tls != (config.tls_key_file is not None):
        raise ConfigError("ssl.certificate.location and ssl.key.location go together")
    if config.auth_method == "BASIC" and not config.auth_credentials_file:
        raise ConfigError("authentication.method=BASIC needs authentication.basic.credentials.file")
    try:
        heartbeat_settings(config)
    except ValueError as exc:
        raise ConfigError(f"heartbeat settings: {exc}") from None
    return config


def heartbeat_settings(config: ServerConfig) -> HeartbeatSettings:
    """The KLIP-12 heartbeat settings of ``config``.

    Raises:
        ValueError: the five settings do not fit together (see ``HeartbeatSettings``).
    """
    return HeartbeatSettings(
        send_interval_ms=config.heartbeat_send_interval_ms,
        check_interval_ms=config.heartbeat_check_interval_ms,
        window_ms=config.heartbeat_window_ms,
        missed_threshold=config.heartbeat_missed_threshold,
        received_threshold=config.heartbeat_received_threshold,
    )


def _did_you_mean(key: str) -> str:
    close = difflib.get_close_matches(key, list(_BY_KEY), n=1, cutoff=0.6)
    return (
        f" (did you mean {close[0]!r}?)" if close else " (see `headwater server --help-settings`)"
    )


def as_mapping(config: ServerConfig) -> Mapping[str, Any]:
    """The config as key -> value, with the settings' keys (for ``GET /status``)."""
    return {s.key: getattr(config, s.field) for s in SETTINGS}
