"""headwater.engine.functions: the built-in scalar functions and the type rules they share.

The function registry (`registry.FUNCTIONS`: name -> resolver of argument types), its groups by
family (`numeric`, `strings`, `temporal`, `arrays`, `json_text`; the lambda functions in `lambdas`),
the type rules and casts the expression compiler applies, and `catalog`, what SHOW FUNCTIONS and
DESCRIBE FUNCTION tell. Pure (no I/O), except that UNIX_DATE() and UNIX_TIMESTAMP() read the clock.
"""
