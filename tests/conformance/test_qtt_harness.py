"""The QTT runner's emulation of ksqlDB's test harness: which schema ids its registry gives."""

from __future__ import annotations

from conformance.qtt import _unchecked_partitions, java_hash_map_order
from headwater.sqlparse_ext import parse_one
from headwater.sqlparse_ext import statements as ast


def test_topics_are_registered_in_java_hash_map_order() -> None:
    # "input".hashCode() lands in bucket 1, "OUTPUT" in 5: ksqlDB's runner registers input-value
    # first (id 1), so a CREATE ... AS SELECT naming VALUE_SCHEMA_ID=2 means OUTPUT's schema
    assert java_hash_map_order(["OUTPUT", "input"]) == ["input", "OUTPUT"]
    # a bucket keeps the order the names were put in
    assert java_hash_map_order(["Aa", "BB"]) == ["Aa", "BB"]  # equal hash codes in Java
    assert java_hash_map_order(["BB", "Aa"]) == ["BB", "Aa"]


def test_the_table_grows_as_javas_does() -> None:
    names = [f"topic_{i}" for i in range(13)]  # past 12 entries a HashMap has 32 buckets
    ordered = java_hash_map_order(names)
    assert sorted(ordered) == sorted(names) and len(ordered) == 13


def test_partitions_of_a_source_over_an_existing_topic_go_unchecked_as_the_harness_leaves_them() -> (
    None
):
    text = "CREATE TABLE t (k INT PRIMARY KEY, v INT) WITH (kafka_topic='t', partitions=128, format='JSON');"
    statement = parse_one(text)
    assert isinstance(statement, ast.CreateSource)
    unchecked = _unchecked_partitions(statement, {"t": object()})
    assert "PARTITIONS" not in unchecked.properties and unchecked.properties["FORMAT"] == "JSON"
    assert _unchecked_partitions(statement, {}) is statement  # a new topic: made with them
