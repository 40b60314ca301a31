"""Parse speed of the headwater dialect: uncached statements/s and cached lookups/s.

Run ``python -m bench.parse_speed [PATH]`` or ``python bench/parse_speed.py [PATH]`` (PATH
defaults to ``../shared/ksql-corpus/statements.sql`` next to the repository). Reads the corpus;
writes nothing. Targets: >= 3,000 uncached statements/s, >= 100,000 cached lookups/s.
"""

from __future__ import annotations

import platform
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sqlglot

from conformance import corpus
from headwater.sqlparse_ext import ParseError, parse_cached, parse_one

PULL_QUERY = "SELECT * FROM riderLocations WHERE profileId = 'c2309eec' AND latitude > 37.7;"


def _statements(path: Path) -> list[str]:
    try:
        return corpus.read_statements(path)
    except FileNotFoundError as error:
        raise SystemExit(str(error)) from error


def uncached_rate(statements: list[str], rounds: int = 3) -> tuple[float, int]:
    """Best statements/s over ``rounds`` passes of parse_one (uncached), and the failures."""
    best = 0.0
    failures = 0
    for _ in range(rounds):
        failures = 0
        start = time.perf_counter()
        for text in statements:
            try:
                parse_one(text)
            except ParseError:
                failures += 1
        best = max(best, len(statements) / (time.perf_counter() - start))
    return best, failures


def cached_rate(text: str = PULL_QUERY, lookups: int = 200_000) -> float:
    """Lookups/s of parse_cached for one repeated pull query."""
    parse_cached(text)
    start = time.perf_counter()
    for _ in range(lookups):
        parse_cached(text)
    return lookups / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit status 0."""
    args = sys.argv[1:] if argv is None else argv
    statements = _statements(Path(args[0]) if args else corpus.STATEMENTS)
    print(f"Python {platform.python_version()}, sqlglot {sqlglot.__version__}")
    rate, failures = uncached_rate(statements)
    print(
        f"uncached: {rate:,.0f} statements/s over {len(statements)} statements "
        f"({failures} rejected; target >= 3,000/s)"
    )
    print(f"cached:   {cached_rate():,.0f} lookups/s of one pull query (target >= 100,000/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
