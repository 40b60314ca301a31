"""A schema as the compatibility rules see it. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Subject:
    """A schema as the rules see it: its kind (``AVRO``, ``PROTOBUF``, ``JSON``), its text, and
    the texts of the schemas it references, by reference name (an Avro type's full name, a
    ``.proto`` import path, a JSON Schema ``$ref``)."""

    kind: str
    text: str
    references: Mapping[str, str] = field(default_factory=dict)
