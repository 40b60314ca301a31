"""headwater: a SQL-first streaming database for Kafka.

The distribution installs one namespace, ``headwater``, over the top-level folders (pyproject's
package-dir): ``headwater.sqlparse_ext`` (the SQL dialect), ``headwater.kafka`` (the embedded broker and
the one factory for Kafka clients), ``headwater.metastore``, ``headwater.engine``, ``headwater.store``,
``headwater.cluster``, ``headwater.gateway`` (the HTTP API), and its clients ``headwater.dbapi`` and
``headwater.shell``; this folder holds the ``headwater`` command and the server. This module does no I/O.
"""

from __future__ import annotations

__version__ = "0.1.0"
