"""The web console: ``GET /`` (its page) and ``GET /console/{file}`` (its script and style sheet).

The console is three hand-written static files shipped in the wheel (``gateway/console/``: no build
step, nothing fetched from elsewhere). In the browser it is a client of the HTTP API like any other
(``/ksql``, ``/query-stream``, ``/close-query``, ``/clusterStatus``), so it sees exactly what the API
answers, behind the same authentication (``gateway.auth.BasicAuthMiddleware`` wraps every route: with
``authentication.method=BASIC`` the browser gets a 401 challenge and asks for a login).

Only the names of :data:`ASSETS` are served: anything else (``../``, another file of the folder)
answers 404. Does I/O: reads the files when asked (Starlette's ``FileResponse``).
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from headwater.gateway.errors import KsqlError

__all__ = ["ASSETS", "CONSOLE_DIR", "CONSOLE_ROUTES", "console_asset", "console_page"]

CONSOLE_DIR = Path(__file__).resolve().with_name("console")
"""The console's files, inside the installed package."""

ASSETS = MappingProxyType(
    {
        "console.js": "text/javascript; charset=utf-8",
        "console.css": "text/css; charset=utf-8",
    }
)
"""The files ``/console/{file}`` serves (the allow-list), with their content types."""

_PAGE = "index.html"

_HEADERS = {
    # Everything the page needs comes from this server: no inline script, nothing from elsewhere.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",  # revalidated (ETag): a server upgrade shows the new console
}


async def console_page(_request: Request) -> Response:
    """``GET /``: the console's page."""
    return FileResponse(
        CONSOLE_DIR / _PAGE, media_type="text/html; charset=utf-8", headers=_HEADERS
    )


async def console_asset(request: Request) -> Response:
    """``GET /console/{file}``: one of :data:`ASSETS` (40400 for any other name)."""
    name = request.path_params["file"]
    media_type = ASSETS.get(name)
    if media_type is None:
        raise KsqlError(f"the console has no file {name!r}", 40400, kind="generic_error")
    return FileResponse(CONSOLE_DIR / name, media_type=media_type, headers=_HEADERS)


CONSOLE_ROUTES = [
    Route("/", console_page, methods=["GET"]),
    Route("/console/{file}", console_asset, methods=["GET"]),
]
"""To be added to ``gateway.app.ROUTES``."""
