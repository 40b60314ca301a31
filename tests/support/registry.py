"""A small schema registry speaking Confluent's REST API, in this process, for the runners and tests.

ksqlDB's own test runners use a mock registry; this is the same thing over HTTP, so a real
``headwater server`` (and its Spark processes) can use it through ``ksql.schema.registry.url``.
It keeps schemas in memory: ``POST /subjects/{subject}/versions``, ``GET /schemas/ids/{id}``,
``GET /subjects/{subject}/versions/latest``, ``GET /subjects``.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Handler(BaseHTTPRequestHandler):
    registry: LocalRegistry

    def _answer(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        parts = self.path.strip("/").split("/")
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if len(parts) != 3 or parts[0] != "subjects" or parts[2] != "versions":
            return self._answer(404, {"error_code": 404, "message": f"no such path {self.path}"})
        schema_id = self.registry.register(
            parts[1], str(body.get("schema", "")), str(body.get("schemaType") or "AVRO")
        )
        return self._answer(200, {"id": schema_id})

    def do_GET(self) -> None:
        parts = self.path.strip("/").split("/")
        found: Any = None
        if len(parts) == 3 and parts[:2] == ["schemas", "ids"] and parts[2].isdigit():
            found = self.registry.by_id(int(parts[2]))
        elif len(parts) == 4 and parts[0] == "subjects" and parts[2:] == ["versions", "latest"]:
            found = self.registry.latest(parts[1])
        elif parts == ["subjects"]:
            found = self.registry.subjects()
        if found is None:
            return self._answer(404, {"error_code": 40401, "message": "Subject not found."})
        return self._answer(200, found)

    def log_message(self, *args: object) -> None:
        pass


class LocalRegistry:
    """The registry and its HTTP server on 127.0.0.1 (a free port): ``url``, ``register``,
    ``close``. Ids start at 1; the same schema text gets the same id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._schemas: dict[int, dict[str, str]] = {}
        self._subjects: dict[str, list[int]] = {}
        handler = type("Handler", (_Handler,), {"registry": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, name="schema-registry"
        )
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def register(
        self, subject: str, schema: str, kind: str = "AVRO", schema_id: int | None = None
    ) -> int:
        """The id of ``schema`` under ``subject``, registering it (under ``schema_id`` if given)."""
        entry = {"schema": schema, "schemaType": kind}
        with self._lock:
            if schema_id is None:
                schema_id = next((i for i, s in self._schemas.items() if s == entry), None)
            if schema_id is None:
                schema_id = max(self._schemas, default=0) + 1
            self._schemas[schema_id] = entry
            versions = self._subjects.setdefault(subject, [])
            if schema_id not in versions:
                versions.append(schema_id)
            return schema_id

    def by_id(self, schema_id: int) -> dict[str, str] | None:
        with self._lock:
            return self._schemas.get(schema_id)

    def latest(self, subject: str) -> dict[str, Any] | None:
        with self._lock:
            versions = self._subjects.get(subject)
            if not versions:
                return None
            return {
                "subject": subject,
                "version": len(versions),
                "id": versions[-1],
                **self._schemas[versions[-1]],
            }

    def subjects(self) -> list[str]:
        with self._lock:
            return sorted(self._subjects)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
