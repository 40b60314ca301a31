"""Client authentication: ksqlDB's ``authentication.method=BASIC``, as a pure ASGI middleware.

The decisions are pure functions over plain values (:func:`parse_credentials`,
:func:`check_basic`, :func:`skipped`); :class:`BasicAuthMiddleware` applies them to each request
and does no I/O besides reading an internal request's body to check its signature. The
credentials file is read once, by the entry point (:func:`load_credentials`).

The credentials file (``authentication.basic.credentials.file``) holds one user a line, as
ksqlDB's JAAS property file does: ``user: password[,role...]`` (``user:password`` works too),
``#`` starts a comment. A password is plain text or ``sha256:<hex>``, the SHA-256 of the
password's UTF-8 bytes (``printf %s 'secret' | sha256sum``). A password cannot contain a comma;
Jetty's ``OBF:``, ``MD5:`` and ``CRYPT:`` forms (which ksqlDB's JAAS realm reads) are refused
rather than taken as plain passwords.

Every request must carry ``Authorization: Basic ...`` of a listed user (with one of
``authentication.roles`` unless that is ``*``), except:

- the paths ksqlDB leaves open (``/healthcheck``, ``/v1/metadata``, ``/v1/metadata/id``) and those
  of ``authentication.skip.paths`` (``*`` matches any characters, as ksqlDB's wildcards do);
- internal requests between the servers of the service, which carry no user but a valid
  ``X-Headwater-Auth`` signature with the cluster's secret (``cluster.auth``): the middleware
  checks it over the body before the request goes on.

Anything else gets 401 with ``WWW-Authenticate: Basic realm="<authentication.realm>"`` and
ksqlDB's error body (``error_code`` 40100, ``"Unauthorized"``); a known user without an allowed
role gets 403 (40300).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import MappingProxyType

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from headwater.cluster import auth as internal
from headwater.cluster.agent import wall_clock_ms

__all__ = [
    "ALWAYS_OPEN",
    "LOCAL_TOKEN_HEADER",
    "Authentication",
    "BadCredentialsFile",
    "BasicAuthMiddleware",
    "Credential",
    "Outcome",
    "check_basic",
    "load_credentials",
    "parse_credentials",
    "skipped",
]

ALWAYS_OPEN = ("/healthcheck", "/v1/metadata", "/v1/metadata/id")
"""Paths ksqlDB never authenticates (its ``AuthenticationPluginHandler``)."""

_SHA256 = re.compile(r"sha256:([0-9a-fA-F]{64})")
_JETTY = re.compile(r"(OBF|MD5|CRYPT):", re.IGNORECASE)  # Jetty's forms, which ksqlDB's realm reads


class BadCredentialsFile(ValueError):
    """A credentials file line that is not ``user: password[,role...]``."""


@dataclass(frozen=True, slots=True)
class Credential:
    """One user of the credentials file.

    Attributes:
        password: the plain password, or None when only its hash is stored.
        sha256: the password's SHA-256 hex digest (lowercase), or None for a plain one.
        roles: the user's roles.
    """

    password: str | None
    sha256: str | None
    roles: tuple[str, ...] = ()

    def matches(self, given: str) -> bool:
        """Whether ``given`` is the password (compared in constant time)."""
        if self.sha256 is not None:
            digest = hashlib.sha256(given.encode("utf-8")).hexdigest()
            return hmac.compare_digest(digest, self.sha256)
        return hmac.compare_digest(given.encode("utf-8"), (self.password or "").encode("utf-8"))


@dataclass(frozen=True, slots=True)
class Authentication:
    """How clients authenticate (``authentication.*`` settings, the file read).

    Attributes:
        realm: ``authentication.realm``, named in ``WWW-Authenticate``.
        users: the credentials file's users, by name.
        roles: ``authentication.roles``: a user needs one of them (``*``: any user).
        skip_paths: ``authentication.skip.paths``: paths (``*`` wildcards) open to anyone.
    """

    realm: str
    users: Mapping[str, Credential] = field(default_factory=lambda: MappingProxyType({}))
    roles: tuple[str, ...] = ("*",)
    skip_paths: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "users", MappingProxyType(dict(self.users)))


class Outcome(Enum):
    """What :func:`check_basic` decided."""

    OK = "ok"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"


def parse_credentials(text: str, origin: str = "credentials file") -> dict[str, Credential]:
    """The users of a credentials file's text.

    Raises:
        BadCredentialsFile: a line is not ``user: password[,role...]``, naming its number.
    """
    users: dict[str, Credential] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        user, sep, rest = line.partition(":")
        user = user.strip()
        password, *roles = [part.strip() for part in rest.split(",")]
        if not sep or not user or not password:
            raise BadCredentialsFile(f"{origin}, line {number}: expected user: password[,role...]")
        if _JETTY.match(password):
            raise BadCredentialsFile(
                f"{origin}, line {number}: {password.split(':')[0]}: "
                "passwords are not read (use plain or sha256:<hex>)"
            )
        hashed = _SHA256.fullmatch(password)
        users[user] = Credential(
            None if hashed else password,
            hashed.group(1).lower() if hashed else None,
            tuple(role for role in roles if role),
        )
    return users


def load_credentials(path: Path) -> dict[str, Credential]:
    """The users of the credentials file at ``path``.

    Raises:
        BadCredentialsFile: the file cannot be read, or a line is malformed.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadCredentialsFile(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_credentials(text, str(path))


def _wildcard(pattern: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")))


def skipped(path: str, skip_paths: Iterable[str]) -> bool:
    """Whether ``path`` is open without authentication (ksqlDB's fixed list, then the setting)."""
    return path in ALWAYS_OPEN or any(_wildcard(p).fullmatch(path) for p in skip_paths)


def _basic_user(header: str | None) -> tuple[str, str] | None:
    """(user, password) of an ``Authorization: Basic`` value (None: absent or malformed)."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    try:
        text = decoded.decode("utf-8")
    except UnicodeDecodeError:
        text = decoded.decode("latin-1")
    user, sep, password = text.partition(":")
    return (user, password) if sep else None


_NOBODY = Credential(None, hashlib.sha256(b"\0").hexdigest())


def check_basic(settings: Authentication, header: str | None) -> tuple[Outcome, str | None]:
    """Decide an ``Authorization`` header value: (outcome, user name when known)."""
    given = _basic_user(header)
    if given is None:
        return Outcome.UNAUTHORIZED, None
    user, password = given
    credential = settings.users.get(user)
    matched = (credential or _NOBODY).matches(password)  # as slow for an unknown user
    if credential is None or not matched:
        return Outcome.UNAUTHORIZED, None
    if "*" not in settings.roles and not set(settings.roles) & set(credential.roles):
        return Outcome.FORBIDDEN, user
    return Outcome.OK, user


def _error(
    status: int, code: int, message: str, headers: list[tuple[bytes, bytes]]
) -> tuple[Message, Message]:
    body = orjson.dumps(
        {
            "@type": "generic_error",
            "error_code": code,
            "message": message,
            "statementText": "",
            "entities": [],
        }
    )
    start: Message = {
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *headers,
        ],
    }
    return start, {"type": "http.response.body", "body": body}


#: The header of requests from the processes a server starts (``BasicAuthMiddleware``).
LOCAL_TOKEN_HEADER = "X-Headwater-Local-Token"
#: The paths such requests may reach: the schema registry, which Spark's processes read and write.
LOCAL_TOKEN_PATHS = ("/registry/",)


class BasicAuthMiddleware:
    """Refuses requests without a listed user's ``Authorization: Basic`` (see the module doc).

    Args:
        app: the application behind.
        settings: the users, realm, roles and open paths.
        secret: returns the cluster's secret (None: internal requests are not accepted unsigned
            by a user), asked per request since the server learns it at start.
        max_body_bytes: the largest internal request body read to check its signature.
        clock_ms: this server's clock, for the signature's timestamp.
        local_token: the token this server hands to the processes it starts (Spark's), which
            they send in ``X-Headwater-Local-Token`` to reach its schema registry
            (:data:`LOCAL_TOKEN_PATHS`) without a user; None: no such requests.
    """

    def __init__(
        self,
        app: ASGIApp,
        settings: Authentication,
        secret: Callable[[], str | None] = lambda: None,
        max_body_bytes: int = 1 << 20,
        clock_ms: Callable[[], int] = wall_clock_ms,
        local_token: str | None = None,
    ) -> None:
        self.app = app
        self.local_token = local_token.encode() if local_token else None
        self.settings = settings
        self.secret = secret
        self.max_body_bytes = max_body_bytes
        self.clock_ms = clock_ms
        realm = settings.realm.replace("\\", "\\\\").replace('"', '\\"')
        self._challenge = (b"www-authenticate", f'Basic realm="{realm}"'.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or skipped(
            scope["path"], self.settings.skip_paths
        ):
            await self.app(scope, receive, send)
            return
        headers = {name.lower(): value for name, value in scope["headers"]}
        authorization = headers.get(b"authorization")
        if scope["type"] == "websocket":  # none is served; never one without a user either
            decoded = authorization.decode("latin-1") if authorization is not None else None
            if check_basic(self.settings, decoded)[0] is Outcome.OK:
                await self.app(scope, receive, send)
            else:
                await send({"type": "websocket.close", "code": 1008})
            return
        token = headers.get(LOCAL_TOKEN_HEADER.lower().encode())
        if (
            token is not None
            and self.local_token is not None
            and scope["path"].startswith(LOCAL_TOKEN_PATHS)
            and hmac.compare_digest(token, self.local_token)
        ):
            await self.app(scope, receive, send)
            return
        signature = headers.get(internal.HEADER.lower().encode())
        if authorization is None and signature is not None and self.secret() is not None:
            await self._internal(scope, receive, send, signature.decode("latin-1"))
            return
        outcome, user = check_basic(
            self.settings, authorization.decode("latin-1") if authorization is not None else None
        )
        if outcome is Outcome.OK:
            scope.setdefault("state", {})["user"] = user
            await self.app(scope, receive, send)
        elif outcome is Outcome.FORBIDDEN:
            await self._refuse(
                send,
                403,
                40300,
                f"Forbidden: {user} has none of the roles {', '.join(self.settings.roles)}",
            )
        else:
            await self._refuse(send, 401, 40100, "Unauthorized", [self._challenge])

    async def _internal(self, scope: Scope, receive: Receive, send: Send, signature: str) -> None:
        """A request from another server: let it through if its signature is valid."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await self._refuse(send, 413, 41300, "the request body is too large")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        secret = self.secret()
        verdict = internal.verify(
            secret or "", signature, self.clock_ms(), scope["method"], scope["path"], body
        )
        if secret is None or not verdict.ok:
            await self._refuse(
                send, 401, 40100, f"Unauthorized: {verdict.reason}", [self._challenge]
            )
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(
        self,
        send: Send,
        status: int,
        code: int,
        message: str,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        start, body = _error(status, code, message, headers or [])
        await send(start)
        await send(body)
