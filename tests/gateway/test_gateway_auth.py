"""gateway.auth: the credentials file, the Basic header check and the middleware (in-process)."""

from __future__ import annotations

import base64
import hashlib
import json
import warnings
from collections.abc import Iterator

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from headwater.cluster import auth as internal
from headwater.gateway.auth import (
    LOCAL_TOKEN_HEADER,
    Authentication,
    BadCredentialsFile,
    BasicAuthMiddleware,
    Credential,
    Outcome,
    check_basic,
    parse_credentials,
    skipped,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette wants httpx2 for its TestClient
    from starlette.testclient import TestClient

SECRET = "cluster-secret"
NOW_MS = 1_700_000_000_000
FILE = f"""
# users of the test
fred: letmein,user,admin
alice:sha256:{hashlib.sha256(b"wonder land").hexdigest().upper()} , user
bob:plain:with:colons
"""


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_the_credentials_file_is_parsed() -> None:
    users = parse_credentials(FILE)
    assert users["fred"] == Credential("letmein", None, ("user", "admin"))
    assert users["alice"].password is None and users["alice"].roles == ("user",)
    assert users["alice"].matches("wonder land") and not users["alice"].matches("wonderland")
    assert users["bob"].matches("plain:with:colons") and users["bob"].roles == ()


@pytest.mark.parametrize(
    "line",
    ["fred", "fred:", ": pw", "fred: ,admin", "fred: MD5:164c88b3", "fred: OBF:1v2j1uum1xtv"],
)
def test_malformed_lines_name_their_number(line: str) -> None:
    with pytest.raises(BadCredentialsFile, match="line 2"):
        parse_credentials(f"# ok\n{line}\n")


SETTINGS = Authentication("test-realm", parse_credentials(FILE))


@pytest.mark.parametrize(
    ("header", "outcome"),
    [
        (basic("fred", "letmein"), Outcome.OK),
        (basic("alice", "wonder land"), Outcome.OK),
        ("basic " + base64.b64encode(b"bob:plain:with:colons").decode(), Outcome.OK),
        (basic("fred", "letmeout"), Outcome.UNAUTHORIZED),
        (basic("mallory", "letmein"), Outcome.UNAUTHORIZED),
        (basic("fred", ""), Outcome.UNAUTHORIZED),
        ("Bearer abc", Outcome.UNAUTHORIZED),
        ("Basic !!!", Outcome.UNAUTHORIZED),
        ("Basic " + base64.b64encode(b"no-colon").decode(), Outcome.UNAUTHORIZED),
        (None, Outcome.UNAUTHORIZED),
    ],
)
def test_basic_header_check(header: str | None, outcome: Outcome) -> None:
    assert check_basic(SETTINGS, header)[0] is outcome


def test_roles_restrict_users() -> None:
    admins = Authentication("r", parse_credentials(FILE), roles=("admin",))
    assert check_basic(admins, basic("fred", "letmein")) == (Outcome.OK, "fred")
    assert check_basic(admins, basic("alice", "wonder land")) == (Outcome.FORBIDDEN, "alice")


def test_open_paths() -> None:
    assert skipped("/healthcheck", ()) and skipped("/v1/metadata/id", ())
    assert not skipped("/info", ()) and not skipped("/healthcheck/x", ())
    assert skipped("/info", ("/info",)) and skipped("/status/a/b", ("/status/*",))
    assert not skipped("/statusx", ("/status/*",))


async def echo(request: Request) -> Response:
    return JSONResponse(
        {"body": (await request.body()).decode(), "user": getattr(request.state, "user", None)}
    )


@pytest.fixture
def client() -> Iterator[TestClient]:
    app = Starlette(
        routes=[
            Route(p, echo, methods=["GET", "POST"])
            for p in ("/info", "/healthcheck", "/lag", "/registry/subjects")
        ],
        middleware=[
            Middleware(
                BasicAuthMiddleware,
                settings=SETTINGS,
                secret=lambda: SECRET,
                clock_ms=lambda: NOW_MS,
                max_body_bytes=1000,
                local_token="t0ken",
            )
        ],
    )
    with TestClient(app) as test_client:
        yield test_client


def test_the_servers_own_processes_reach_its_registry_with_its_token_and_nothing_else(
    client: TestClient,
) -> None:
    """Spark's processes read and write the server's schema registry with the token the server
    gave them; the token opens nothing else, and a wrong one nothing at all."""
    token = {LOCAL_TOKEN_HEADER: "t0ken"}
    assert client.get("/registry/subjects", headers=token).status_code == 200
    assert client.get("/registry/subjects").status_code == 401
    assert (
        client.get("/registry/subjects", headers={LOCAL_TOKEN_HEADER: "t0kem"}).status_code == 401
    )
    assert client.get("/info", headers=token).status_code == 401


def test_requests_without_credentials_get_ksqldb_401(client: TestClient) -> None:
    for headers in ({}, {"Authorization": basic("fred", "nope")}):
        answer = client.get("/info", headers=headers)
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"] == 'Basic realm="test-realm"'
        body = answer.json()
        assert (body["@type"], body["error_code"], body["message"]) == (
            "generic_error",
            40100,
            "Unauthorized",
        )


def test_users_and_open_paths_pass(client: TestClient) -> None:
    answer = client.post("/info", content=b"x", headers={"Authorization": basic("fred", "letmein")})
    assert answer.status_code == 200 and answer.json() == {"body": "x", "user": "fred"}
    assert client.get("/healthcheck").status_code == 200


def test_signed_internal_requests_pass_without_a_user(client: TestClient) -> None:
    body = json.dumps({"lag": 1}).encode()
    good = internal.sign(SECRET, NOW_MS, "POST", "/lag", body)
    answer = client.post("/lag", content=body, headers={internal.HEADER: good})
    assert answer.status_code == 200 and answer.json()["body"] == body.decode()
    forged = internal.sign("guess", NOW_MS, "POST", "/lag", body)
    for header in (forged, internal.sign(SECRET, NOW_MS, "POST", "/info", body), "t=1,sig=x"):
        refused = client.post("/lag", content=body, headers={internal.HEADER: header})
        assert refused.status_code == 401 and refused.json()["error_code"] == 40100
    too_big = b"x" * 2000
    signed = internal.sign(SECRET, NOW_MS, "POST", "/lag", too_big)
    assert (
        client.post("/lag", content=too_big, headers={internal.HEADER: signed}).status_code == 413
    )


def test_websockets_need_a_user_too(client: TestClient) -> None:
    from starlette.websockets import WebSocketDisconnect

    with pytest.raises(WebSocketDisconnect) as closed, client.websocket_connect("/info"):
        pass
    assert closed.value.code == 1008


def test_a_server_asking_for_credentials_counts_as_answering() -> None:
    import http.server
    import threading

    from headwater.localnode import answering

    class Guarded(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="r"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Guarded)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert answering(f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
