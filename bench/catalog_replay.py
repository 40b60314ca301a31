"""Catalog replay speed: how fast a server folds command-log records into its catalog.

Run: ``python -m bench.catalog_replay [--commands N] [--sources S]`` (or ``python bench/catalog_replay.py``).
Folds N encoded records (CREATE STREAM over S names, replaced in turn, with drops mixed in) through
the same pure step the command runner uses, and prints commands/s. No broker: this is the CPU cost
of replay; reading the log adds the consumer's fetch time (see tests/metastore/test_command_log.py).
Target (issue: single server): >= 5,000 commands/s.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sqlglot

from headwater.metastore.catalog import Column, Source, SourceKind
from headwater.metastore.codec import catalog_digest, source_to_dict
from headwater.metastore.records import CommandRecord, encode
from headwater.metastore.replay import CommandState, Fold


def _records(commands: int, sources: int) -> list[bytes]:
    records = []
    for offset in range(commands):
        name = f"S{offset % sources}"
        source = Source(
            kind=SourceKind.STREAM,
            name=name,
            columns=(
                Column("ID", "STRING", key=True),
                *(Column(f"C{i}", "BIGINT") for i in range(8)),
            ),
            topic=name.lower(),
            partitions=4,
            properties=(("KAFKA_TOPIC", name.lower()), ("VALUE_FORMAT", "JSON")),
            statement_text=f"CREATE OR REPLACE STREAM {name} (...) WITH (...);",
        )
        command = {"type": "create_source", "source": source_to_dict(source), "replace": True}
        records.append(encode(CommandRecord(f"c{offset}", offset, source.statement_text, command)))
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=10_000)
    parser.add_argument("--sources", type=int, default=100)
    args = parser.parse_args()
    records = _records(args.commands, args.sources)
    fold = Fold()
    start = time.perf_counter()
    for offset, value in enumerate(records):
        outcome = fold.feed(offset, value)
        assert outcome is not None and outcome.state is CommandState.SUCCESS, outcome
    elapsed = time.perf_counter() - start
    print(f"Python {platform.python_version()}, sqlglot {sqlglot.__version__}")
    print(
        f"replayed {args.commands:,} commands over {args.sources} sources in {elapsed:.2f} s: "
        f"{args.commands / elapsed:,.0f} commands/s (target >= 5,000/s)"
    )
    print(
        f"catalog: {len(fold.catalog.sources)} sources, digest {catalog_digest(fold.catalog)[:16]}"
    )


if __name__ == "__main__":
    main()
