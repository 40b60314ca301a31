"""What each Nexmark query of `bench.nexmark.queries` must output, computed in plain Python.

A model takes the run's events (in the order they were produced) and returns the expected rows:
for a ``stream`` query every output record, for a ``table`` query the last row of every key still
present. Rows are compared by `canonical`: a JSON object's columns and values, with a stream
record's non-null key under ``$KEY``, and numbers with a fraction to 12 significant digits (a
DECIMAL(23, 3) of q1's prices and an AVG's double both fit).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson

from bench.nexmark.generator import Auction, Bid, Event, Person, date_time_text

Row = dict[str, Any]
Canonical = tuple[tuple[str, Any], ...]

_RATE = Decimal("0.908")
_CHANNEL_ID = re.compile(r"(&|^)channel_id=([^&]*)")
_NAMED_CHANNELS = {"apple": "0", "google": "1", "facebook": "2", "baidu": "3"}
SIDE_KEYS = 10_000


@dataclass(frozen=True)
class Run:
    """What a model reads: the events in produced order, and each bid's Kafka timestamp."""

    events: Sequence[Event]
    arrival_ms: Sequence[int] = ()  # per bid, in order: the record timestamp it was produced with

    @property
    def bids(self) -> list[Bid]:
        return [e for e in self.events if isinstance(e, Bid)]

    @property
    def auctions(self) -> list[Auction]:
        return [e for e in self.events if isinstance(e, Auction)]

    @property
    def persons(self) -> list[Person]:
        return [e for e in self.events if isinstance(e, Person)]


def side_input() -> list[tuple[int, str]]:
    """q13's side input: (key, value) for keys 0..9,999."""
    return [(k, f"side-{k}") for k in range(SIDE_KEYS)]


def canonical(row: Mapping[str, Any]) -> Canonical:
    """``row`` as a hashable value that compares as the benchmark means: upper-case names,
    numbers with a fraction to 12 significant digits, lists and structs element by element."""
    return tuple(sorted((name.upper(), _value(value)) for name, value in row.items()))


def _value(value: Any) -> Any:
    if isinstance(value, float | Decimal):
        return float(f"{float(value):.12g}")
    if isinstance(value, Mapping):
        return canonical(value)
    if isinstance(value, list | tuple):
        return tuple(_value(v) for v in value)
    return value


def _day(ms: int) -> str:
    return date_time_text(ms)[:10]


def _minute(ms: int) -> str:
    return date_time_text(ms)[11:16]


# -- the models ------------------------------------------------------------------------------------


def q0(run: Run) -> list[Row]:
    return [
        {
            "AUCTION": b.auction,
            "BIDDER": b.bidder,
            "PRICE": b.price,
            "DATE_TIME": date_time_text(b.date_time),
            "EXTRA": b.extra,
        }
        for b in run.bids
    ]


def q1(run: Run) -> list[Row]:
    return [{**row, "PRICE": _RATE * row["PRICE"]} for row in q0(run)]


def q2(run: Run) -> list[Row]:
    return [{"AUCTION": b.auction, "PRICE": b.price} for b in run.bids if b.auction % 123 == 0]


def q3(run: Run) -> list[Row]:
    persons = {p.id: p for p in run.persons}
    rows = []
    for a in run.auctions:
        p = persons.get(a.seller)
        if a.category == 10 and p is not None and p.state in ("OR", "ID", "CA"):
            rows.append(
                {"$KEY": a.seller, "NAME": p.name, "CITY": p.city, "STATE": p.state, "ID": a.id}
            )
    return rows


def q4(run: Run) -> list[Row]:
    auctions = {a.id: a for a in run.auctions}
    final: dict[int, int] = {}
    for b in run.bids:
        a = auctions.get(b.auction)
        if a is None:
            continue
        text = date_time_text(b.date_time)
        if date_time_text(a.date_time) <= text <= date_time_text(a.expires):
            final[a.id] = max(final.get(a.id, b.price), b.price)
    per_category: dict[int, list[int]] = defaultdict(list)
    for auction_id, price in final.items():
        per_category[auctions[auction_id].category].append(price)
    return [
        {"C": category, "AVG_FINAL": sum(prices) / len(prices)}
        for category, prices in per_category.items()
    ]


def q10(run: Run) -> list[Row]:
    return [{**row, "DT": row["DATE_TIME"][:10], "HM": row["DATE_TIME"][11:16]} for row in q0(run)]


def q11(run: Run, gap_ms: int = 10_000) -> list[Row]:
    times: dict[int, list[int]] = defaultdict(list)
    for b in run.bids:
        times[b.bidder].append(b.date_time)
    rows = []
    for bidder, stamps in times.items():
        stamps.sort()
        start = end = stamps[0]
        count = 0
        for ts in stamps:
            if ts - end > gap_ms:
                rows.append(_session(bidder, count, start, end))
                start, count = ts, 0
            end = ts
            count += 1
        rows.append(_session(bidder, count, start, end))
    return rows


def _session(bidder: int, count: int, start: int, end: int) -> Row:
    return {"B": bidder, "BID_COUNT": count, "STARTTIME": start, "ENDTIME": end}


def q12(run: Run, size_ms: int = 10_000) -> list[Row]:
    bids = run.bids
    if len(run.arrival_ms) != len(bids):
        raise ValueError("q12 needs every bid's Kafka timestamp")
    counts: Counter[tuple[int, int]] = Counter()
    for b, ts in zip(bids, run.arrival_ms, strict=True):
        counts[(b.bidder, ts - ts % size_ms)] += 1
    return [
        {"B": bidder, "BID_COUNT": n, "STARTTIME": start, "ENDTIME": start + size_ms}
        for (bidder, start), n in counts.items()
    ]


def q13(run: Run) -> list[Row]:
    side = dict(side_input())
    return [
        {
            "$KEY": b.auction % SIDE_KEYS,
            "AUCTION": b.auction,
            "BIDDER": b.bidder,
            "PRICE": b.price,
            "DATE_TIME": date_time_text(b.date_time),
            "VALUE": side[b.auction % SIDE_KEYS],
        }
        for b in run.bids
    ]


def q14(run: Run) -> list[Row]:
    rows = []
    for b in run.bids:
        price = _RATE * b.price
        if not 1_000_000 < price < 50_000_000:
            continue
        hour = int(date_time_text(b.date_time)[11:13])
        if 8 <= hour <= 18:
            kind = "dayTime"
        elif hour <= 6 or hour >= 20:
            kind = "nightTime"
        else:
            kind = "otherTime"
        rows.append(
            {
                "AUCTION": b.auction,
                "BIDDER": b.bidder,
                "PRICE": price,
                "BID_TIME_TYPE": kind,
                "DATE_TIME": date_time_text(b.date_time),
                "EXTRA": b.extra,
                "C_COUNTS": b.extra.count("c"),
            }
        )
    return rows


def _rank(price: int) -> int:
    return 1 if price < 10_000 else 2 if price < 1_000_000 else 3


def _statistics(bids: Iterable[Bid]) -> Row:
    bids = list(bids)
    row: Row = {"TOTAL_BIDS": len(bids)}
    for rank in (1, 2, 3):
        row[f"RANK{rank}_BIDS"] = sum(1 for b in bids if _rank(b.price) == rank)
    for column, plural in (("bidder", "BIDDERS"), ("auction", "AUCTIONS")):
        row[f"TOTAL_{plural}"] = len({getattr(b, column) for b in bids})
        for rank in (1, 2, 3):
            row[f"RANK{rank}_{plural}"] = len(
                {getattr(b, column) for b in bids if _rank(b.price) == rank}
            )
    return row


def _grouped(bids: Iterable[Bid], key: Callable[[Bid], Any]) -> dict[Any, list[Bid]]:
    groups: dict[Any, list[Bid]] = defaultdict(list)
    for b in bids:
        groups[key(b)].append(b)
    return groups


def q15(run: Run) -> list[Row]:
    return [
        {"D": day, **_statistics(bids)}
        for day, bids in _grouped(run.bids, lambda b: _day(b.date_time)).items()
    ]


def q16(run: Run) -> list[Row]:
    return [
        {
            "CH": channel,
            "D": day,
            "MINUTE": max(_minute(b.date_time) for b in bids),
            **_statistics(bids),
        }
        for (channel, day), bids in _grouped(
            run.bids, lambda b: (b.channel, _day(b.date_time))
        ).items()
    ]


def q17(run: Run) -> list[Row]:
    rows = []
    for (auction, day), bids in _grouped(
        run.bids, lambda b: (b.auction, _day(b.date_time))
    ).items():
        prices = [b.price for b in bids]
        statistics = _statistics(bids)
        rows.append(
            {
                "A": auction,
                "D": day,
                "TOTAL_BIDS": len(bids),
                **{f"RANK{r}_BIDS": statistics[f"RANK{r}_BIDS"] for r in (1, 2, 3)},
                "MIN_PRICE": min(prices),
                "MAX_PRICE": max(prices),
                "AVG_PRICE": sum(prices) / len(prices),
                "SUM_PRICE": sum(prices),
            }
        )
    return rows


def q18(run: Run) -> list[Row]:
    last = {(b.bidder, b.auction): b for b in run.bids}
    return [
        {
            "B": b.bidder,
            "A": b.auction,
            "PRICE": b.price,
            "CHANNEL": b.channel,
            "URL": b.url,
            "DATE_TIME": date_time_text(b.date_time),
            "EXTRA": b.extra,
        }
        for b in last.values()
    ]


def q19(run: Run) -> list[Row]:
    return [
        {"A": auction, "TOP_PRICES": sorted((b.price for b in bids), reverse=True)[:10]}
        for auction, bids in _grouped(run.bids, lambda b: b.auction).items()
    ]


def q19_shape(run: Run) -> Callable[[Row], Row]:
    """q19's actual rows as the model's: the top prices, each checked to be a bid of the
    auction with that bidder and time (else the row keeps ``TOP_BIDS`` and cannot match)."""
    bids = {(b.auction, b.price, b.bidder, date_time_text(b.date_time)) for b in run.bids}

    def shape(row: Row) -> Row:
        top = [{k.upper(): v for k, v in item.items()} for item in row.get("TOP_BIDS") or []]
        real = all((row.get("A"), t["SORT_COL"], t["COL0"], t["COL1"]) in bids for t in top)
        if not real:
            return row
        return {"A": row.get("A"), "TOP_PRICES": [t["SORT_COL"] for t in top]}

    return shape


def _auction_columns(a: Auction) -> Row:
    """An auction's columns as q20 and q23 select them."""
    return {
        "ITEM_NAME": a.item_name,
        "DESCRIPTION": a.description,
        "INITIAL_BID": a.initial_bid,
        "RESERVE": a.reserve,
        "AUCTION_DATE_TIME": date_time_text(a.date_time),
        "EXPIRES": date_time_text(a.expires),
        "SELLER": a.seller,
        "CATEGORY": a.category,
        "AUCTION_EXTRA": a.extra,
    }


def q20(run: Run) -> list[Row]:
    auctions = {a.id: a for a in run.auctions}
    rows = []
    for b in run.bids:
        a = auctions.get(b.auction)
        if a is None or a.category != 10:
            continue
        rows.append(
            {
                "$KEY": b.auction,
                "BIDDER": b.bidder,
                "PRICE": b.price,
                "CHANNEL": b.channel,
                "URL": b.url,
                "BID_DATE_TIME": date_time_text(b.date_time),
                "BID_EXTRA": b.extra,
                **_auction_columns(a),
            }
        )
    return rows


def q21(run: Run) -> list[Row]:
    rows = []
    for b in run.bids:
        found = _CHANNEL_ID.search(b.url)
        extracted = found.group(2) if found else None
        named = _NAMED_CHANNELS.get(b.channel.lower())
        if extracted is None and named is None:
            continue
        channel_id = named if named is not None else extracted
        rows.append(
            {
                "AUCTION": b.auction,
                "BIDDER": b.bidder,
                "PRICE": b.price,
                "CHANNEL": b.channel,
                "CHANNEL_ID": channel_id,
            }
        )
    return rows


def q22(run: Run) -> list[Row]:
    rows = []
    for b in run.bids:
        parts = b.url.split("/")
        dirs = [parts[i] if i < len(parts) else None for i in (3, 4, 5)]
        rows.append(
            {
                "AUCTION": b.auction,
                "BIDDER": b.bidder,
                "PRICE": b.price,
                "CHANNEL": b.channel,
                "DIR1": dirs[0],
                "DIR2": dirs[1],
                "DIR3": dirs[2],
            }
        )
    return rows


def q23(run: Run) -> list[Row]:
    persons = {p.id: p for p in run.persons}
    by_seller: dict[int, list[Auction]] = defaultdict(list)
    for a in run.auctions:
        by_seller[a.seller].append(a)
    rows = []
    for b in run.bids:
        p = persons.get(b.bidder)
        if p is None:
            continue
        for a in by_seller.get(b.bidder, ()):
            rows.append(
                {
                    "$KEY": b.bidder,
                    "PRICE": b.price,
                    "CHANNEL": b.channel,
                    "URL": b.url,
                    "BID_EXTRA": b.extra,
                    "PERSON_ID": p.id,
                    "NAME": p.name,
                    "EMAIL_ADDRESS": p.email_address,
                    "CREDIT_CARD": p.credit_card,
                    "CITY": p.city,
                    "STATE": p.state,
                    "PERSON_EXTRA": p.extra,
                    **_auction_columns(a),
                }
            )
    return rows


MODELS: dict[str, Callable[[Run], list[Row]]] = {
    name: model
    for name, model in globals().items()
    if re.fullmatch(r"q\d+", name) and callable(model)
}
"""Query name -> its model, for every query `bench.nexmark.queries` writes."""

SHAPES: dict[str, Callable[[Run], Callable[[Row], Row]]] = {"q19": q19_shape}
"""Query name -> how its actual rows are brought to the model's shape, where they differ."""


def expected(name: str, run: Run) -> Counter[Canonical]:
    """The rows query ``name`` must output for ``run``, as a multiset."""
    return Counter(canonical(row) for row in MODELS[name](run))


def actual(
    name: str,
    kind: str,
    records: Iterable[tuple[bytes | None, bytes | None]],
    run: Run,
) -> Counter[Canonical]:
    """The rows of an output topic's (key, value) ``records`` in the models' terms: for a
    ``stream`` every record (its key under ``$KEY``), for a ``table`` the last value per key,
    a tombstone removing it."""
    shape = SHAPES[name](run) if name in SHAPES else None
    rows: list[Row] = []
    if kind == "stream":
        for key, value in records:
            if value is None:
                continue
            row = orjson.loads(value)
            if key is not None:
                row["$KEY"] = orjson.loads(key)
            rows.append(row)
    else:
        latest: dict[bytes | None, bytes] = {}
        for key, value in records:
            if value is None:
                latest.pop(key, None)
            else:
                latest[key] = value
        rows = [orjson.loads(value) for value in latest.values()]
    return Counter(canonical(shape(row) if shape else row) for row in rows)


def difference(want: Counter[Canonical], got: Counter[Canonical], limit: int = 3) -> str:
    """How ``got`` differs from ``want``, in a few lines ("" when they are equal)."""
    if want == got:
        return ""
    missing, extra = want - got, got - want
    lines = [f"{sum(missing.values())} rows missing, {sum(extra.values())} unexpected"]
    lines += [f"  missing {dict(row)}" for row in list(missing)[:limit]]
    lines += [f"  unexpected {dict(row)}" for row in list(extra)[:limit]]
    return "\n".join(lines)
