"""ksqlDB's test function TOSTRUCT (org.damian.ksql.udf.ToStruct, from the udf-example jar of
ksqlDB's engine tests), ported for the QTT runner (`conformance.qtt`). Not part of the product.
"""

from __future__ import annotations

from headwater.functions import udf


@udf("tostruct", returns="STRUCT<A VARCHAR>", description="wraps a string with a struct")
def from_string(value: str | None) -> dict:
    return {"A": value}
