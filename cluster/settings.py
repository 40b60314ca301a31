"""A server's cluster settings, and the names of the service's internal topics. Pure.

Read once at the entry point (``headwater.config``) and passed down. ksqlDB's names where it has
the setting: ``ksql.heartbeat.*``, ``num.standby.replicas``, ``rack.aware.assignment.tags``,
``client.tag.<name>``; headwater's own: ``lag.report.interval.ms``, ``cluster.auth.secret``,
``cluster.peers``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from headwater.cluster.liveness import DEFAULT_SETTINGS, HeartbeatSettings
from headwater.cluster.tls import PeerTls


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """How one server takes part in its cluster.

    Attributes:
        self_id: ``host:port`` where peers reach this server's HTTP API.
        tags: this server's ``client.tag.<name>`` values (rack awareness).
        num_standby_replicas: standbys per table partition (on distinct servers).
        rack_tags: ``rack.aware.assignment.tags``: tag names standbys are spread over, in order.
        heartbeat: the five KLIP-12 heartbeat settings.
        lag_report_interval_ms: how often this server posts its store lags to its peers.
        auth_secret: the secret internal requests are signed with: ``cluster.auth.secret``, or
            None until the service's generated one is agreed on (``cluster._secret``).
        peers: ``cluster.peers``: servers to contact before the members topic names them.
        request_timeout_ms: timeout of one internal HTTP request (heartbeat, lag, forwarded query).
        tls: how peers are reached over TLS (None: cleartext HTTP), see ``cluster.tls``.
    """

    self_id: str
    tags: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    num_standby_replicas: int = 1
    rack_tags: tuple[str, ...] = ()
    heartbeat: HeartbeatSettings = DEFAULT_SETTINGS
    lag_report_interval_ms: int = 200
    auth_secret: str | None = None
    peers: tuple[str, ...] = ()
    request_timeout_ms: int = 2000
    tls: PeerTls | None = None

    def __post_init__(self) -> None:
        if ":" not in self.self_id:
            raise ValueError(f"self_id must be host:port, got {self.self_id!r}")
        if self.num_standby_replicas < 0:
            raise ValueError("num_standby_replicas must be >= 0")
        if self.lag_report_interval_ms <= 0:
            raise ValueError("lag_report_interval_ms must be positive")
        object.__setattr__(self, "tags", MappingProxyType(dict(self.tags)))


def members_topic(service_id: str) -> str:
    """The topic where the servers of a service announce themselves."""
    return f"_headwater-{service_id}-members"


def secret_topic(service_id: str) -> str:
    """The topic holding the service's generated internal-auth secret (``cluster._secret``)."""
    return f"_headwater-{service_id}-secret"


def control_topic(service_id: str) -> str:
    """The topic of controller claims and assignment decisions (the source of truth)."""
    return f"_headwater-{service_id}-control"
