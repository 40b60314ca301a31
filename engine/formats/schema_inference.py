"""The columns a CREATE STREAM/TABLE leaves out, found in the schema registry (ksqlDB's inference).

``CREATE STREAM s WITH (kafka_topic='t', value_format='AVRO')`` takes its value columns from the
newest schema of subject ``t-value`` (or the schema ``VALUE_SCHEMA_ID`` names), and its key
columns from ``t-key`` (``KEY_SCHEMA_ID``). The submitter gathers them with :func:`schema_facts`
before planning, so the planner (metastore.plan) stays pure: it gets, per subject (or ``id:N``),
the columns as (name, SQL type text), or the reason they cannot be had.
"""

from __future__ import annotations

from headwater.engine.errors import SerdeError
from headwater.engine.formats import _avro as avro
from headwater.engine.formats import _json_sr as json_sr
from headwater.engine.formats import _proto_text as proto
from headwater.engine.formats.schema_registry import SchemaRegistry
from headwater.sqlparse_ext import statements as ast

#: Formats whose columns can be inferred from a registered schema.
INFERRING_FORMATS = {"AVRO": "AVRO", "JSON_SR": "JSON", "PROTOBUF": "PROTOBUF"}

Columns = tuple[tuple[str, str], ...]


def _formats(properties: ast.Properties) -> tuple[str, str]:
    upper = {k.upper(): v for k, v in properties.items()}
    both = upper.get("FORMAT")
    value = str(both or upper.get("VALUE_FORMAT") or "").upper()
    key = str(both or upper.get("KEY_FORMAT") or "KAFKA").upper()
    return key, value


def _columns(
    fmt: str,
    schema_text: str,
    kind: str,
    name: str,
    full_name: str | None = None,
    by_id: bool = False,
) -> Columns | str:
    """A schema named by id keeps its field names (ksqlDB writes with that very schema); one
    inferred from a subject gets them upper-cased."""
    if kind != INFERRING_FORMATS[fmt]:
        return f"the registered schema is {kind}, not {INFERRING_FORMATS[fmt]}"
    try:
        if kind == "AVRO":
            return avro.inferred_columns(schema_text, name, upper=not by_id)
        if kind == "PROTOBUF":
            return proto.inferred_columns(schema_text, name, full_name, upper=not by_id)
        return json_sr.inferred_columns(schema_text, name, upper=not by_id)
    except SerdeError as exc:
        return str(exc)


def schema_facts(
    statement: ast.Statement, registry: SchemaRegistry | None
) -> dict[str, Columns | str] | None:
    """Subject (``<topic>-key``, ``<topic>-value``) or ``id:N`` -> the inferred columns, or why
    there are none, for a CREATE STREAM/TABLE in a registry format; None without a registry.

    Raises:
        SchemaRegistryError: If the registry cannot be reached.
    """
    if registry is None:
        return None
    if isinstance(statement, ast.CreateAsSelect):
        return _schemas_by_id(statement.properties, registry)
    if not isinstance(statement, ast.CreateSource):
        return {}
    upper = {k.upper(): v for k, v in statement.properties.items()}
    topic = upper.get("KAFKA_TOPIC")
    if topic is None:
        return {}
    found: dict[str, Columns | str] = {}
    for part, fmt, unwrapped in zip(
        ("key", "value"), _formats(statement.properties), ("ROWKEY", "ROWVAL")
    ):
        if fmt not in INFERRING_FORMATS:
            continue
        schema_id = upper.get(f"{part.upper()}_SCHEMA_ID")
        full_name = upper.get(f"{part.upper()}_SCHEMA_FULL_NAME")
        full_name = None if full_name is None else str(full_name)
        if schema_id is not None:
            found[f"id:{schema_id}"] = _by_id(registry, schema_id, fmt, unwrapped, full_name)
            continue
        latest = registry.latest(f"{topic}-{part}")
        if latest is not None:
            found[f"{topic}-{part}"] = _columns(
                fmt, latest[1].text, latest[1].kind, unwrapped, full_name
            )
    return found


def _schemas_by_id(
    properties: ast.Properties, registry: SchemaRegistry
) -> dict[str, Columns | str]:
    """For a CREATE ... AS SELECT: ``id:N`` -> the columns of each schema its ``KEY_SCHEMA_ID``
    and ``VALUE_SCHEMA_ID`` name (read in the registered schema's own format: the sink's format
    is known only once the query is planned, which checks that the two agree)."""
    upper = {k.upper(): v for k, v in properties.items()}
    found: dict[str, Columns | str] = {}
    for part, unwrapped in (("KEY", "ROWKEY"), ("VALUE", "ROWVAL")):
        schema_id = upper.get(f"{part}_SCHEMA_ID")
        if schema_id is None:
            continue
        full_name = upper.get(f"{part}_SCHEMA_FULL_NAME")
        found[f"id:{schema_id}"] = _by_id(
            registry, schema_id, None, unwrapped, None if full_name is None else str(full_name)
        )
    return found


def _by_id(
    registry: SchemaRegistry,
    schema_id: object,
    fmt: str | None,
    unwrapped: str,
    full_name: str | None,
) -> Columns | str:
    """The columns of the schema registered under ``schema_id``, read as format ``fmt`` (None:
    the registered schema's own), or why there are none."""
    try:
        schema = registry.schema(int(str(schema_id)))
    except (ValueError, SerdeError) as exc:
        return str(exc)
    if fmt is None:
        fmt = next((f for f, kind in INFERRING_FORMATS.items() if kind == schema.kind), None)
        if fmt is None:
            return f"schema {schema_id} is {schema.kind}"
    return _columns(fmt, schema.text, schema.kind, unwrapped, full_name, by_id=True)
