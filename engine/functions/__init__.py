"""headwater.engine.functions: the built-in functions, and the type rules and casts they share.

Assembled top-down: `types` (the SQL types of values, numeric widening, Java overflow) and
`signatures` (how a function declares the argument types it takes) at the bottom; `casts` (CAST)
on `types`; the scalar function groups, one module per family (`conditional`, `numeric`,
`strings`, `temporal`, `arrays`, `json_text`), on those; `registry` (`FUNCTIONS`, every scalar
function by name) imports the groups, which never import it. `lambdas` holds TRANSFORM, REDUCE and
FILTER, typed by the compiler; `aggregates`, the aggregate functions (COUNT, SUM, TOPK, ...) as
state transitions for aggregating queries; `catalog` is what SHOW FUNCTIONS and DESCRIBE FUNCTION
tell. Pure (no I/O), except that UNIX_DATE() and UNIX_TIMESTAMP() read the clock.
"""
