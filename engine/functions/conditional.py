"""Conditional functions of the function table (COALESCE, IFNULL, NULLIF) and AS_VALUE. Pure.

Registered into `registry.FUNCTIONS`. They see NULL arguments (`NULL_TOLERANT`): that is their
point; AS_VALUE copies a key column into the value.
"""

from __future__ import annotations

from collections.abc import Sequence

from headwater.engine.functions.signatures import Impl, Resolver, same_type_variadic
from headwater.engine.functions.types import NULL
from headwater.sqlparse_ext.sqltypes import SqlType


def _nullif(args: Sequence[SqlType]) -> tuple[SqlType, Impl] | None:
    if len(args) != 2 or args[0] == NULL or args[1] not in (args[0], NULL):
        return None
    return args[0], lambda a, b: None if a == b else a


FUNCTIONS: dict[str, Resolver] = {
    "COALESCE": same_type_variadic(1, lambda *xs: next((x for x in xs if x is not None), None)),
    "IFNULL": same_type_variadic(2, lambda a, b: b if a is None else a, maximum=2),
    "NULLIF": _nullif,
    "AS_VALUE": lambda args: (args[0], lambda x: x) if len(args) == 1 and args[0] != NULL else None,
}

NULL_TOLERANT = frozenset({"COALESCE", "IFNULL", "NULLIF"})
