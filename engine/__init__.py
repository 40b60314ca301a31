"""headwater.engine: running queries.

At the top, what every room shares: the expression compiler (`expressions` is its entry point;
`_compiler`, `_scope`, `_bound` for a cached plan's bound values, `_format` for ksqlDB's rendering
of expressions in messages), the value model (`values`), the errors, Java-compatible key
partitioning (`partitioner`), INSERT VALUES and stateless push queries (`push`). The rooms:
`functions/` (type rules, casts and the built-in functions), `formats/` (serde for every format and
the schema registry), `pull/` (pull queries and the tables they read), `persistent/` (persistent
queries, planned and run per record, pure) and `spark/` (the Spark binding that runs them).
"""
