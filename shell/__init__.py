"""The interactive shell and script runner: a client of the gateway's HTTP API, through the DB-API
driver (never the server's own modules)."""
