"""headwater.cluster: who is alive, who is how far behind, who holds which replica, who is active, and
where a pull query goes (docs/architecture.md, "Pull queries").

Decisions are pure functions over plain values with ``now`` passed in (assignment, liveness, routing,
epoch fencing); thin drivers gather their inputs and act on them.
"""
