"""ksqlDB's test aggregate function TEST_UDAF (io.confluent.ksql.function.udaf.TestUdaf), ported
for the QTT runner (`conformance.qtt`): it is one of the functions ksqlDB's test runner loads from
its test jar. Not part of the product.

Its overloads sum their column: BIGINT and INTEGER (over tables too: they can undo), DOUBLE, any
number type (``T``), the lengths of strings (from an initial string's), and the fields of a struct.
As in Java, a NULL value fails the row (which leaves the sum as it was).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from headwater.functions import udaf

N = TypeVar("N")


@udaf("test_udaf", description="sums longs")
class SumLong:
    def initialize(self) -> int:
        return 0

    def aggregate(self, state: int, value: int | None) -> int:
        return state + value

    def undo(self, state: int, value: int | None) -> int:
        return state - value

    def merge(self, one: int, two: int) -> int:
        return one + two

    def map(self, state: int) -> int:
        return state


@udaf("test_udaf", params=["INTEGER"], description="sums int")
class SumInt:
    def initialize(self) -> int:
        return 0

    def aggregate(self, state: int, value: int | None) -> int:
        return state + value

    def undo(self, state: int, value: int | None) -> int:
        return state - value

    def merge(self, one: int, two: int) -> int:
        return one + two

    def map(self, state: int) -> int:
        return state


@udaf("test_udaf", description="sums double")
class SumDouble:
    def initialize(self) -> float:
        return 0.0

    def aggregate(self, state: float, value: float | None) -> float:
        return state + value

    def merge(self, one: float, two: float) -> float:
        return one + two

    def map(self, state: float) -> float:
        return state


def _number_type(args: Sequence[Any]) -> Any:
    """The result type of the generic overload: its argument's, which must be one it sums (Java's
    ``initializeTypeArguments``)."""
    if args[0].sql() not in ("DOUBLE", "INTEGER", "BIGINT"):
        raise ValueError(f"Type {args[0].sql()} is not handled.")
    return args[0]


@udaf("test_udaf", returns=_number_type, description="sums numbers")
class SumNumbers:
    def initialize(self) -> int | float:
        return 0

    def aggregate(self, state: N, value: N | None) -> N:
        return state + value

    def merge(self, one: N, two: N) -> N:
        return one + two

    def map(self, state: N) -> N:
        return state


@udaf("test_udaf", description="sums the length of strings")
class SumLengthOfStrings:
    def __init__(self, initial_string: str) -> None:
        self.initial_string = initial_string

    def initialize(self) -> int:
        return len(self.initial_string)

    def aggregate(self, state: int, value: str | None) -> int:
        return state + len(value)

    def merge(self, one: int, two: int) -> int:
        return one + two

    def map(self, state: int) -> int:
        return state


@udaf(
    "test_udaf",
    params=["STRUCT<A INTEGER, B INTEGER>"],
    state="STRUCT<A INTEGER, B INTEGER>",
    returns="STRUCT<A INTEGER, B INTEGER>",
    description="returns a struct with {SUM(in->A), SUM(in->B)}",
)
class SumStructFields:
    def initialize(self) -> dict:
        return {"A": 0, "B": 0}

    def aggregate(self, state: dict, value: dict | None) -> dict:
        return {"A": value["A"] + state["A"], "B": value["B"] + state["B"]}

    def merge(self, one: dict, two: dict) -> dict:
        return self.aggregate(one, two)

    def map(self, state: dict) -> dict:
        return state
