"""The HTTP API described for tools: an OpenAPI 3.1 document served at ``GET /openapi.json``. Pure.

Written by hand from ksqlDB's REST shapes (docs/architecture.md, REST conventions); a test checks that
every route of the app is described here and nothing else is, so the two cannot drift apart.
"""

from __future__ import annotations

from typing import Any

import headwater

_JSON = "application/json"
_DELIMITED = "application/vnd.ksqlapi.delimited.v1"

_ERROR = {
    "type": "object",
    "required": ["@type", "error_code", "message"],
    "properties": {
        "@type": {"enum": ["statement_error", "generic_error"]},
        "error_code": {"type": "integer", "description": "HTTP status x 100 + n (ksqlDB's codes)"},
        "message": {"type": "string"},
        "statementText": {"type": "string"},
        "entities": {"type": "array", "items": {"type": "object"}},
        "line": {"type": "integer"},
        "column": {"type": "integer"},
    },
}

_PARAMETERS = {
    "type": "array",
    "description": "headwater: one value per '?' placeholder, bound as data after ${name} "
    'substitution ({"decimal": "1.5"}, {"bytes": "<base64>"}, {"map": [[k, v]]} '
    "for the types JSON lacks)",
}

_KSQL_REQUEST = {
    "type": "object",
    "required": ["ksql"],
    "properties": {
        "ksql": {"type": "string", "description": "one or more statements, each ended by ';'"},
        "streamsProperties": {"type": "object", "description": "per-request properties"},
        "sessionVariables": {"type": "object", "description": "values for ${name} substitution"},
        "parameters": _PARAMETERS,
        "commandSequenceNumber": {
            "type": "integer",
            "description": "wait until this command has been executed here first",
        },
    },
}

_QUERY_STREAM_REQUEST = {
    "type": "object",
    "required": ["sql"],
    "properties": {
        "sql": {"type": "string"},
        "properties": {"type": "object"},
        "sessionVariables": {"type": "object"},
        "parameters": _PARAMETERS,
    },
}


def _errors(*statuses: int) -> dict[str, Any]:
    return {
        str(status): {
            "description": "ksqlDB's error object",
            "content": {_JSON: {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
        for status in statuses
    }


def _json(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"description": description, "content": {_JSON: {"schema": schema or {}}}}


PATHS: dict[str, dict[str, Any]] = {
    "/ksql": {
        "post": {
            "summary": "Run statements other than SELECT (DDL, INSERT VALUES, SHOW, DESCRIBE, ...)",
            "requestBody": {
                "content": {_JSON: {"schema": {"$ref": "#/components/schemas/KsqlRequest"}}}
            },
            "responses": {
                "200": _json("one entity per statement", {"type": "array"}),
                **_errors(400, 413, 503),
            },
        }
    },
    "/query": {
        "post": {
            "summary": "Run a pull or push query: a JSON array of a header, rows and an optional "
            "finalMessage; or PRINT a topic: text lines (text/plain) as records arrive",
            "requestBody": {
                "content": {_JSON: {"schema": {"$ref": "#/components/schemas/KsqlRequest"}}}
            },
            "responses": {
                "200": _json(
                    "[{header}, {row}..., {finalMessage}?]; with Accept: "
                    "application/x-ndjson one item per line; PRINT: "
                    "'Key format: ...', 'Value format: ...' and 'rowtime: ..., "
                    "key: ..., value: ..., partition: N' lines, the PRINT's id "
                    "(for /close-query) in the X-Query-Id header",
                    {"type": "array"},
                ),
                **_errors(400, 413, 429, 503),
            },
        }
    },
    "/query-stream": {
        "post": {
            "summary": "Run a pull or push query (ksqlDB's HTTP/2-era API): a header line, then one "
            "array per row (streamed as they arrive for a push query)",
            "requestBody": {
                "content": {_JSON: {"schema": {"$ref": "#/components/schemas/QueryStreamRequest"}}}
            },
            "responses": {
                "200": {
                    "description": "a header object, then one JSON array per row",
                    "content": {_DELIMITED: {}, _JSON: {}},
                },
                **_errors(400, 413, 429, 503),
            },
        }
    },
    "/close-query": {
        "post": {
            "summary": "End a push query (EMIT CHANGES) or a PRINT started on any connection to this "
            "server",
            "requestBody": {
                "content": {
                    _JSON: {
                        "schema": {
                            "type": "object",
                            "properties": {"queryId": {"type": "string"}},
                            "required": ["queryId"],
                        }
                    }
                }
            },
            "responses": {"200": {"description": "the query ends"}, **_errors(400, 404)},
        }
    },
    "/inserts-stream": {
        "post": {
            "summary": "Insert a stream of rows (ksqlDB's inserts-stream): the body is a first line "
            '{"target": "NAME", "properties": {...}} then one JSON object per row, each '
            "ended by a newline; each row is acknowledged as soon as the broker has it",
            "requestBody": {"content": {_DELIMITED: {"schema": {"type": "string"}}}},
            "responses": {
                "200": {
                    "description": 'one item per row, in order: {"status": "ok", '
                    '"seq": N} or {"status": "error", "seq": N, '
                    '"error_code": 40000, "message": ...}; one per line, '
                    "or a JSON array with Accept: application/json",
                    "content": {_DELIMITED: {}, _JSON: {"schema": {"type": "array"}}},
                },
                **_errors(400, 413),
            },
        }
    },
    "/info": {
        "get": {
            "summary": "Server version, service id, status, catalog digest, Python function modules",
            "responses": {"200": _json("KsqlServerInfo")},
        }
    },
    "/healthcheck": {
        "get": {
            "summary": "Health of the metastore, Kafka and the command runner",
            "responses": {"200": _json("healthy"), "503": _json("unhealthy")},
        }
    },
    "/status": {
        "get": {
            "summary": "Every catalog command decided here and its status",
            "responses": {"200": _json("commandStatuses")},
        }
    },
    "/status/{command_id}": {
        "get": {
            "summary": "One catalog command's status",
            "parameters": [
                {"name": "command_id", "in": "path", "required": True, "schema": {"type": "string"}}
            ],
            "responses": {"200": _json("status and message"), **_errors(404)},
        }
    },
    "/heartbeat": {
        "post": {
            "summary": "Internal: a peer's heartbeat (KLIP-12); signed with the cluster's secret",
            "responses": {"200": _json("recorded"), **_errors(400, 401)},
        }
    },
    "/lag": {
        "post": {
            "summary": "Internal: a peer's store lags (KIP-535); signed with the cluster's secret",
            "responses": {"200": _json("recorded"), **_errors(400, 401)},
        }
    },
    "/clusterStatus": {
        "get": {
            "summary": "This server's view of the cluster: hosts, alive, last heartbeat, actives and "
            "standbys, store lags",
            "responses": {"200": _json("clusterStatus")},
        }
    },
    "/queryStatus": {
        "get": {
            "summary": "The persistent queries this server runs and how each is doing (state, "
            "records written and skipped, last error)",
            "responses": {"200": _json("queryStatus")},
        }
    },
    "/openapi.json": {
        "get": {"summary": "This document", "responses": {"200": _json("OpenAPI 3.1")}}
    },
    "/metrics": {
        "get": {
            "summary": "Prometheus metrics: persistent queries, table partitions, pull and push "
            "queries, HTTP, the command log, the cluster and Spark (OpenMetrics when Accept asks)",
            "responses": {
                "200": {
                    "description": "Prometheus' text format 0.0.4",
                    "content": {"text/plain; version=0.0.4; charset=utf-8": {}},
                }
            },
        }
    },
}


def _registry_paths() -> dict[str, dict[str, Any]]:
    """The schema registry's routes (Confluent's v1 API, ``gateway.schema_registry_api``)."""
    from headwater.gateway.schema_registry_api import ENDPOINTS, MEDIA_TYPE, PREFIX

    paths: dict[str, dict[str, Any]] = {}
    for path, method, _, summary in ENDPOINTS:
        paths.setdefault(f"{PREFIX}{path}".rstrip("/") or PREFIX, {})[method.lower()] = {
            "summary": f"Schema registry (Confluent's API): {summary}",
            "responses": {
                "200": {"description": "Confluent's answer", "content": {MEDIA_TYPE: {}}},
                "4XX": {
                    "description": "Confluent's error: {error_code, message} (40401 subject, "
                    "40402 version, 40403 schema not found, 409 incompatible, 42201 invalid "
                    "schema, ...)",
                    "content": {MEDIA_TYPE: {}},
                },
            },
        }
    return paths


PATHS.update(_registry_paths())


def _console_paths() -> dict[str, dict[str, Any]]:
    """The web console's routes (``gateway.console_routes``): its page and its files."""
    from headwater.gateway.console_routes import ASSETS

    def page(summary: str, media_types: list[str]) -> dict[str, Any]:
        content: dict[str, Any] = {media_type: {} for media_type in media_types}
        return {
            "get": {
                "summary": summary,
                "responses": {"200": {"description": summary, "content": content}},
            }
        }

    return {
        "/": page("The web console (a page of the browser)", ["text/html; charset=utf-8"]),
        "/console/{file}": page(
            f"The web console's files ({', '.join(sorted(ASSETS))}; any other name: 404)",
            sorted(set(ASSETS.values())),
        ),
    }


PATHS.update(_console_paths())


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the HTTP API."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "headwater",
            "version": headwater.__version__,
            "description": "ksqlDB's REST API over a SQL-first streaming database for Kafka.",
        },
        "paths": PATHS,
        "components": {
            "schemas": {
                "Error": _ERROR,
                "KsqlRequest": _KSQL_REQUEST,
                "QueryStreamRequest": _QUERY_STREAM_REQUEST,
            },
            "securitySchemes": {
                "basic": {
                    "type": "http",
                    "scheme": "basic",
                    "description": "Only with authentication.method=BASIC; then every path but "
                    "/healthcheck (and authentication.skip.paths) answers 401 "
                    "(error_code 40100, WWW-Authenticate: Basic) without it",
                }
            },
        },
    }
