"""headwater: a SQL-first streaming database for Kafka.

The distribution installs one namespace, ``headwater``: ``headwater.sqlparse_ext`` (the SQL dialect),
``headwater.metastore``, ``headwater.gateway``, ``headwater.shell``, and ``headwater.kafka`` (the
embedded broker and the one factory for Kafka clients). This module does no I/O.
"""

from __future__ import annotations

__version__ = "0.1.0"
