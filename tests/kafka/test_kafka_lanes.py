"""kafka.lanes: which of a reader's two consumers reads a partition (pure)."""

from __future__ import annotations

import pytest

from headwater.kafka.lanes import Lane, next_lane

LIMIT = 20


@pytest.mark.parametrize(
    ("position", "end", "wanted"),
    [
        (0, None, Lane.LIVE),  # end not seen yet: nothing to conclude
        (100, 100, Lane.LIVE),
        (80, 100, Lane.LIVE),  # exactly the limit behind
        (79, 100, Lane.CATCH_UP),
        (0, 50_000, Lane.CATCH_UP),  # a replica rebuilt from offset 0
    ],
)
def test_a_live_partition_moves_to_catch_up_only_when_far_behind(
    position: int, end: int | None, wanted: Lane
) -> None:
    assert next_lane(Lane.LIVE, position, end, False, LIMIT) is wanted


def test_a_live_partition_at_its_end_stays_live() -> None:
    assert next_lane(Lane.LIVE, 100, 100, True, LIMIT) is Lane.LIVE


@pytest.mark.parametrize("end", [None, 100, 100_000])
def test_a_catching_up_partition_stays_until_it_reaches_the_end(end: int | None) -> None:
    assert next_lane(Lane.CATCH_UP, 99, end, False, LIMIT) is Lane.CATCH_UP
    # near the end is not enough: the next fetch may well bring the rest
    assert next_lane(Lane.CATCH_UP, 99, 100, False, LIMIT) is Lane.CATCH_UP


def test_a_catching_up_partition_goes_live_at_its_end() -> None:
    assert next_lane(Lane.CATCH_UP, 100, 100, True, LIMIT) is Lane.LIVE
    # the end seen by an earlier fetch may be behind the end-of-partition event
    assert next_lane(Lane.CATCH_UP, 120, 100, True, LIMIT) is Lane.LIVE
