"""The catalog as immutable snapshots, and the command log that every server replays into the same
catalog (docs/architecture.md, "The command log")."""
