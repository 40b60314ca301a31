"""ksqlDB's test function TEST_UDF (io.confluent.ksql.function.udf.TestUdf), ported for the QTT
runner (`conformance.qtt`): it is one of the functions ksqlDB's test runner loads from its test jar.
Not part of the product.

Each overload returns the name of the Java method it ports, so a case can see which one a call
resolved to.
"""

from __future__ import annotations

from headwater.functions import udf


@udf("test_udf", params=["INTEGER", None], description="returns the method name")
def do_stuff_int_string(arg1: int, arg2: str | None) -> str:
    return "doStuffIntString"


@udf("test_udf", description="returns the method name")
def do_stuff_long_string(arg1: int, arg2: str | None) -> str:
    return "doStuffLongString"


@udf("test_udf", description="returns the method name")
def do_stuff_long_long_string(arg1: int, arg2: int, arg3: str | None) -> str:
    return "doStuffLongLongString"


@udf("test_udf", description="returns method name")
def do_stuff_long_varargs(*longs: int) -> str:
    return "doStuffLongVarargs"


@udf("test_udf", params=["STRUCT<A VARCHAR>"], description="returns the value of 'A'")
def do_stuff_struct(struct: dict | None) -> str | None:
    # As in Java, a NULL struct fails the call (which gives NULL).
    return struct["A"]


@udf("test_udf", returns="STRUCT<A STRING>", description="returns the value of 'STRUCT<A VARCHAR>'")
def return_struct_stuff() -> dict:
    return {"A": "foo"}
