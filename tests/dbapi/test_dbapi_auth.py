"""The DB-API driver's login: connect(user=, password=, verify=), and 401 as AuthorizationError."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx
import pytest

from headwater import dbapi

GOOD = "Basic " + base64.b64encode(b"fred:pw").decode()


def guarded(request: httpx.Request) -> httpx.Response:
    if request.headers.get("authorization") != GOOD:
        return httpx.Response(
            401,
            headers={"WWW-Authenticate": 'Basic realm="r"'},
            json={"@type": "generic_error", "error_code": 40100, "message": "Unauthorized"},
        )
    return httpx.Response(
        200, json=[{"@type": "streams", "statementText": "SHOW STREAMS;", "streams": []}]
    )


def test_user_and_password_are_sent() -> None:
    with dbapi.connect(
        "http://k:8088", user="fred", password="pw", transport=httpx.MockTransport(guarded)
    ) as connection:
        cursor = connection.cursor()
        cursor.execute("SHOW STREAMS")
        assert cursor.fetchall() == []


@pytest.mark.parametrize("login", [{}, {"user": "fred", "password": "no"}, {"user": "fred"}])
def test_a_401_is_an_authorization_error_with_the_servers_message(login: dict[str, str]) -> None:
    connection = dbapi.connect("http://k:8088", transport=httpx.MockTransport(guarded), **login)  # type: ignore[arg-type]
    with connection, pytest.raises(dbapi.AuthorizationError) as caught:
        connection.cursor().execute("SHOW STREAMS")
    error = caught.value
    assert isinstance(error, dbapi.OperationalError) and isinstance(error, dbapi.DatabaseError)
    assert error.error_code == 40100 and error.message == "Unauthorized"


def test_bad_login_arguments(tmp_path: Path) -> None:
    with pytest.raises(dbapi.InterfaceError, match="either auth or user"):
        dbapi.connect("http://k:8088", auth=("a", "b"), user="fred")
    with pytest.raises(dbapi.InterfaceError, match="needs a user"):
        dbapi.connect("http://k:8088", password="pw")
    with pytest.raises(dbapi.InterfaceError, match="CA file"):
        dbapi.connect("https://k:8443", verify=str(tmp_path / "missing.pem"))
