"""`headwater.dbapi`: the DB-API 2.0 (PEP 249) driver, re-exported from `headwater.gateway.dbapi`.

Importing it loads the driver and httpx only, never the server.
"""

from __future__ import annotations

import headwater.gateway.dbapi as _driver
from headwater.gateway.dbapi import *

__all__ = list(_driver.__all__)
