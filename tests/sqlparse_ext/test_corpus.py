"""Parse coverage over ksqlDB's own test statements (../shared/ksql-corpus).

Coverage and round trip must stay >= 95%, the statements ksqlDB rejects with a syntax error
must be rejected, and every disagreement must be listed in ``known_gaps.txt``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance import corpus, parse_coverage

pytestmark = pytest.mark.corpus

GAPS = Path(__file__).with_name("known_gaps.txt")


@pytest.fixture(scope="module")
def report():
    if not corpus.STATEMENTS.is_file():
        pytest.fail(corpus.missing(corpus.STATEMENTS))
    return parse_coverage.corpus_report(
        corpus.read_statements(),
        parse_coverage.syntax_rejected(),
        parse_coverage.expected_errors(),
    )


def _known_gaps() -> dict[str, str]:
    gaps = {}
    for line in GAPS.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            statement, _, reason = line.partition("\t")
            gaps[statement] = reason
    return gaps


def test_coverage_and_round_trip(report):
    assert report.total == 3155
    assert report.parsed / report.total >= 0.95
    assert report.round_tripped / report.parsed >= 0.95
    assert report.correct / report.total >= 0.95
    assert not report.round_trip_failures, list(report.round_trip_failures.items())[:5]


def test_syntax_errors_of_ksqldb_are_rejected(report):
    assert report.rejected_total >= 25
    assert len(report.rejected_ok) >= report.rejected_total - 1


def test_every_disagreement_is_a_known_gap(report):
    gaps = _known_gaps()
    disagreements = set(report.failures) | set(report.rejected_accepted)
    unexpected = sorted(disagreements - set(gaps))
    assert not unexpected, "new failures:\n" + "\n".join(
        f"{report.failures.get(s, 'accepted but ksqlDB rejects it')} | {s}" for s in unexpected
    )
    fixed = sorted(set(gaps) - disagreements)
    assert not fixed, "now handled as ksqlDB does; remove from known_gaps.txt:\n" + "\n".join(fixed)
