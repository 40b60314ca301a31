"""headwater.http_server: each HTTP server kind serves HTTPS with ``tls_cert_file``/``tls_key_file``
(in-process, a tiny app; the certificate is made with openssl)."""

from __future__ import annotations

import ssl
import subprocess
import threading
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from headwater.http_server import HttpServer, HttpServerKind, HttpServerSettings, UnsupportedTls
from headwater.kafka._ports import free_port


async def hello(request: Request) -> Response:
    return JSONResponse({"scheme": request.url.scheme})


@pytest.mark.parametrize("encrypted", [False, True], ids=["key", "encrypted-key"])
@pytest.mark.parametrize("kind", list(HttpServerKind))
def test_each_server_kind_serves_https(
    kind: HttpServerKind, encrypted: bool, self_signed: tuple[Path, Path]
) -> None:
    cert, key = self_signed
    password = None
    if encrypted:  # ssl.key.password
        password, plain, key = "pem pass", key, key.with_name("encrypted.pem")
        subprocess.run(
            [
                "openssl",
                "pkey",
                "-in",
                str(plain),
                "-aes256",
                "-passout",
                f"pass:{password}",
                "-out",
                str(key),
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )
    port = free_port()
    if encrypted and kind is HttpServerKind.GRANIAN:  # granian 2.8 would abort the process
        with pytest.raises(UnsupportedTls, match="hypercorn or"):
            HttpServerSettings(
                kind=kind, tls_cert_file=str(cert), tls_key_file=str(key), tls_key_password=password
            )
        return
    settings = HttpServerSettings(
        port=port,
        kind=kind,
        tls_cert_file=str(cert),
        tls_key_file=str(key),
        tls_key_password=password,
        graceful_timeout_s=1,
    )
    server = HttpServer(Starlette(routes=[Route("/hello", hello)]), settings)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        assert server.started.wait(30), "the server did not start"
        verify = ssl.create_default_context(cafile=str(cert))
        answer = httpx.get(f"https://127.0.0.1:{port}/hello", verify=verify, timeout=5)
        assert answer.status_code == 200 and answer.json() == {"scheme": "https"}
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/hello", timeout=3)
    finally:
        server.stop()
        thread.join(30)
    assert not thread.is_alive()
