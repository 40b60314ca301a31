"""The catalog and the command log (ARCHITECTURE.md, "The command log"). Filled in by the server issue."""
