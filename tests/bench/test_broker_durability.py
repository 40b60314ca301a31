"""bench.broker_durability's reading of the delivery reports (pure)."""

from __future__ import annotations

from bench.broker_durability import went_back


def test_confirmations_behind_their_partition_are_found_in_write_order() -> None:
    # values 0..: partition value % 2; after a restart the broker confirmed 6 and 8 at offsets 0, 1
    confirmed = {0: (0, 10), 1: (1, 20), 2: (0, 11), 3: (1, 21), 4: (0, None), 6: (0, 0)}
    confirmed |= {8: (0, 1), 10: (0, 12), 5: (1, 22)}
    assert went_back(confirmed) == [(4, 0, None), (6, 0, 0), (8, 0, 1)]
    assert went_back({0: (0, 0), 1: (1, 0), 2: (0, 1)}) == []
