"""The restorer's book-keeping without a broker: routes of shared topics, the status board, waits."""

from __future__ import annotations

import threading

import pytest

from headwater.store.api import StoreId, WriteBatch
from headwater.store.errors import TableNotMaterialized
from headwater.store.lag import LagInfo
from headwater.store.memory import MemoryStore
from headwater.store.records import PartitionStatus
from headwater.store.tables import Routes, StatusBoard, TableTarget


def target(table: str, partition: int, position: int | None = None) -> TableTarget:
    store = MemoryStore(StoreId(table, partition))
    if position is not None:
        store.apply(WriteBatch((), position))
    return TableTarget(table, partition, store, lambda key: key or b"?")


def test_a_target_starts_at_its_store_position() -> None:
    assert target("T", 0).position == 0
    assert target("T", 1, 42).position == 42


def test_routes_assign_new_partitions_and_move_shared_ones_back() -> None:
    routes = Routes()
    first = [target("A", 0, 100), target("A", 1, 7)]
    assert routes.attach("topic", first) == ([("topic", 0, 100), ("topic", 1, 7)], [])
    second = [target("B", 0, 10), target("B", 1, 50)]
    # B reads partition 0 from 10 (below A's 100: read again from there); partition 1 is behind
    # already (7 < 50), nothing to do.
    assert routes.attach("topic", second) == ([], [("topic", 0, 10)])
    assert sorted(routes.starts()) == [("topic", 0, 10), ("topic", 1, 7)]
    assert [t.table for t in routes.targets(("topic", 0))] == ["A", "B"]
    assert routes.detach("A") == []  # B still needs both partitions
    assert routes.detach("B") == [("topic", 0), ("topic", 1)]
    assert len(routes) == 0 and routes.targets(("topic", 0)) == []


def test_removing_a_failed_target_frees_its_partition_when_it_was_the_last() -> None:
    routes = Routes()
    a, b = target("A", 0), target("B", 0)
    routes.attach("topic", [a])
    routes.attach("topic", [b])
    assert routes.remove(("topic", 0), a) is False
    assert routes.remove(("topic", 0), a) is False  # already gone
    assert routes.remove(("topic", 0), b) is True
    assert routes.partitions() == []


def test_the_board_publishes_claimed_tables_only() -> None:
    board = StatusBoard()
    board.claim("T")
    with pytest.raises(ValueError):
        board.claim("T")
    with pytest.raises(TableNotMaterialized):
        board.status("T")  # claimed, stores still opening
    board.publish("T", "topic", [PartitionStatus("topic", 0, 5), PartitionStatus("topic", 1, 0)])
    assert board.topics() == {"T": "topic"}
    assert board.lags() == {"T": {}}
    board.update("T", 0, lambda s: s.advanced(5, 9))
    assert board.lags() == {"T": {0: LagInfo(5, 9, 4)}}
    board.update("GONE", 0, lambda s: s.advanced(1, 1))  # ignored
    board.discard("T")
    with pytest.raises(TableNotMaterialized):
        board.status("T")


def test_waits_wake_on_updates_and_stop_on_failure() -> None:
    board = StatusBoard()
    board.claim("T")
    board.publish("T", "topic", [PartitionStatus("topic", 0, 0), PartitionStatus("topic", 1, 0)])
    assert not board.wait_until_caught_up("T", 0.05)

    def progress() -> None:
        board.update("T", 0, lambda s: s.advanced(10, 10))
        board.update("T", 1, lambda s: s.advanced(3, 3))

    threading.Timer(0.05, progress).start()
    assert board.wait_until_caught_up("T", 5)
    assert board.wait_for_positions("T", {0: 10}, 0.01)
    assert not board.wait_for_positions("T", {1: 4}, 0.05)
    board.update("T", 1, lambda s: s.failed("disk full"))
    assert board.wait_for_positions("T", {0: 10}, 0.01)  # partition 0 is fine
    assert not board.wait_for_positions("T", {1: 4}, 5)  # returns at once: FAILED
    board.fail_all("restorer died")
    assert board.status("T")[0].error == "restorer died"
    assert board.status("T")[1].error == "disk full"
