"""The `PartitionStore` contract, one suite run against the in-memory and the LMDB store."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.store.api import MAX_KEY_BYTES, PartitionStore, StoreEngine, StoreId, WriteBatch
from headwater.store.errors import KeyTooLarge, PositionRegression, StoreClosed
from headwater.store.keys import KeyType, encode_key
from headwater.store.lmdb import LmdbEngine, LmdbSettings
from headwater.store.memory import MemoryEngine

ENGINES: dict[str, Callable[[], StoreEngine]] = {
    "memory": MemoryEngine,
    "lmdb": lambda: LmdbEngine(LmdbSettings(map_size_bytes=256 * 2**20)),
}
ID = StoreId("ORDERS", 3)
Opener = Callable[[], PartitionStore]


@pytest.fixture(params=sorted(ENGINES))
def reopen(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens the same store (same folder, same engine) each time it is called."""
    engine = ENGINES[request.param]()
    opened: list[PartitionStore] = []

    def open_store() -> PartitionStore:
        store = engine.open(str(tmp_path), ID)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


@pytest.fixture
def store(reopen: Opener) -> PartitionStore:
    return reopen()


def k(n: int) -> bytes:
    return encode_key((n,), (KeyType.INT,))


def fill(store: PartitionStore, numbers: range, position: int = 1) -> None:
    store.apply(WriteBatch.of(((k(n), b"v%d" % n) for n in numbers), position))


def numbers(rows: Iterator[tuple[bytes, bytes]]) -> list[int]:
    return [int(value[1:]) for _, value in rows]


def test_both_implementations_satisfy_the_protocol(store: PartitionStore) -> None:
    assert isinstance(store, PartitionStore)


def test_a_new_store_is_empty_with_no_position(store: PartitionStore) -> None:
    assert store.get(k(1)) is None
    assert list(store.scan()) == []
    assert store.position() is None
    assert store.approximate_count() == 0


def test_put_overwrite_and_tombstone(store: PartitionStore) -> None:
    store.apply(WriteBatch.of([(k(1), b"a"), (k(2), b"b"), (k(1), b"c")], 3))
    assert (store.get(k(1)), store.get(k(2))) == (b"c", b"b")
    store.apply(WriteBatch.of([(k(2), None), (k(3), b""), (k(9), None)], 6))
    assert store.get(k(2)) is None
    assert store.get(k(3)) == b""
    assert list(store.scan()) == [(k(1), b"c"), (k(3), b"")]
    assert store.position() == 6
    assert store.approximate_count() == 2


def test_later_change_of_a_key_in_one_batch_wins(store: PartitionStore) -> None:
    store.apply(WriteBatch.of([(k(1), b"a"), (k(1), None)], 2))
    assert store.get(k(1)) is None
    store.apply(WriteBatch.of([(k(1), None), (k(1), b"b")], 4))
    assert store.get(k(1)) == b"b"


@pytest.mark.parametrize(
    ("low", "high", "low_inclusive", "high_inclusive", "expected"),
    [
        (3, 6, True, True, [3, 4, 6]),
        (3, 6, False, True, [4, 6]),
        (3, 6, True, False, [3, 4]),
        (3, 6, False, False, [4]),
        (5, 5, True, True, []),
        (4, 4, True, True, [4]),
        (4, 4, False, True, []),
        (None, 3, True, True, [-7, 0, 3]),
        (None, 3, True, False, [-7, 0]),
        (4, None, True, True, [4, 6, 9]),
        (4, None, False, True, [6, 9]),
        (None, None, False, False, [-7, 0, 3, 4, 6, 9]),
        (8, 2, True, True, []),
        (10, None, True, True, []),
        (None, -8, True, True, []),
    ],
)
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_range_bounds(
    store: PartitionStore,
    low: int | None,
    high: int | None,
    low_inclusive: bool,
    high_inclusive: bool,
    expected: list[int],
    reverse: bool,
) -> None:
    store.apply(WriteBatch.of([(k(n), b"v%d" % n) for n in (9, -7, 4, 0, 6, 3)], 6))
    rows = store.range(
        None if low is None else k(low),
        None if high is None else k(high),
        low_inclusive=low_inclusive,
        high_inclusive=high_inclusive,
        reverse=reverse,
    )
    assert numbers(rows) == (expected[::-1] if reverse else expected)


def test_range_bounds_need_not_be_stored_keys_and_may_be_any_length(store: PartitionStore) -> None:
    fill(store, range(600))
    assert numbers(store.range(b"", k(2))) == [0, 1, 2]
    assert numbers(store.range(None, b"", reverse=True)) == []
    long_low = k(597) + b"\x00" * 600
    assert numbers(store.range(long_low, None)) == [598, 599]
    assert numbers(store.range(None, long_low, reverse=True))[:2] == [597, 596]
    assert numbers(store.range(k(597)[:3], k(2**31 - 1))) == list(range(600))


def test_long_ranges_cross_read_chunks_in_both_directions(store: PartitionStore) -> None:
    fill(store, range(1000))
    assert numbers(store.scan()) == list(range(1000))
    assert numbers(store.range(k(100), k(900), reverse=True)) == list(range(900, 99, -1))


def test_typed_keys_come_back_in_sql_order(store: PartitionStore) -> None:
    types = (KeyType.STRING, KeyType.DOUBLE)
    values = [
        ("b", 1.5),
        ("a", float("inf")),
        ("ab", -2.0),
        ("a", -1e300),
        (None, 0.0),
        ("a\x00", 0.0),
    ]
    store.apply(WriteBatch.of([(encode_key(v, types), repr(v).encode()) for v in values], 6))
    got = [value.decode() for _, value in store.scan()]
    expected = [
        (None, 0.0),
        ("a", -1e300),
        ("a", float("inf")),
        ("a\x00", 0.0),
        ("ab", -2.0),
        ("b", 1.5),
    ]
    assert got == [repr(v) for v in expected]


def test_position_moves_with_each_batch_and_never_back(store: PartitionStore) -> None:
    fill(store, range(3), position=10)
    store.apply(WriteBatch.of([], 10))  # an empty batch at the same position is fine
    assert store.position() == 10
    with pytest.raises(PositionRegression) as info:
        store.apply(WriteBatch.of([(k(99), b"x")], 9))
    assert (info.value.position, info.value.batch_position, info.value.table) == (10, 9, "ORDERS")
    assert store.get(k(99)) is None
    assert store.position() == 10


def test_a_batch_with_a_bad_key_changes_nothing(store: PartitionStore) -> None:
    fill(store, range(2), position=5)
    bad = WriteBatch(((k(7), b"x"), (b"x" * (MAX_KEY_BYTES + 1), b"y")), 8)
    with pytest.raises(KeyTooLarge):
        store.apply(bad)
    with pytest.raises(KeyTooLarge):
        store.apply(WriteBatch(((b"", b"y"),), 8))
    assert store.get(k(7)) is None
    assert store.position() == 5
    store.apply(WriteBatch.of([(b"m" * MAX_KEY_BYTES, b"z")], 9))
    assert store.get(b"m" * MAX_KEY_BYTES) == b"z"
    assert store.get(b"m" * (MAX_KEY_BYTES + 1)) is None
    assert store.get(b"") is None


def test_rows_and_position_survive_close_and_reopen(reopen: Opener) -> None:
    first = reopen()
    fill(first, range(50), position=50)
    first.apply(WriteBatch.of([(k(3), None)], 51))
    first.close()
    again = reopen()
    assert again.position() == 51
    assert again.get(k(3)) is None
    assert numbers(again.scan()) == [n for n in range(50) if n != 3]


def test_clear_drops_rows_and_position(reopen: Opener) -> None:
    store = reopen()
    fill(store, range(20), position=20)
    store.clear()
    assert (list(store.scan()), store.position(), store.approximate_count()) == ([], None, 0)
    fill(store, range(2), position=3)
    store.close()
    assert reopen().position() == 3


def test_a_range_iterator_reads_one_snapshot(store: PartitionStore) -> None:
    fill(store, range(600), position=1)
    rows = store.range(None, None)
    first = next(rows)
    store.apply(WriteBatch.of([(k(599), None), (k(1000), b"v1000")], 2))
    assert numbers(iter([first, *rows])) == list(range(600))
    assert numbers(store.range(k(598), None)) == [598, 1000]


def test_a_closed_store_raises_store_closed(store: PartitionStore) -> None:
    fill(store, range(600), position=1)
    rows = store.range(None, None)
    next(rows)
    store.close()
    store.close()  # idempotent
    for call in (
        lambda: store.get(k(1)),
        lambda: list(store.scan()),
        lambda: store.position(),
        lambda: store.approximate_count(),
        lambda: store.apply(WriteBatch.of([], 2)),
        lambda: store.clear(),
        lambda: list(rows),
    ):
        with pytest.raises(StoreClosed) as info:
            call()
        assert info.value.retriable and info.value.error_code == 50302


def test_reads_in_threads_while_a_batch_writer_runs(store: PartitionStore) -> None:
    def writer() -> None:
        for i in range(50):
            store.apply(WriteBatch.of(((k(i * 20 + j), b"v%d" % i) for j in range(20)), i + 1))

    def reader() -> None:
        for _ in range(100):
            rows = list(store.scan())
            assert len(rows) % 20 == 0  # whole batches only

    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [pool.submit(writer), pool.submit(reader), pool.submit(reader)]
        for future in futures:
            future.result()  # re-raises a thread's failure here
    assert store.approximate_count() == 1000


CHANGES = st.lists(st.tuples(st.integers(0, 40), st.none() | st.binary(max_size=3)), max_size=30)
BOUND = st.none() | st.integers(-1, 41)


@pytest.mark.parametrize("engine_name", sorted(ENGINES))
@settings(derandomize=True, deadline=None, max_examples=40)
@given(
    batches=st.lists(CHANGES, min_size=1, max_size=5),
    queries=st.lists(
        st.tuples(BOUND, BOUND, st.booleans(), st.booleans(), st.booleans()), max_size=8
    ),
)
def test_behaves_like_a_sorted_dict(
    engine_name: str,
    batches: list[list[tuple[int, bytes | None]]],
    queries: list[tuple[int | None, int | None, bool, bool, bool]],
) -> None:
    model: dict[bytes, bytes] = {}
    with tempfile.TemporaryDirectory() as folder:
        store = ENGINES[engine_name]().open(folder, ID)
        try:
            for position, changes in enumerate(batches, start=1):
                store.apply(WriteBatch.of([(k(n), v) for n, v in changes], position * 10))
                for n, v in changes:
                    if v is None:
                        model.pop(k(n), None)
                    else:
                        model[k(n)] = v
            assert list(store.scan()) == sorted(model.items())
            assert store.position() == len(batches) * 10
            for low, high, low_inc, high_inc, reverse in queries:
                lo = None if low is None else k(low)
                hi = None if high is None else k(high)
                expected = sorted(
                    (key, v)
                    for key, v in model.items()
                    if (lo is None or key > lo or (low_inc and key == lo))
                    and (hi is None or key < hi or (high_inc and key == hi))
                )
                got = store.range(
                    lo, hi, low_inclusive=low_inc, high_inclusive=high_inc, reverse=reverse
                )
                assert list(got) == (expected[::-1] if reverse else expected)
        finally:
            store.close()
