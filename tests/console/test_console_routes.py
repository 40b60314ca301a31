"""The web console's routes without a browser: the page and its files, their content types, the
allow-list (anything else is 404, ``../`` included), BASIC authentication in front, and the wheel
shipping the files."""

from __future__ import annotations

import base64
import fnmatch
import tomllib
import warnings
from pathlib import Path

import pytest
from starlette.applications import Starlette

from headwater.gateway.app import EXCEPTION_HANDLERS, ROUTES
from headwater.gateway.auth import Authentication, BasicAuthMiddleware, parse_credentials
from headwater.gateway.console_routes import ASSETS, CONSOLE_DIR, CONSOLE_ROUTES

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette wants httpx2 for its TestClient
    from starlette.testclient import TestClient

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(Starlette(routes=CONSOLE_ROUTES, exception_handlers=EXCEPTION_HANDLERS))


def test_the_app_serves_the_console() -> None:
    assert all(route in ROUTES for route in CONSOLE_ROUTES)


def test_the_page_and_each_file_answer_with_their_content_type(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert "/console/console.js" in page.text and "/console/console.css" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    expected = {"console.js": "text/javascript", "console.css": "text/css"}
    assert set(ASSETS) == set(expected)
    for name, media_type in expected.items():
        answer = client.get(f"/console/{name}")
        assert answer.status_code == 200, name
        assert answer.headers["content-type"].split(";")[0] == media_type
        assert answer.content == (CONSOLE_DIR / name).read_bytes()


@pytest.mark.parametrize(
    "path",
    [
        "/console/index.html",  # in the folder, but not on the list
        "/console/nope.js",
        "/console/console.js.map",
        "/console/../console_routes.py",
        "/console/..%2Fconsole_routes.py",
        "/console/%2e%2e%2fapp.py",
        "/console/..%2F..%2Fpyproject.toml",
        "/console/",
        "/console",
    ],
)
def test_anything_else_is_404(client: TestClient, path: str) -> None:
    answer = client.get(path)
    assert answer.status_code == 404, (path, answer.text)
    assert answer.json()["error_code"] == 40400
    assert "def " not in answer.text and "[project]" not in answer.text


def test_the_console_is_behind_basic_authentication() -> None:
    settings = Authentication("KsqlServer-Props", parse_credentials("fred: let me in,user\n"))
    app = BasicAuthMiddleware(
        Starlette(routes=CONSOLE_ROUTES, exception_handlers=EXCEPTION_HANDLERS), settings
    )
    client = TestClient(app)
    for path in ("/", "/console/console.js"):
        refused = client.get(path)
        assert refused.status_code == 401, path
        assert refused.headers["www-authenticate"] == 'Basic realm="KsqlServer-Props"'
    login = base64.b64encode(b"fred:let me in").decode()
    assert client.get("/", headers={"Authorization": f"Basic {login}"}).status_code == 200


def test_the_wheel_ships_every_file_of_the_console() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]
    assert "headwater.gateway.console" in config["packages"]
    patterns = config["package-data"]["headwater.gateway.console"]
    files = [p.name for p in CONSOLE_DIR.iterdir() if p.is_file() and p.suffix != ".py"]
    assert {"index.html", "console.js", "console.css"} <= set(files)
    left_out = [f for f in files if not any(fnmatch.fnmatch(f, p) for p in patterns)]
    assert not left_out, f"add to [tool.setuptools.package-data] in pyproject.toml: {left_out}"
