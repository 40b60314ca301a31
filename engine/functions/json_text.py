"""JSON functions of the function table (TO_JSON_STRING, EXTRACTJSONFIELD, JSON_*). Pure (no I/O).

Registered into `registry.FUNCTIONS`. JSON text is read as ksqlDB's Jackson mapper reads it: the
first value counts and anything after it is ignored, blank text is "missing", and fractional numbers
keep their digits (``1.23450`` stays ``1.23450``). Output is compact, as Jackson writes it.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from headwater.engine.formats._json import MAX_NESTING_DEPTH, nesting_depth
from headwater.engine.functions.casts import to_string
from headwater.engine.functions.signatures import Impl, Resolver, fixed
from headwater.engine.functions.types import (
    BIGINT,
    BOOLEAN,
    BYTES,
    DATE,
    DOUBLE,
    INTEGER,
    NULL,
    STRING,
    TIME,
    TIMESTAMP,
    EvalFailure,
)
from headwater.sqlparse_ext.sqltypes import (
    ArrayType,
    DecimalType,
    MapType,
    SqlType,
    StructType,
    format_double,
)

_MISSING = object()
"""What blank JSON text parses to (Jackson's MissingNode)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")


_DECODER = json.JSONDecoder(parse_float=Decimal, parse_constant=_reject_constant)


def parse_json(text: str) -> Any:
    """The first JSON value of ``text``, `_MISSING` for blank text.

    Raises:
        EvalFailure: ``Invalid JSON format:<text>``.
    """
    body = text.lstrip(" \t\r\n")
    if not body:
        return _MISSING
    if (
        body.count("[") + body.count("{") > MAX_NESTING_DEPTH
        and nesting_depth(body.encode("utf-8", "surrogatepass")) > MAX_NESTING_DEPTH
    ):
        raise EvalFailure(f"Invalid JSON format:{text}")  # parsing it would exhaust the stack
    try:
        return _DECODER.raw_decode(body)[0]
    except ValueError as error:
        raise EvalFailure(f"Invalid JSON format:{text}") from error


_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\b": "\\b",
    "\f": "\\f",
}


def _quote(text: str) -> str:
    return (
        '"'
        + "".join(_ESCAPES.get(c) or (f"\\u{ord(c):04X}" if ord(c) < 0x20 else c) for c in text)
        + '"'
    )


def json_text(node: Any, plain: bool = False) -> str:
    """Compact JSON for a parsed node; DECIMALs as ``BigDecimal.toString`` (plain when asked)."""
    if node is None:
        return "null"
    if node is _MISSING:
        return ""
    if isinstance(node, bool):
        return "true" if node else "false"
    if isinstance(node, str):
        return _quote(node)
    if isinstance(node, Decimal):
        return format(node, "f") if plain else str(node)
    if isinstance(node, float):  # Jackson quotes NaN and the infinities
        return format_double(node) if math.isfinite(node) else _quote(format_double(node))
    if isinstance(node, int):
        return str(node)
    if isinstance(node, list):
        return "[" + ",".join(json_text(v, plain) for v in node) + "]"
    return "{" + ",".join(f"{_quote(k)}:{json_text(v, plain)}" for k, v in node.items()) + "}"


def _node_string(node: Any) -> str:
    """Jackson's ``asText`` for text nodes, ``toString`` otherwise."""
    return node if isinstance(node, str) else json_text(node)


# -- TO_JSON_STRING ----------------------------------------------------------------------------


def _time_text(ms: int) -> str:
    """``LocalTime.toString`` of the whole seconds: ``16:43`` or ``16:43:40``."""
    seconds = ms // 1000
    hours, minutes, secs = seconds // 3600, seconds // 60 % 60, seconds % 60
    return f"{hours:02d}:{minutes:02d}" + (f":{secs:02d}" if secs else "")


def _prepare(value: Any, t: SqlType) -> Any:
    """A value of type ``t`` as a JSON node (structs and maps sorted by key, as ksqlDB does)."""
    if value is None:
        return None
    if t == TIME:
        return _time_text(value)
    if t in (DATE, TIMESTAMP):
        return to_string(value, t)
    if t == BYTES:
        return base64.b64encode(value).decode("ascii")
    if isinstance(t, StructType):
        types = {f.name: f.type for f in t.fields}
        return {k: _prepare(value.get(k), types[k]) for k in sorted(types)}
    if isinstance(t, MapType):
        pairs = {to_string(k, t.key): _prepare(v, t.value) for k, v in value.items()}
        return dict(sorted(pairs.items()))
    if isinstance(t, ArrayType):
        return [_prepare(v, t.element) for v in value]
    return value


def _to_json_string(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    if len(args) != 1:
        return None
    t = args[0]
    return STRING, lambda value: json_text(_prepare(value, t), plain=True)


# -- EXTRACTJSONFIELD --------------------------------------------------------------------------


def json_path_tokens(path: str) -> list[str]:
    """The steps of a JSON path such as ``$.a.b[0]["c"]`` (ksqlDB's ``JsonPathTokenizer``).

    Raises:
        EvalFailure: ``Invalid JSON path: '<path>'``.
    """
    invalid = EvalFailure(f"Invalid JSON path: '{path}'")
    if not path.startswith("$"):
        raise invalid
    tokens: list[str] = []
    i, n = 1, len(path)

    def run(start: int, extra: str) -> int:
        end = start
        while end < n and (path[end].isalnum() or path[end] in extra):
            end += 1
        if end == start:
            raise invalid
        return end

    while i < n:
        if path[i] == ".":
            end = run(i + 1, "_:@")
            tokens.append(path[i + 1 : end])
            i = end
        elif path[i] == "[" and path[i + 1 : i + 2] == '"':
            token, i = [], i + 2
            while i < n and path[i] != '"':
                if path[i] == "\\":
                    if path[i + 1 : i + 2] not in ('"', "\\"):
                        raise invalid
                    i += 1
                token.append(path[i])
                i += 1
            if path[i : i + 2] != '"]':
                raise invalid
            tokens.append("".join(token))
            i += 2
        elif path[i] == "[":
            end = run(i + 1, "_")
            if path[end : end + 1] != "]":
                raise invalid
            tokens.append(path[i + 1 : end])
            i = end + 1
        else:
            raise invalid
    return tokens


def _extract(text: str, path: str) -> str | None:
    tokens = json_path_tokens(path)
    node = parse_json(text)
    for token in tokens:
        if isinstance(node, list):
            try:
                index = int(token)
            except ValueError:
                return None
            node = node[index] if 0 <= index < len(node) else _MISSING
        elif isinstance(node, dict):
            node = node.get(token, _MISSING)
        else:
            return None
        if node is _MISSING:
            return None
    return _node_string(node)


# -- the JSON_* functions ----------------------------------------------------------------------


def _is_json_string(text: str | None) -> bool:
    if text is None:
        return False
    try:
        return parse_json(text) is not _MISSING
    except EvalFailure:
        return False


def _matches(node: Any, value: Any) -> bool:
    """Whether a JSON array element equals a ksqlDB value of a compatible kind."""
    if node is None or value is None:
        return node is None and value is None
    if isinstance(node, bool) or isinstance(value, bool):
        return node is value
    if isinstance(node, int):
        return isinstance(value, int) and node == value
    if isinstance(node, Decimal):
        return isinstance(value, float) and float(node) == value
    return isinstance(node, str) and node == value


def _json_array_contains(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    if len(args) != 2 or args[0] not in (STRING, NULL):
        return None
    if args[1] not in (INTEGER, BIGINT, DOUBLE, BOOLEAN, STRING, NULL) and not isinstance(
        args[1], DecimalType
    ):
        return None

    def contains(text: str | None, value: Any) -> bool | None:
        if text is None:
            return None
        try:
            node = parse_json(text)
        except EvalFailure:
            return False
        return isinstance(node, list) and any(_matches(item, value) for item in node)

    return BOOLEAN, contains


def _json_array_length(text: str) -> int | None:
    node = parse_json(text)
    return len(node) if isinstance(node, list) else None


def _json_concat(*texts: str) -> str | None:
    nodes = [parse_json(text) for text in texts]
    if any(node is _MISSING for node in nodes):
        return None
    if all(isinstance(node, dict) for node in nodes):
        merged: dict[str, Any] = {}
        for node in nodes:
            merged.update(node)
        return json_text(merged, plain=True)
    items: list[Any] = []
    for node in nodes:
        items.extend(node if isinstance(node, list) else [node])
    return json_text(items, plain=True)


def _json_concat_resolver(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    if not args or any(a not in (STRING, NULL) for a in args):
        return None
    return STRING, _json_concat


def _json_items(text: str) -> list[str]:
    node = parse_json(text)
    if not isinstance(node, list):
        raise EvalFailure(f"Invalid JSON format:{text}")
    return [json_text(item) for item in node]


def _json_keys(text: str) -> list[str] | None:
    node = parse_json(text)
    return list(node) if isinstance(node, dict) else None


def _json_records(text: str) -> dict[str, str] | None:
    node = parse_json(text)
    if not isinstance(node, dict):
        return None
    return {k: _node_string(v) for k, v in node.items()}


FUNCTIONS: dict[str, Resolver] = {
    "TO_JSON_STRING": _to_json_string,
    "EXTRACTJSONFIELD": fixed((STRING, STRING), STRING, _extract),
    "IS_JSON_STRING": fixed((STRING,), BOOLEAN, _is_json_string),
    "JSON_ARRAY_CONTAINS": _json_array_contains,
    "JSON_ARRAY_LENGTH": fixed((STRING,), INTEGER, _json_array_length),
    "JSON_CONCAT": _json_concat_resolver,
    "JSON_ITEMS": fixed((STRING,), ArrayType(STRING), _json_items),
    "JSON_KEYS": fixed((STRING,), ArrayType(STRING), _json_keys),
    "JSON_RECORDS": fixed((STRING,), MapType(STRING, STRING), _json_records),
}

NULL_TOLERANT = frozenset({"TO_JSON_STRING", "IS_JSON_STRING", "JSON_ARRAY_CONTAINS"})
