"""How a server reaches its peers when the listener uses TLS: the URL scheme and the client's
certificate checks. Reads the CA files (I/O) when a context is made; the rest is pure.

Every server of a service listens the same way, so a server with a TLS listener talks TLS to its
peers too, and verifies their certificates against ``ssl.ca.location`` when set, else the
system's CAs plus its own certificate (``ssl.certificate.location``), so that one self-signed
certificate shared by the servers (or a certificate signed by the system's CAs) needs nothing
more. A peer's certificate must name the host of its advertised listener.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PeerTls:
    """TLS towards peers.

    Attributes:
        ca_file: PEM CA certificates to verify peers with (``ssl.ca.location``), or None.
        own_cert_file: this server's certificate (``ssl.certificate.location``), trusted too
            when ``ca_file`` is None.
    """

    ca_file: str | None = None
    own_cert_file: str | None = None


def scheme(tls: PeerTls | None) -> str:
    """``https`` towards peers with TLS, else ``http``."""
    return "http" if tls is None else "https"


def peer_url(tls: PeerTls | None, peer: str, path: str) -> str:
    """The URL of ``path`` on ``peer`` (``host:port``)."""
    return f"{scheme(tls)}://{peer}{path}"


def client_context(tls: PeerTls | None) -> ssl.SSLContext | None:
    """An SSL context verifying peers (None without TLS).

    Raises:
        OSError, ssl.SSLError: a CA file cannot be read or is not PEM.
    """
    if tls is None:
        return None
    if tls.ca_file is not None:
        context = ssl.create_default_context(cafile=tls.ca_file)
    else:
        context = ssl.create_default_context()
        if tls.own_cert_file is not None:
            context.load_verify_locations(cafile=tls.own_cert_file)
    # a peer's own (leaf) certificate may be the trust anchor, as with a shared self-signed one
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    return context
