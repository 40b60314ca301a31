"""ksqlDB's test functions WHENCONDITION and WHENRESULT (io.confluent.ksql.function.udf.WhenCondition
and WhenResult), ported for the QTT runner (`conformance.qtt`): they are among the functions ksqlDB's
test runner loads from its test jar. Not part of the product.

case-expression.json uses them to check that CASE evaluates its branches lazily: each raises when
its second argument is false, that is when the case says it must not be evaluated.
"""

from __future__ import annotations

from headwater.functions import udf


@udf("WhenCondition", description="UDF used in case-expression.json")
def when_condition(ret_value: bool, should_be_evaluated: bool) -> bool:
    if not should_be_evaluated:
        raise RuntimeError("When condition in case is not running lazily!")
    return ret_value


@udf(
    "WhenResult",
    params=["INTEGER", None],
    returns="INTEGER",
    description="UDF used in case-expression.json",
)
def when_result(ret_val: int, should_be_evaluated: bool) -> int:
    if not should_be_evaluated:
        raise RuntimeError("Then expression in case is not running lazily!")
    return ret_val
