"""The driver's HTTP transport: requests, failover over several servers, retries, status parsing.
Does I/O (httpx); makes no decisions of its own (`_retry.plan_retry` decides) and knows nothing of
cursors.

Every httpx exception is turned into a driver error here; none leaves this module.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import httpx

from ._errors import (
    ConnectionFailedError,
    Error,
    InterfaceError,
    ProgrammingError,
    error_from_body,
)
from ._jsonstream import JsonStreamError, iter_json_items
from ._retry import Failure, FailureKind, RetryPolicy, plan_retry

__all__ = ["KSQL_MEDIA_TYPE", "HttpTransport", "Streamed"]

log = logging.getLogger(__name__)

KSQL_MEDIA_TYPE = "application/vnd.ksql.v1+json"
_HEADERS = {"Accept": f"{KSQL_MEDIA_TYPE}, application/json;q=0.9", "Content-Type": KSQL_MEDIA_TYPE}

Auth = httpx.Auth | tuple[str, str] | None
Verify = ssl.SSLContext | str | bool
"""How https:// servers are verified: True (the system's CAs), a CA file (PEM) path, an SSL
context, or False (not at all)."""


def ssl_verify(verify: Verify) -> ssl.SSLContext | bool:
    """httpx's ``verify`` for a :data:`Verify` (a path becomes a context trusting that file).

    Raises:
        InterfaceError: the CA file cannot be read.
    """
    if not isinstance(verify, str):
        return verify
    try:
        return ssl.create_default_context(cafile=verify)
    except (OSError, ssl.SSLError) as exc:
        raise InterfaceError(f"cannot use the CA file {verify!r}: {exc}") from exc


def _retry_after(response: httpx.Response) -> float | None:
    """Retry-After in seconds (the delta-seconds form; an HTTP date is ignored)."""
    value = response.headers.get("Retry-After")
    try:
        return max(float(value), 0.0) if value is not None else None
    except ValueError:
        return None


def _decode_error_body(response: httpx.Response) -> object:
    try:
        return response.json()
    except ValueError:
        return response.text


class Streamed:
    """An answer read as it arrives: an iterator (of JSON items or text lines) that also knows
    which server sends it and the response's headers; `close()` drops the connection."""

    def __init__(self, items: Iterator[Any], server_url: str, headers: Mapping[str, str]) -> None:
        self._items = items
        self.server_url = server_url
        self.headers = headers

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        return next(self._items)

    def close(self) -> None:
        close = getattr(self._items, "close", None)
        if close is not None:
            close()


class HttpTransport:
    """Sends requests to the first server that answers, failing over and retrying per policy.

    The server that answered last is tried first next time ("sticky"), so a connection keeps
    talking to one server while it is healthy.
    """

    def __init__(
        self,
        urls: Sequence[str],
        *,
        timeout_s: float,
        connect_timeout_s: float,
        auth: Auth = None,
        verify: Verify = True,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not urls:
            raise InterfaceError("connect() needs at least one server URL")
        for url in urls:
            try:
                scheme = httpx.URL(url).scheme
            except httpx.InvalidURL as exc:
                raise InterfaceError(f"invalid server URL {url!r}: {exc}") from exc
            if scheme not in ("http", "https"):
                raise InterfaceError(f"server URL {url!r} must start with http:// or https://")
        self.urls = tuple(u.rstrip("/") for u in urls)
        self._retry = retry or RetryPolicy()
        # A push query or PRINT may wait for its next row for ever: no read timeout once it runs.
        self._follow_timeout = httpx.Timeout(timeout_s, connect=connect_timeout_s, read=None)
        self._sleep = sleep
        self._lock = threading.Lock()
        self._current = 0
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            auth=auth,
            headers=_HEADERS,
            transport=transport,
            verify=ssl_verify(verify),
        )

    @property
    def current_url(self) -> str:
        """The server tried first by the next request (the last one that answered)."""
        return self.urls[self._current]

    def close(self) -> None:
        """Close the pooled connections."""
        self._client.close()

    def request_json(
        self, method: str, path: str, body: Mapping[str, Any] | None = None, *, idempotent: bool
    ) -> Any:
        """Send one request and return its decoded JSON body (2xx only).

        Raises:
            Error: a driver error for a non-2xx answer, an unreachable cluster, or an unreadable body.
        """
        return self.request_json_with_headers(method, path, body, idempotent=idempotent)[0]

    def request_json_with_headers(
        self, method: str, path: str, body: Mapping[str, Any] | None = None, *, idempotent: bool
    ) -> tuple[Any, httpx.Headers]:
        """As `request_json`, with the answer's headers."""
        response = self._send(method, path, body, stream=False, idempotent=idempotent)
        try:
            return response.json(), response.headers
        except ValueError as exc:
            raise InterfaceError(f"the server's answer to {path} is not JSON: {exc}") from exc

    def stream_items(self, path: str, body: Mapping[str, Any], *, follow: bool = False) -> Streamed:
        """Send a POST whose answer is a streamed JSON array; yield its elements as they arrive.

        The request is sent (with failover and retries) before the first element is asked for;
        a failure while reading the body raises ConnectionFailedError from the iterator.

        Args:
            follow: the answer runs until it is closed (a push query): no read timeout.
        """
        response = self._send(
            "POST",
            path,
            body,
            stream=True,
            idempotent=True,
            timeout=self._follow_timeout if follow else None,
        )
        return Streamed(self._iterate(response, path), self._origin(response), response.headers)

    def stream_lines(self, path: str, body: Mapping[str, Any]) -> Streamed:
        """Send a POST whose answer is text read until it is closed (PRINT); yield its lines as
        they arrive (without their line ends; empty ones too), with no read timeout."""
        response = self._send(
            "POST", path, body, stream=True, idempotent=True, timeout=self._follow_timeout
        )
        return Streamed(self._lines(response, path), self._origin(response), response.headers)

    def close_query(self, server_url: str, query_id: str) -> bool:
        """`POST /close-query` to the server running `query_id`; whether it answered 2xx. Never
        raises (the query may have ended already, or the server be gone)."""
        try:
            response = self._client.post(f"{server_url}/close-query", json={"queryId": query_id})
            response.close()
        except httpx.HTTPError as exc:
            log.debug("close-query %s on %s failed: %r", query_id, server_url, exc)
            return False
        return response.is_success

    def _origin(self, response: httpx.Response) -> str:
        url = response.request.url
        return str(url.copy_with(path="/", query=None, fragment=None)).rstrip("/")

    def _lines(self, response: httpx.Response, path: str) -> Iterator[str]:
        try:
            yield from response.iter_lines()
        except httpx.HTTPError as exc:
            raise ConnectionFailedError(f"the answer to {path} was cut off: {exc}") from exc
        finally:
            response.close()

    def _iterate(self, response: httpx.Response, path: str) -> Iterator[Any]:
        try:
            yield from iter_json_items(response.iter_text())
        except httpx.HTTPError as exc:
            raise ConnectionFailedError(f"the answer to {path} was cut off: {exc}") from exc
        except JsonStreamError as exc:
            raise InterfaceError(f"cannot read the answer to {path}: {exc}") from exc
        finally:
            response.close()

    def _send(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None,
        *,
        stream: bool,
        idempotent: bool,
        timeout: httpx.Timeout | None = None,
    ) -> httpx.Response:
        try:
            content = None if body is None else json.dumps(body).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise ProgrammingError(f"cannot send the request as JSON: {exc}") from exc
        attempts = 0
        index = self._current
        while True:
            url = self.urls[index] + path
            attempts += 1
            failure: Failure
            last: Error
            try:
                request = self._client.build_request(
                    method,
                    url,
                    content=content,
                    timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
                )
                response = self._client.send(request, stream=stream)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
                failure = Failure(FailureKind.CONNECT)
                last = ConnectionFailedError(f"cannot connect to {self.urls[index]}: {exc}")
            except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                failure = Failure(FailureKind.NO_ANSWER)
                last = ConnectionFailedError(f"no answer from {self.urls[index]}: {exc!r}")
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                raise InterfaceError(f"cannot send the request to {url}: {exc}") from exc
            else:
                if response.is_success:
                    with self._lock:
                        self._current = index
                    return response
                retriable, last = self._failure_of(response)
                if retriable is None:  # an answer that retrying cannot change
                    with self._lock:
                        self._current = index
                    raise last
                failure = retriable
            step = plan_retry(
                failure,
                attempts=attempts,
                servers=len(self.urls),
                idempotent=idempotent,
                policy=self._retry,
            )
            if step is None:
                raise last
            log.debug(
                "retrying %s %s after %s (%.3fs)", method, path, failure.kind.value, step.delay_s
            )
            if step.failover:
                index = (index + 1) % len(self.urls)
            if step.delay_s > 0:
                self._sleep(step.delay_s)

    @staticmethod
    def _failure_of(response: httpx.Response) -> tuple[Failure | None, Error]:
        """The error a non-2xx answer stands for, and how to retry it (None: do not)."""
        try:
            response.read()
        except httpx.HTTPError as exc:
            return Failure(FailureKind.NO_ANSWER), ConnectionFailedError(f"answer cut off: {exc}")
        finally:
            response.close()
        error = error_from_body(response.status_code, _decode_error_body(response))
        if response.status_code == 429:
            return Failure(FailureKind.THROTTLED, _retry_after(response)), error
        if response.status_code == 503:
            return Failure(FailureKind.UNAVAILABLE, _retry_after(response)), error
        return None, error
