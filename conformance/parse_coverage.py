"""Parse coverage of the headwater dialect over ksqlDB's own test statements.

Run ``python -m conformance.parse_coverage [PATH]`` from the repository
(PATH defaults to ``../shared/ksql-corpus/statements.sql`` next to the repository). Prints the
parse rate, the round-trip rate, how the statements ksqlDB rejects with a syntax error were
handled, and the failures grouped by cause. Reads the corpus files; writes nothing.

The test suite imports this module for the same figures (``corpus_report``).
"""

from __future__ import annotations

import json
import platform
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import sqlglot

from conformance.corpus import CORPUS, STATEMENTS, read_statements, strip_comments
from headwater.sqlparse_ext import ParseError, parse_one, to_sql

#: Expected-error texts that mean ksqlDB's parser rejected the statement.
_SYNTAX_ERROR = re.compile(
    r"Syntax Error|Syntax error|mismatched input|extraneous input|no viable alternative"
    r"|Invalid numeric literal|Number overflows|missing '"
)
_PARSE_EXCEPTION = "io.confluent.ksql.parser.exception.ParseFailedException"


def expected_errors(corpus: Path = CORPUS) -> dict[str, str]:
    """The error message each failing case's last statement is expected to raise."""
    expected: dict[str, str] = {}
    for case_file in sorted([*corpus.glob("qtt/*.json"), *corpus.glob("rqtt/*.json")]):
        document = json.loads(strip_comments(case_file.read_text(encoding="utf-8")))
        for case in document.get("tests", []):
            error = case.get("expectedException") or case.get("expectedError")
            if error and case.get("statements"):
                expected[case["statements"][-1].strip()] = str(error.get("message", ""))
    return expected


def syntax_rejected(corpus: Path = CORPUS) -> set[str]:
    """Statements that ksqlDB's parser rejects, from the qtt/rqtt expected errors.

    A case counts when its expected error is a ParseFailedException or its message is one of
    the parser's (syntax error, mismatched/extraneous input, numeric literal out of range); the
    statement that fails is the case's last one.
    """
    rejected: set[str] = set()
    for case_file in sorted([*corpus.glob("qtt/*.json"), *corpus.glob("rqtt/*.json")]):
        document = json.loads(strip_comments(case_file.read_text(encoding="utf-8")))
        for case in document.get("tests", []):
            error = case.get("expectedException") or case.get("expectedError")
            if not error or not case.get("statements"):
                continue
            message = str(error.get("message", ""))
            if error.get("type") == _PARSE_EXCEPTION or _SYNTAX_ERROR.search(message):
                rejected.add(case["statements"][-1].strip())
    return rejected


@dataclass
class Report:
    """What happened to each corpus statement."""

    total: int = 0
    parsed: int = 0
    round_tripped: int = 0
    rejected_total: int = 0
    rejected_ok: list[str] = field(default_factory=list)
    rejected_accepted: list[str] = field(default_factory=list)
    #: refused by headwater's parser with the message ksqlDB gives while building the statement
    refused_alike: list[str] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)  # statement -> message
    round_trip_failures: dict[str, str] = field(default_factory=dict)

    @property
    def correct(self) -> int:
        """Accepted statements ksqlDB accepts, plus rejected ones ksqlDB rejects."""
        return (
            self.parsed
            - len(self.rejected_accepted)
            + len(self.rejected_ok)
            + len(self.refused_alike)
        )


def _cause(message: str) -> str:
    """A failure's class: its message without the position and the found token."""
    text = re.sub(r"^line \d+:\d+: ", "", message)
    return re.sub(r", found .*$", "", text)


def corpus_report(
    statements: Iterable[str],
    rejected: set[str],
    expected: Mapping[str, str] | None = None,
) -> Report:
    """Parse and round-trip every statement.

    A statement headwater's parser refuses counts as correct when ksqlDB's parser refuses it
    too (``rejected``), or when the refusal holds the very message ksqlDB's case expects
    (``expected``: ksqlDB refuses it while building the statement, as headwater does).
    """
    report = Report()
    expected = expected or {}
    for text in statements:
        report.total += 1
        wanted = expected.get(text.strip())
        is_rejected = text.strip() in rejected
        report.rejected_total += is_rejected
        try:
            statement = parse_one(text)
        except ParseError as error:
            if is_rejected:
                report.rejected_ok.append(text)
            elif wanted and wanted in error.message:
                report.refused_alike.append(text)
            else:
                report.failures[text] = error.message
            continue
        report.parsed += 1
        if is_rejected:
            report.rejected_accepted.append(text)
        try:
            again = parse_one(to_sql(statement))
            if again == statement and again.expression == statement.expression:
                report.round_tripped += 1
            else:
                report.round_trip_failures[text] = f"differs after round trip: {to_sql(statement)}"
        except ParseError as error:
            report.round_trip_failures[text] = f"regenerated SQL fails: {error.message}"
    return report


def _percent(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "n/a"


def main(argv: list[str] | None = None) -> int:
    """Print the coverage figures; exit status 0 (2 when the corpus is missing)."""
    args = sys.argv[1:] if argv is None else argv
    try:
        statements = read_statements(Path(args[0]) if args else STATEMENTS)
    except FileNotFoundError as error:
        print(f"parse_coverage: {error}", file=sys.stderr)
        return 2
    report = corpus_report(statements, syntax_rejected(), expected_errors())
    print(f"Python {platform.python_version()}, sqlglot {sqlglot.__version__}")
    print(f"parsed {report.parsed}/{report.total} ({_percent(report.parsed, report.total)})")
    print(
        f"round-trip {report.round_tripped}/{report.parsed} "
        f"({_percent(report.round_tripped, report.parsed)})"
    )
    print(
        f"correct (accept what ksqlDB accepts, reject its syntax errors) {report.correct}/"
        f"{report.total} ({_percent(report.correct, report.total)})"
    )
    print(
        f"ksqlDB syntax errors in the corpus: {report.rejected_total}; rejected too: "
        f"{len(report.rejected_ok)}; accepted: {len(report.rejected_accepted)}"
    )
    print(
        f"refused while building the statement, with ksqlDB's message: {len(report.refused_alike)}"
    )
    for text in report.rejected_accepted:
        print(f"    accepted: {text[:150]}")
    groups: dict[str, list[str]] = defaultdict(list)
    for text, message in report.failures.items():
        groups[_cause(message)].append(f"{message} | {text}")
    print(f"failures: {len(report.failures)} in {len(groups)} causes")
    for cause, examples in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        print(f"  [{len(examples)}] {cause}")
        for example in examples[:3]:
            print(f"      {example[:220]}")
    if report.round_trip_failures:
        print(f"round-trip failures: {len(report.round_trip_failures)}")
        for text, message in list(report.round_trip_failures.items())[:10]:
            print(f"      {message[:200]} | {text[:150]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
