"""The interactive shell and script runner, a client of the gateway. Filled in by the server issue."""
