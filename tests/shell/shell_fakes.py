"""A fake headwater server for the shell's tests: an httpx.MockTransport handler answering in
ksqlDB's shapes, with a tiny catalog so that CREATE, SHOW, DESCRIBE and pull queries agree.

Recordings: written by hand from the shapes of ksqlDB's docs (developer-guide/ksqldb-rest-api/
ksql-endpoint.md and query-endpoint.md) and headwater's docs/architecture.md "REST conventions"
(servedBy, line/column in error bodies), like tests/dbapi/test_dbapi_cursor.py's.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

INFO = {
    "KsqlServerInfo": {
        "version": "0.1.0",
        "kafkaClusterId": "c1",
        "ksqlServiceId": "default_",
        "serverStatus": "RUNNING",
    }
}

PULL_SCHEMA = "`ID` STRING KEY, `TOTAL` DECIMAL(10, 2), `TAGS` ARRAY<STRING>"
PULL_ROWS = [["a", 12.30, ["x", "y"]], ["b", 0.10, []]]
SERVED_BY = [
    {"partition": 0, "host": "127.0.0.1:8088", "position": 1234, "lag": 0},
    {"partition": 1, "host": "127.0.0.1:8089", "position": 99, "lag": 3},
]


class FakeKsql:
    """Answers /info, /ksql and /query; remembers every request body."""

    def __init__(self, *, refuse_hosts: tuple[str, ...] = ()) -> None:
        self.sources: dict[str, tuple[str, list[str]]] = {}  # name -> (STREAM|TABLE, columns)
        self.bodies: list[dict[str, Any]] = []
        self.hosts: list[str] = []
        self.refuse_hosts = refuse_hosts
        self.sequence = 0

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.host in self.refuse_hosts:
            raise httpx.ConnectError("connection refused", request=request)
        self.hosts.append(request.url.host)
        if request.url.path == "/info":
            return httpx.Response(200, json=INFO)
        body = json.loads(request.content)
        self.bodies.append(body)
        if request.url.path == "/query":
            return self._query(body["ksql"])
        if request.url.path == "/ksql":
            return self._ksql(body["ksql"])
        return httpx.Response(
            404, json={"@type": "generic_error", "error_code": 40400, "message": "not found"}
        )

    def _query(self, text: str) -> httpx.Response:
        if "MISSING" in text.upper():
            return _error(400, 40001, "MISSING does not exist.", text)
        items: list[Any] = [{"header": {"queryId": "query_1", "schema": PULL_SCHEMA}}]
        items += [{"row": {"columns": row}} for row in PULL_ROWS]
        items += [{"servedBy": SERVED_BY}, {"finalMessage": "Query Completed"}]
        return httpx.Response(200, json=items)

    def _ksql(self, text: str) -> httpx.Response:
        words = text.rstrip(";").split()
        upper = [w.upper() for w in words]
        if upper[:2] in (["CREATE", "STREAM"], ["CREATE", "TABLE"]):
            name = words[2].upper()
            columns = re.findall(r"[(,]\s*(\w+)\s", text)
            self.sources[name] = (upper[1], [c.upper() for c in columns])
            self.sequence += 1
            return _ok(
                {
                    "@type": "currentStatus",
                    "statementText": text,
                    "commandId": f"{upper[1].lower()}/`{name}`/create",
                    "commandStatus": {
                        "status": "SUCCESS",
                        "message": f"{upper[1].title()} created",
                    },
                    "commandSequenceNumber": self.sequence,
                    "warnings": [],
                }
            )
        if upper[:2] in (["SHOW", "STREAMS"], ["SHOW", "TABLES"], ["LIST", "STREAMS"]):
            kind = upper[1][:-1]
            return _ok(
                {
                    "@type": kind.lower() + "s",
                    "statementText": text,
                    kind.lower() + "s": [
                        {
                            "type": kind,
                            "name": n,
                            "topic": n.lower(),
                            "keyFormat": "KAFKA",
                            "valueFormat": "JSON",
                            "isWindowed": False,
                        }
                        for n, (k, _) in sorted(self.sources.items())
                        if k == kind
                    ],
                    "warnings": [],
                }
            )
        if upper[:2] == ["SHOW", "PROPERTIES"]:  # the server's settings and the session's
            session = self.bodies[-1].get("streamsProperties") or {}
            values = {"ksql.service.id": "default_", **session}
            return _ok(
                {
                    "@type": "properties",
                    "statementText": text,
                    "warnings": [],
                    "properties": [
                        {"name": k, "scope": "KSQL", "value": str(v)}
                        for k, v in sorted(values.items())
                    ],
                    "overwrittenProperties": sorted(session),
                    "defaultProperties": ["ksql.service.id"],
                }
            )
        if upper[:2] in (["SHOW", "TOPICS"], ["LIST", "TOPICS"]):
            return _ok(
                {
                    "@type": "kafka_topics",
                    "statementText": text,
                    "warnings": [],
                    "topics": [{"name": "orders", "replicaInfo": [1, 1]}],
                }
            )
        if upper[:1] == ["DESCRIBE"]:
            name = words[1].strip("`").upper()
            if name not in self.sources:
                return _error(
                    400, 40001, f"Could not find STREAM/TABLE '{name}' in the Metastore", text
                )
            kind, columns = self.sources[name]
            fields = [{"name": c, "schema": {"type": "STRING"}} for c in columns]
            return _ok(
                {
                    "@type": "sourceDescription",
                    "statementText": text,
                    "warnings": [],
                    "sourceDescription": {
                        "name": name,
                        "type": kind,
                        "fields": fields,
                        "extended": False,
                        "topic": name.lower(),
                    },
                }
            )
        if upper[:2] == ["SHOW", "TYPES"]:  # a server-side parse error, with its position
            return _error(400, 40001, "line 1:6: TYPES is not allowed here", text, line=1, column=6)
        return _error(400, 40001, f"{' '.join(upper[:2])} statements are not supported", text)


def _ok(*entities: dict[str, Any]) -> httpx.Response:
    return httpx.Response(200, json=list(entities))


def _error(status: int, code: int, message: str, text: str, **extra: Any) -> httpx.Response:
    return httpx.Response(
        status,
        json={
            "@type": "statement_error",
            "error_code": code,
            "message": message,
            "statementText": text,
            "entities": [],
            **extra,
        },
    )
