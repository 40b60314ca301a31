"""The CREATE TABLE ... AS SELECT a push query with state runs as (``gateway.transient``): what a
push query may select that a persistent query's projection may not is moved out of it. Pure."""

from __future__ import annotations

import pytest

from headwater.gateway.transient import _with_grouping_selected, _without_window_bounds
from headwater.sqlparse_ext import parse_one
from headwater.sqlparse_ext import statements as ast


def _transient(text: str) -> str:
    statement = parse_one(text)
    assert isinstance(statement, ast.Select)
    return _with_grouping_selected(_without_window_bounds(statement))


@pytest.mark.parametrize(
    ("push", "ctas"),
    [
        (  # window bounds come from the windowed result's keys
            (
                "SELECT K, COUNT(K) AS C, WINDOWSTART, WINDOWEND FROM S "
                "WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY K EMIT CHANGES LIMIT 2;"
            ),
            "SELECT K, COUNT(K) AS C FROM S WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY K EMIT CHANGES",
        ),
        (
            (
                "SELECT windowstart, K, COUNT(*) AS C FROM S WINDOW TUMBLING (SIZE 1 SECOND) "
                "GROUP BY K EMIT CHANGES;"
            ),
            "SELECT K, COUNT(*) AS C FROM S WINDOW TUMBLING (SIZE 1 SECOND) GROUP BY K EMIT CHANGES;",
        ),
        (  # without a window they stay, to be refused as unknown columns
            "SELECT K, WINDOWSTART, COUNT(*) AS C FROM S GROUP BY K EMIT CHANGES;",
            "SELECT K, WINDOWSTART, COUNT(*) AS C FROM S GROUP BY K EMIT CHANGES;",
        ),
        (  # aliased bounds are value columns a persistent query may have too
            (
                "SELECT K, WINDOWSTART AS WS, COUNT(*) AS C FROM S WINDOW TUMBLING (SIZE 1 SECOND) "
                "GROUP BY K EMIT CHANGES;"
            ),
            (
                "SELECT K, WINDOWSTART AS WS, COUNT(*) AS C FROM S WINDOW TUMBLING (SIZE 1 SECOND) "
                "GROUP BY K EMIT CHANGES;"
            ),
        ),
        (  # only keys selected: a hidden value column
            "SELECT K FROM S GROUP BY K HAVING COUNT(K) > 1 EMIT CHANGES LIMIT 2;",
            "SELECT K , COUNT(*) AS HW_VALUE FROM S GROUP BY K HAVING COUNT(K) > 1 EMIT CHANGES",
        ),
        (  # a grouping expression not selected: a hidden key column
            "SELECT COUNT(*) AS C FROM S GROUP BY K EMIT CHANGES;",
            "SELECT COUNT(*) AS C , K AS HW_KEY_0 FROM S GROUP BY K EMIT CHANGES;",
        ),
    ],
)
def test_the_transient_query_text(push: str, ctas: str) -> None:
    assert _transient(push).rstrip(";") == ctas.rstrip(";")
