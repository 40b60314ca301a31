"""The HTTP API in ksqlDB's shapes (docs/architecture.md, "REST conventions"), pull-query routing and
forwarding, push queries, the plan cache and client authentication.

Keep this package's own import light: the shell and the driver import it, and must not pull in the server.
"""
