"""JSON Schema's rules in the registry, as Confluent's ``json-schema-provider`` has them. Pure.

- :func:`parse`: the text must be JSON, an object or a boolean, valid against its draft's
  metaschema (``$schema``: draft-04, -06, -07, 2019-09 or 2020-12; draft-07 when absent or
  unknown, as Confluent's), and every ``$ref`` must resolve (within the document, in a
  referenced schema's text, or in a draft's metaschema), through ``referencing``.
- :func:`canonical`: the text the registry stores and compares (``JsonSchema.canonicalString()``:
  Jackson's compact re-serialization, keys as given, decimals exactly as written); with
  ``normalize`` keys sorted, as ``JsonSchema.normalize()``.
- :func:`backward_problems`: Confluent's ``JsonSchema.isBackwardCompatible``, which runs
  ``SchemaDiff.compare(old, new)`` and reports the differences outside its strict set of
  compatible changes, each as ``Difference.toString()`` in Confluent's wording, the schemas named
  ``new`` and ``old`` (``labels``: Confluent's FORWARD check names them the other way round).
- :func:`differences`: every difference ``SchemaDiff.compare`` finds, compatible ones too (as
  Confluent's ``SchemaDiffTest`` lists them).

The diff works on the schema model Confluent's diff sees, since that model decides outcomes:
drafts 4 to 7 are loaded as the everit library loads them (keywords of several kinds make a
synthetic ``allOf``, ``"type": [..]`` an ``anyOf``, ``{}`` the empty schema), 2019-09 and
2020-12 as json-sKema loads them and Confluent's ``SchemaTranslator`` turns each keyword into an
everit schema and merges them (``prefixItems`` as a tuple, ``items`` as additional items).
Confluent's quirks are kept: ``$id`` is not compared in 2019-09/2020-12, an object or array
default always counts as changed, and differences come in the order of Java's hash sets.
"""

from __future__ import annotations

import copy
import json
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from jsonschema import exceptions as schema_errors
from jsonschema import validators
from jsonschema_specifications import REGISTRY as METASCHEMAS
from referencing import Registry, Specification
from referencing import jsonschema as drafts
from referencing.exceptions import (
    NoSuchAnchor,
    NoSuchResource,
    PointerToNowhere,
    Unresolvable,
    Unretrievable,
)

from headwater.registry.errors import InvalidSchema, RegistryError

if TYPE_CHECKING:
    from referencing._core import Resolver

    from headwater.registry.subject import Subject

KIND = "JSON"


def _names(text: str) -> frozenset[str]:
    """The names written in ``text``, one or more a line."""
    return frozenset(text.split())


# --- Difference types (Confluent's Difference.Type) and SchemaDiff's compatible sets ---------

#: Changes a reader with the new schema can always take (``SchemaDiff.COMPATIBLE_CHANGES_STRICT``).
COMPATIBLE_STRICT = _names(
    """
    ID_CHANGED DESCRIPTION_CHANGED TITLE_CHANGED DEFAULT_CHANGED SCHEMA_REMOVED TYPE_EXTENDED
    MAX_LENGTH_INCREASED MAX_LENGTH_REMOVED MIN_LENGTH_DECREASED MIN_LENGTH_REMOVED PATTERN_REMOVED
    MAXIMUM_INCREASED MAXIMUM_REMOVED MINIMUM_DECREASED MINIMUM_REMOVED
    EXCLUSIVE_MAXIMUM_INCREASED EXCLUSIVE_MAXIMUM_REMOVED EXCLUSIVE_MINIMUM_DECREASED
    EXCLUSIVE_MINIMUM_REMOVED MULTIPLE_OF_REDUCED MULTIPLE_OF_REMOVED
    REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED REQUIRED_ATTRIBUTE_REMOVED DEPENDENCY_ARRAY_NARROWED
    DEPENDENCY_ARRAY_REMOVED DEPENDENCY_SCHEMA_REMOVED MAX_PROPERTIES_INCREASED
    MAX_PROPERTIES_REMOVED MIN_PROPERTIES_DECREASED MIN_PROPERTIES_REMOVED
    ADDITIONAL_PROPERTIES_ADDED ADDITIONAL_PROPERTIES_EXTENDED UNEVALUATED_PROPERTIES_ADDED
    UNEVALUATED_PROPERTIES_EXTENDED PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL
    REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL
    OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL
    PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL
    PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    MAX_ITEMS_INCREASED MAX_ITEMS_REMOVED MIN_ITEMS_DECREASED MIN_ITEMS_REMOVED
    MAX_CONTAINS_INCREASED MAX_CONTAINS_REMOVED MIN_CONTAINS_DECREASED MIN_CONTAINS_REMOVED
    UNIQUE_ITEMS_REMOVED ADDITIONAL_ITEMS_ADDED ADDITIONAL_ITEMS_EXTENDED UNEVALUATED_ITEMS_ADDED
    UNEVALUATED_ITEMS_EXTENDED ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL
    ITEM_ADDED_TO_CLOSED_CONTENT_MODEL ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL
    ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    ENUM_ARRAY_EXTENDED COMBINED_TYPE_EXTENDED PRODUCT_TYPE_NARROWED SUM_TYPE_EXTENDED
    NOT_TYPE_NARROWED
    """
)

#: The strict set and what Confluent's ``LENIENT`` policy also lets through.
COMPATIBLE_LENIENT = COMPATIBLE_STRICT | _names(
    """
    ADDITIONAL_PROPERTIES_NARROWED ADDITIONAL_PROPERTIES_REMOVED UNEVALUATED_PROPERTIES_NARROWED
    UNEVALUATED_PROPERTIES_REMOVED REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL
    OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL
    PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    """
)

# --- Parsing and canonical text -----------------------------------------------------------------

_DRAFT_URLS = {
    "draft4": (
        "http://json-schema.org/draft-04/schema",
        "https://json-schema.org/draft-04/schema",
        "http://json-schema.org/schema",
        "https://json-schema.org/schema",
    ),
    "draft6": ("http://json-schema.org/draft-06/schema", "https://json-schema.org/draft-06/schema"),
    "draft7": ("http://json-schema.org/draft-07/schema", "https://json-schema.org/draft-07/schema"),
    "2019-09": (
        "http://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2019-09/schema",
    ),
    "2020-12": (
        "http://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2020-12/schema",
    ),
}
_DRAFT_OF_URL = {url: draft for draft, urls in _DRAFT_URLS.items() for url in urls}
#: Each draft's metaschema, as a validator (they keep no state between uses).
_METASCHEMA_CHECKERS: dict[str, Any] = {
    draft: checker(checker.META_SCHEMA)
    for draft, checker in (
        ("draft4", validators.Draft4Validator),
        ("draft6", validators.Draft6Validator),
        ("draft7", validators.Draft7Validator),
        ("2019-09", validators.Draft201909Validator),
        ("2020-12", validators.Draft202012Validator),
    )
}
_SPECIFICATIONS: dict[str, Specification[Any]] = {
    "draft4": drafts.DRAFT4,
    "draft6": drafts.DRAFT6,
    "draft7": drafts.DRAFT7,
    "2019-09": drafts.DRAFT201909,
    "2020-12": drafts.DRAFT202012,
}
_MODERN = ("2019-09", "2020-12")


def parse(subject: Subject) -> Any:
    """The schema of ``subject`` (a dict or a bool; numbers with a fraction as ``Decimal``),
    checked as Confluent's registry checks a new JSON schema.

    Raises:
        InvalidSchema: the text is not JSON, not an object or a boolean, not valid against its
            draft's metaschema, or has a ``$ref`` that does not resolve.
    """
    documents = _Documents(subject)
    _load_documents(documents)
    return documents.original


def canonical(subject: Subject, normalize: bool = False) -> str:
    """The text the registry keeps for ``subject`` (``JsonSchema.canonicalString()``): compact
    JSON in the given key order, or with ``normalize`` in sorted key order.

    Raises:
        InvalidSchema: the text is not JSON.
    """
    return _write(_json(subject.text, "the schema"), normalize)


def _invalid(detail: str) -> InvalidSchema:
    return InvalidSchema(f"Invalid schema of type JSON, details: {detail}")


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text, parse_float=Decimal, parse_constant=_not_a_number)
    except (ValueError, RecursionError) as error:
        raise _invalid(f"{what} is not JSON: {error}") from None


def _not_a_number(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _json_type(value: Any) -> str:
    if isinstance(value, str):
        return "STRING"
    if isinstance(value, list):
        return "ARRAY"
    return "NULL" if value is None else "NUMBER"


def _draft(schema: Any, default: str = "draft7") -> str:
    """The draft of a schema: its ``$schema`` (a trailing ``#`` aside), else ``default``; an
    unknown ``$schema`` is draft-07."""
    if isinstance(schema, dict) and isinstance(schema.get("$schema"), str):
        return _DRAFT_OF_URL.get(schema["$schema"].removesuffix("#"), "draft7")
    return default


def _check_metaschema(schema: dict[str, Any] | bool) -> None:
    try:
        errors = _METASCHEMA_CHECKERS[_draft(schema)].iter_errors(_plain(schema))
        found = schema_errors.best_match(errors)
    except RecursionError:
        raise _invalid("the schema is nested too deeply") from None
    if found is not None:
        where = "/".join(str(part) for part in found.absolute_path)
        raise _invalid(f"{found.message} at '#/{where}'")


def _plain(value: Any) -> Any:
    """``value`` with its decimals as floats, for the metaschema validator."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return float(value) if isinstance(value, Decimal) else value


def _write(value: Any, normalize: bool) -> str:
    """``value`` written as Jackson writes a tree: compact, decimals as ``BigDecimal`` writes
    them, non-ASCII characters as they are."""
    if isinstance(value, dict):
        keys = sorted(value, key=_utf16) if normalize else list(value)
        body = ",".join(f"{_string(key)}:{_write(value[key], normalize)}" for key in keys)
        return "{" + body + "}"
    if isinstance(value, list):
        return "[" + ",".join(_write(item, normalize) for item in value) + "]"
    if isinstance(value, str):
        return _string(value)
    if value is True or value is False or value is None:
        return json.dumps(value)
    if isinstance(value, Decimal):  # BigDecimal has no negative zero
        return str(value.copy_abs() if value.is_zero() else value)
    return str(value)


def _utf16(text: str) -> bytes:
    """Java's order of strings (UTF-16 code units)."""
    return text.encode("utf-16-be", "surrogatepass")


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n"}
_SHORT_ESCAPES |= {"\f": "\\f", "\r": "\\r"}


def _string(text: str) -> str:
    out = []
    for char in text:
        if char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif ord(char) < 0x20 or 0xD800 <= ord(char) <= 0xDFFF:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


# --- The model Confluent's diff sees (everit's schema classes) ----------------------------------

_ABSENT: Any = type("_Absent", (), {"__repr__": lambda self: "<absent>"})()


class _Node:
    """A loaded schema: everit's ``Schema`` (its class decides how two schemas are compared)."""

    def __init__(self) -> None:
        self.id: str | None = None
        self.title: str | None = None
        self.description: str | None = None
        self.default: Any = _ABSENT
        self.unprocessed: dict[str, Any] = {}
        self.source: Any = _ABSENT  # the JSON it was loaded from, when one value


class _Empty(_Node):
    pass


class _True(_Empty):
    pass


class _False(_Node):
    pass


class _Boolean(_Node):
    pass


class _Null(_Node):
    pass


class _String(_Node):
    def __init__(self) -> None:
        super().__init__()
        self.min_length: int | None = None
        self.max_length: int | None = None
        self.pattern: str | None = None


class _Number(_Node):
    def __init__(self, integer: bool = False) -> None:
        super().__init__()
        self.integer = integer
        self.minimum: int | Decimal | None = None
        self.maximum: int | Decimal | None = None
        self.exclusive_minimum: int | Decimal | None = None  # draft 6 on: a limit
        self.exclusive_maximum: int | Decimal | None = None
        self.multiple_of: int | Decimal | None = None


class _Object(_Node):
    def __init__(self) -> None:
        super().__init__()
        self.properties: dict[str, _Node] = {}
        self.required: list[str] = []
        self.additional = True
        self.additional_schema: _Node | None = None
        self.pattern_properties: dict[str, _Node] = {}
        self.property_dependencies: dict[str, set[str]] = {}
        self.schema_dependencies: dict[str, _Node] = {}
        self.min_properties: int | None = None
        self.max_properties: int | None = None
        self.property_names: _Node | None = None


class _Array(_Node):
    def __init__(self) -> None:
        super().__init__()
        self.all_items: _Node | None = None
        self.item_schemas: list[_Node] | None = None
        self.additional = True
        self.additional_schema: _Node | None = None
        self.contains: _Node | None = None
        self.min_items: int | None = None
        self.max_items: int | None = None
        self.unique = False


class _Enum(_Node):
    def __init__(self, values: Sequence[Any]) -> None:
        super().__init__()
        self.values = list(values)


class _Const(_Node):
    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value


class _Combined(_Node):
    def __init__(self, criterion: str, subschemas: Iterable[_Node], generated: bool = False):
        super().__init__()
        self.criterion = criterion  # allOf, anyOf or oneOf
        self.subschemas = list(subschemas)
        self.generated = generated  # made by SchemaTranslator, not written as a combinator


class _Not(_Node):
    def __init__(self, must_not: _Node) -> None:
        super().__init__()
        self.must_not = must_not


class _Target:
    """Where a ``$ref`` leads: shared by every reference to one schema, set once it is loaded
    (a recursive reference meets it while it is still being loaded)."""

    def __init__(self) -> None:
        self.node: _Node | None = None


class _Reference(_Node):
    def __init__(self, ref: str, target: _Target) -> None:
        super().__init__()
        self.ref = ref
        self.target = target


class _Conditional(_Node):
    def __init__(self, parts: Mapping[str, _Node]) -> None:
        super().__init__()
        self.parts = dict(parts)


def _clone(node: _Node) -> _Node:
    """A copy of ``node`` whose own collections may change (a translator's ``toBuilder``)."""
    twin = copy.copy(node)
    for name, value in vars(twin).items():
        if name == "property_dependencies":
            setattr(twin, name, {key: set(deps) for key, deps in value.items()})
        elif isinstance(value, dict | list) and name not in ("source", "default", "value"):
            setattr(twin, name, copy.copy(value))
    return twin


# --- Loading: documents and references ----------------------------------------------------------


class _Documents:
    """The schema and the texts it references, as ``referencing`` resources: a ``$ref`` resolves
    against its enclosing ``$id`` to a place in the schema, a referenced text, or a metaschema."""

    def __init__(self, subject: Subject) -> None:
        self.original = _json(subject.text, "the schema")
        if not isinstance(self.original, dict | bool):
            raise _invalid(
                "Invalid JSON schema: expected an object or boolean at the root, found "
                + _json_type(self.original)
            )
        _check_metaschema(self.original)
        self.draft = _draft(self.original)
        self.root = _merged_defs(self.original)
        base = _id_of(self.root, self.draft) or ""
        resources = [(base, self._resource(self.root, self.draft))]
        if base:
            resources.append(("", resources[0][1]))
        for name, text in subject.references.items():
            referenced = _merged_defs(_json(text, f"the referenced schema {name!r}"))
            resource = self._resource(referenced, _draft(referenced, self.draft))
            resources += [(name, resource), (urljoin(base, name), resource)]
        registry: Registry[Any] = METASCHEMAS.with_resources(resources)
        self.registry = registry.crawl()
        self.resolver = self.registry.resolver(base_uri=base)

    @staticmethod
    def _resource(contents: Any, draft: str) -> Any:
        return _SPECIFICATIONS[draft].create_resource(contents)

    def within(self, value: Any, resolver: Resolver[Any]) -> Resolver[Any]:
        """The resolver for the inside of ``value``: its ``$id`` changes the base."""
        if not isinstance(value, dict):
            return resolver
        return resolver.in_subresource(self._resource(value, self.draft))

    def lookup(self, ref: str, resolver: Resolver[Any]) -> tuple[Any, Resolver[Any]]:
        try:
            resolved = resolver.lookup(ref)
        except Unresolvable as error:
            raise _invalid(f"$ref '{ref}' cannot be resolved: {_unresolved(error)}") from None
        return resolved.contents, resolved.resolver


def _unresolved(error: Unresolvable) -> str:
    if isinstance(error, PointerToNowhere):
        return f"nothing is at {error.ref} in {error.resource.id() or 'the schema'}"
    if isinstance(error, NoSuchAnchor):
        return f"no anchor {error.anchor!r}"
    if isinstance(error.__context__, NoSuchResource) or isinstance(error, Unretrievable):
        return (
            f"no schema is known as {error.ref} (the registry fetches none: reference a "
            "registered schema by that name)"
        )
    return str(error)


def _id_of(schema: Any, draft: str) -> str | None:
    if not isinstance(schema, dict):
        return None
    found = schema.get("id" if draft == "draft4" else "$id")
    return found if isinstance(found, str) else None


def _merged_defs(schema: Any) -> Any:
    """Confluent's ``mergeDefBuckets``: top-level ``definitions`` also under ``$defs``."""
    if not isinstance(schema, dict):
        return schema
    source, target = schema.get("definitions"), schema.get("$defs", {})
    if not isinstance(source, dict) or not source or not isinstance(target, dict):
        return schema
    return {**schema, "$defs": {**source, **target}}


def _load(subject: Subject) -> _Node:
    """``subject``'s schema as Confluent's diff sees it.

    Raises:
        InvalidSchema: as :func:`parse`.
    """
    return _load_documents(_Documents(subject))


def _load_documents(documents: _Documents) -> _Node:
    loader: _Loader
    if documents.draft in _MODERN:
        loader = _ModernLoader(documents)
    else:
        loader = _EveritLoader(documents)
    try:
        return loader.load(documents.root, documents.resolver)
    except RecursionError:
        raise _invalid("the schema is nested too deeply") from None


class _Loader:
    """Loads a schema's JSON into the model; every ``$ref`` to one place shares what it leads
    to, loaded once (recursive schemas make cycles, as everit's do)."""

    def __init__(self, documents: _Documents) -> None:
        self.documents = documents
        self.targets: dict[int, _Target] = {}
        self.draft = documents.draft

    def load(self, value: Any, resolver: Resolver[Any]) -> _Node:
        if value is True:
            return _True()
        if value is False:
            return _False()
        if not isinstance(value, dict):
            raise _invalid(f"a $ref leads to {_json_type(value).lower()}, not to a schema")
        node = self.load_object(value, self.documents.within(value, resolver))
        node.source = value
        return node

    def load_object(self, value: dict[str, Any], resolver: Resolver[Any]) -> _Node:
        raise NotImplementedError

    def reference(self, ref: str, resolver: Resolver[Any]) -> _Reference:
        contents, inner = self.documents.lookup(ref, resolver)
        target = self.targets.get(id(contents))
        if target is None:
            target = self.targets[id(contents)] = _Target()
            target.node = self.load(contents, inner)
        return _Reference(ref, target)


# --- Loading drafts 4 to 7 as everit does --------------------------------------------------------

_STRING_KEYWORDS = ("minLength", "maxLength", "pattern", "format")
_NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_OBJECT_KEYWORDS = (
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "dependencies",
    "patternProperties",
    "additionalProperties",
)
_ARRAY_KEYWORDS = ("items", "additionalItems", "minItems", "maxItems", "uniqueItems")
#: everit takes the combinators present from a Java ``HashSet``, in this order.
_COMBINATORS = ("allOf", "oneOf", "anyOf")
_CONDITIONAL = ("if", "then", "else")


class _EveritLoader(_Loader):
    """Drafts 4, 6 and 7 as everit's ``SchemaLoader`` loads them: one schema per kind of keyword
    found (enum, combinators, not, const, type, then the kinds sniffed from what is left), several
    making a synthetic ``allOf``; a ``$ref`` hides its siblings."""

    def load_object(self, value: dict[str, Any], resolver: Resolver[Any]) -> _Node:
        if "$ref" in value:
            built: list[_Node] = [self.reference(_text(value["$ref"], "$ref"), resolver)]
            consumed = {"$ref"}
        else:
            built, consumed = self.extract(value, resolver)
        if len(built) == 1:
            node = built[0]
        else:
            node = _Combined("allOf", built) if built else _Empty()
        self.common(node, {key: item for key, item in value.items() if key not in consumed})
        return node

    def common(self, node: _Node, rest: dict[str, Any]) -> None:
        id_keyword = "id" if self.draft == "draft4" else "$id"
        if id_keyword in rest:
            node.id = _text(rest.pop(id_keyword), id_keyword)
        for key in ("title", "description"):
            if key in rest:
                setattr(node, key, _text(rest.pop(key), key))
        if self.draft == "draft7":
            rest.pop("readOnly", None)
            rest.pop("writeOnly", None)
        if "default" in rest:
            node.default = rest.pop("default")
        node.unprocessed = rest

    def keywords(self, kind: str) -> tuple[str, ...]:
        if kind == "object":
            return _OBJECT_KEYWORDS + (("propertyNames",) if self.draft != "draft4" else ())
        if kind == "array":
            return _ARRAY_KEYWORDS + (("contains",) if self.draft != "draft4" else ())
        return {"string": _STRING_KEYWORDS, "number": _NUMBER_KEYWORDS}.get(kind, ())

    def extract(
        self, value: dict[str, Any], resolver: Resolver[Any]
    ) -> tuple[list[_Node], set[str]]:
        built: list[_Node] = []
        consumed: set[str] = set()
        if "enum" in value:
            built.append(_Enum(_array(value["enum"], "enum")))
            consumed.add("enum")
        for key in _COMBINATORS:
            if key in value:
                children = _array(value[key], key)
                built.append(_Combined(key, [self.load(child, resolver) for child in children]))
                consumed.add(key)
        if "not" in value:
            built.append(_Not(self.load(value["not"], resolver)))
            consumed.add("not")
        if "const" in value and self.draft != "draft4":
            built.append(_Const(value["const"]))
            consumed.add("const")
        if "type" in value:
            built.append(self.typed(value, resolver, consumed))
        built.extend(self.sniffed(value, resolver, consumed))
        return built, consumed

    def typed(self, value: dict[str, Any], resolver: Resolver[Any], consumed: set[str]) -> _Node:
        consumed.add("type")
        kind = value["type"]
        if isinstance(kind, list):
            return _Combined("anyOf", [self.of_type(t, value, resolver, consumed) for t in kind])
        return self.of_type(kind, value, resolver, consumed)

    def of_type(
        self, kind: Any, value: dict[str, Any], resolver: Resolver[Any], consumed: set[str]
    ) -> _Node:
        family = {"integer": "number"}.get(kind, kind)
        consumed.update(key for key in self.keywords(family) if key in value)
        if kind in ("boolean", "null"):
            return _Boolean() if kind == "boolean" else _Null()
        if kind == "string":
            return _string_node(value)
        if kind in ("integer", "number"):
            return self.number(value, integer=kind == "integer")
        if kind == "array":
            return self.array(value, resolver)
        if kind == "object":
            return self.object(value, resolver)
        raise _invalid(f"unknown type: [{kind}]")

    def sniffed(
        self, value: dict[str, Any], resolver: Resolver[Any], consumed: set[str]
    ) -> list[_Node]:
        left = [key for key in value if key not in consumed]
        built: list[_Node] = []
        makers: list[tuple[str, Callable[[], _Node]]] = [
            ("array", lambda: self.array(value, resolver)),
            ("object", lambda: self.object(value, resolver)),
            ("number", lambda: self.number(value, integer=False)),
            ("string", lambda: _string_node(value)),
        ]
        for family, make in makers:
            if any(key in left for key in self.keywords(family)):
                consumed.update(key for key in self.keywords(family) if key in value)
                built.append(make())
        if self.draft == "draft7" and any(key in left for key in _CONDITIONAL):
            consumed.update(key for key in _CONDITIONAL if key in value)
            parts = {key: self.load(value[key], resolver) for key in _CONDITIONAL if key in value}
            built.append(_Conditional(parts))
        return built

    def number(self, value: dict[str, Any], integer: bool) -> _Number:
        node = _Number(integer)
        node.minimum = _number(value.get("minimum"))
        node.maximum = _number(value.get("maximum"))
        node.multiple_of = _number(value.get("multipleOf"))
        if self.draft != "draft4":  # draft 4's exclusive limits are flags, never compared
            node.exclusive_minimum = _number(value.get("exclusiveMinimum"))
            node.exclusive_maximum = _number(value.get("exclusiveMaximum"))
        return node

    def array(self, value: dict[str, Any], resolver: Resolver[Any]) -> _Array:
        node = _Array()
        node.min_items = _integer(value.get("minItems"))
        node.max_items = _integer(value.get("maxItems"))
        node.unique = value.get("uniqueItems") is True
        more = value.get("additionalItems")
        if isinstance(more, bool):
            node.additional = more
        elif isinstance(more, dict):
            node.additional_schema = self.load(more, resolver)
        items = value.get("items")
        if isinstance(items, list):
            node.item_schemas = [self.load(item, resolver) for item in items]
        elif isinstance(items, dict | bool):
            node.all_items = self.load(items, resolver)
        if "contains" in value and self.draft != "draft4":
            node.contains = self.load(value["contains"], resolver)
        return node

    def object(self, value: dict[str, Any], resolver: Resolver[Any]) -> _Object:
        node = _Object()
        node.min_properties = _integer(value.get("minProperties"))
        node.max_properties = _integer(value.get("maxProperties"))
        id_keyword = "id" if self.draft == "draft4" else "$id"
        for name, child in _mapping(value.get("properties", {}), "properties").items():
            if name != id_keyword or isinstance(child, dict):
                node.properties[name] = self.load(child, resolver)
        more = value.get("additionalProperties")
        if isinstance(more, bool):
            node.additional = more
        elif isinstance(more, dict):
            node.additional_schema = self.load(more, resolver)
        node.required = [_text(name, "required") for name in value.get("required", [])]
        for pattern, child in _mapping(
            value.get("patternProperties", {}), "patternProperties"
        ).items():
            node.pattern_properties[pattern] = self.load(child, resolver)
        for name, dependency in _mapping(value.get("dependencies", {}), "dependencies").items():
            if isinstance(dependency, list):
                node.property_dependencies[name] = {_text(d, name) for d in dependency}
            else:
                node.schema_dependencies[name] = self.load(dependency, resolver)
        if "propertyNames" in value and self.draft != "draft4":
            node.property_names = self.load(value["propertyNames"], resolver)
        return node


def _string_node(value: dict[str, Any]) -> _String:
    node = _String()
    node.min_length = _integer(value.get("minLength"))
    node.max_length = _integer(value.get("maxLength"))
    if "pattern" in value:
        node.pattern = _text(value["pattern"], "pattern")
    return node


def _text(value: Any, keyword: str) -> str:
    if not isinstance(value, str):
        raise _invalid(f"{keyword}: expected a string, found {_json_type(value)}")
    return value


def _array(value: Any, keyword: str) -> list[Any]:
    if not isinstance(value, list):
        raise _invalid(f"{keyword}: expected an array")
    return value


def _mapping(value: Any, keyword: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _invalid(f"{keyword}: expected an object")
    return value


def _number(value: Any) -> int | Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        return None
    return value


def _integer(value: Any) -> int | None:
    found = _number(value)
    return None if found is None else int(found)


# --- Loading 2019-09 and 2020-12 as json-sKema and Confluent's SchemaTranslator do ----------------

#: json-sKema's keywords: any other member of a schema is kept as an unprocessed property.
_KNOWN = _names(
    """
    $id $anchor $dynamicRef $dynamicAnchor $ref $defs $schema $vocabulary minLength maxLength
    allOf anyOf oneOf additionalProperties properties patternProperties title description
    readOnly writeOnly deprecated default enum const false true type not required maximum minimum
    exclusiveMaximum exclusiveMinimum multipleOf uniqueItems items prefixItems contains
    minContains maxContains if then else dependentSchemas dependentRequired unevaluatedItems
    unevaluatedProperties minItems maxItems minProperties maxProperties propertyNames pattern
    format
    """
)
_SEPARATE = _names(
    "properties patternProperties title description default unevaluatedItems "
    "unevaluatedProperties $defs"
)
_MERGEABLE: tuple[type[_Node], ...] = (_Array, _Number, _Object, _String)


class _ModernLoader(_Loader):
    """2019-09 and 2020-12: json-sKema makes one schema per keyword, in the order written, and
    ``SchemaTranslator`` turns each into an everit schema and joins them (schemas of one kind
    merge, ``"type": [..]`` takes what fits its types, else a generated ``allOf``); then the
    properties, the pattern properties and the unevaluated keywords are joined in."""

    def load_object(self, value: dict[str, Any], resolver: Resolver[Any]) -> _Node:
        product: _Node | None = None
        for key, item in value.items():
            if key in _SEPARATE:
                continue
            part = self.keyword(key, item, value, resolver)
            if part is not None:
                product = part if product is None else _join("", product, part)
        product = self.separate(value, resolver, product or _neutral())
        return self.finish(value, product)

    def separate(self, value: dict[str, Any], resolver: Resolver[Any], product: _Node) -> _Node:
        parts: list[_Node] = []
        for name, child in _mapping(value.get("properties", {}), "properties").items():
            parts.append(_object_with(properties={name: self.load(child, resolver)}))
        if parts:
            product = _join("", product, _fold(parts))
        parts = []
        for pattern, child in _mapping(
            value.get("patternProperties", {}), "patternProperties"
        ).items():
            parts.append(_object_with(pattern_properties={pattern: self.load(child, resolver)}))
        if parts:
            product = _join("", product, _fold(parts))
        if "unevaluatedItems" in value:
            array = _Array()
            array.unprocessed = {"unevaluatedItems": self.load(value["unevaluatedItems"], resolver)}
            product = _join("", product, array)
        if "unevaluatedProperties" in value:
            child = self.load(value["unevaluatedProperties"], resolver)
            product = _join("", product, _object_with(unprocessed={"unevaluatedProperties": child}))
        return product

    def finish(self, value: dict[str, Any], product: _Node) -> _Node:
        if _generated(product, "allOf"):
            assert isinstance(product, _Combined)
            if not product.subschemas:
                product = _Empty()
            elif len(product.subschemas) == 1:
                product = _clone(product.subschemas[0])
        if "title" in value:
            product.title = _text(value["title"], "title")
        if "description" in value:
            product.description = _text(value["description"], "description")
        if value.get("default") is not None:
            product.default = value["default"]
        unprocessed = {key: item for key, item in value.items() if key not in _KNOWN}
        if isinstance(value.get("$defs"), dict) and value["$defs"]:
            unprocessed["$defs"] = value["$defs"]
        if unprocessed:  # the translator replaces what the joined schemas kept
            product.unprocessed = unprocessed
        return product

    def keyword(
        self, key: str, item: Any, value: dict[str, Any], resolver: Resolver[Any]
    ) -> _Node | None:
        if key in ("$ref", "$dynamicRef"):
            return self.reference(_text(item, key), resolver)
        if key in ("allOf", "anyOf", "oneOf"):
            product: _Node = _Combined(key, [])
            for child in _array(item, key):
                product = _join(key, product, self.load(child, resolver))
            return product
        if key == "type":
            if isinstance(item, list):
                return _Combined("anyOf", [_of_type(kind) for kind in item], generated=True)
            return _of_type(item)
        if key in ("format", "readOnly", "writeOnly"):
            return _neutral()
        maker = _KEYWORD_MAKERS.get(key)
        if maker is not None:
            return maker(item)
        return self.keyword_with_schemas(key, item, value, resolver)

    def keyword_with_schemas(
        self, key: str, item: Any, value: dict[str, Any], resolver: Resolver[Any]
    ) -> _Node | None:
        load = self.load
        if key == "not":
            return _Not(load(item, resolver))
        if key == "additionalProperties":
            return _additional(_Object(), load(item, resolver))
        if key == "propertyNames":
            return _object_with(property_names=load(item, resolver))
        if key == "dependentSchemas":
            found = {name: load(child, resolver) for name, child in _mapping(item, key).items()}
            return _object_with(schema_dependencies=found)
        if key == "if":
            parts = {k: load(value[k], resolver) for k in _CONDITIONAL if k in value}
            return _Conditional(parts)
        return self.array_keyword(key, item, value, resolver)

    def array_keyword(
        self, key: str, item: Any, value: dict[str, Any], resolver: Resolver[Any]
    ) -> _Node | None:
        array = _Array()
        if key == "contains":
            array.contains = self.load(item, resolver)
            least = _number(value.get("minContains"))
            array.unprocessed = {"minContains": 1 if least is None else least}
            if _number(value.get("maxContains")) is not None:
                array.unprocessed["maxContains"] = value["maxContains"]
        elif key == "prefixItems":
            array.item_schemas = [self.load(child, resolver) for child in _array(item, key)]
        elif key == "items" and isinstance(item, list):  # 2019-09's tuple form
            array.item_schemas = [self.load(child, resolver) for child in item]
        elif key == "items":
            child = self.load(item, resolver)
            if isinstance(child, _False):
                array.additional = False
            elif not isinstance(child, _True):
                if isinstance(value.get("prefixItems"), list):
                    array.additional_schema = child
                else:
                    array.all_items = child
        else:
            return None
        return array


def _of_type(kind: Any) -> _Node:
    makers: dict[Any, Callable[[], _Node]] = {
        "string": _String,
        "integer": lambda: _Number(integer=True),
        "number": _Number,
        "boolean": _Boolean,
        "null": _Null,
        "array": _Array,
        "object": _Object,
    }
    if kind not in makers:
        raise _invalid(f"unknown type: [{kind}]")
    return makers[kind]()


def _neutral() -> _Combined:
    """What the translator makes of a keyword it ignores: an empty generated ``allOf``."""
    return _Combined("allOf", [], generated=True)


def _object_with(**fields: Any) -> _Object:
    node = _Object()
    for name, value in fields.items():
        setattr(node, name, value)
    return node


def _additional(node: _Object, child: _Node) -> _Object:
    if isinstance(child, _False):
        node.additional = False
    elif not isinstance(child, _True):
        node.additional_schema = child
    return node


def _with(node: _Node, **fields: Any) -> _Node:
    for name, value in fields.items():
        setattr(node, name, value)
    return node


_KEYWORD_MAKERS: dict[str, Callable[[Any], _Node]] = {
    "required": lambda v: _object_with(
        required=[_text(p, "required") for p in _array(v, "required")]
    ),
    "minLength": lambda v: _with(_String(), min_length=_integer(v)),
    "maxLength": lambda v: _with(_String(), max_length=_integer(v)),
    "pattern": lambda v: _with(_String(), pattern=_text(v, "pattern")),
    "minItems": lambda v: _with(_Array(), min_items=_integer(v)),
    "maxItems": lambda v: _with(_Array(), max_items=_integer(v)),
    "uniqueItems": lambda v: _with(_Array(), unique=v is True),
    "minProperties": lambda v: _object_with(min_properties=_integer(v)),
    "maxProperties": lambda v: _object_with(max_properties=_integer(v)),
    "minimum": lambda v: _with(_Number(), minimum=_number(v)),
    "maximum": lambda v: _with(_Number(), maximum=_number(v)),
    "exclusiveMinimum": lambda v: _with(_Number(), exclusive_minimum=_number(v)),
    "exclusiveMaximum": lambda v: _with(_Number(), exclusive_maximum=_number(v)),
    "multipleOf": lambda v: _with(_Number(), multiple_of=_number(v)),
    "enum": lambda v: _Enum(_array(v, "enum")),
    "const": _Const,
    "dependentRequired": lambda v: _object_with(
        property_dependencies={
            k: set(_array(d, "dependentRequired"))
            for k, d in _mapping(v, "dependentRequired").items()
        }
    ),
}


def _fold(parts: list[_Node]) -> _Node:
    product = parts[0]
    for part in parts[1:]:
        product = _join("", product, part)
    return product


def _join(parent: str, previous: _Node, current: _Node) -> _Node:
    """``SchemaTranslator.SchemaContext.join``: ``current`` joined to what came before it in a
    schema (``parent`` empty) or in a combinator (``parent`` its criterion)."""
    for kind in _MERGEABLE:
        if isinstance(previous, kind) and isinstance(current, kind):
            return _merge(_clone(previous), current)
    if _generated(previous, "anyOf") and _contains_type(previous, current):
        assert isinstance(previous, _Combined)
        return _Combined("anyOf", _accumulate(list(previous.subschemas), current), True)
    if _generated(current, "anyOf") and _contains_type(current, previous):
        assert isinstance(current, _Combined)
        return _Combined("anyOf", _accumulate(list(current.subschemas), previous), True)
    if parent and isinstance(previous, _Combined):
        return _Combined(parent, [*previous.subschemas, *_flatten(current)])
    merged: list[_Node] = []
    for node in [*_flatten(previous), *_flatten(current)]:
        merged = _accumulate(merged, node)
    return _Combined("allOf", merged, generated=True)


def _generated(node: _Node, criterion: str) -> bool:
    return isinstance(node, _Combined) and node.generated and node.criterion == criterion


def _contains_type(combined: _Node, node: _Node) -> bool:
    assert isinstance(combined, _Combined)
    return any(_types_equal(sub, node) for sub in combined.subschemas)


def _flatten(node: _Node) -> list[_Node]:
    if _generated(node, "allOf"):
        assert isinstance(node, _Combined)
        return list(node.subschemas)
    return [node]


def _accumulate(product: list[_Node], current: _Node) -> list[_Node]:
    for index, node in enumerate(product):
        if type(node) is type(current) and isinstance(node, _MERGEABLE):
            product[index] = _merge(_clone(node), current)
            return product
    product.append(current)
    return product


def _merge(builder: _Node, other: _Node) -> _Node:
    """``SchemaUtils.merge``: what ``other`` sets, set on ``builder`` too."""
    for name in ("title", "description", "id"):
        if getattr(other, name) is not None:
            setattr(builder, name, getattr(other, name))
    if other.default is not _ABSENT:
        builder.default = other.default
    builder.unprocessed = {**builder.unprocessed, **other.unprocessed}
    if isinstance(builder, _Object) and isinstance(other, _Object):
        _merge_object(builder, other)
    elif isinstance(builder, _Array) and isinstance(other, _Array):
        _merge_array(builder, other)
    else:
        _merge_values(builder, other)
    return builder


_VALUE_FIELDS = {
    _String: ("min_length", "max_length", "pattern"),
    _Number: ("minimum", "maximum", "exclusive_minimum", "exclusive_maximum", "multiple_of"),
    _Array: ("min_items", "max_items", "all_items", "additional_schema", "contains"),
    _Object: ("min_properties", "max_properties", "additional_schema", "property_names"),
}


def _merge_values(builder: _Node, other: _Node) -> None:
    for name in _VALUE_FIELDS.get(type(other), ()):
        if getattr(other, name) is not None:
            setattr(builder, name, getattr(other, name))
    if isinstance(builder, _Number) and isinstance(other, _Number) and other.integer:
        builder.integer = True


def _merge_object(builder: _Object, other: _Object) -> None:
    _merge_values(builder, other)
    builder.pattern_properties.update(other.pattern_properties)
    builder.properties.update(other.properties)
    builder.additional = builder.additional and other.additional
    builder.required.extend(other.required)
    for name, deps in other.property_dependencies.items():
        builder.property_dependencies.setdefault(name, set()).update(deps)
    builder.schema_dependencies.update(other.schema_dependencies)


def _merge_array(builder: _Array, other: _Array) -> None:
    _merge_values(builder, other)
    builder.unique = builder.unique or other.unique
    if other.item_schemas is not None:
        builder.item_schemas = [*(builder.item_schemas or []), *other.item_schemas]
    builder.additional = builder.additional and other.additional


# --- Confluent's SchemaDiff -----------------------------------------------------------------------

_Difference = tuple[str, str]  # Difference.Type, JSON path ("#/properties/foo")


class _Shared:
    """What every context of one comparison shares (``Context``'s memo, the pairs being compared,
    the pairs a previous pass found incompatible, and whether a cycle was assumed compatible)."""

    def __init__(self, seed: Mapping[tuple[int, int], tuple[_Difference, ...]]) -> None:
        self.memo: dict[tuple[int, int], tuple[_Difference, ...]] = {}
        self.in_progress: set[tuple[int, int]] = set()
        self.seed = seed
        self.optimistic = False


class _Context:
    """Confluent's ``Context``: where the comparison is, and what differences it found there."""

    def __init__(self, compatible: frozenset[str], shared: _Shared, path: Sequence[str] = ()):
        self.compatible = compatible
        self.shared = shared
        self.path = list(path)
        self.found: list[_Difference] = []

    def sub(self) -> _Context:
        return _Context(self.compatible, self.shared, self.path)

    @contextmanager
    def at(self, segment: str) -> Iterator[None]:
        self.path.append(segment)
        try:
            yield
        finally:
            self.path.pop()

    def add(self, kind: str, attribute: str | None = None) -> None:
        path = [*self.path, attribute] if attribute is not None else self.path
        self.found.append((kind, "#/" + "/".join(path)))

    def add_all(self, found: Iterable[_Difference]) -> None:
        self.found.extend(found)

    def add_rebased(self, found: Iterable[_Difference]) -> None:
        if not self.path:
            self.found.extend(found)
            return
        prefix = "#/" + "/".join(self.path)
        for kind, path in found:
            self.found.append((kind, prefix if len(path) <= 2 else f"{prefix}/{path[2:]}"))

    def is_compatible(self) -> bool:
        return all(kind in self.compatible for kind, _ in self.found)


class _RecursionAllowance:
    """Room for deep comparisons: recursive schemas put many pairs on the stack at once (Java's
    stack holds them). The limit is raised while any comparison runs, restored after the last."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.lock = threading.Lock()
        self.running = 0
        self.saved = 0

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self.lock:
            if self.running == 0:
                self.saved = sys.getrecursionlimit()
                sys.setrecursionlimit(max(self.saved, self.limit))
            self.running += 1
        try:
            yield
        except RecursionError:
            raise RegistryError("The schemas are nested too deeply to compare") from None
        finally:
            with self.lock:
                self.running -= 1
                if self.running == 0:
                    sys.setrecursionlimit(self.saved)


_deep = _RecursionAllowance(20_000)


def _diff(original: _Node, update: _Node, compatible: frozenset[str]) -> list[_Difference]:
    """``SchemaDiff.compare``: passes until the pairs found incompatible stop growing, each
    feeding them to the next, so that a recursive cycle assumed compatible is checked again."""
    with _deep():
        return _passes(original, update, compatible)


def _passes(original: _Node, update: _Node, compatible: frozenset[str]) -> list[_Difference]:
    seed: Mapping[tuple[int, int], tuple[_Difference, ...]] = {}
    while True:
        shared = _Shared(seed)
        context = _Context(compatible, shared)
        _compare(context, original, update)
        incompatible = {
            pair: found
            for pair, found in shared.memo.items()
            if any(kind not in compatible for kind, _ in found)
        }
        if not shared.optimistic or incompatible.keys() == seed.keys():
            return context.found
        seed = incompatible


def _compare(ctx: _Context, original: _Node | None, update: _Node | None) -> None:
    if original is None and update is None:
        return
    if original is None:
        ctx.add("SCHEMA_ADDED")
        return
    if update is None:
        ctx.add("SCHEMA_REMOVED")
        return
    ctx.add_rebased(_memoized(ctx, _referred(original), _referred(update)))


def _referred(node: _Node) -> _Node:
    if isinstance(node, _Reference):
        if node.target.node is None:
            raise _invalid(f"Unresolved $ref '{node.ref}'")
        return node.target.node
    return node


def _memoized(ctx: _Context, original: _Node, update: _Node) -> tuple[_Difference, ...]:
    shared = ctx.shared
    pair = (id(original), id(update))
    if pair in shared.memo:
        return shared.memo[pair]
    if pair in shared.in_progress:
        if pair in shared.seed:
            return shared.seed[pair]
        shared.optimistic = True
        return ()
    shared.in_progress.add(pair)
    try:
        inner = _Context(ctx.compatible, shared)
        _compare_types(inner, original, update)
        shared.memo[pair] = tuple(inner.found)
        return shared.memo[pair]
    finally:
        shared.in_progress.discard(pair)


def _types_equal(one: _Node, other: _Node) -> bool:
    return type(one) is type(other) or (isinstance(one, _Combined) and isinstance(other, _Combined))


def _compare_types(ctx: _Context, original: _Node, update: _Node) -> None:
    if _against_union(ctx, original, update):
        return
    if not _types_equal(original, update):
        if isinstance(original, _False) or isinstance(update, _Empty):
            return
        if (
            original.unprocessed.get("connect.type")
            == "bytes"
            == update.unprocessed.get("connect.type")
        ):
            return
        ctx.add("TYPE_CHANGED")
        return
    for name, kind in (("id", "ID"), ("title", "TITLE"), ("description", "DESCRIPTION")):
        if getattr(original, name) != getattr(update, name):
            ctx.add(f"{kind}_CHANGED")
    if not _same_default(original.default, update.default):
        ctx.add("DEFAULT_CHANGED")
    compare = _COMPARERS.get(type(original))
    if compare is not None:
        compare(ctx, original, update)


def _against_union(ctx: _Context, original: _Node, update: _Node) -> bool:
    """A schema against a combined one, or the reverse: it stands when it matches a singleton
    union's member, a member of an ``anyOf``/``oneOf`` update, or a member of an ``allOf``
    original."""
    if isinstance(update, _Combined) and not isinstance(original, _Combined):
        pairs = [(original, member) for member in update.subschemas]
        union = update.criterion in ("anyOf", "oneOf")
        return _matches_member(ctx, pairs, union, "SUM_TYPE_EXTENDED")
    if isinstance(original, _Combined) and not isinstance(update, _Combined):
        pairs = [(member, update) for member in original.subschemas]
        return _matches_member(ctx, pairs, original.criterion == "allOf", "PRODUCT_TYPE_NARROWED")
    return False


def _matches_member(
    ctx: _Context, pairs: list[tuple[_Node, _Node]], any_member: bool, change: str
) -> bool:
    if len(pairs) != 1 and not any_member:
        return False
    for one, other in pairs:
        sub = ctx.sub()
        _compare(sub, one, other)
        if sub.is_compatible():
            ctx.add_all(sub.found)
            if len(pairs) != 1:
                ctx.add(change)
            return True
    return False


def _same_default(one: Any, other: Any) -> bool:
    """Java's ``Objects.equals`` on everit's defaults: an object or array default is an org.json
    object, equal only to itself."""
    if one is _ABSENT or other is _ABSENT:
        return one is other
    if isinstance(one, dict | list) or isinstance(other, dict | list):
        return one is other
    return type(one) is type(other) and bool(one == other)


def _value_key(value: Any) -> Any:
    """A hashable stand-in for a JSON value, equal when Java's values are equal."""
    if isinstance(value, dict):
        return ("object", frozenset((key, _value_key(item)) for key, item in value.items()))
    if isinstance(value, list):
        return ("array", tuple(_value_key(item) for item in value))
    return (type(value).__name__, value)


# --- Java's hash order (Confluent walks properties through HashSets) ------------------------------


def _java_hash(text: str) -> int:
    units = _utf16(text)
    found = 0
    for index in range(0, len(units), 2):
        found = (31 * found + (units[index] << 8 | units[index + 1])) & 0xFFFFFFFF
    return found


def _bucket(text: str, capacity: int) -> int:
    found = _java_hash(text)
    return (found ^ (found >> 16)) & (capacity - 1)


def _power_of_two(at_least: int) -> int:
    return 1 << max(at_least - 1, 0).bit_length()


def _grown(count: int, capacity: int = 16) -> int:
    while count > capacity * 0.75:
        capacity *= 2
    return capacity


def _map_order(keys: Iterable[str], copied: bool = False) -> list[str]:
    """The order a ``HashMap`` of ``keys`` iterates them in (filled by puts, or ``copied`` by
    ``new HashMap<>(map)``)."""
    listed = list(keys)
    capacity = _power_of_two(int(len(listed) / 0.75 + 1)) if copied else _grown(len(listed))
    return sorted(listed, key=lambda key: _bucket(key, capacity))


def _union_order(first: list[str], second: list[str]) -> list[str]:
    """The order of ``new HashSet<>(first)`` after ``addAll(second)``."""
    merged = list(dict.fromkeys([*first, *second]))
    capacity = _grown(len(merged), _power_of_two(max(int(len(first) / 0.75) + 1, 16)))
    return sorted(merged, key=lambda key: _bucket(key, capacity))


# --- The diffs of each kind of schema -------------------------------------------------------------


def _compare_limits(
    ctx: _Context, keyword: str, old: int | Decimal | None, new: int | Decimal | None, name: str
) -> None:
    """Confluent's ``*_ADDED / _REMOVED / _INCREASED / _DECREASED`` of one keyword."""
    if old is None and new is None:
        return
    if old is None:
        ctx.add(f"{name}_ADDED", keyword)
    elif new is None:
        ctx.add(f"{name}_REMOVED", keyword)
    elif old < new:
        ctx.add(f"{name}_INCREASED", keyword)
    elif old > new:
        ctx.add(f"{name}_DECREASED", keyword)


def _compare_string(ctx: _Context, original: _Node, update: _Node) -> None:
    assert isinstance(original, _String) and isinstance(update, _String)
    _compare_limits(ctx, "maxLength", original.max_length, update.max_length, "MAX_LENGTH")
    _compare_limits(ctx, "minLength", original.min_length, update.min_length, "MIN_LENGTH")
    if original.pattern is None and update.pattern is not None:
        ctx.add("PATTERN_ADDED", "pattern")
    elif original.pattern is not None and update.pattern is None:
        ctx.add("PATTERN_REMOVED", "pattern")
    elif original.pattern != update.pattern:
        ctx.add("PATTERN_CHANGED", "pattern")


def _compare_number(ctx: _Context, original: _Node, update: _Node) -> None:
    assert isinstance(original, _Number) and isinstance(update, _Number)
    _compare_limits(ctx, "maximum", original.maximum, update.maximum, "MAXIMUM")
    _compare_limits(ctx, "minimum", original.minimum, update.minimum, "MINIMUM")
    _compare_exclusive_maximum(ctx, original, update)
    _compare_limits(
        ctx,
        "exclusiveMinimum",
        original.exclusive_minimum,
        update.exclusive_minimum,
        "EXCLUSIVE_MINIMUM",
    )
    _compare_multiple_of(ctx, original.multiple_of, update.multiple_of)
    if original.integer != update.integer:
        ctx.add("TYPE_EXTENDED" if original.integer else "TYPE_NARROWED")


def _compare_exclusive_maximum(ctx: _Context, original: _Number, update: _Number) -> None:
    """As Confluent's: a lowered exclusive maximum counts only when it is above the update's
    maximum (Java fails without one: then it counts, as meant)."""
    old, new = original.exclusive_maximum, update.exclusive_maximum
    if old is not None and new is not None and old > new:
        if update.maximum is None or old > update.maximum:
            ctx.add("EXCLUSIVE_MAXIMUM_DECREASED", "exclusiveMaximum")
        return
    _compare_limits(ctx, "exclusiveMaximum", old, new, "EXCLUSIVE_MAXIMUM")


def _compare_multiple_of(
    ctx: _Context, old: int | Decimal | None, new: int | Decimal | None
) -> None:
    if old is None and new is None:
        return
    if old is None:
        ctx.add("MULTIPLE_OF_ADDED", "multipleOf")
    elif new is None:
        ctx.add("MULTIPLE_OF_REMOVED", "multipleOf")
    elif Decimal(old) == Decimal(new):
        return
    elif old != 0 and Decimal(new) % Decimal(old) == 0:
        ctx.add("MULTIPLE_OF_EXPANDED", "multipleOf")
    elif new != 0 and Decimal(old) % Decimal(new) == 0:
        ctx.add("MULTIPLE_OF_REDUCED", "multipleOf")
    else:
        ctx.add("MULTIPLE_OF_CHANGED", "multipleOf")


def _compare_const(ctx: _Context, original: _Node, update: _Node) -> None:
    assert isinstance(original, _Const) and isinstance(update, _Const)
    if _value_key(original.value) != _value_key(update.value):
        ctx.add("ENUM_ARRAY_CHANGED", "const")


def _compare_enum(ctx: _Context, original: _Node, update: _Node) -> None:
    assert isinstance(original, _Enum) and isinstance(update, _Enum)
    old = {_value_key(value) for value in original.values}
    new = {_value_key(value) for value in update.values}
    if old == new:
        return
    if new >= old:
        ctx.add("ENUM_ARRAY_EXTENDED", "enum")
    elif old >= new:
        ctx.add("ENUM_ARRAY_NARROWED", "enum")
    else:
        ctx.add("ENUM_ARRAY_CHANGED", "enum")


def _compare_not(ctx: _Context, original: _Node, update: _Node) -> None:
    assert isinstance(original, _Not) and isinstance(update, _Not)
    with ctx.at("not"):
        sub = ctx.sub()
        _compare(sub, update.must_not, original.must_not)  # reversed: what is refused
        ctx.add("NOT_TYPE_NARROWED" if sub.is_compatible() else "NOT_TYPE_EXTENDED")


def _compare_combined(ctx: _Context, original: _Node, update: _Node) -> None:
    assert isinstance(original, _Combined) and isinstance(update, _Combined)
    if _compare_criteria(ctx, original, update) == "COMBINED_TYPE_CHANGED":
        return
    old, new = _distinct(original.subschemas), _distinct(update.subschemas)
    if len(old) < len(new):
        ctx.add("PRODUCT_TYPE_EXTENDED" if update.criterion == "allOf" else "SUM_TYPE_EXTENDED")
    elif len(old) > len(new):
        ctx.add("PRODUCT_TYPE_NARROWED" if original.criterion == "allOf" else "SUM_TYPE_NARROWED")
    edges: dict[tuple[int, int], list[_Difference]] = {}
    for index, one in enumerate(old):
        with ctx.at(f"{original.criterion}/{index}"):
            for other_index, other in enumerate(new):
                sub = ctx.sub()
                _compare(sub, one, other)
                if sub.is_compatible():
                    edges[(index, other_index)] = sub.found
    matching = _maximum_matching(list(edges), len(old), len(new))
    for edge in sorted(matching):
        ctx.add_all(edges[edge])
    if len(matching) < min(len(old), len(new)):
        ctx.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")


def _compare_criteria(ctx: _Context, original: _Combined, update: _Combined) -> str | None:
    if original.criterion == update.criterion:
        return None
    single_old, single_new = len(original.subschemas) == 1, len(update.subschemas) == 1
    if (
        update.criterion == "anyOf"
        or (single_old and single_new)
        or (single_old and update.criterion == "oneOf")
        or (single_new and original.criterion == "allOf")
    ):
        found = "COMBINED_TYPE_EXTENDED"
    else:
        found = "COMBINED_TYPE_CHANGED"
    ctx.add(found)
    return found


def _distinct(subschemas: list[_Node]) -> list[_Node]:
    """The members of a combined schema, repeated ones once (Confluent collects them in a
    ``LinkedHashSet`` of ``JsonSchema``, equal when their JSON is)."""
    seen: dict[Any, _Node] = {}
    for node in subschemas:
        source = node.source
        key = id(node) if source is _ABSENT else _value_key(source)
        seen.setdefault(key, node)
    return list(seen.values())


def _maximum_matching(edges: list[tuple[int, int]], left: int, right: int) -> set[tuple[int, int]]:
    """A maximum matching of the bipartite graph (augmenting paths, in index order)."""
    neighbours: dict[int, list[int]] = {index: [] for index in range(left)}
    for one, other in edges:
        neighbours[one].append(other)
    owner: dict[int, int] = {}

    def augment(one: int, seen: set[int]) -> bool:
        for other in neighbours[one]:
            if other in seen:
                continue
            seen.add(other)
            if other not in owner or augment(owner[other], seen):
                owner[other] = one
                return True
        return False

    for one in range(left):
        augment(one, set())
    return {(one, other) for other, one in owner.items()}


def _compare_object(ctx: _Context, original: _Node, update: _Node) -> None:
    assert isinstance(original, _Object) and isinstance(update, _Object)
    _compare_required(ctx, original, update)
    _compare_properties(ctx, original, update)
    _compare_dependencies(ctx, original, update)
    _compare_additional_properties(ctx, original, update)
    _compare_unevaluated(ctx, original, update, "unevaluatedProperties", "UNEVALUATED_PROPERTIES")
    _compare_limits(
        ctx, "maxProperties", original.max_properties, update.max_properties, "MAX_PROPERTIES"
    )
    _compare_limits(
        ctx, "minProperties", original.min_properties, update.min_properties, "MIN_PROPERTIES"
    )


def _compare_required(ctx: _Context, original: _Object, update: _Object) -> None:
    with ctx.at("required"):
        for name in _map_order(original.properties):
            if name not in update.properties:
                continue
            was, now = name in original.required, name in update.required
            if was and not now:
                ctx.add("REQUIRED_ATTRIBUTE_REMOVED", name)
            elif now and not was:
                with_default = update.properties[name].default is not _ABSENT
                kind = "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if with_default else ""
                ctx.add(kind or "REQUIRED_ATTRIBUTE_ADDED", name)


def _compare_properties(ctx: _Context, original: _Object, update: _Object) -> None:
    names = _union_order(_map_order(original.properties), _map_order(update.properties))
    with ctx.at("properties"):
        for name in names:
            with ctx.at(name):
                old, new = original.properties.get(name), update.properties.get(name)
                if new is None:
                    _property_removed(ctx, old, update, name)
                elif old is None:
                    _property_added(ctx, original, new, update, name)
                else:
                    _compare(ctx, old, new)


def _property_removed(ctx: _Context, old: _Node | None, update: _Object, name: str) -> None:
    if _open_object(update):
        ctx.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")
        return
    partial = _partial_object(update, name)
    if partial is not None:
        sub = ctx.sub()
        _compare(sub, old, partial)
        ctx.add_all(sub.found)
        covered = "IS" if sub.is_compatible() else "NOT"
        ctx.add(f"PROPERTY_REMOVED_{covered}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    elif isinstance(old, _False):
        ctx.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        ctx.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _property_added(
    ctx: _Context, original: _Object, new: _Node, update: _Object, name: str
) -> None:
    required = name in update.required
    with_default = new.default is not _ABSENT
    if _open_object(original):
        if isinstance(new, _Empty):
            ctx.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")
        elif required and with_default:
            ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL")
        elif required:
            ctx.add("REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
        else:
            ctx.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
        return
    partial = _partial_object(original, name)
    if partial is not None:
        sub = ctx.sub()
        _compare(sub, partial, new)
        ctx.add_all(sub.found)
        covered = "IS" if sub.is_compatible() else "NOT"
        ctx.add(f"PROPERTY_ADDED_{covered}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    if required and with_default:
        ctx.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL")
    elif required:
        ctx.add("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
    else:
        ctx.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")


def _unevaluated(node: _Node, keyword: str) -> _Node | None:
    found = node.unprocessed.get(keyword)
    return found if isinstance(found, _Node) else None


def _open_object(node: _Object) -> bool:
    """Every property allowed: no ``additionalProperties`` schema or ``false``, no pattern
    properties, and ``unevaluatedProperties`` absent or ``true``."""
    if not node.additional or node.additional_schema is not None or node.pattern_properties:
        return False
    found = _unevaluated(node, "unevaluatedProperties")
    return found is None or isinstance(found, _Empty)


def _partial_object(node: _Object, name: str) -> _Node | None:
    """The schema a property of that name takes in a partially open object."""
    for pattern, schema in node.pattern_properties.items():
        if _finds(pattern, name):
            return schema
    if node.additional_schema is not None:
        return node.additional_schema
    return _partial_unevaluated(node, node.additional, "unevaluatedProperties")


def _partial_unevaluated(node: _Node, additional: bool, keyword: str) -> _Node | None:
    found = _unevaluated(node, keyword) if additional else None
    if found is None or isinstance(found, _False | _Empty):
        return None
    return found


def _finds(pattern: str, name: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False


def _compare_dependencies(ctx: _Context, original: _Object, update: _Object) -> None:
    old_arrays, new_arrays = original.property_dependencies, update.property_dependencies
    old_schemas, new_schemas = original.schema_dependencies, update.schema_dependencies
    with ctx.at("dependencies"):
        for name in _union_order(_map_order(old_arrays, True), _map_order(new_arrays, True)):
            _compare_dependency(ctx, old_arrays.get(name), new_arrays.get(name), name)
        for name in _union_order(_map_order(old_schemas, True), _map_order(new_schemas, True)):
            old, new = old_schemas.get(name), new_schemas.get(name)
            with ctx.at(name):
                if new is None:
                    ctx.add("DEPENDENCY_SCHEMA_REMOVED")
                elif old is None:
                    ctx.add("DEPENDENCY_SCHEMA_ADDED")
                else:
                    _compare(ctx, old, new)


def _compare_dependency(
    ctx: _Context, old: set[str] | None, new: set[str] | None, name: str
) -> None:
    if new is None:
        ctx.add("DEPENDENCY_ARRAY_REMOVED", name)
    elif old is None:
        ctx.add("DEPENDENCY_ARRAY_ADDED", name)
    elif old != new:
        kind = "EXTENDED" if new >= old else "NARROWED" if old >= new else "CHANGED"
        ctx.add(f"DEPENDENCY_ARRAY_{kind}", name)


def _compare_additional_properties(ctx: _Context, original: _Object, update: _Object) -> None:
    with ctx.at("additionalProperties"):
        if original.additional != update.additional:
            opened = "ADDED" if update.additional else "REMOVED"
            ctx.add(f"ADDITIONAL_PROPERTIES_{opened}")
        else:
            _compare_additional(ctx, original, update, "ADDITIONAL_PROPERTIES")


def _compare_additional(
    ctx: _Context, original: _Object | _Array, update: _Object | _Array, name: str
) -> None:
    """The schemas of additional properties or items (``true`` or ``false`` alike)."""
    if original.additional_schema is None and update.additional_schema is not None:
        ctx.add(f"{name}_NARROWED")
    elif update.additional_schema is None and original.additional_schema is not None:
        ctx.add(f"{name}_EXTENDED")
    else:
        _compare(ctx, original.additional_schema, update.additional_schema)


def _compare_unevaluated(
    ctx: _Context, original: _Node, update: _Node, keyword: str, name: str
) -> None:
    old, new = _unevaluated(original, keyword), _unevaluated(update, keyword)
    if old is None and new is None:
        return
    with ctx.at(keyword):
        if old is None:
            ctx.add(f"{name}_REMOVED" if isinstance(new, _False) else f"{name}_NARROWED")
        elif new is None:
            ctx.add(f"{name}_ADDED" if isinstance(old, _False) else f"{name}_EXTENDED")
        elif isinstance(old, _False) and not isinstance(new, _False):
            ctx.add(f"{name}_ADDED")
        elif not isinstance(old, _False) and isinstance(new, _False):
            ctx.add(f"{name}_REMOVED")
        elif isinstance(old, _Empty) and not isinstance(new, _Empty):
            ctx.add(f"{name}_NARROWED")
        elif not isinstance(old, _Empty) and isinstance(new, _Empty):
            ctx.add(f"{name}_EXTENDED")
        else:
            _compare(ctx, old, new)


def _compare_array(ctx: _Context, original: _Node, update: _Node) -> None:
    assert isinstance(original, _Array) and isinstance(update, _Array)
    with ctx.at("items"):
        _compare(ctx, original.all_items, update.all_items)
    _compare_tuples(ctx, original, update)
    with ctx.at("additionalItems"):
        if original.additional != update.additional:
            ctx.add("ADDITIONAL_ITEMS_REMOVED" if original.additional else "ADDITIONAL_ITEMS_ADDED")
        else:
            _compare_additional(ctx, original, update, "ADDITIONAL_ITEMS")
    _compare_unevaluated(ctx, original, update, "unevaluatedItems", "UNEVALUATED_ITEMS")
    _compare_limits(ctx, "maxItems", original.max_items, update.max_items, "MAX_ITEMS")
    _compare_limits(ctx, "minItems", original.min_items, update.min_items, "MIN_ITEMS")
    if original.unique != update.unique:
        ctx.add("UNIQUE_ITEMS_REMOVED" if original.unique else "UNIQUE_ITEMS_ADDED", "uniqueItems")
    for keyword in ("maxContains", "minContains"):
        old, new = _contains_limit(original, keyword), _contains_limit(update, keyword)
        name = "MAX_CONTAINS" if keyword == "maxContains" else "MIN_CONTAINS"
        _compare_limits(ctx, keyword, old, new, name)


def _contains_limit(node: _Array, keyword: str) -> int | None:
    found = _number(node.unprocessed.get(keyword))
    return None if found is None else int(found)


def _compare_tuples(ctx: _Context, original: _Array, update: _Array) -> None:
    old, new = original.item_schemas or [], update.item_schemas or []
    for index in range(min(len(old), len(new))):
        with ctx.at(f"items/{index}"):
            _compare(ctx, old[index], new[index])
    for index in range(len(new), len(old)):
        with ctx.at(f"items/{index}"):
            _item_removed(ctx, old[index], update)
    for index in range(len(old), len(new)):
        with ctx.at(f"items/{index}"):
            _item_added(ctx, original, new[index])


def _open_array(node: _Array) -> bool:
    if not node.additional or node.additional_schema is not None:
        return False
    found = _unevaluated(node, "unevaluatedItems")
    return found is None or isinstance(found, _Empty)


def _partial_array(node: _Array) -> _Node | None:
    if node.additional_schema is not None:
        return node.additional_schema
    return _partial_unevaluated(node, node.additional, "unevaluatedItems")


def _item_removed(ctx: _Context, old: _Node, update: _Array) -> None:
    if _open_array(update):
        ctx.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL")
        return
    partial = _partial_array(update)
    if partial is not None:
        sub = ctx.sub()
        _compare(sub, old, partial)
        ctx.add_all(sub.found)
        covered = "IS" if sub.is_compatible() else "NOT"
        ctx.add(f"ITEM_REMOVED_{covered}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
    elif isinstance(old, _False):
        ctx.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
    else:
        ctx.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")


def _item_added(ctx: _Context, original: _Array, new: _Node) -> None:
    if _open_array(original):
        empty = isinstance(new, _Empty)
        ctx.add(f"ITEM_{'WITH_EMPTY_SCHEMA_' if empty else ''}ADDED_TO_OPEN_CONTENT_MODEL")
        return
    partial = _partial_array(original)
    if partial is None:
        ctx.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")
        return
    sub = ctx.sub()
    _compare(sub, partial, new)
    ctx.add_all(sub.found)
    covered = "IS" if sub.is_compatible() else "NOT"
    ctx.add(f"ITEM_ADDED_{covered}_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")


_COMPARERS: dict[type[_Node], Callable[[_Context, _Node, _Node], None]] = {
    _String: _compare_string,
    _Number: _compare_number,
    _Const: _compare_const,
    _Enum: _compare_enum,
    _Combined: _compare_combined,
    _Not: _compare_not,
    _Object: _compare_object,
    _Array: _compare_array,
}


# --- Confluent's messages -------------------------------------------------------------------------

_KEYWORD_ADDED_OR_REMOVED = _names(
    """
    MAXIMUM_ADDED MINIMUM_ADDED EXCLUSIVE_MAXIMUM_ADDED EXCLUSIVE_MINIMUM_ADDED MULTIPLE_OF_ADDED
    MAX_LENGTH_ADDED MIN_LENGTH_ADDED PATTERN_ADDED REQUIRED_ATTRIBUTE_ADDED MAX_PROPERTIES_ADDED
    MIN_PROPERTIES_ADDED DEPENDENCY_ARRAY_ADDED DEPENDENCY_SCHEMA_ADDED MAX_ITEMS_ADDED
    MIN_ITEMS_ADDED MAX_CONTAINS_ADDED MIN_CONTAINS_ADDED UNIQUE_ITEMS_ADDED
    ADDITIONAL_ITEMS_REMOVED ADDITIONAL_PROPERTIES_REMOVED UNEVALUATED_PROPERTIES_REMOVED
    UNEVALUATED_ITEMS_REMOVED
    """
)
_VALUE_INCREASED = _names(
    "MIN_LENGTH_INCREASED MINIMUM_INCREASED EXCLUSIVE_MINIMUM_INCREASED MIN_PROPERTIES_INCREASED "
    "MULTIPLE_OF_EXPANDED MIN_ITEMS_INCREASED MIN_CONTAINS_INCREASED"
)
_VALUE_DECREASED = _names(
    "MAX_LENGTH_DECREASED MAXIMUM_DECREASED MAX_ITEMS_DECREASED MAX_CONTAINS_DECREASED "
    "EXCLUSIVE_MAXIMUM_DECREASED MAX_PROPERTIES_DECREASED"
)
_TYPE_NARROWED = _names(
    "ADDITIONAL_ITEMS_NARROWED ENUM_ARRAY_NARROWED SUM_TYPE_NARROWED ADDITIONAL_PROPERTIES_NARROWED "
    "UNEVALUATED_PROPERTIES_NARROWED UNEVALUATED_ITEMS_NARROWED"
)
_VALUE_CHANGED = _names("PATTERN_CHANGED MULTIPLE_OF_CHANGED DEPENDENCY_ARRAY_CHANGED")
_TYPE_CHANGED = _names(
    "TYPE_CHANGED TYPE_NARROWED COMBINED_TYPE_CHANGED COMBINED_TYPE_SUBSCHEMAS_CHANGED "
    "ENUM_ARRAY_CHANGED"
)
_TYPE_EXTENDED = _names(
    "DEPENDENCY_ARRAY_EXTENDED PRODUCT_TYPE_EXTENDED SUM_TYPE_EXTENDED NOT_TYPE_EXTENDED"
)
_ADDED_TO_OPEN = _names(
    "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL "
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL "
    "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL ITEM_ADDED_TO_OPEN_CONTENT_MODEL"
)


def _description(kind: str, path: str, reader: str, writer: str) -> str:
    """``Difference.error()`` with its two ``%s`` filled as Confluent's validator fills them."""
    r, w = reader, writer
    if kind in _KEYWORD_ADDED_OR_REMOVED:
        return f"The keyword at path '{path}' in the {r} schema is not present in the {w} schema"
    if kind in _VALUE_INCREASED:
        return (
            f"The value at path '{path}' in the {r} schema is more than its value in the {w} schema"
        )
    if kind in _VALUE_DECREASED:
        return (
            f"The value at path '{path}' in the {r} schema is less than its value in the {w} schema"
        )
    if kind in _VALUE_CHANGED:
        return f"The value at path '{path}' is different between the {r} and {w} schema"
    if kind in _TYPE_NARROWED:
        return (
            f"An array or combined type at path '{path}' has fewer elements in the {r} schema "
            f"than the {w} schema"
        )
    if kind in _TYPE_EXTENDED:
        return (
            f"An array or combined type at path '{path}' has more elements in the {r} schema "
            f"than the {w} schema"
        )
    if kind in _TYPE_CHANGED:
        return f"A type at path '{path}' is different between the {r} schema and the {w} schema"
    return _property_or_item_description(kind, path, r, w)


def _property_or_item_description(kind: str, path: str, r: str, w: str) -> str:
    if kind in _ADDED_TO_OPEN:
        return (
            f"The {r} schema has an open content model and has a property or item at path "
            f"'{path}' which is missing in the {w} schema"
        )
    if kind == "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL":
        return (
            f"The {r} schema has an unopen content model and has a required property at path "
            f"'{path}' which is missing in the {w} schema"
        )
    if kind in (
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
        "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    ):
        return (
            f"The {r} has a closed content model and is missing a property or item present at "
            f"path '{path}' in the {w} schema"
        )
    if kind.endswith("_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"):
        return (
            f"A property or item is missing in the {r} schema but present at path '{path}' in "
            f"the {w} schema and is not covered by its partially open content model"
        )
    if kind.endswith("_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"):
        return (
            f"The {r} schema has a property or item at path '{path}' which is missing in the "
            f"{w} schema and is not covered by its partially open content model"
        )
    return ""


def _message(kind: str, path: str, reader: str, writer: str) -> str:
    """``Difference.toString()``, Confluent's closing quote and all."""
    return f'{{errorType:"{kind}", description:"{_description(kind, path, reader, writer)}\'}}'


# --- The rules ------------------------------------------------------------------------------------


def differences(original: Subject, update: Subject) -> list[tuple[str, str]]:
    """Every difference Confluent's ``SchemaDiff.compare(original, update)`` finds, compatible or
    not, as (``Difference.Type``, JSON path) pairs.

    Raises:
        InvalidSchema: either schema does not load.
    """
    return _diff(_load(original), _load(update), COMPATIBLE_STRICT)


def backward_problems(
    new: Subject, old: Subject, *, labels: tuple[str, str] = ("new", "old")
) -> list[str]:
    """Why a reader with ``new`` could not read what ``old`` wrote: Confluent's messages for the
    differences outside its strict compatible set (empty when compatible). ``labels`` name the
    two schemas in the messages (Confluent's FORWARD check, which asks whether ``old`` reads
    ``new``, names them ``("old", "new")``).

    Raises:
        InvalidSchema: either schema does not load.
    """
    found = _diff(_load(old), _load(new), COMPATIBLE_STRICT)
    return [_message(kind, path, *labels) for kind, path in found if kind not in COMPATIBLE_STRICT]
