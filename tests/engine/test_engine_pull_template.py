"""Cached pull plans (engine.pull.template): a template built from one query of a shape answers
every other query of that shape exactly as planning it afresh does (rows, order, key access,
partitions read), or declines (and the caller plans afresh)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_engine_pull import MemoryReader, _source  # its reader and table helper, shared

from headwater.engine.errors import PullQueryError
from headwater.engine.pull.query import PullResult, execute_pull, plan_pull
from headwater.engine.pull.template import PullTemplate, build_template
from headwater.metastore.catalog import Source, SourceKind
from headwater.sqlparse_ext import Select, parse_one
from headwater.sqlparse_ext.shape import literal_shape

TYPES: dict[str, Any] = {}


USERS = _source(
    SourceKind.TABLE, "K BIGINT KEY, NAME STRING, AGE INTEGER, SCORE DECIMAL(5, 2), R DOUBLE"
)
PAIRS = _source(SourceKind.TABLE, "K1 STRING KEY, K2 INTEGER KEY, V BIGINT")


USER_ROWS = MemoryReader(
    [
        ((k,), {"NAME": f"n{k % 7}", "AGE": k % 50, "SCORE": Decimal(k) / 4, "R": k / 3})
        for k in range(-20, 60)
    ]
)
PAIR_ROWS = MemoryReader(
    [((f"k{a}", b), {"V": a * 10 + b}) for a in range(6) for b in range(-3, 4)]
)


def fresh(text: str, source: Source, reader: MemoryReader, scans: bool = True) -> Any:
    """The uncached answer: rows, access and partitions, or the error's message."""
    try:
        statement = parse_one(text)
        assert isinstance(statement, Select)
        plan = plan_pull(statement, source, TYPES, table_scan_enabled=scans)
        result = execute_pull(plan, reader)
    except Exception as error:  # noqa: BLE001 - compared as an outcome
        return ("error", str(error))
    return _outcome(plan.access, result)


def _outcome(access: Any, result: PullResult) -> Any:
    return (access, [list(r) for r in result.rows], sorted(result.partitions), result.limit_reached)


def template_of(text: str, source: Source, scans: bool = True) -> PullTemplate:
    shape = literal_shape(text)
    assert shape is not None
    statement = parse_one(text)
    assert isinstance(statement, Select)
    return build_template(statement, shape.starts, shape.values, source, TYPES, scans)


def cached(
    template: PullTemplate, text: str, source: Source, reader: MemoryReader, scans: bool = True
) -> Any:
    """The answer through the template, falling back to planning afresh as the server does."""
    shape = literal_shape(text)
    assert shape is not None
    if not template.matches(shape.values, source, TYPES, scans):
        return fresh(text, source, reader, scans)
    try:
        bound = template.bind(shape.values)
    except Exception:  # noqa: BLE001 - the server plans afresh
        return fresh(text, source, reader, scans)
    return _outcome(bound.plan.access, bound.execute(reader))


# -- fixed examples -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("SELECT * FROM T WHERE K = 3;", "SELECT * FROM T WHERE K = 11;"),
        ("SELECT * FROM T WHERE K = 3;", "SELECT * FROM T WHERE K = 999;"),  # no such row
        ("SELECT * FROM T WHERE K = -3;", "SELECT * FROM T WHERE K = -17;"),
        ("SELECT NAME FROM T WHERE K IN (1, 2, 3);", "SELECT NAME FROM T WHERE K IN (4, 4, 9);"),
        ("SELECT K FROM T WHERE K >= 3 AND K < 9;", "SELECT K FROM T WHERE K >= 30 AND K < 31;"),
        ("SELECT K FROM T WHERE K BETWEEN 3 AND 9;", "SELECT K FROM T WHERE K BETWEEN 9 AND 3;"),
        (
            "SELECT K, AGE + 1 AS A FROM T WHERE K = 5;",
            "SELECT K, AGE + 7 AS A FROM T WHERE K = 6;",
        ),
        ("SELECT K, SCORE * 1.5 FROM T WHERE K = 5;", "SELECT K, SCORE * 2.5 FROM T WHERE K = 8;"),
        ("SELECT * FROM T WHERE NAME = 'n1';", "SELECT * FROM T WHERE NAME = 'n2';"),
        ("SELECT * FROM T WHERE K = 1 OR K = 2;", "SELECT * FROM T WHERE K = 5 OR K = 5;"),
        ("SELECT * FROM T WHERE K = 1 LIMIT 1;", "SELECT * FROM T WHERE K = 2 LIMIT 1;"),
        ("SELECT * FROM T WHERE K = 1 LIMIT 1;", "SELECT * FROM T WHERE K = 2 LIMIT 0;"),  # fixed
        ("SELECT * FROM T WHERE K = 1.0;", "SELECT * FROM T WHERE K = 1.5;"),  # inexact key
        (
            "SELECT * FROM T WHERE K = CAST('3' AS BIGINT);",
            "SELECT * FROM T WHERE K = CAST('x' AS BIGINT);",
        ),  # the fold fails: planned afresh
        (
            "SELECT CAST(R AS DECIMAL(4, 1)) FROM T WHERE K = 1;",
            "SELECT CAST(R AS DECIMAL(4, 1)) FROM T WHERE K = 2;",
        ),
    ],
)
def test_a_template_answers_like_a_fresh_plan(first: str, second: str) -> None:
    template = template_of(first, USERS)
    assert cached(template, second, USERS, USER_ROWS) == fresh(second, USERS, USER_ROWS)
    assert cached(template, first, USERS, USER_ROWS) == fresh(first, USERS, USER_ROWS)


def test_multi_column_keys_and_disabled_scans() -> None:
    template = template_of("SELECT * FROM T WHERE K1 = 'k1' AND K2 = 2;", PAIRS, scans=False)
    for text in (
        "SELECT * FROM T WHERE K1 = 'k4' AND K2 = 0;",
        "SELECT * FROM T WHERE K1 = 'k9' AND K2 = 3;",
    ):
        assert cached(template, text, PAIRS, PAIR_ROWS, False) == fresh(
            text, PAIRS, PAIR_ROWS, False
        )
    with pytest.raises(PullQueryError, match="Query requires table scan to be enabled"):
        template_of("SELECT * FROM T WHERE K1 = 'k1' AND K2 > 0;", PAIRS, scans=False)


def test_key_values_ksqldb_refuses_fall_back_to_the_planner() -> None:
    template = template_of("SELECT * FROM T WHERE K IN (1, 2);", USERS, scans=False)
    for text in ("SELECT * FROM T WHERE K IN (1, NULL);", "SELECT * FROM T WHERE K IN (1, 2.5);"):
        outcome = cached(template, text, USERS, USER_ROWS, False)
        assert outcome == fresh(text, USERS, USER_ROWS, False)
        assert outcome[0] == "error"


def test_a_template_keeps_what_must_stay_literal() -> None:
    template = template_of("SELECT CAST(R AS DECIMAL(4, 1)) FROM T WHERE K = 1 LIMIT 3;", USERS)
    assert [i for i, _ in template.fixed] == [0, 1, 3]  # the type's digits and the LIMIT
    shape = literal_shape("SELECT CAST(R AS DECIMAL(4, 1)) FROM T WHERE K = 1 LIMIT 4;")
    assert shape is not None and not template.matches(shape.values, USERS, TYPES, True)


def test_a_changed_source_or_setting_does_not_match() -> None:
    template = template_of("SELECT * FROM T WHERE K = 1;", USERS)
    values = (2,)
    assert template.matches(values, USERS, TYPES, True)
    assert not template.matches(
        values, _source(SourceKind.TABLE, "K BIGINT KEY, NAME STRING"), TYPES, True
    )
    assert not template.matches(values, USERS, {}, True)
    assert not template.matches(values, USERS, TYPES, False)
    assert not template.matches(values, USERS, TYPES, True, False)  # range scans off


# -- random queries over random data --------------------------------------------------------------

_INT = st.integers(min_value=-25, max_value=65).map(str)
_NAME = st.sampled_from(["n0", "n1", "n3", "x", "", "it's"]).map(
    lambda v: "'" + v.replace("'", "''") + "'"
)
# decimals of one precision and scale each, so that two draws have the same shape
_DEC = st.sampled_from(["1.25", "-3.50", "9.99", "0.01", "5.00"])
_SMALL_DEC = st.sampled_from(["1.5", "2.0", "0.5", "4.5"])

# skeletons: {} is a literal, drawn from the strategy beside it (one list per leaf)
_LEAVES = [
    ("K = {}", [_INT]),
    ("K = {}.0", [_INT]),
    ("K IN ({}, {}, {})", [_INT, _INT, _INT]),
    ("K IN ({})", [_INT]),
    ("K >= {} AND K < {}", [_INT, _INT]),
    ("K BETWEEN {} AND {}", [_INT, _INT]),
    ("AGE > {}", [_INT]),
    ("NAME = {}", [_NAME]),
    ("SCORE < {}", [_DEC]),
    ("K = CAST({} AS BIGINT)", [_NAME]),
]
_PROJECTIONS = [
    ("*", []),
    ("K, NAME", []),
    ("NAME, AGE + {} AS A", [_INT]),
    ("K, SCORE * {}", [_SMALL_DEC]),
    ("UCASE(NAME) AS U, R", []),
    ("K, CONCAT(NAME, {}) AS C", [_NAME]),
]


@st.composite
def _pair_of_queries(draw: st.DrawFn) -> tuple[str, str]:
    """Two queries of one skeleton, with literals drawn independently."""
    projection = draw(st.sampled_from(_PROJECTIONS))
    leaves = [draw(st.sampled_from(_LEAVES)) for _ in range(draw(st.integers(1, 3)))]
    joiner = draw(st.sampled_from([" AND ", " OR "]))
    limit = draw(st.sampled_from(["", " LIMIT 2"]))
    skeleton = (
        f"SELECT {projection[0]} FROM T WHERE "
        + joiner.join(f"({leaf})" for leaf, _ in leaves)
        + f"{limit};"
    )
    strategies = projection[1] + [s for _, kinds in leaves for s in kinds]

    def render() -> str:
        return skeleton.format(*(draw(s) for s in strategies))

    return render(), render()


@settings(
    max_examples=500,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(_pair_of_queries(), st.booleans())
def test_random_queries_cached_and_fresh_agree(pair: tuple[str, str], scans: bool) -> None:
    first, second = pair
    try:
        template = template_of(first, USERS, scans)
    except Exception:  # noqa: BLE001 - a shape that is not cached: nothing to compare
        return
    shape_1, shape_2 = literal_shape(first), literal_shape(second)
    assert shape_1 is not None and shape_2 is not None
    if shape_1.key != shape_2.key:  # literals of other kinds: another template
        return
    assert cached(template, second, USERS, USER_ROWS, scans) == fresh(
        second, USERS, USER_ROWS, scans
    )
    COMPARED.append(second)


COMPARED: list[str] = []


def test_most_random_shapes_are_cached() -> None:
    """The property above must not pass by declining: most skeletons build a template."""
    built = 0
    for leaf, kinds in _LEAVES:
        examples = {id(_INT): "7", id(_NAME): "'3'", id(_DEC): "1.25", id(_SMALL_DEC): "0.5"}
        text = "SELECT * FROM T WHERE " + leaf.format(*(examples[id(s)] for s in kinds)) + ";"
        try:
            template_of(text, USERS)
        except Exception:  # noqa: BLE001, S112 - counted: most must build
            continue
        built += 1
    assert built >= len(_LEAVES) - 1


def test_the_property_compared_many_pairs() -> None:
    # With table scans off, ksqlDB's rules refuse most skeletons (ranges on an INTEGER key, ORs
    # of an equality and a range, non-key filters), and a refused skeleton builds no template:
    # of 500 examples, about 140 compare (200 before the rules; the bound guards the property
    # against passing by declining).
    assert len(COMPARED) >= 100, len(COMPARED)
