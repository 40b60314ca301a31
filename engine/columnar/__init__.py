"""Vectorized execution: a batch of records as columns, expressions as Arrow kernels. Pure.

The per-record compiler (`engine/_compiler.py`) defines what every expression means; this room runs
the same expressions over whole columns with pyarrow.compute where the result is the same value for
every input (`kernels.py` lists what qualifies and why), and falls back to the per-record closure,
per expression, everywhere else. `batch.py` holds columns (Arrow arrays for INTEGER, BIGINT,
DOUBLE, STRING and BOOLEAN; Python lists for the other types); `json_columns.py` reads JSON objects
into columns and writes columns as JSON objects. `engine/persistent/columnar_run.py` puts them
together for stateless persistent queries, and tests/engine/test_columnar_differential.py keeps both
paths equal row for row on random expressions and records.
"""
