"""ksqlDB's test table function THROWING_UDTF (io.confluent.ksql.function.udf.ThrowingUdtf),
ported for the QTT runner (`conformance.qtt`): it is one of the functions ksqlDB's test runner
loads from its test jar. Not part of the product.
"""

from __future__ import annotations

from headwater.functions import udtf


@udtf("throwing_udtf", description="test UDTF that throws if param is true")
def throw_if_true(should_throw: bool) -> list[bool]:
    if should_throw:
        raise RuntimeError("You asked me to throw...")
    return [should_throw]
