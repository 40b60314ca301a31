"""The engine's schema registry over headwater's own (``headwater.registry``), in process.

The server's AVRO, PROTOBUF and JSON_SR serdes register and read schemas through this, with the
same rules as the registry's HTTP API: a schema a subject cannot take under its compatibility
level is refused with Confluent's 409, as Confluent's serializers would see it. Over the topic
(``registry.log.RegistryLog``: I/O) in a server; over memory (``registry.memory``) in tests and
the conformance runners.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from headwater.engine.formats.schema_registry import RegisteredSchema, SchemaRegistryError
from headwater.registry import operations as ops
from headwater.registry.errors import RegistryError, SchemaNotFound, SubjectNotFound
from headwater.registry.records import Reference
from headwater.registry.state import RegistryState


class RegistryStore(Protocol):
    """Where the registry's state is: ``RegistryLog`` (its topic) or ``MemoryRegistryLog``."""

    def read(self, reader: Callable[[RegistryState], Any]) -> Any: ...

    def write(
        self, decide: Callable[[RegistryState], ops.Decision], timeout_s: float = ...
    ) -> Any: ...


class OwnSchemaRegistry:
    """:class:`headwater.engine.formats.schema_registry.SchemaRegistry` over headwater's own."""

    def __init__(self, log: RegistryStore, limits: ops.Limits | None = None) -> None:
        self._log = log
        self._limits = limits or ops.Limits()

    def register(
        self,
        subject: str,
        schema: RegisteredSchema,
        schema_id: int | None = None,
        references: Sequence[Reference] = (),
    ) -> int:
        """As :meth:`SchemaRegistry.register`; ``schema_id`` registers it under that id, which
        the registry takes in IMPORT mode (a mock registry per test case does); ``references``
        name the registered schemas it uses."""
        wanted = ops.Registration(
            subject, schema.kind, schema.text, tuple(references), schema_id=schema_id
        )
        try:
            value = self._log.write(lambda state: ops.register(state, wanted, self._limits))
        except RegistryError as exc:
            raise SchemaRegistryError(
                f"the schema registry refused the schema of subject {subject}: "
                f"{exc.code} {exc.message}"
            ) from None
        registered: int = value.id
        return registered

    def schema(self, schema_id: int) -> RegisteredSchema:
        try:
            value = self._log.read(lambda state: ops.schema_by_id(state, schema_id))
        except SchemaNotFound:
            raise SchemaRegistryError(f"Schema {schema_id} not found") from None
        return RegisteredSchema(value.kind, value.text)

    def latest(self, subject: str) -> tuple[int, RegisteredSchema] | None:
        try:
            value = self._log.read(lambda state: ops.resolve_version(state, subject, "latest"))
        except (SubjectNotFound, RegistryError):
            return None
        return value.id, RegisteredSchema(value.kind, value.text)

    def subjects(self) -> list[str]:
        """Every subject with a live version."""
        found: list[str] = self._log.read(lambda state: state.subject_names())
        return found


def mock_registry() -> OwnSchemaRegistry:
    """A registry in memory with the node's rules, set up as ksqlDB's test runners' mock registry
    behaves: a case's schemas take the ids the case gives them (IMPORT mode), and what a query
    registers after them is not checked against them (compatibility NONE)."""
    from headwater.registry.memory import MemoryRegistryLog

    log = MemoryRegistryLog()
    log.write(lambda state: ops.set_mode(state, None, "IMPORT", force=True))
    log.write(lambda state: ops.set_config(state, None, {"compatibility": "NONE"}))
    return OwnSchemaRegistry(log)
