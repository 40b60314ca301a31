"""``GET /status`` and ``GET /status/{commandId}``: what became of each catalog command (ksqlDB's shapes).

No I/O beyond reading the runner's decisions. A command id this server has not read (yet) is a 404
with error code 40400, as ksqlDB answers.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from headwater.gateway.errors import KsqlError
from headwater.gateway.services import services_of


async def status_endpoint(request: Request) -> JSONResponse:
    """``GET /status``: every command id decided here and its status."""
    outcomes = services_of(request).runner.outcomes()
    ordered = sorted(outcomes.values(), key=lambda o: o.offset)
    return JSONResponse({"commandStatuses": {o.command_id: o.state.value for o in ordered}})


async def command_status_endpoint(request: Request) -> JSONResponse:
    """``GET /status/{commandId}``: one command's status and message."""
    command_id = request.path_params["command_id"]
    outcome = services_of(request).runner.outcome(command_id)
    if outcome is None:
        raise KsqlError(f"command not found: {command_id}", 40400, kind="generic_error")
    return JSONResponse(
        {
            "status": outcome.state.value,
            "message": outcome.message,
            "commandSequenceNumber": outcome.offset,
        }
    )
