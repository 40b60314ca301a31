"""ksqlDB's QTT cases that headwater passes, one test each (corpus: ../shared/ksql-corpus/qtt).

Every case of ``conformance/qtt_ci_expected.txt`` runs as ``python -m conformance.qtt`` runs it
(in this process, topics in memory, no broker) and must pass, so a regression is named by its case:
``test_qtt_case[joins: stream stream left join - JSON]``. Marked ``corpus``: ``.ci/run`` runs them
with ``pytest -m corpus tests``; ``python -m conformance.qtt`` gives the totals over the whole corpus.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pytest

from conformance import corpus, qtt
from conformance.cases import load_cases
from headwater.engine.formats import schema_registry

pytestmark = pytest.mark.corpus


@functools.cache
def _cases_of(stem: str) -> dict[str, dict]:
    """The cases of corpus file ``stem`` by the name the CI list gives them (``stem: name``)."""
    path = corpus.QTT / f"{stem}.json"
    if not path.is_file():
        pytest.fail(corpus.missing(path), pytrace=False)
    return {f"{stem}: {case['name']}".strip(): case for _, case in load_cases([path])}


@pytest.fixture(scope="module", autouse=True)
def _process_registry() -> Iterator[None]:
    """Each case makes its own mock registry the process's; the one before is put back after."""
    before = schema_registry.current()
    yield
    schema_registry.use(before)


@pytest.mark.parametrize("case_id", qtt.ci_expected())
def test_qtt_case(case_id: str) -> None:
    stem = case_id.partition(": ")[0]
    case = _cases_of(stem).get(case_id)
    assert case is not None, f"{case_id}: no such case in {corpus.QTT / stem}.json"
    outcome = qtt.run_case(stem, case)
    assert outcome.verdict == "passed", (
        f"{case_id}: {outcome.verdict} ({outcome.cause}): {outcome.detail}"
    )
