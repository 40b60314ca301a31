"""The formats a CREATE STREAM/TABLE takes when its WITH clause names none. Pure, no I/O.

ksqlDB's ``ksql.persistence.default.format.key`` (default ``KAFKA``) and
``ksql.persistence.default.format.value`` (no default: a statement without ``VALUE_FORMAT`` or
``FORMAT`` is refused) are server settings that a request may override (``streamsProperties``, or
``SET`` in the shell). The planner writes the formats it chose into the command, so a replay never
depends on the settings of the server that replays it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KEY = "ksql.persistence.default.format.key"
VALUE = "ksql.persistence.default.format.value"


@dataclass(frozen=True, slots=True)
class FormatDefaults:
    """The key and value formats of a source whose WITH clause names none (None: required)."""

    key: str = "KAFKA"
    value: str | None = None


KSQLDB_DEFAULTS = FormatDefaults()
"""ksqlDB's own: KAFKA keys, no value format."""


def format_defaults(overrides: Mapping[str, Any], server: Mapping[str, Any]) -> FormatDefaults:
    """The defaults a statement is planned with: the request's, else the server's, else ksqlDB's.
    An empty value counts as unset."""

    def find(name: str) -> str | None:
        for properties in (overrides, server):
            value = properties.get(name)
            if value is not None and str(value).strip():
                return str(value).strip().upper()
        return None

    return FormatDefaults(find(KEY) or "KAFKA", find(VALUE))
