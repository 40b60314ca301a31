"""kafka.lanes: which of a reader's two consumers reads a partition (pure)."""

from __future__ import annotations

import pytest

from headwater.kafka.lanes import Lane, behind_since, live_wait_after_stall, next_lane

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


@pytest.mark.parametrize(
    ("wait_ms", "position", "end", "behind_s", "longer"),
    [
        (20, 100, 101, 1.0, 40),  # a record waits and none came: the wait doubles
        (320, 100, 101, 1.0, 500),  # up to the cap
        (500, 100, 101, 1.0, None),  # at the cap: nothing longer to try
        (20, 100, 101, 0.1, None),  # not for long enough yet
        (20, 101, 101, 9.0, None),  # at the end: idle is just quiet
        (20, 100, None, 9.0, None),  # no end reported yet
    ],
)
def test_a_live_consumer_stalled_behind_its_end_gets_a_longer_wait(
    wait_ms: int, position: int, end: int | None, behind_s: float, longer: int | None
) -> None:
    assert live_wait_after_stall(wait_ms, position, end, behind_s, 0.5, 500) == longer


def test_behind_counts_from_when_the_end_moved_not_from_the_last_record() -> None:
    # Quiet for an hour, then a record arrives: it is behind from now, not for an hour.
    assert behind_since(None, 100, 100, 3600.0) is None
    assert behind_since(None, 100, 101, 3600.0) == 3600.0
    assert behind_since(3600.0, 100, 101, 3600.4) == 3600.0
    assert behind_since(3600.0, 101, 101, 3600.5) is None  # it came
    assert behind_since(3600.0, 100, None, 3601.0) is None
