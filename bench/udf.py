"""What a Python function costs per record (issue 31): a filter + projection query with and
without a trivial Python UDF, through the stage a persistent query's Spark task runs
(`source_rows`: Arrow batches of sink records), in this process.

Run ``python -m bench.udf [--records N]`` (default 200000; ~1 minute). Three queries over the same
JSON records (filter + projection, 90% pass):

1. built-in only: ``WHERE qty > 10`` (runs a batch at a time on Arrow: `columnar_run`);
2. built-in only, record by record (the same query with a header column, which the columnar
   path refuses): the per-record baseline;
3. a trivial Python UDF in the WHERE and the projection: ``WHERE plus_one(qty) > 11``
   (a query calling a Python function that is not vectorized runs record by record);
4. the same function vectorized (``@udf(vectorized=True)``: pyarrow arrays in and out), which
   keeps the query on the batch path: one call per batch.

Prints records/s and microseconds per record for each, and the UDF's cost per record and call
beside the baseline of its path (the issue asks for the figures, not a bound).
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

from headwater.engine.functions import extensions
from headwater.engine.persistent import QUERY_ANALYZER, InputRecord
from headwater.engine.spark.host import query_payload
from headwater.engine.spark.source_rows import _pipeline, forget_pipelines
from headwater.metastore.plan import TopicFacts, plan
from headwater.metastore.records import CommandRecord, encode
from headwater.metastore.replay import Fold
from headwater.sqlparse_ext import parse_one

MODULE = """
import pyarrow as pa
import pyarrow.compute as pc

from headwater.functions import udf


@udf(description="x + 1")
def plus_one(x: int) -> int:
    return x + 1


@udf(description="x + 1 over arrays", vectorized=True, params=["INTEGER"], returns="BIGINT")
def plus_one_v(x):
    return pc.add(x.cast(pa.int64()), 1)
"""

SOURCE = (
    "CREATE STREAM orders (id STRING KEY, item STRING, qty INT) "
    "WITH (kafka_topic='orders', value_format='JSON');"
)
SOURCE_WITH_HEADER = (
    "CREATE STREAM orders_h (id STRING KEY, item STRING, qty INT, h BYTES HEADER('h')) "
    "WITH (kafka_topic='orders_h', value_format='JSON');"
)
QUERIES = {
    "built-in, batch (Arrow)": (
        "CREATE STREAM a AS SELECT id, item, qty * 2 AS q FROM orders WHERE qty > 10;"
    ),
    "built-in, record by record": (
        "CREATE STREAM b AS SELECT id, item, qty * 2 AS q FROM orders_h WHERE qty > 10;"
    ),
    "Python UDF, record by record": (
        "CREATE STREAM c AS SELECT id, item, plus_one(qty) * 2 AS q FROM orders "
        "WHERE plus_one(qty) > 11;"
    ),
    "vectorized Python UDF, batch": (
        "CREATE STREAM d AS SELECT id, item, plus_one_v(qty) * 2 AS q FROM orders "
        "WHERE plus_one_v(qty) > 11;"
    ),
}


def _catalog(*statements: str):  # type: ignore[no-untyped-def]
    fold = Fold()
    facts = TopicFacts({"orders": 2, "orders_h": 2})
    for offset, text in enumerate(statements):
        planned = plan(parse_one(text), fold.catalog, facts, QUERY_ANALYZER)
        assert planned.command is not None, text
        fold.feed(offset, encode(CommandRecord(f"c{offset}", offset, text, planned.command)))
    return fold.catalog


def _records(n: int) -> list[InputRecord]:
    return [
        InputRecord(
            b"k%d" % (i % 1000),
            json.dumps({"ITEM": f"item-{i}", "QTY": i % 100}).encode(),
            1_700_000_000_000 + i,
            i % 2,
            i // 2,
        )
        for i in range(n)
    ]


def _measure(label: str, statement: str, records: list[InputRecord]) -> float:
    catalog = _catalog(SOURCE, SOURCE_WITH_HEADER, statement)
    query = next(iter(catalog.queries.values()))
    payload = query_payload(query, catalog)
    body = json.dumps({"queryId": query.id, "catalog": payload["catalog"]}, sort_keys=True)
    run = _pipeline(body)
    run(records[:5000])  # warm
    started = time.perf_counter()
    written = 0
    for start in range(0, len(records), 5000):
        written += run(records[start : start + 5000]).num_rows
    elapsed = time.perf_counter() - started
    forget_pipelines()
    per_record_us = elapsed / len(records) * 1e6
    print(
        f"  {label:<32} {len(records) / elapsed:>10,.0f} records/s  "
        f"{per_record_us:>7.2f} us/record  ({written:,} rows out)"
    )
    return per_record_us


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    args = parser.parse_args(argv)
    print(f"bench.udf: {args.records:,} JSON records, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "bench_functions.py").write_text(MODULE)
        extensions.load_folder(folder)
        records = _records(args.records)
        figures = {label: _measure(label, sql, records) for label, sql in QUERIES.items()}
    baseline = figures["built-in, record by record"]
    udf = figures["Python UDF, record by record"]
    calls = 2  # WHERE and projection
    print(
        f"  Python UDF cost: {udf - baseline:.2f} us per record over the per-record baseline, "
        f"{(udf - baseline) / calls:.2f} us per call ({calls} calls per record); "
        f"{udf / figures['built-in, batch (Arrow)']:.1f}x the batch path"
    )
    vectorized = figures["vectorized Python UDF, batch"]
    print(
        f"  vectorized Python UDF cost: {vectorized - figures['built-in, batch (Arrow)']:.2f} us "
        f"per record over the batch path ({calls} calls per batch of 5,000 records)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
