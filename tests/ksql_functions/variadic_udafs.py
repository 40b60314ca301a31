"""ksqlDB's variadic test aggregate functions VAR_ARG, MID_VAR_ARG, GENERIC_VAR_ARG and OBJ_COL_ARG
(io.confluent.ksql.function.udaf.VarArgUdaf, MiddleVarArgUdaf, GenericVarArgUdaf and
ObjVarColArgUdaf), ported for the QTT runner (`conformance.qtt`): they are among the functions
ksqlDB's test runner loads from its test jar. Not part of the product.

Their columns are called with NULL, as Java's boxed values are.
"""

from __future__ import annotations

from typing import Any, TypeVar

from headwater.functions import udaf

A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")


def _length_sum(strings: tuple[str | None, ...]) -> int:
    return sum(len(s) for s in strings if s is not None)


@udaf(
    "VAR_ARG",
    author="Confluent",
    description="Returns the sum of the provided longs and lengths of strings.",
)
class VarArg:
    def initialize(self) -> int:
        return 0

    def aggregate(self, state: int, number: int | None, *strings: str | None) -> int:
        return state + (number or 0) + _length_sum(strings)

    def merge(self, one: int, two: int) -> int:
        return one + two

    def map(self, state: int) -> int:
        return state


@udaf(
    "MID_VAR_ARG",
    init=["INTEGER", "INTEGER"],
    author="Confluent",
    description="Returns the sum of the provided longs, lengths of strings, and initial arguments.",
)
class MiddleVarArg:
    def __init__(self, first: int, second: int) -> None:
        self.constant = first + second

    def initialize(self) -> int:
        return 0

    def aggregate(self, state: int, number: int | None, *strings: str | None) -> int:
        return state + (number or 0) + _length_sum(strings)

    def merge(self, one: int, two: int) -> int:
        return one + two

    def map(self, state: int) -> int:
        return state + self.constant


@udaf(
    "GENERIC_VAR_ARG",
    author="Confluent",
    description="Returns an array of rows where all the given columns are non-null.",
)
class GenericVarArg:
    def initialize(self) -> list[A]:
        return []

    def aggregate(
        self, state: list[A], first: A | None, second: B | None, *rest: C | None
    ) -> list[A]:
        if first is not None and second is not None and all(v is not None for v in rest):
            return [*state, first]
        return state

    def merge(self, one: list[A], two: list[A]) -> list[A]:
        return one + two

    def map(self, state: list[A]) -> list[A]:
        return state


@udaf(
    "OBJ_COL_ARG",
    params=["INTEGER", None],
    state="ARRAY<INTEGER>",
    returns="ARRAY<INTEGER>",
    author="Confluent",
    description="Returns an array of rows where all the given columns are non-null.",
)
class ObjVarColArg:
    def initialize(self) -> list[int]:
        return []

    def aggregate(self, state: list[int], first: int | None, *rest: Any) -> list[int]:
        if first is not None and all(v is not None for v in rest):
            return [*state, first]
        return state

    def merge(self, one: list[int], two: list[int]) -> list[int]:
        return one + two

    def map(self, state: list[int]) -> list[int]:
        return state
