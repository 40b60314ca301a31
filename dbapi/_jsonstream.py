"""Decode a JSON array (or a run of JSON values) that arrives in chunks, one element at a time.
No I/O: the caller feeds text chunks (from httpx's streamed body) and gets elements as soon as each
is complete.

ksqlDB's `/query` answers `[{"header": ...},{"row": ...},...]` with chunked transfer encoding, so a
row may be split anywhere. The decoder also accepts values that are not wrapped in an array,
separated by whitespace, commas or newlines (ksqlDB's v2 and delimited framings), so a server that
streams one item per line works too.
"""

from __future__ import annotations

import decimal
import json
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["JsonStreamError", "iter_json_items"]

_DECODER = json.JSONDecoder(parse_float=decimal.Decimal)
_SEPARATORS = " \t\r\n,"


class JsonStreamError(ValueError):
    """The streamed body is not a JSON array or a run of JSON values."""


class _Decoder:
    """The incremental state: unread text, and whether the array's `[` and `]` were seen."""

    def __init__(self) -> None:
        self.buffer = ""
        self.started = False
        self.in_array = False
        self.finished = False

    def _skip_separators(self) -> None:
        i = 0
        while i < len(self.buffer) and self.buffer[i] in _SEPARATORS:
            i += 1
        self.buffer = self.buffer[i:]

    def items(self, *, final: bool) -> Iterator[Any]:
        """Yield every element complete in the buffer (all of them when `final`)."""
        while True:
            self._skip_separators()
            if not self.buffer:
                return
            if self.finished:
                raise JsonStreamError(f"text after the end of the array: {self.buffer[:40]!r}")
            if not self.started:
                self.started = True
                if self.buffer[0] == "[":
                    self.in_array = True
                    self.buffer = self.buffer[1:]
                    continue
            if self.in_array and self.buffer[0] == "]":
                self.finished = True
                self.buffer = self.buffer[1:]
                continue
            try:
                value, end = _DECODER.raw_decode(self.buffer)
            except json.JSONDecodeError as exc:
                if final:
                    raise JsonStreamError(f"malformed JSON in the answer: {exc}") from exc
                return  # wait for more text
            # A value is complete only once something follows it (a number may still grow).
            if end == len(self.buffer) and not final:
                return
            self.buffer = self.buffer[end:]
            yield value


def iter_json_items(chunks: Iterable[str]) -> Iterator[Any]:
    """Yield the elements of a streamed JSON array (or JSON values run together) as they complete.

    Args:
        chunks: the body's text, in pieces of any size.

    Yields:
        Each decoded element, floats as decimal.Decimal.

    Raises:
        JsonStreamError: the text is not well-formed, or an array was left open.
    """
    decoder = _Decoder()
    for chunk in chunks:
        decoder.buffer += chunk
        yield from decoder.items(final=False)
    yield from decoder.items(final=True)
    if decoder.in_array and not decoder.finished:
        raise JsonStreamError("the answer ended before its closing ']'")
