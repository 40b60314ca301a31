"""Confluent's compatibility levels over each schema kind's rules. Pure.

A level says which schemas a new one is checked against and in which direction
(Confluent's ``CompatibilityChecker``):

- ``BACKWARD``: the new schema can read what the latest one wrote;
- ``FORWARD``: the latest can read what the new one writes;
- ``FULL``: both;
- each ``*_TRANSITIVE``: the same against every earlier version, not only the latest;
- ``NONE``: no check.

Each kind's module (``avro_rules``, ``protobuf_rules``, ``json_rules``) gives
``backward_problems(new, old)``: why a consumer using ``new`` could not read data written with
``old`` (empty when it can). FORWARD swaps the two.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

from headwater.registry.errors import InvalidSchema
from headwater.registry.subject import Subject

LEVELS = (
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
    "NONE",
)
DEFAULT_LEVEL = "BACKWARD"


Rule = Callable[[Subject, Subject], list[str]]


class Rules(Protocol):
    """What each kind's module gives (``avro_rules``, ``protobuf_rules``, ``json_rules``)."""

    KIND: str

    def parse(self, subject: Subject) -> Any: ...

    def canonical(self, subject: Subject, normalize: bool = False) -> str: ...

    def backward_problems(self, new: Subject, old: Subject) -> list[str]: ...


#: The kinds a registry holds, as the API names them (``schemaType``).
KINDS = ("AVRO", "PROTOBUF", "JSON")

DIFFERENT_KIND = "Incompatible because of different schema type"


def rules(kind: str) -> Rules:
    """The rules of a schema kind.

    Raises:
        InvalidSchema: the kind is not one of :data:`KINDS`.
    """
    if kind == "AVRO":
        from headwater.registry import avro_rules as found
    elif kind == "PROTOBUF":
        from headwater.registry import protobuf_rules as found  # type: ignore[no-redef]
    elif kind == "JSON":
        from headwater.registry import json_rules as found  # type: ignore[no-redef]
    else:
        raise InvalidSchema(f"Invalid schema type {kind}: one of {', '.join(KINDS)} expected")
    return cast(Rules, found)


def problems(level: str, new: Subject, previous: Sequence[tuple[int, Subject]]) -> list[str]:
    """Why ``new`` may not follow ``previous`` (version number and schema, oldest first) at
    ``level``: empty when it may. The messages are Confluent's: the kind's own, then which
    version and level refused it."""
    if level == "NONE" or not previous:
        return []
    checked = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    for version, old in reversed(checked):
        found = _between(base, new, old)
        if found:
            return [
                *found,
                f"{{oldSchemaVersion: {version}}}",
                f"{{oldSchema: '{old.text}'}}",
                f"{{compatibility: '{level}'}}",
            ]
    return []


def _between(base: str, new: Subject, old: Subject) -> list[str]:
    if new.kind != old.kind:
        return [DIFFERENT_KIND]
    kind = rules(new.kind)
    found: list[str] = []
    if base in ("FORWARD", "FULL"):  # the old schema reads the new one's data: roles swapped
        found.extend(_swap_roles(p) for p in kind.backward_problems(old, new))
    if base in ("BACKWARD", "FULL"):
        found.extend(kind.backward_problems(new, old))
    return found


def _swap_roles(message: str) -> str:
    """A problem found with the old schema as the reader, worded as Confluent words it for
    FORWARD: the schemas named by their roles in the registration ("new", "old")."""
    marker = "\0"
    return (
        message.replace("new schema", marker)
        .replace("old schema", "new schema")
        .replace(marker, "old schema")
    )
