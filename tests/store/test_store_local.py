"""LocalStores: one store per (table, partition) under the state folder, listed again after a restart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from headwater.store.api import StoreEngine, StoreId, WriteBatch
from headwater.store.lmdb import LmdbEngine, LmdbSettings
from headwater.store.local import LocalStores, table_folder_name, table_from_folder_name
from headwater.store.memory import MemoryEngine

ENGINES: dict[str, Callable[[], StoreEngine]] = {
    "memory": MemoryEngine,
    "lmdb": lambda: LmdbEngine(LmdbSettings(map_size_bytes=64 * 2**20)),
}


@pytest.fixture(params=sorted(ENGINES))
def engine(request: pytest.FixtureRequest) -> StoreEngine:
    return ENGINES[request.param]()


def put(stores: LocalStores, table: str, partition: int, position: int) -> None:
    stores.open(table, partition).apply(WriteBatch.of([(b"k%d" % position, b"v")], position))


def test_stores_are_listed_with_positions_after_a_restart(
    tmp_path: Path, engine: StoreEngine
) -> None:
    stores = LocalStores(tmp_path, engine)
    put(stores, "ORDERS", 0, 10)
    put(stores, "ORDERS", 1, 20)
    put(stores, "users by/name", 0, 7)
    stores.open("EMPTY", 3)
    assert (tmp_path / "stores" / "ORDERS" / "1").is_dir()
    stores.close_all()

    restarted = LocalStores(tmp_path, engine)
    assert restarted.opened() == {}
    assert restarted.on_disk() == {
        StoreId("EMPTY", 3): None,
        StoreId("ORDERS", 0): 10,
        StoreId("ORDERS", 1): 20,
        StoreId("users by/name", 0): 7,
    }
    assert restarted.opened() == {}  # listing opened nothing for good
    store = restarted.open("ORDERS", 1)
    assert store.get(b"k20") == b"v"
    assert restarted.on_disk()[StoreId("ORDERS", 1)] == 20  # read from the open store
    restarted.close_all()


def test_open_returns_the_open_store_and_close_keeps_the_data(
    tmp_path: Path, engine: StoreEngine
) -> None:
    stores = LocalStores(tmp_path, engine)
    first = stores.open("T", 0)
    assert stores.open("T", 0) is first
    assert stores.get("T", 0) is first
    assert stores.get("T", 1) is None
    put(stores, "T", 0, 5)
    stores.close("T", 0)
    stores.close("T", 0)  # closing a closed store is fine
    assert stores.get("T", 0) is None
    assert stores.open("T", 0).position() == 5
    stores.close_all()


def test_drop_deletes_a_partition_and_then_its_empty_table_folder(
    tmp_path: Path, engine: StoreEngine
) -> None:
    stores = LocalStores(tmp_path, engine)
    put(stores, "T", 0, 1)
    put(stores, "T", 1, 2)
    assert stores.drop("T", 0) is True
    assert stores.drop("T", 0) is False
    assert stores.on_disk() == {StoreId("T", 1): 2}
    stores.drop("T", 1)
    assert not (tmp_path / "stores" / "T").exists()
    reopened = stores.open("T", 0)
    assert (reopened.position(), list(reopened.scan())) == (None, [])
    stores.close_all()

    restarted = LocalStores(tmp_path, engine)
    assert restarted.on_disk() == {StoreId("T", 0): None}


def test_remains_of_an_interrupted_drop_are_removed_and_not_listed(
    tmp_path: Path, engine: StoreEngine
) -> None:
    stores = LocalStores(tmp_path, engine)
    put(stores, "T", 0, 1)
    stores.close_all()
    remains = tmp_path / "stores" / "T" / ".drop-0-abc"
    (tmp_path / "stores" / "T" / "0").rename(remains)
    (tmp_path / "stores" / "T" / "notes.txt").write_text("not a store")
    restarted = LocalStores(tmp_path, engine)
    assert not remains.exists()
    assert restarted.on_disk() == {}


@pytest.mark.parametrize("table", ["ORDERS", "a/b", "..", ".", "x%41", "naïve 表", "-_"])
def test_table_folder_names_are_safe_and_reversible(table: str) -> None:
    name = table_folder_name(table)
    assert "/" not in name and not name.startswith(".")
    assert table_from_folder_name(name) == table


def test_bad_table_and_partition_are_refused(tmp_path: Path) -> None:
    stores = LocalStores(tmp_path, MemoryEngine())
    with pytest.raises(ValueError):
        stores.open("", 0)
    with pytest.raises(ValueError):
        stores.open("T", -1)
