"""Schema registries: where the AVRO, PROTOBUF and JSON_SR formats keep their schemas.

A record in those formats starts with Confluent's wire header: a zero byte and the 4-byte id of its
writer's schema in a registry; readers fetch the schema by that id. headwater speaks to a registry
through :class:`SchemaRegistry`:

- :class:`HttpSchemaRegistry` talks Confluent Schema Registry's REST API (Confluent's own, Karapace,
  Redpanda's, Apicurio's compatibility API), from ``ksql.schema.registry.url``;
- :class:`MemorySchemaRegistry` keeps schemas in this process (ksqlDB's own tests use such a mock),
  for tests and the conformance runners.

The registry a process uses is set once at start with :func:`use` (the server, from its config)
or found in the environment variable ``HEADWATER_SCHEMA_REGISTRY_URL`` (Spark's processes, which
inherit it from the server), and read with :func:`current`. Schemas fetched by id are
immutable, so they are cached for the life of the client.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from headwater.engine.errors import SerdeError

#: The kinds of schema a registry holds, as its API names them.
KINDS = ("AVRO", "PROTOBUF", "JSON")

#: The config naming the registry, as ksqlDB names it.
URL_CONFIG = "ksql.schema.registry.url"

#: The registry's URL in the environment of the processes a server starts (its Spark child and
#: Spark's Python workers), which find their registry there.
URL_ENV = "HEADWATER_SCHEMA_REGISTRY_URL"
#: A token the registry's server takes instead of a user (a server hands it to the processes it
#: starts, for its own registry), sent in ``X-Headwater-Local-Token``.
TOKEN_ENV = "HEADWATER_SCHEMA_REGISTRY_TOKEN"
#: The CA file that verifies the registry's certificate (a server's own registry over HTTPS).
CA_ENV = "HEADWATER_SCHEMA_REGISTRY_CA"


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """A schema as a registry holds it: its kind (AVRO, PROTOBUF or JSON) and its text."""

    kind: str
    text: str


class SchemaRegistryError(SerdeError):
    """The registry could not be reached, or refused a request."""


class SchemaRegistry(Protocol):
    """What the serde needs of a registry."""

    def register(self, subject: str, schema: RegisteredSchema) -> int:
        """The id of ``schema`` under ``subject``, registering it if it is new there."""

    def schema(self, schema_id: int) -> RegisteredSchema:
        """The schema with this id.

        Raises:
            SchemaRegistryError: If there is none (or the registry cannot be reached).
        """

    def latest(self, subject: str) -> tuple[int, RegisteredSchema] | None:
        """The newest schema of ``subject`` with its id; None if the subject has none."""


class MemorySchemaRegistry:
    """A registry in this process's memory: ids from 1, one id per distinct schema."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[int, RegisteredSchema] = {}
        self._ids: dict[RegisteredSchema, int] = {}
        self._subjects: dict[str, list[int]] = {}

    def register(self, subject: str, schema: RegisteredSchema, schema_id: int | None = None) -> int:
        """As :meth:`SchemaRegistry.register`; ``schema_id`` registers it under that id (as a
        registry in import mode does)."""
        with self._lock:
            if schema_id is not None:
                self._by_id[schema_id] = schema
                self._ids.setdefault(schema, schema_id)
            schema_id = self._ids.get(schema)
            if schema_id is None:
                schema_id = max(self._by_id, default=0) + 1
                self._ids[schema] = schema_id
                self._by_id[schema_id] = schema
            versions = self._subjects.setdefault(subject, [])
            if schema_id not in versions:
                versions.append(schema_id)
            return schema_id

    def schema(self, schema_id: int) -> RegisteredSchema:
        with self._lock:
            found = self._by_id.get(schema_id)
        if found is None:
            raise SchemaRegistryError(f"Schema {schema_id} not found")
        return found

    def latest(self, subject: str) -> tuple[int, RegisteredSchema] | None:
        with self._lock:
            versions = self._subjects.get(subject)
            if not versions:
                return None
            return versions[-1], self._by_id[versions[-1]]

    def subjects(self) -> list[str]:
        """Every subject with a schema."""
        with self._lock:
            return sorted(self._subjects)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without its lock (the QTT runner ships a case's registry to Spark's workers)."""
        with self._lock:
            return {
                "by_id": dict(self._by_id),
                "subjects": {k: list(v) for k, v in self._subjects.items()},
            }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._lock = threading.Lock()
        self._by_id = state["by_id"]
        self._ids = {}
        for schema_id, schema in self._by_id.items():
            self._ids.setdefault(schema, schema_id)
        self._subjects = state["subjects"]


class HttpSchemaRegistry:
    """A client of Confluent Schema Registry's REST API at ``url``."""

    def __init__(
        self,
        url: str,
        timeout_s: float = 10.0,
        token: str | None = None,
        ca_file: str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
        if token:
            self._headers["X-Headwater-Local-Token"] = token
        self._timeout_s = timeout_s
        self._verify: str | bool = ca_file if ca_file else True
        # made on the first request: its TLS context costs ~10 ms, and a query whose formats
        # never ask the registry (JSON, DELIMITED) builds a client in every Spark worker
        self._client: Any = None
        self._client_lock = threading.Lock()
        self._lock = threading.Lock()
        self._by_id: dict[int, RegisteredSchema] = {}
        self._ids: dict[tuple[str, RegisteredSchema], int] = {}

    def _http(self) -> Any:
        """The HTTP client (an ``httpx.Client``), made once."""
        import httpx

        with self._client_lock:
            if self._client is None:
                self._client = httpx.Client(
                    base_url=self.url,
                    timeout=self._timeout_s,
                    headers=self._headers,
                    verify=self._verify,
                )
            return self._client

    def _call(self, method: str, path: str, body: object = None) -> object:
        import httpx

        try:
            response = self._http().request(
                method, path, content=None if body is None else json.dumps(body)
            )
        except httpx.HTTPError as exc:
            raise SchemaRegistryError(
                f"the schema registry at {self.url} cannot be reached: {exc}"
            ) from None
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            try:
                message = response.json().get("message", response.text)
            except ValueError:
                message = response.text
            raise SchemaRegistryError(
                f"the schema registry refused {method} {path}: {response.status_code} {message}"
            )
        return response.json()

    def register(self, subject: str, schema: RegisteredSchema) -> int:
        with self._lock:
            known = self._ids.get((subject, schema))
        if known is not None:
            return known
        body: dict[str, object] = {"schema": schema.text}
        if schema.kind != "AVRO":
            body["schemaType"] = schema.kind
        answer = self._call("POST", f"/subjects/{subject}/versions", body)
        if not isinstance(answer, dict) or "id" not in answer:
            raise SchemaRegistryError(
                f"the schema registry at {self.url} did not register a schema for {subject}"
            )
        schema_id = int(answer["id"])
        with self._lock:
            self._ids[(subject, schema)] = schema_id
            self._by_id[schema_id] = schema
        return schema_id

    def schema(self, schema_id: int) -> RegisteredSchema:
        with self._lock:
            found = self._by_id.get(schema_id)
        if found is not None:
            return found
        answer = self._call("GET", f"/schemas/ids/{schema_id}")
        if not isinstance(answer, dict):
            raise SchemaRegistryError(f"Schema {schema_id} not found")
        found = RegisteredSchema(str(answer.get("schemaType") or "AVRO"), str(answer["schema"]))
        with self._lock:
            self._by_id[schema_id] = found
        return found

    def latest(self, subject: str) -> tuple[int, RegisteredSchema] | None:
        answer = self._call("GET", f"/subjects/{subject}/versions/latest")
        if not isinstance(answer, dict):
            return None
        found = RegisteredSchema(str(answer.get("schemaType") or "AVRO"), str(answer["schema"]))
        return int(answer["id"]), found

    def close(self) -> None:
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None


_current: SchemaRegistry | None = None


_from_env: tuple[str, SchemaRegistry | None] | None = None


def use(registry: SchemaRegistry | None) -> None:
    """Make ``registry`` this process's registry (None: none configured)."""
    global _current
    _current = registry


def current() -> SchemaRegistry | None:
    """This process's registry: the one :func:`use` set, else the one named by the environment
    (``HEADWATER_SCHEMA_REGISTRY_URL``), else None."""
    global _from_env
    if _current is not None:
        return _current
    url = os.environ.get(URL_ENV, "")
    if not url:
        return None
    if _from_env is None or _from_env[0] != url:
        _from_env = (url, from_url(url))
    return _from_env[1]


def from_url(url: str | None) -> SchemaRegistry | None:
    """The registry named by a ``ksql.schema.registry.url`` value; None for none ('' or None).

    ``mock://`` URLs (as ksqlDB's tests use) are a registry in this process's memory.
    """
    if not url:
        return None
    if url.startswith("mock://"):
        return MemorySchemaRegistry()
    return HttpSchemaRegistry(
        url.split(",")[0].strip(),
        token=os.environ.get(TOKEN_ENV) or None,
        ca_file=os.environ.get(CA_ENV) or None,
    )
