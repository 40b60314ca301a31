"""ksqlDB's test aggregate functions of several columns MULTI_ARG, FOUR_ARG and FIVE_ARG
(io.confluent.ksql.function.udaf.MultiArgUdaf, FourArgUdaf and FiveArgUdaf), ported for the QTT
runner (`conformance.qtt`): they are among the functions ksqlDB's test runner loads from its test
jar. Not part of the product.

Each sums a BIGINT column and the lengths of string columns (FIVE_ARG: and an INTEGER column),
from an initial value given by its literal parameters: an INTEGER and the lengths of any number of
strings. Their columns are called with NULL (counted as 0), as Java's boxed values are.
"""

from __future__ import annotations

from headwater.functions import udaf

_DESCRIPTION = "Returns the sum of the provided longs and lengths of strings."


def _length(text: str | None) -> int:
    return 0 if text is None else len(text)


class _SumFromInitial:
    """What the three share: the initial value from the literal parameters, and the sums. (Each
    repeats ``__init__``: `udaf` reads the literal parameters from the class's own.)"""

    def __init__(self, init_arg1: int, *init_arg2: str) -> None:
        self.initial = init_arg1 + sum(len(s) for s in init_arg2)

    def initialize(self) -> int:
        return self.initial

    def merge(self, one: int, two: int) -> int:
        return one + two

    def map(self, state: int) -> int:
        return state


@udaf("MULTI_ARG", init=["INTEGER", None], author="Confluent", description=_DESCRIPTION)
class MultiArg(_SumFromInitial):
    def __init__(self, init_arg1: int, *init_arg2: str) -> None:
        super().__init__(init_arg1, *init_arg2)

    def aggregate(self, state: int, first: int | None, second: str | None) -> int:
        return state + (first or 0) + _length(second)


@udaf("FOUR_ARG", init=["INTEGER", None], author="Confluent", description=_DESCRIPTION)
class FourArg(_SumFromInitial):
    def __init__(self, init_arg1: int, *init_arg2: str) -> None:
        super().__init__(init_arg1, *init_arg2)

    def aggregate(
        self,
        state: int,
        first: int | None,
        second: str | None,
        third: str | None,
        fourth: str | None,
    ) -> int:
        return state + (first or 0) + _length(second) + _length(third) + _length(fourth)


@udaf(
    "FIVE_ARG",
    params=[None, None, None, None, "INTEGER"],
    init=["INTEGER", None],
    author="Confluent",
    description="Returns the sum of the provided longs, lengths of strings, and integers.",
)
class FiveArg(_SumFromInitial):
    def __init__(self, init_arg1: int, *init_arg2: str) -> None:
        super().__init__(init_arg1, *init_arg2)

    def aggregate(
        self,
        state: int,
        first: int | None,
        second: str | None,
        third: str | None,
        fourth: str | None,
        fifth: int | None,
    ) -> int:
        lengths = _length(second) + _length(third) + _length(fourth)
        return state + (first or 0) + lengths + (fifth or 0)
