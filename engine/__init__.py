"""headwater.engine: running queries.

Serde for the Kafka formats (JSON, DELIMITED, KAFKA), Java-compatible key partitioning, the SQL
expression evaluator, and pull queries over materialized tables and streams; persistent queries on
Spark come later.
"""
