"""ksqlDB's test function BAD_UDF (io.confluent.ksql.function.udf.BadUdf), ported for the QTT
runner (`conformance.qtt`): it is one of the functions ksqlDB's test runner loads from its test jar.
Not part of the product.

It fails on purpose, to test how a query treats a function that raises or returns NULL.
"""

from __future__ import annotations

from itertools import count

from headwater.functions import udf

# ksqlDB keeps this count in the function's instance, a new one for each query: the QTT runner
# calls reset() before each case.
_calls = count()


def reset() -> None:
    """Starts the count of calls again (a new query)."""
    global _calls
    _calls = count()


@udf("bad_udf", params=["INTEGER"], description="throws")
def blow_up(arg1: int) -> str:
    raise RuntimeError("boom!")


@udf("bad_udf", returns="INTEGER", description="throws if arg is true")
def might_throw(arg: bool) -> int:
    if arg:
        raise RuntimeError("You asked me to throw...")
    return 0


@udf("bad_udf", description="returns null every other invocation")
def return_null(arg: str | None) -> str | None:
    return None if next(_calls) % 2 == 0 else arg
