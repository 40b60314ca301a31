"""Write SQL functions in Python: ``@udf``, ``@udaf`` and ``@udtf``.

Put a module that uses them in the server's extension folder (``ksql.extension.dir``, by default
``<state.dir>/ext``); the server loads it at start-up and the functions can be called from any
statement: pull and push queries, and persistent queries on Spark, whose workers receive the
module's text with the query::

    from headwater.functions import udf

    @udf(description="The text with its vowels masked", author="me", version="1.0")
    def mask_vowels(text: str) -> str:
        return "".join("*" if c in "aeiouAEIOU" else c for c in text)

Types come from the annotations (``int`` is BIGINT, ``float`` DOUBLE, ``str`` STRING,
``X | None`` a parameter that receives NULL; a parameter annotated ``X`` makes a NULL argument
give NULL without a call) or from SQL text: ``@udf(params=["INTEGER"], returns="DECIMAL(10, 2)")``.
A function that raises gives NULL for that record, and the processing log says which function,
on which argument types, raised what. See the README's "Python functions" section.
"""

from __future__ import annotations

from headwater.engine.functions.user import DeclarationError, udaf, udf, udtf

__all__ = ["DeclarationError", "udaf", "udf", "udtf"]
