"""The scalar function registry: every built-in function by name, assembled from its groups. Pure.

`FUNCTIONS` maps a name to its resolver (`signatures.Resolver`: argument types -> result type and
implementation, or None when the types are not accepted); each group module (`conditional`,
`numeric`, `strings`, `temporal`, `arrays`, `json_text`) holds a family's functions and names
those among them that see NULL arguments. This module imports the groups; they never import it.
The lambda functions (TRANSFORM, REDUCE, FILTER) are typed by the compiler through `lambdas`.
"""

from __future__ import annotations

from headwater.engine.functions import (
    arrays,
    conditional,
    json_text,
    numeric,
    overloaded,
    strings,
    temporal,
)
from headwater.engine.functions.signatures import Resolver

FUNCTIONS: dict[str, Resolver] = {
    **conditional.FUNCTIONS,
    **numeric.FUNCTIONS,
    **overloaded.FUNCTIONS,
    **strings.FUNCTIONS,
    **temporal.FUNCTIONS,
    **arrays.FUNCTIONS,
    **json_text.FUNCTIONS,
}
NULL_TOLERANT: frozenset[str] = (
    conditional.NULL_TOLERANT
    | numeric.NULL_TOLERANT
    | overloaded.NULL_TOLERANT
    | strings.NULL_TOLERANT
    | temporal.NULL_TOLERANT
    | arrays.NULL_TOLERANT
    | json_text.NULL_TOLERANT
)
"""Functions that see NULL arguments; every other function is NULL when an argument is NULL."""
VOLATILE = frozenset({"UNIX_DATE", "UNIX_TIMESTAMP", "RANDOM"})
"""Functions whose call without arguments reads the clock (or draws a random number), so is never
folded into a constant."""
