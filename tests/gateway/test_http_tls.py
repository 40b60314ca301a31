"""headwater.http_server: each HTTP server kind serves HTTPS with ``tls_cert_file``/``tls_key_file``
(in-process, a tiny app; the certificate is made with openssl)."""

from __future__ import annotations

import ssl
import threading
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from headwater.http_server import HttpServer, HttpServerKind, HttpServerSettings
from headwater.kafka._ports import free_port


async def hello(request: Request) -> Response:
    return JSONResponse({"scheme": request.url.scheme})


@pytest.mark.parametrize("kind", list(HttpServerKind))
def test_each_server_kind_serves_https(kind: HttpServerKind,
                                       self_signed: tuple[Path, Path]) -> None:  # fmt: skip
    cert, key = self_signed
    port = free_port()
    settings = HttpServerSettings(port=port, kind=kind, tls_cert_file=str(cert),
                                  tls_key_file=str(key), graceful_timeout_s=1)  # fmt: skip
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
