"""An example extension module: copy it into the server's extension folder
(``ksql.extension.dir``, default ``<state dir>/ext``) and restart the server.

    SELECT parcel, shipping_cost(kg, express) FROM parcels EMIT CHANGES;
    CREATE TABLE heaviest_by_route AS SELECT route, heaviest(parcel, kg) FROM parcels GROUP BY route;
    CREATE STREAM parcel_items AS SELECT parcel, items(contents) AS item FROM parcels;

The decorators only describe the functions: each stays a plain Python function (or class) that
tests can call directly (test_shipping.py).
"""

from __future__ import annotations

from decimal import Decimal

from headwater.functions import udaf, udf, udtf


@udf(
    description="Shipping cost of a weight in kg",
    author="ops",
    version="1.0",
    returns="DECIMAL(10, 2)",
)
def shipping_cost(kg: float, express: bool | None) -> Decimal:
    """kg is never NULL here (a NULL weight gives NULL without a call); express may be."""
    return Decimal(kg * (9.5 if express else 4.0)).quantize(Decimal("0.01"))


@udaf(description="The heaviest parcel's id", author="ops", version="1.0")
class heaviest:
    """State: [parcel id, its weight]; it must pickle (checkpoints keep it)."""

    def initialize(self) -> list[object]:
        return [None, float("-inf")]

    def aggregate(self, state: list[object], parcel: str, kg: float) -> list[object]:
        return [parcel, kg] if kg > state[1] else state  # type: ignore[operator]

    def merge(self, a: list[object], b: list[object]) -> list[object]:
        return a if a[1] >= b[1] else b  # type: ignore[operator]

    def map(self, state: list[object]) -> str | None:
        return None if state[0] is None else str(state[0])


@udtf(description="One row per item of a comma-separated list", author="ops", version="1.0")
def items(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]
