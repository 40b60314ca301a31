"""The HTTP API and the DB-API driver (ARCHITECTURE.md, "REST conventions"). Filled in by the server issue.

Keep this package's own import light: the shell and the driver import it, and must not pull in the server.
"""
