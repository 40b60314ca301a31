"""Tests of the example functions: plain calls, then the declarations headwater reads
(run with ``pytest examples/functions``)."""

from __future__ import annotations

import sys
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import shipping

from headwater.engine.functions.user import declaration_of


def test_shipping_cost() -> None:
    assert shipping.shipping_cost(2.0, None) == Decimal("8.00")
    assert shipping.shipping_cost(2.0, True) == Decimal("19.00")


def test_heaviest() -> None:
    function = shipping.heaviest()
    state = function.initialize()
    for parcel, kg in (("p1", 1.0), ("p2", 3.5), ("p3", 2.0)):
        state = function.aggregate(state, parcel, kg)
    assert function.map(state) == "p2"


def test_items() -> None:
    assert shipping.items("apples, pears,") == ["apples", "pears"]


def test_declarations() -> None:
    cost = declaration_of(shipping.shipping_cost)
    assert cost is not None and cost.name == "SHIPPING_COST"
    assert [p.type.sql() for p in cost.overload.params] == ["DOUBLE", "BOOLEAN"]
    assert cost.overload.returns_text() == "DECIMAL(10, 2)"
    heaviest = declaration_of(shipping.heaviest)
    assert heaviest is not None and heaviest.kind == "AGGREGATE"
    items = declaration_of(shipping.items)
    assert items is not None and items.kind == "TABLE"
