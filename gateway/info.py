"""``GET /info`` and ``GET /healthcheck``: what this server is and whether it works.

The handlers read the runner's state and probe Kafka (a metadata request, on a worker thread).
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaException
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from headwater.engine.functions.extensions import current
from headwater.gateway.services import Services, services_of
from headwater.metastore.codec import catalog_digest
from headwater.metastore.runner import RunnerState

KSQLDB_VERSION = "0.29.0"
"""The ksqlDB release whose statements and REST API headwater answers as: ``/info``'s ``version``,
which ksqlDB's clients read to decide what a server supports (headwater's own version is beside
it, in ``headwaterVersion``)."""


def server_info(services: Services) -> dict[str, Any]:
    """ksqlDB's ``/info`` body, plus headwater's ``headwaterVersion``, ``catalogDigest`` and
    ``extensions``: the Python function modules this server loaded (path, digest of the text,
    functions), so an operator can see which servers of a cluster carry which versions, and
    ``extensionProblems``: the modules and functions it left out, and why."""
    running = services.runner.state is RunnerState.RUNNING
    return {
        "KsqlServerInfo": {
            "version": KSQLDB_VERSION,
            "kafkaClusterId": services.info.kafka_cluster_id,
            "ksqlServiceId": services.info.service_id,
            "serverStatus": "RUNNING" if running else "DEGRADED",
        },
        "headwaterVersion": services.info.version,
        "catalogDigest": catalog_digest(services.runner.catalog),
        "extensions": loaded_modules(),
        "extensionProblems": list(current().problems),
    }


def loaded_modules() -> list[dict[str, Any]]:
    """The extension folder's modules this server loaded, with the functions each declares."""
    loaded = current()
    by_module: dict[str, list[str]] = {}
    for function in loaded.functions.values():
        for declaration in function.declarations:
            names = by_module.setdefault(declaration.module, [])
            if function.name not in names:
                names.append(function.name)
    return [
        {
            "module": m.path or m.stem,
            "sha256": m.digest,
            "functions": sorted(by_module.get(m.path or m.stem, [])),
        }
        for m in loaded.modules
    ]


def kafka_reachable(services: Services) -> bool:
    """Whether the broker answers a metadata request in time."""
    try:
        services.admin.list_topics(timeout=services.limits.kafka_probe_timeout_s)
    except KafkaException:
        return False
    return True


def health(services: Services, kafka_ok: bool) -> dict[str, Any]:
    """ksqlDB's ``/healthcheck`` body; the runner's state and reason say why it is not healthy."""
    runner = services.runner
    runner_ok = runner.state is RunnerState.RUNNING
    return {
        "isHealthy": runner_ok and kafka_ok,
        "details": {
            "metastore": {"isHealthy": runner_ok},
            "kafka": {"isHealthy": kafka_ok},
            "commandRunner": {
                "isHealthy": runner_ok,
                "state": runner.state.value,
                "reason": runner.reason,
            },
        },
    }


async def info_endpoint(request: Request) -> JSONResponse:
    """``GET /info``."""
    return JSONResponse(server_info(services_of(request)))


async def healthcheck_endpoint(request: Request) -> JSONResponse:
    """``GET /healthcheck``: 200 when healthy, 503 otherwise (same body)."""
    services = services_of(request)
    body = health(services, await run_in_threadpool(kafka_reachable, services))
    return JSONResponse(body, status_code=200 if body["isHealthy"] else 503)
