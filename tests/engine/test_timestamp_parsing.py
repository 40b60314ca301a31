"""STRINGTOTIMESTAMP's fast path (``fromisoformat`` for fixed-width ISO shapes, as event-time
sources parse a timestamp per record) against the general one (``strptime``): the same instant, or
the same failure, for every text."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.engine.columnar.times import iso_millis
from headwater.engine.functions import temporal
from headwater.engine.functions.types import EvalFailure

PATTERNS = [
    "yyyy-MM-dd HH:mm:ss.SSS",
    "yyyy-MM-dd'T'HH:mm:ss.SSS",
    "yyyy-MM-dd HH:mm:ss",
    "yyyy-MM-dd'T'HH:mm:ss",
]


def general(text: str, pattern: str) -> int | str:
    try:
        stamp = dt.datetime.strptime(text, temporal._strftime_pattern(pattern))
    except ValueError:
        return "fails"
    return (stamp.replace(tzinfo=dt.UTC) - temporal._EPOCH) // dt.timedelta(milliseconds=1)


def fast(text: str, pattern: str) -> int | str:
    try:
        return temporal._parse_ts(text, pattern)
    except EvalFailure:
        return "fails"


_ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")  # strptime reads these digits


@st.composite
def texts(draw: st.DrawFn) -> str:
    """Mostly real instants in the patterns' shapes, some with a digit changed (to a day that
    does not exist, an hour 24, ...) or written in other digits."""
    when = draw(st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31)))
    sep = draw(st.sampled_from([" ", "T"]))
    fraction = draw(st.sampled_from(["", f".{when.microsecond // 1000:03d}", ".5", ".1234"]))
    text = when.strftime(f"%Y-%m-%d{sep}%H:%M:%S").rjust(19, "0") + fraction
    how = draw(st.integers(0, 3))
    at = draw(st.integers(0, len(text) - 1))
    if how == 1 and text[at].isdigit():
        text = text[:at] + draw(st.sampled_from("0123456789")) + text[at + 1 :]
    elif how == 2:
        text = text[:at] + text[at].translate(_ARABIC_INDIC) + text[at + 1 :]
    return text


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(deadline=None)
@given(text=st.one_of(texts(), st.text(max_size=25)))
def test_the_fast_path_reads_every_text_as_strptime_does(pattern: str, text: str) -> None:
    assert fast(text, pattern) == general(text, pattern)


def test_a_date_that_does_not_exist_fails_on_both_paths() -> None:
    assert fast("2023-02-30 10:00:00.000", PATTERNS[0]) == "fails"
    assert fast("2023-11-14 22:13:20.040", PATTERNS[0]) == 1_700_000_000_040


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(deadline=None)
@given(column=st.lists(texts(), min_size=1, max_size=8))
def test_a_column_read_at_once_is_read_as_value_by_value(pattern: str, column: list[str]) -> None:
    each = [fast(text, pattern) for text in column]
    at_once = iso_millis(column, pattern)
    if at_once is not None:
        assert at_once == each
    elif "fails" not in each:
        # every value reads: only a shape the column reader leaves alone may refuse it
        assert any(
            temporal._ISO_SHAPES[temporal._strftime_pattern(pattern)].fullmatch(t) is None
            or t.startswith("0000")
            for t in column
        )


def test_a_column_of_event_times_is_read_at_once() -> None:
    column = pa.array(["2023-11-14 22:13:20.040", "1969-12-31 23:59:59.999"])
    assert iso_millis(column, PATTERNS[0]) == [1_700_000_000_040, -1]
    for bad in ("2023-02-30 10:00:00.000", "0000-01-01 00:00:00.000", None, "2023-11-14"):
        assert iso_millis([*column.to_pylist(), bad], PATTERNS[0]) is None


@pytest.mark.parametrize(
    ("text", "pattern", "millis"),
    [
        ("2020-05-11T21:58:33z", "yyyy-MM-dd'T'HH:mm:ssX", 1589234313000),  # case-insensitive
        ("2020-05-11T21:58:33Z", "yyyy-MM-dd'T'HH:mm:ssX", 1589234313000),
        ("2018-05-11T21:58:33 PST", "yyyy-MM-dd'T'HH:mm:ss zzz", 1526101113000),  # PDT in May
        ("2018-01-11T21:58:33 PST", "yyyy-MM-dd'T'HH:mm:ss zzz", 1515736713000),
        ("2018-01-11T21:58:33 Europe/London", "yyyy-MM-dd'T'HH:mm:ss zzz", 1515707913000),
        ("2018-01-11T21:58:33 UTC", "yyyy-MM-dd'T'HH:mm:ss zzz", 1515707913000),
    ],
)
def test_zones_parse_as_java_reads_them(text: str, pattern: str, millis: int) -> None:
    assert temporal._parse_ts(text, pattern) == millis


def test_an_unknown_zone_name_fails() -> None:
    with pytest.raises(EvalFailure):
        temporal._parse_ts("2018-01-11T21:58:33 NOWHERE", "yyyy-MM-dd'T'HH:mm:ss zzz")
