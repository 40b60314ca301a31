"""LagInfo arithmetic and the store errors' codes, retriability and fields."""

from __future__ import annotations

import pytest

from headwater.store import errors
from headwater.store.api import WriteBatch
from headwater.store.lag import LagInfo


@pytest.mark.parametrize(
    ("position", "end", "expected"),
    [
        (None, 0, LagInfo(0, 0, 0)),
        (None, 40, LagInfo(0, 40, 40)),
        (25, 40, LagInfo(25, 40, 15)),
        (40, 40, LagInfo(40, 40, 0)),
        (45, 40, LagInfo(45, 40, 0)),  # end offset seen before the store moved on: lag clamps at 0
    ],
)
def test_lag_info_of_position_and_end(position: int | None, end: int, expected: LagInfo) -> None:
    assert LagInfo.of(position, end) == expected


def test_lag_info_refuses_negative_numbers() -> None:
    with pytest.raises(ValueError):
        LagInfo.of(3, -1)
    with pytest.raises(ValueError):
        LagInfo(1, 2, -1)


def test_lag_info_is_a_frozen_slotted_value() -> None:
    lag = LagInfo.of(1, 2)
    with pytest.raises(AttributeError):
        lag.offset_lag = 5  # type: ignore[misc]
    assert not hasattr(lag, "__dict__")


@pytest.mark.parametrize(
    ("error", "code", "retriable"),
    [
        (errors.StoreError, 50000, False),
        (errors.StoreNotReady, 50302, True),
        (errors.StoreRestoring, 50302, True),
        (errors.StoreClosed, 50302, True),
        (errors.PositionRegression, 50000, False),
        (errors.KeyEncodingError, 40000, False),
        (errors.KeyDecodingError, 50000, False),
        (errors.KeyTooLarge, 40000, False),
        (errors.StoreFormatError, 50000, False),
        (errors.StoreIOError, 50000, False),
    ],
)
def test_error_codes_and_retriability(
    error: type[errors.StoreError], code: int, retriable: bool
) -> None:
    assert issubclass(error, errors.StoreError)
    assert (error.error_code, error.retriable) == (code, retriable)


def test_errors_carry_their_store() -> None:
    exc = errors.StoreRestoring("still restoring", table="T", partition=2, position=5, end_offset=9)
    assert (exc.table, exc.partition, exc.position, exc.end_offset) == ("T", 2, 5, 9)
    assert str(exc) == "still restoring (store T/2)"
    assert str(errors.StoreError("boom")) == "boom"


def test_write_batch_checks_its_input_and_reports_its_net_effect() -> None:
    batch = WriteBatch.of([(b"a", b"1"), (b"b", None), (b"a", None), (b"b", b"2")], 4)
    assert batch.net() == {b"a": None, b"b": b"2"}
    assert (batch.puts(), batch.deletes()) == ({b"b": b"2"}, {b"a"})
    with pytest.raises(ValueError):
        WriteBatch.of([], -1)
    with pytest.raises(TypeError):
        WriteBatch.of([("a", b"1")], 1)  # type: ignore[list-item]
    with pytest.raises(TypeError):
        WriteBatch.of([(b"a", "1")], 1)  # type: ignore[list-item]
    with pytest.raises(errors.KeyTooLarge):
        WriteBatch.of([(b"", b"1")], 1)
