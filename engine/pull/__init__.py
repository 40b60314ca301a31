"""headwater.engine.pull: pull queries, planned once and answered from the current state.

`query` checks a SELECT against one table or stream and plans it (projection, output schema, the
key access `_keys` extracts from WHERE: exact keys, a key range or a scan), then runs the plan over
rows; `template` is the cached plan of a statement shape, its literals bound per execution (through
`engine._bound`). The rows come from `tables` (the tables this server materializes: LMDB stores fed
by `store.restorer`, I/O) or, for a stream, from `streams` (a scan of its topic to the end offsets
taken when the query starts, I/O); `query`, `template` and `_keys` are pure.
"""
