"""Avro's rules for the registry (schema kind ``AVRO``): parsing, canonical text, compatibility. Pure.

No I/O: every function works on a :class:`~headwater.registry.compatibility.Subject`'s texts.

- :func:`parse`: fastavro validates a schema's structure; this module then builds the model Avro's
  Java parser builds (Confluent's ``AvroSchema``), which the other two functions need and fastavro
  does not keep: names resolved in namespaces as Java resolves them (a short name is looked up in
  the enclosing namespace, then in the null one), the original order of attributes and extra
  properties, aliases. It applies the checks Confluent makes on a new schema: strict (ASCII)
  names, field defaults valid for their type (Avro's ``Schema.isValidDefault``), no duplicate
  fields, enum symbols or union branches, no redefined name. The schemas of ``references`` are
  parsed first (in whatever order lets each find the names it uses), their named types usable
  in the main one, as Confluent's ``AvroSchemaProvider`` does.
- :func:`canonical`: Confluent's ``AvroSchema.canonicalString()``, which is Avro's
  ``Schema.toString(referencedSchemas)``: compact JSON, attributes in Avro's order, names relative
  to the enclosing namespace, a type defined in a reference written as its name. With
  ``normalize``, Confluent's ``AvroSchema.normalize()`` (``AvroSchemaUtils.toNormalizedString``,
  parsed again): extra properties and aliases sorted, empty docs dropped, defaults converted to
  their field's type.
- :func:`backward_problems`: Avro's ``SchemaCompatibility.checkReaderWriterCompatibility`` with
  the new schema as reader and the old one as writer (memoised pairs, so recursive types end, and
  its JSON-pointer locations), each incompatibility worded as Confluent's ``Difference``.
"""

from __future__ import annotations

import json
import math
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

from headwater.registry.errors import InvalidSchema
from headwater.registry.subject import Subject

KIND = "AVRO"

_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_NAMED = ("record", "enum", "fixed")
_TYPE_NAMES = (*_NAMED, "array", "map", "union", *_PRIMITIVES)
_SCHEMA_RESERVED = frozenset(
    ("doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type", "aliases")
)
_ENUM_RESERVED = _SCHEMA_RESERVED | {"default"}
_FIELD_RESERVED = frozenset(("default", "doc", "name", "order", "type", "aliases"))
_ORDERS = ("ascending", "descending", "ignore")
_STRICT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: A field without a default (a JSON ``null`` default is a default).
_ABSENT: Any = object()


# -- the model ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Name:
    """Avro's ``Schema.Name``: a short name and its namespace (``None``: the null namespace)."""

    name: str
    space: str | None

    @property
    def full(self) -> str:
        return self.name if self.space is None else f"{self.space}.{self.name}"

    def qualified(self, space: str | None) -> str:
        """The name as Avro writes it where ``space`` is the enclosing namespace."""
        if self.space is not None and self.space == space and self.name not in _TYPE_NAMES:
            return self.name
        return self.full


@dataclass(eq=False, slots=True)
class _Field:
    name: str
    type: _Node
    pos: int
    doc: str | None = None
    default: Any = _ABSENT
    order: str = "ascending"
    aliases: list[str] = field(default_factory=list)
    props: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False, slots=True)
class _Node:
    """One schema as Avro's Java model holds it. ``type`` is Avro's type name (an ``error`` is a
    ``record`` with ``is_error``); each named type is one node wherever it is used, every other
    occurrence its own node (compatibility memoises on identity, as Avro does)."""

    type: str
    props: dict[str, Any] = field(default_factory=dict)
    name: _Name | None = None
    doc: str | None = None
    aliases: list[_Name] = field(default_factory=list)
    is_error: bool = False
    fields: list[_Field] = field(default_factory=list)
    symbols: list[str] = field(default_factory=list)
    enum_default: str | None = None
    size: int = 0
    element: _Node | None = None  # an array's items, a map's values
    branches: list[_Node] = field(default_factory=list)

    @property
    def full(self) -> str:
        return self.name.full if self.name is not None else self.type

    def alias_names(self) -> list[str]:
        """Avro's ``getAliases()``: full names, ``.name`` for a null-namespace alias of a type
        that has a namespace."""
        space = self.name.space if self.name is not None else None
        return [
            f".{a.name}" if a.space is None and space is not None else a.full for a in self.aliases
        ]


@dataclass(frozen=True, slots=True)
class _Parsed:
    """What :func:`parse` gives: the schema, and the full names of the references' schemas."""

    root: _Node
    known: frozenset[str]


class _Undefined(InvalidSchema):
    """A name no schema parsed so far defines (a reference may define it later)."""


# -- parsing ------------------------------------------------------------------------------------


def parse(subject: Subject) -> Any:
    """The schema ``subject.text`` defines, its references' named types resolved.

    Raises:
        InvalidSchema: the text (or a reference's) is not JSON, not a valid Avro schema, or uses
            a name neither it nor a reference defines.
    """
    names: dict[str, _Node] = {}
    checked: dict[str, Any] = {}
    known = _parse_references(subject.references.values(), names, checked)
    root = _parse_text(subject.text, names, checked)
    return _Parsed(root, frozenset(known))


def _parse_references(
    texts: Iterable[str], names: dict[str, _Node], checked: dict[str, Any]
) -> list[str]:
    """Parses the references' texts, each once the names it uses are known; their top-level
    full names (Confluent writes those as names in the canonical text)."""
    pending = list(texts)
    known: list[str] = []
    while pending:
        waiting: list[tuple[str, _Undefined]] = []
        for text in pending:
            try:
                root = _parse_text(text, names, checked)
            except _Undefined as exc:
                waiting.append((text, exc))
                continue
            known.append(root.full)
        if len(waiting) == len(pending):
            raise waiting[0][1]
        pending = [text for text, _ in waiting]
    return known


def _parse_text(text: str, names: dict[str, _Node], checked: dict[str, Any]) -> _Node:
    """One schema text's model; its named types join ``names`` only when it parses."""
    document = _load(text)
    scratch = dict(names)
    root = _Builder(scratch).node(document, None)
    _check_structure(document, checked)
    names.update(scratch)
    return root


def _load(text: str) -> Any:
    """The JSON of a schema text (Avro's parser allows ``//`` and ``/* */`` comments)."""
    try:
        return json.loads(_without_comments(text), parse_constant=_no_constant)
    except ValueError as exc:
        raise InvalidSchema(f"Invalid schema: not JSON: {exc}") from None


def _no_constant(word: str) -> Any:
    raise ValueError(f"{word} is not JSON")


def _without_comments(text: str) -> str:
    if "/" not in text:
        return text
    out: list[str] = []
    i, quoted = 0, False
    while i < len(text):
        c = text[i]
        if quoted:
            out.append(text[i : i + 2] if c == "\\" else c)
            i += 2 if c == "\\" else 1
            quoted = c != '"'
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = len(text) if end < 0 else end + 2
            out.append(" ")
        else:
            out.append(c)
            quoted = c == '"'
            i += 1
    return "".join(out)


def _check_structure(document: Any, checked: dict[str, Any]) -> None:
    """fastavro's validation of the schema (after :class:`_Builder`'s, whose messages are Avro
    Java's). Its name lookup is narrower than Java's (no fallback to the null namespace), so an
    unknown name is left to the builder; defaults are checked there too, as Java checks them."""
    trial = dict(checked)
    try:
        fastavro.parse_schema(
            document, named_schemas=trial, _write_hint=False, _ignore_default_error=True
        )
    except UnknownType:
        return
    except (SchemaParseException, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InvalidSchema(f"Invalid schema: {_detail(exc)}") from None
    checked.update(trial)


def _detail(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing attribute {exc}"
    return str(exc) or type(exc).__name__


def _invalid(detail: str) -> InvalidSchema:
    return InvalidSchema(f"Invalid schema: {detail}")


def _text(value: Any, key: str) -> str | None:
    """Jackson's ``textValue()`` of an attribute: the string, else ``None``."""
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, str) else None


def _valid_name(name: str | None, what: str = "Name") -> str:
    """Avro's strict name rule (Confluent's for a new schema)."""
    if name is None:
        raise _invalid(f"{what}: Null name")
    if not name:
        raise _invalid(f"{what}: Empty name")
    if not _STRICT_NAME.fullmatch(name):
        initial = _STRICT_NAME.fullmatch(name[0]) is not None
        problem = "Illegal character in" if initial else "Illegal initial character"
        raise _invalid(f'{what} "{name}" is invalid: {problem}: {name}')
    return name


def _name(text: str, space: str | None) -> _Name:
    """Avro's ``new Name(name, space)``: a dotted name carries its namespace; ``""`` is none."""
    if "." in text:
        space, text = text.rsplit(".", 1)
    return _Name(text, space or None)


def _props(document: dict[str, Any], reserved: frozenset[str]) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key not in reserved}


def _alias_list(document: dict[str, Any]) -> list[str]:
    aliases = document.get("aliases")
    if aliases is None:
        return []
    if not isinstance(aliases, list):
        raise _invalid(f"aliases not an array: {_dump(document)}")
    for alias in aliases:
        if not isinstance(alias, str):
            raise _invalid(f"alias not a string: {_dump(alias)}")
    return list(dict.fromkeys(aliases))


class _Builder:
    """Builds the model of one schema text; ``names`` holds the named types defined so far."""

    def __init__(self, names: dict[str, _Node]) -> None:
        self.names = names

    def node(self, document: Any, space: str | None) -> _Node:
        if isinstance(document, str):
            return self.lookup(document, space)
        if isinstance(document, list):
            return self.union(document, space)
        if not isinstance(document, dict):
            raise _invalid(f"Schema not yet supported: {_dump(document)}")
        kind = document.get("type")
        if not isinstance(kind, str):
            raise _invalid(f"No type: {_dump(document)}")
        if kind in _PRIMITIVES:
            return _Node(kind, _props(document, _SCHEMA_RESERVED))
        if kind in ("record", "error"):
            return self.named(document, space, "record")
        if kind in ("enum", "fixed"):
            return self.named(document, space, kind)
        if kind in ("array", "map"):
            return self.container(document, space, kind)
        return self.lookup(kind, space)  # Avro before 1.12: {"type": "AName"} names a type

    def lookup(self, name: str, space: str | None) -> _Node:
        """Avro's ``ParseContext.find``: a primitive, else the name in ``space``, else as is."""
        if name in _PRIMITIVES:
            return _Node(name)
        full = f"{space}.{name}" if space is not None and "." not in name else name
        found = self.names.get(full) or self.names.get(name)
        if found is None:
            raise _Undefined(f"Invalid schema: Undefined name: {_dump(name)}")
        return found

    def union(self, document: list[Any], space: str | None) -> _Node:
        branches = [self.node(branch, space) for branch in document]
        seen: set[str] = set()
        for branch in branches:
            if branch.type == "union":
                raise _invalid(f"Nested union: {_dump(document)}")
            if branch.full in seen:
                raise _invalid(f"Duplicate in union:{branch.full}")
            seen.add(branch.full)
        return _Node("union", branches=branches)

    def container(self, document: dict[str, Any], space: str | None, kind: str) -> _Node:
        key = "items" if kind == "array" else "values"
        if key not in document:
            what = "Array has no items type" if kind == "array" else "Map has no values type"
            raise _invalid(f"{what}: {_dump(document)}")
        element = self.node(document[key], space)
        return _Node(kind, _props(document, _SCHEMA_RESERVED), element=element)

    def named(self, document: dict[str, Any], space: str | None, kind: str) -> _Node:
        name = self.name_of(document, space)
        node = _Node(
            kind,
            _props(document, _ENUM_RESERVED if kind == "enum" else _SCHEMA_RESERVED),
            name=name,
            doc=_text(document, "doc"),
            aliases=list(
                dict.fromkeys(_name(_valid_alias(a), name.space) for a in _alias_list(document))
            ),
            is_error=document.get("type") == "error",
        )
        previous = self.names.get(name.full)
        self.names[name.full] = node  # a record may use its own name in its fields
        if kind == "record":
            self.fill_record(node, document)
        elif kind == "enum":
            _fill_enum(node, document)
        else:
            _fill_fixed(node, document)
        if previous is None:
            return node
        self.names[name.full] = previous
        if _dump(_write(previous, set(), None)) != _dump(_write(node, set(), None)):
            raise _invalid(f"Can't redefine: {name.full}")
        return previous

    def name_of(self, document: dict[str, Any], space: str | None) -> _Name:
        text = _text(document, "name")
        if text is None:
            raise _invalid(f"No name in schema: {_dump(document)}")
        given = _text(document, "namespace")
        name = _name(text, space if given is None else given)
        _valid_name(name.name)
        for part in name.space.split(".") if name.space is not None else ():
            _valid_name(part, "Namespace part")
        if name.full in _PRIMITIVES:
            raise _invalid(f"Schemas may not be named after primitives: {name.full}")
        return name

    def fill_record(self, node: _Node, document: dict[str, Any]) -> None:
        fields = document.get("fields")
        if not isinstance(fields, list):
            raise _invalid(f"Record has no fields: {_dump(document)}")
        space = node.name.space if node.name is not None else None
        for pos, item in enumerate(fields):
            made = self.field(item, space, pos)
            if any(f.name == made.name for f in node.fields):
                raise _invalid(f"Duplicate field {made.name} in record {node.full}")
            node.fields.append(made)

    def field(self, document: Any, space: str | None, pos: int) -> _Field:
        name = _text(document, "name")
        if name is None:
            raise _invalid(f"No field name: {_dump(document)}")
        _valid_name(name, "Field name")
        if "type" not in document:
            raise _invalid(f"No field type: {_dump(document)}")
        made = _Field(
            name,
            self.node(document["type"], space),
            pos,
            doc=_text(document, "doc"),
            order=_order(document),
            aliases=_alias_list(document),
            props=_props(document, _FIELD_RESERVED),
        )
        if "default" in document:
            made.default = _field_default(made, document["default"])
        return made


def _valid_alias(alias: str) -> str:
    _valid_name(alias.rsplit(".", 1)[-1], "Alias")
    return alias


def _fill_enum(node: _Node, document: dict[str, Any]) -> None:
    symbols = document.get("symbols")
    if not isinstance(symbols, list):
        raise _invalid(f"Enum has no symbols: {_dump(document)}")
    for symbol in symbols:
        checked = _valid_name(symbol if isinstance(symbol, str) else None, "Enum symbol")
        if checked in node.symbols:
            raise _invalid(f"Duplicate enum symbol: {checked}")
        node.symbols.append(checked)
    node.enum_default = _text(document, "default")
    if node.enum_default is not None and node.enum_default not in node.symbols:
        raise _invalid(
            f"The Enum Default: {node.enum_default} is not in the enum symbol set: "
            f"[{', '.join(node.symbols)}]"
        )


def _fill_fixed(node: _Node, document: dict[str, Any]) -> None:
    size = document.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or not -(2**31) <= size < 2**31:
        raise _invalid(f"Invalid or no size: {_dump(document)}")
    if size < 0:
        raise _invalid(f"Malformed data. Length is negative: {size}")
    node.size = size


def _order(document: dict[str, Any]) -> str:
    if "order" not in document:
        return "ascending"
    order = _text(document, "order")
    if order is None or order.lower() not in _ORDERS:
        raise _invalid(f"Invalid field order: {_dump(document.get('order'))}")
    return order.lower()


def _field_default(made: _Field, value: Any) -> Any:
    """A field's default as Avro keeps it (a float or double field's text default is parsed as
    a number), checked as Avro's ``Schema.isValidDefault`` checks it."""
    if made.type.type in ("float", "double") and isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise _invalid(f"Invalid default for field {made.name}: {_dump(value)}") from None
    if not _valid_default(made.type, value):
        raise _invalid(
            f"Invalid default for field {made.name}: {_dump(value)} not a "
            f"{_dump(_write(made.type, set(), None))}"
        )
    return value


def _is_int(value: Any, bits: int) -> bool:
    limit = 2 ** (bits - 1)
    return isinstance(value, int) and not isinstance(value, bool) and -limit <= value < limit


def _valid_default(node: _Node, value: Any) -> bool:
    kind = node.type
    if kind in ("string", "bytes", "enum", "fixed"):
        return isinstance(value, str)
    if kind in ("int", "long"):
        return _is_int(value, 32 if kind == "int" else 64)
    if kind in ("float", "double"):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "array":
        return isinstance(value, list) and all(_valid_value(node.element, v) for v in value)
    if kind == "map":
        return isinstance(value, dict) and all(
            _valid_value(node.element, v) for v in value.values()
        )
    if kind == "union":
        return any(_valid_value(branch, value) for branch in node.branches)
    return isinstance(value, dict) and all(
        _valid_value(f.type, value.get(f.name, f.default)) for f in node.fields
    )


def _valid_value(node: _Node | None, value: Any) -> bool:
    if node is None or value is _ABSENT:
        return False
    if node.type == "union":
        return any(_valid_default(branch, value) for branch in node.branches)
    return _valid_default(node, value)


# -- canonical text -----------------------------------------------------------------------------


def canonical(subject: Subject, normalize: bool = False) -> str:
    """The text the registry keeps for ``subject``: Confluent's ``canonicalString()`` (Avro's
    ``Schema.toString`` with the references' types written as names); with ``normalize``, that
    of Confluent's ``normalize()``.

    Raises:
        InvalidSchema: as :func:`parse`.
    """
    parsed: _Parsed = parse(subject)
    if normalize:
        text = _dump(_normal(parsed.root, set(parsed.known)))
        return canonical(Subject(subject.kind, text, subject.references))
    return _dump(_write(parsed.root, set(parsed.known), None))


def _write(node: _Node, known: set[str], space: str | None) -> Any:
    """Avro's ``Schema.toJson``, as JSON values (dicts keep Avro's attribute order)."""
    if node.type == "union":
        return [_write(branch, known, space) for branch in node.branches]
    if node.name is not None:
        if node.full in known:
            return node.name.qualified(space)
        known.add(node.full)
        return _write_named(node, node.name, known, space)
    if node.type in ("array", "map"):
        key = "items" if node.type == "array" else "values"
        assert node.element is not None
        return {"type": node.type, key: _write(node.element, known, space), **node.props}
    return {"type": node.type, **node.props} if node.props else node.type


def _write_named(node: _Node, name: _Name, known: set[str], space: str | None) -> Any:
    out: dict[str, Any] = {"type": "error" if node.is_error else node.type, "name": name.name}
    if name.space is not None and name.space != space:
        out["namespace"] = name.space
    elif name.space is None and space is not None:
        out["namespace"] = ""
    if node.doc is not None:
        out["doc"] = node.doc
    if node.type == "record":
        out["fields"] = [_write_field(f, known, name.space) for f in node.fields]
    elif node.type == "enum":
        out["symbols"] = list(node.symbols)
        if node.enum_default is not None:
            out["default"] = node.enum_default
    else:
        out["size"] = node.size
    out.update(node.props)
    if node.aliases:
        out["aliases"] = [alias.qualified(name.space) for alias in node.aliases]
    return out


def _write_field(f: _Field, known: set[str], space: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name, "type": _write(f.type, known, space)}
    if f.doc is not None:
        out["doc"] = f.doc
    if f.default is not _ABSENT:
        out["default"] = f.default
    if f.order != "ascending":
        out["order"] = f.order
    if f.aliases:
        out["aliases"] = list(f.aliases)
    out.update(f.props)
    return out


def _normal(node: _Node, env: set[str]) -> Any:
    """Confluent's ``AvroSchemaUtils.build`` (normalisation) as JSON values. A key written twice
    keeps its first place and its last value, as Jackson reads such JSON back."""
    if node.type == "union":
        return [_normal(branch, env) for branch in node.branches]
    if node.name is not None:
        if node.full in env:
            return node.full
        env.add(node.full)
        return _normal_named(node, env)
    if node.type in ("array", "map"):
        assert node.element is not None
        key = "items" if node.type == "array" else "values"
        out: dict[str, Any] = {"type": node.type, key: _normal(node.element, env)}
    elif _logical(node) is None and not node.props:
        return node.type
    else:
        out = {"type": node.type}
    _logical_props(out, node)
    _sorted_props(out, node.props)
    return out


def _normal_named(node: _Node, env: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": node.full, "type": node.type}
    if node.type == "enum":
        out["symbols"] = list(node.symbols)
    elif node.type == "fixed":
        out["size"] = node.size
    else:
        out["fields"] = [_normal_field(f, env) for f in node.fields]
    _logical_props(out, node)
    if node.doc:
        out["doc"] = node.doc
    if node.aliases:
        out["aliases"] = sorted(node.alias_names())
    if node.enum_default is not None:
        out["default"] = node.enum_default
    _sorted_props(out, node.props)
    return out


def _normal_field(f: _Field, env: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name, "type": _normal(f.type, env), "order": f.order}
    if f.doc is not None:
        out["doc"] = f.doc
    if f.aliases:
        out["aliases"] = sorted(f.aliases)
    if f.default is not _ABSENT:
        value = _as_type(f.default, f.type)
        if value is not _ABSENT:
            out["default"] = _sorted_json(value)
    _sorted_props(out, f.props)
    return out


def _sorted_props(out: dict[str, Any], props: dict[str, Any]) -> None:
    for key in sorted(props):
        out[key] = _sorted_json(props[key])


def _sorted_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted_json(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_json(item) for item in value]
    return value


def _logical_props(out: dict[str, Any], node: _Node) -> None:
    found = _logical(node)
    if found is None:
        return
    out["logicalType"] = found[0]
    if found[0] == "decimal":
        out["precision"] = found[1]
        if found[2]:
            out["scale"] = found[2]


_LOGICAL_BASES = {
    "big-decimal": ("bytes",),
    "date": ("int",),
    "time-millis": ("int",),
    "time-micros": ("long",),
    "timestamp-millis": ("long",),
    "timestamp-micros": ("long",),
    "timestamp-nanos": ("long",),
    "local-timestamp-millis": ("long",),
    "local-timestamp-micros": ("long",),
    "local-timestamp-nanos": ("long",),
}
_LOGICAL_CLASHES = ("avro.java.string", "java-class", "java-key-class", "java-element-class")


def _logical(node: _Node) -> tuple[str, int, int] | None:
    """The node's valid logical type (Avro's ``LogicalTypes.fromSchemaIgnoreInvalid``): its
    name, and a decimal's precision and scale."""
    name = node.props.get("logicalType")
    if not isinstance(name, str) or any(
        isinstance(node.props.get(p), str) for p in _LOGICAL_CLASHES
    ):
        return None
    if name == "decimal":
        return _decimal(node)
    if name == "uuid":
        ok = node.type == "string" or (node.type == "fixed" and node.size == 16)
    elif name == "duration":
        ok = node.type == "fixed" and node.size == 12
    else:
        ok = node.type in _LOGICAL_BASES.get(name, ())
    return (name, 0, 0) if ok else None


def _decimal(node: _Node) -> tuple[str, int, int] | None:
    precision: Any = node.props.get("precision")
    scale: Any = node.props.get("scale", 0)
    if node.type not in ("bytes", "fixed") or not _is_int(precision, 32) or not _is_int(scale, 32):
        return None
    most = 2**31 - 1 if node.type == "bytes" else math.floor(math.log10(2) * (8 * node.size - 1))
    if not 0 < precision <= most or not 0 <= scale <= precision:
        return None
    return ("decimal", precision, scale)


def _as_type(value: Any, node: _Node | None) -> Any:
    """Avro's ``JacksonUtils.toObject(value, schema)`` as Confluent's normalisation applies it to
    a default: a number takes its field's type; ``_ABSENT`` where Java's gives ``null`` (the
    default is then left out)."""
    if value is None:
        return None
    kind = node.type if node is not None else None
    if node is not None and kind == "union":
        for branch in node.branches:
            found = _as_type(value, branch) if branch.type != "null" else _ABSENT
            if found is not _ABSENT:
                return found
        return _ABSENT
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return _int_as(value, kind)
    if isinstance(value, float):
        return (
            value if kind in (None, "double") else _float32(value) if kind == "float" else _ABSENT
        )
    if isinstance(value, str):
        if kind in (None, "string", "enum"):
            return value
        return (
            "".join(c if ord(c) < 256 else "?" for c in value)
            if kind in ("bytes", "fixed")
            else _ABSENT
        )
    if isinstance(value, list):
        items = node.element if node is not None and kind == "array" else None
        return [_or_null(_as_type(item, items)) for item in value]
    return {key: _or_null(_as_type(item, _member(node, key))) for key, item in value.items()}


def _int_as(value: int, kind: str | None) -> Any:
    if not _is_int(value, 64):
        return _ABSENT  # Jackson's BigIntegerNode: toObject gives null
    if kind in (None, "int", "long"):
        return value
    if kind == "float":
        return _float32(float(value))
    return float(value) if kind == "double" else _ABSENT


def _member(node: _Node | None, key: str) -> _Node | None:
    if node is None:
        return None
    if node.type == "map":
        return node.element
    if node.type == "record":
        return next((f.type for f in node.fields if f.name == key), None)
    return None


def _or_null(value: Any) -> Any:
    return None if value is _ABSENT else value


def _float32(value: float) -> float:
    """Java's ``(float) value`` written by ``Float.toString`` and read back as a double."""
    try:
        single = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)
    if not math.isfinite(single):
        return float(single)
    for digits in range(1, 10):
        text = f"{single:.{digits}g}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == single:
            return float(text)
    return float(single)


def _dump(value: Any) -> str:
    """Compact JSON as Jackson writes it (Java's ``Double.toString`` for doubles)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, list):
        return "[" + ",".join(_dump(item) for item in value) + "]"
    return "{" + ",".join(f"{_quote(str(k))}:{_dump(v)}" for k, v in value.items()) + "}"


_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def _quote(text: str) -> str:
    out = [_SHORT_ESCAPES.get(c) or (f"\\u{ord(c):04X}" if ord(c) < 0x20 else c) for c in text]
    return '"' + "".join(out) + '"'


def _java_double(value: float) -> str:
    """Java's ``Double.toString`` (Jackson quotes NaN and the infinities)."""
    if math.isnan(value):
        return '"NaN"'
    if math.isinf(value):
        return '"Infinity"' if value > 0 else '"-Infinity"'
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    number = Decimal(repr(value)).normalize()
    if 1e-3 <= abs(value) < 1e7:
        text = format(number, "f")
        return text if "." in text else text + ".0"
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    shown = "".join(map(str, digits))
    power = len(shown) - 1 + exponent
    return f"{'-' if sign else ''}{shown[0]}.{shown[1:] or '0'}E{power}"


# -- compatibility ------------------------------------------------------------------------------


def backward_problems(new: Subject, old: Subject) -> list[str]:
    """Why a reader using ``new`` cannot read data written with ``old`` (empty: it can), in
    Confluent's words (``{errorType:'...', description:'...', additionalInfo:'...'}``).

    Raises:
        InvalidSchema: either text does not parse (:func:`parse`).
    """
    reader: _Parsed = parse(new)
    writer: _Parsed = parse(old)
    try:
        found = _Checker().fresh(reader.root, writer.root)
    except _Ambiguous as exc:
        return [f"Unexpected exception during compatibility check: {exc}"]
    return [_describe(problem) for problem in found]


@dataclass(frozen=True, slots=True)
class _Problem:
    """Avro's ``SchemaCompatibility.Incompatibility``: its type, message and location."""

    kind: str
    message: str
    location: tuple[str, ...]

    @property
    def path(self) -> str:
        """Avro's ``getLocation()``: a JSON pointer, the root token left out."""
        tokens = (t.replace("~", "~0").replace("/", "~1") for t in self.location[1:])
        return "/" + "/".join(tokens)


class _Ambiguous(Exception):
    """A reader field matches two writer fields (Avro raises; Confluent reports it)."""


_DESCRIPTIONS = {
    "FIXED_SIZE_MISMATCH": "The size of FIXED type field at path '{path}' in the new schema does "
    "not match with the old schema",
    "TYPE_MISMATCH": "The type (path '{path}') of a field in the new schema does not match with "
    "the old schema",
    "NAME_MISMATCH": "The name of the schema has changed (path '{path}')",
    "MISSING_ENUM_SYMBOLS": "The new schema is missing enum symbols '{info}' at path '{path}' in "
    "the old schema",
    "MISSING_UNION_BRANCH": "The new schema is missing a type inside a union field at path "
    "'{path}' in the old schema",
    "READER_FIELD_MISSING_DEFAULT_VALUE": "The field '{info}' at path '{path}' in the new schema "
    "has no default value and is missing in the old schema",
}


def _describe(problem: _Problem) -> str:
    """Confluent's ``Difference.toString()``, with the reader as ``new``, the writer ``old``."""
    description = _DESCRIPTIONS[problem.kind].format(path=problem.path, info=problem.message)
    return (
        f"{{errorType:'{problem.kind}', description:'{description}', "
        f"additionalInfo:'{problem.message}'}}"
    )


_PROMOTIONS = {
    "long": ("int",),
    "float": ("int", "long"),
    "double": ("int", "long", "float"),
    "bytes": ("string",),
    "string": ("bytes",),
}

_Result = tuple[_Problem, ...]


class _Checker:
    """Avro's ``ReaderWriterCompatibilityChecker``: one per check, memoising reader/writer node
    pairs by identity (a pair met again while in progress counts as compatible)."""

    def __init__(self) -> None:
        self.memo: dict[tuple[int, int], _Result | None] = {}

    def fresh(self, reader: _Node, writer: _Node) -> _Result:
        """A check from a new root location (Avro's two-argument ``getCompatibility``)."""
        return self.check("", reader, writer, [])

    def check(self, token: str, reader: _Node, writer: _Node, location: list[str]) -> _Result:
        location.append(token)
        key = (id(reader), id(writer))
        if key in self.memo:
            result = self.memo[key] or ()
        else:
            self.memo[key] = None
            result = self.memo[key] = self.calculate(reader, writer, location)
        location.pop()
        return result

    def calculate(self, reader: _Node, writer: _Node, location: list[str]) -> _Result:
        if reader.type == writer.type:
            return self.same_type(reader, writer, location)
        if writer.type == "union":
            found: list[_Problem] = []
            for index, branch in enumerate(writer.branches):
                found.extend(self.check(str(index), reader, branch, location))
            return tuple(found)
        if reader.type == "union":
            if any(not self.fresh(branch, writer) for branch in reader.branches):
                return ()
            return (_lacking(writer, location),)
        if writer.type in _PROMOTIONS.get(reader.type, ()):
            return ()
        return (_type_mismatch(reader, writer, location),)

    def same_type(self, reader: _Node, writer: _Node, location: list[str]) -> _Result:
        kind = reader.type
        if kind in ("array", "map"):
            assert reader.element is not None and writer.element is not None
            token = "items" if kind == "array" else "values"
            return self.check(token, reader.element, writer.element, location)
        if kind == "union":
            return self.union_branches(reader, writer, location)
        if kind not in _NAMED:
            return ()
        found = _name_problems(reader, writer, location)
        if kind == "fixed":
            return found + _size_problems(reader, writer, location)
        if kind == "enum":
            return found + _symbol_problems(reader, writer, location)
        return found + self.fields(reader, writer, location)

    def union_branches(self, reader: _Node, writer: _Node, location: list[str]) -> _Result:
        found: list[_Problem] = []
        for index, branch in enumerate(writer.branches):
            location.append(str(index))
            if self.fresh(reader, branch):
                found.append(_lacking(branch, location))
            location.pop()
        return tuple(found)

    def fields(self, reader: _Node, writer: _Node, location: list[str]) -> _Result:
        found: list[_Problem] = []
        location.append("fields")
        for reader_field in reader.fields:
            location.append(str(reader_field.pos))
            found.extend(self.field(reader_field, reader, writer, location))
            location.pop()
        location.pop()
        return tuple(found)

    def field(
        self, reader_field: _Field, reader: _Node, writer: _Node, location: list[str]
    ) -> _Result:
        writer_field = _writer_field(writer, reader_field)
        if writer_field is not None:
            return self.check("type", reader_field.type, writer_field.type, location)
        if reader_field.default is not _ABSENT:
            return ()
        if reader_field.type.type == "enum" and reader_field.type.enum_default is not None:
            return self.check("type", reader_field.type, writer, location)
        return (_Problem("READER_FIELD_MISSING_DEFAULT_VALUE", reader_field.name, tuple(location)),)


def _writer_field(writer: _Node, reader_field: _Field) -> _Field | None:
    """Avro's ``lookupWriterField``: by the reader field's name and by each of its aliases."""
    by_name = {f.name: f for f in writer.fields}
    found = [by_name[n] for n in (reader_field.name, *reader_field.aliases) if n in by_name]
    if len(found) > 1:
        raise _Ambiguous(
            f"Reader record field {reader_field.name} type:{reader_field.type.type.upper()} "
            f"pos:{reader_field.pos} matches multiple fields in writer record schema "
            f"{_dump(_write(writer, set(), None))}"
        )
    return found[0] if found else None


def _lacking(writer: _Node, location: list[str]) -> _Problem:
    message = f"reader union lacking writer type: {writer.type.upper()}"
    return _Problem("MISSING_UNION_BRANCH", message, tuple(location))


def _type_mismatch(reader: _Node, writer: _Node, location: list[str]) -> _Problem:
    message = (
        f"reader type: {reader.type.upper()} not compatible with writer type: {writer.type.upper()}"
    )
    return _Problem("TYPE_MISMATCH", message, tuple(location))


def _name_problems(reader: _Node, writer: _Node, location: list[str]) -> _Result:
    """Avro's ``schemaNameEquals``: the same short name, or a reader alias naming the writer."""
    assert reader.name is not None and writer.name is not None
    if reader.name.name == writer.name.name or writer.full in reader.alias_names():
        return ()
    return (_Problem("NAME_MISMATCH", f"expected: {writer.full}", (*location, "name")),)


def _size_problems(reader: _Node, writer: _Node, location: list[str]) -> _Result:
    if reader.size == writer.size:
        return ()
    message = f"expected: {writer.size}, found: {reader.size}"
    return (_Problem("FIXED_SIZE_MISMATCH", message, (*location, "size")),)


def _symbol_problems(reader: _Node, writer: _Node, location: list[str]) -> _Result:
    missing = sorted(set(writer.symbols) - set(reader.symbols))
    if not missing or (reader.enum_default is not None and reader.enum_default in reader.symbols):
        return ()
    message = f"[{', '.join(missing)}]"
    return (_Problem("MISSING_ENUM_SYMBOLS", message, (*location, "symbols")),)
