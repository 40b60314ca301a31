"""Fuzzing: any text raises only ParseError, quickly (never another exception, never a hang)."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance import corpus
from headwater.sqlparse_ext import ParseError, parse, to_sql
from tests.support.parse_errors import names_position

MAX_SECONDS = 2.0


def _corpus() -> list[str]:
    if not corpus.STATEMENTS.is_file():
        pytest.fail(corpus.missing(corpus.STATEMENTS))
    return corpus.read_statements()


# without the corpus (a user's clone), the corpus-based tests below are deselected (-m corpus runs them)
STATEMENTS = _corpus() if corpus.STATEMENTS.is_file() else ["SELECT * FROM s;"]
FUZZ = settings(
    derandomize=True,
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _only_parse_error(text: str) -> None:
    start = time.perf_counter()
    try:
        for statement in parse(text):
            to_sql(statement)
    except ParseError as error:
        assert error.line >= 1 and error.column >= 1
        assert names_position(error.message, error.line, error.column), error.message
    assert time.perf_counter() - start < MAX_SECONDS, f"too slow on {text[:200]!r}"


@pytest.mark.corpus
def test_corpus_is_present():
    assert len(_corpus()) == 3155


@FUZZ
@given(st.text(max_size=300))
def test_random_text(text):
    _only_parse_error(text)


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_decoded(data):
    _only_parse_error(data.decode("utf-8", errors="replace"))
    _only_parse_error(data.decode("latin-1"))


@pytest.mark.corpus
@FUZZ
@given(st.sampled_from(STATEMENTS), st.floats(min_value=0.0, max_value=1.0))
def test_truncated_corpus_statements(statement, fraction):
    _only_parse_error(statement[: int(len(statement) * fraction)])


@pytest.mark.corpus
@FUZZ
@given(
    st.sampled_from(STATEMENTS),
    st.integers(min_value=0, max_value=10_000),
    st.sampled_from(["'", "`", '"', "(", ")", "[", "]", "<", ">", "/*", "--", "${", ";", "->"]),
)
def test_unbalanced_insertions(statement, position, fragment):
    at = position % (len(statement) + 1)
    _only_parse_error(statement[:at] + fragment + statement[at:])


@pytest.mark.corpus
@FUZZ
@given(st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=4), st.text(max_size=20))
def test_scripts_of_statements(statements, glue):
    _only_parse_error((glue + "\n").join(statements))
