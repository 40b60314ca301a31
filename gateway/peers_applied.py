"""Waiting until every live peer has applied a command: before a DROP ... DELETE TOPIC deletes its topic.

Does I/O (HTTP to the peers). A server applying a DROP ... DELETE TOPIC stops its readers of the topic
(``headwater.kafka.readers``) before its ``GET /status/{commandId}`` says SUCCESS; the server that
deletes the topic asks each live peer until all have, so that no server's consumer is fetching the
topic when it goes (on the embedded broker that kills the fetching process).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import httpx

from headwater.cluster.agent import ClusterAgent
from headwater.cluster.auth import HEADER, sign
from headwater.gateway.forwarding import Forwarding

log = logging.getLogger(__name__)

#: Between two rounds of asking the peers that have not applied the command yet.
_RETRY_S = 0.05


def waiter(
    agent: ClusterAgent, forwarding: Forwarding, timeout_s: float
) -> Callable[[str], list[str]]:
    """``wait(command_id)``: asks every live peer until each has applied ``command_id`` or
    ``timeout_s`` has passed; returns the peers that did not confirm (empty: all did)."""

    def wait(command_id: str) -> list[str]:
        pending = set(agent.live()) - {agent.self_id}
        deadline = time.monotonic() + timeout_s
        client = forwarding.client(timeout_s)
        while pending and time.monotonic() < deadline:
            for peer in sorted(pending):
                if _applied(
                    client,
                    forwarding.scheme,
                    peer,
                    command_id,
                    agent.settings.auth_secret,
                    deadline,
                ):
                    pending.discard(peer)
            pending &= set(agent.live())  # a peer that died meanwhile replays the log at start
            if pending:
                time.sleep(_RETRY_S)
        if pending:
            log.warning(
                "peers %s did not confirm command %s within %.1f s",
                sorted(pending),
                command_id,
                timeout_s,
            )
        return sorted(pending)

    return wait


def _applied(
    client: httpx.Client,
    scheme: str,
    peer: str,
    command_id: str,
    secret: str | None,
    deadline: float,
) -> bool:
    path = f"/status/{command_id}"
    headers = {}
    if secret:
        headers[HEADER] = sign(secret, int(time.time() * 1000), "GET", path, b"")
    try:
        answer = client.get(
            f"{scheme}://{peer}{path}",
            headers=headers,
            timeout=max(0.1, deadline - time.monotonic()),
        )
    except httpx.HTTPError as exc:
        log.debug("status of %s on %s: %s", command_id, peer, exc)
        return False
    if answer.status_code != 200:
        return False
    try:
        return bool(answer.json().get("status") == "SUCCESS")
    except ValueError:
        return False
