"""The PEP 249 connection: the session (streams properties, variables, the last command sequence
number seen) and the HTTP transport it sends through. Does I/O via `_http.py`.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Self

import httpx

from ._cursor import Cursor
from ._errors import InterfaceError, NotSupportedError
from ._http import Auth, HttpTransport, Verify
from ._retry import RetryPolicy

__all__ = ["Connection"]

_UNSET = object()


READ_AFTER = "headwater.read.after"
"""Request property carrying the offsets this connection's INSERTs wrote (read-your-writes)."""


class Connection:
    """A session with a headwater (or ksqlDB) cluster, always in autocommit.

    Every request carries the session's `streamsProperties` (e.g. `acceptable.offset.lag`) and
    `sessionVariables`, plus the highest `commandSequenceNumber` seen so far, so the server first
    catches up with this session's own DDL (read-your-writes, as in ksqlDB).
    """

    def __init__(
        self,
        urls: Sequence[str],
        *,
        timeout: float,
        connect_timeout: float,
        properties: Mapping[str, Any] | None,
        session_variables: Mapping[str, Any] | None,
        auth: Auth,
        retry: RetryPolicy,
        transport: httpx.BaseTransport | None,
        verify: Verify = True,
    ) -> None:
        self._transport = HttpTransport(
            urls,
            timeout_s=timeout,
            connect_timeout_s=connect_timeout,
            auth=auth,
            verify=verify,
            retry=retry,
            transport=transport,
        )
        self._lock = threading.Lock()
        self._properties: dict[str, Any] = dict(properties or {})
        self._variables: dict[str, Any] = dict(session_variables or {})
        self._sequence: int | None = None
        self._written: dict[tuple[str, int], int] = {}
        self._closed = False
        self._cursors: weakref.WeakSet[Cursor] = weakref.WeakSet()

    # -- session state -----------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether close() was called."""
        return self._closed

    @property
    def urls(self) -> tuple[str, ...]:
        """The server URLs, in the order given."""
        return self._transport.urls

    @property
    def server_url(self) -> str:
        """The server the next request goes to first (the last one that answered)."""
        return self._transport.current_url

    @property
    def properties(self) -> Mapping[str, Any]:
        """The session's streams properties, sent as `streamsProperties` (read-only view)."""
        return MappingProxyType(self._properties)

    def set_property(self, name: str, value: Any) -> None:
        """Set a streams property for every later request (the CLI's `SET 'name'='value';`)."""
        self._update(self._properties, name, value)

    def unset_property(self, name: str) -> None:
        """Remove a streams property (the CLI's `UNSET 'name';`); unknown names are ignored."""
        self._update(self._properties, name, _UNSET)

    @property
    def session_variables(self) -> Mapping[str, Any]:
        """The session's variables, sent as `sessionVariables` (read-only view)."""
        return MappingProxyType(self._variables)

    def set_variable(self, name: str, value: Any) -> None:
        """Define a variable for substitution (the CLI's `DEFINE name = 'value';`)."""
        self._update(self._variables, name, value)

    def unset_variable(self, name: str) -> None:
        """Remove a variable (the CLI's `UNDEFINE name;`); unknown names are ignored."""
        self._update(self._variables, name, _UNSET)

    @property
    def command_sequence_number(self) -> int | None:
        """The highest commandSequenceNumber this connection has seen, None before any DDL."""
        return self._sequence

    # -- PEP 249 -----------------------------------------------------------------------------------

    def close(self) -> None:
        """PEP 249: "Close the connection now"; "the connection will be unusable from this point
        forward; an Error (or subclass) exception will be raised if any operation is attempted".
        Closing twice is harmless. Its cursors are closed first, which ends their push queries
        and PRINTs on the server."""
        if not self._closed:
            for cursor in list(self._cursors):
                cursor.close()
            self._closed = True
            self._transport.close()

    def commit(self) -> None:
        """PEP 249: "Commit any pending transaction to the database". headwater has no
        transactions and every statement takes effect at once (autocommit), so this does nothing."""
        self._check_open()

    def rollback(self) -> None:
        """PEP 249: "This method is optional since not all databases provide transaction support";
        headwater has none, so it raises NotSupportedError."""
        self._check_open()
        raise NotSupportedError("headwater has no transactions: every statement is autocommitted")

    def cursor(self) -> Cursor:
        """PEP 249: "Return a new Cursor Object using the connection"."""
        self._check_open()
        cursor = Cursor(self)
        self._cursors.add(cursor)
        return cursor

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- server endpoints beyond SQL ---------------------------------------------------------------

    def server_info(self) -> Mapping[str, Any]:
        """`GET /info`: the `KsqlServerInfo` object (version, kafkaClusterId, ksqlServiceId,
        serverStatus)."""
        self._check_open()
        body = self._transport.request_json("GET", "/info", idempotent=True)
        info = body.get("KsqlServerInfo") if isinstance(body, Mapping) else None
        if not isinstance(info, Mapping):
            raise InterfaceError(f"the /info answer has no KsqlServerInfo: {body!r:.200}")
        return info

    def healthcheck(self) -> Mapping[str, Any]:
        """`GET /healthcheck`: `{"isHealthy": ..., "details": {...}}`."""
        self._check_open()
        body = self._transport.request_json("GET", "/healthcheck", idempotent=True)
        if not isinstance(body, Mapping):
            raise InterfaceError(f"the /healthcheck answer is not an object: {body!r:.200}")
        return body

    # -- used by Cursor ----------------------------------------------------------------------------

    def _update(self, target: dict[str, Any], name: str, value: Any) -> None:
        """Set `target[name]` (or remove it for `_UNSET`) under the lock."""
        with self._lock:
            if value is _UNSET:
                target.pop(name, None)
            else:
                target[name] = value

    def _check_open(self) -> None:
        if self._closed:
            raise InterfaceError("the connection is closed")

    def _request_body(self, sql: str, parameters: list[Any] | None = None) -> dict[str, Any]:
        """The JSON body of a `/ksql` or `/query` request for `sql` in this session (with the
        values for its `?` placeholders, bound by the server)."""
        with self._lock:
            body: dict[str, Any] = {
                "ksql": sql,
                "streamsProperties": dict(self._properties),
                "sessionVariables": dict(self._variables),
            }
            if parameters is not None:
                body["parameters"] = parameters
            if self._sequence is not None:
                body["commandSequenceNumber"] = self._sequence
            if self._written:
                # Read-your-writes: the server answers only from replicas that have applied them.
                body["streamsProperties"].setdefault(
                    READ_AFTER,
                    [
                        {"topic": topic, "partition": partition, "offset": offset}
                        for (topic, partition), offset in sorted(self._written.items())
                    ],
                )
        return body

    def _note_written(self, items: Iterable[Any]) -> None:
        """Remember where INSERTs wrote (``{"topic", "partition", "offset"}`` items: the
        ``Headwater-Written-Offsets`` header of `/ksql`), so later queries see those writes."""
        for item in items:
            if (
                isinstance(item, Mapping)
                and isinstance(item.get("topic"), str)
                and type(item.get("partition")) is int
                and type(item.get("offset")) is int
            ):
                key = (item["topic"], item["partition"])
                with self._lock:
                    self._written[key] = max(self._written.get(key, -1), item["offset"])

    def _note_entities(self, entities: Iterable[Mapping[str, Any]]) -> None:
        """Remember the highest commandSequenceNumber among `entities`, and the offsets INSERTs wrote
        (`writtenOffsets`), so later queries of this connection see its own writes."""
        entities = list(entities)
        for entity in entities:
            self._note_written(entity.get("writtenOffsets") or ())
        numbers = [e.get("commandSequenceNumber") for e in entities]
        valid = [n for n in numbers if type(n) is int and n >= 0]  # -1: not executed
        if valid:
            with self._lock:
                self._sequence = max(valid + [self._sequence or 0])
