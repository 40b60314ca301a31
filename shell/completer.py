"""The prompt_toolkit completer: asks `suggest.py` what fits, then matches and ranks names from the
live catalog's `Metadata` through a per-kind dispatch table. No I/O: the metadata is swapped in by
`refresh.py` (from a background thread; reads of one attribute are atomic).

Ranking, as pgcli does it: names that start with the typed word first, then names that contain
it, then names whose letters appear in order (fuzzy); within a rank, kinds in the order `suggest`
listed them, then (once something is typed) shorter names first, then the catalog's own order
(columns as declared, other names sorted).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from .suggest import Kind, Suggestion, suggest
from .vocabulary import FUNCTIONS, KEYWORDS, PROPERTIES, PSEUDO_COLUMNS

__all__ = ["Metadata", "ShellCompleter", "complete", "quote_name"]

_PLAIN_NAME = re.compile(r"[A-Z_][A-Z0-9_@]*$")


@dataclass(frozen=True, slots=True)
class Metadata:
    """What the completer knows of the live catalog and of the session."""

    streams: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    columns: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    topics: tuple[str, ...] = ()
    queries: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    functions: tuple[
        str, ...
    ] = ()  # the server's (its Python functions too); empty: the vocabulary's
    properties: tuple[str, ...] = ()
    variables: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Candidate:
    """A name to offer: its text, its kind (shown as meta) and its rank key."""

    text: str
    kind: Kind
    rank: tuple[int, int, int, int]


def quote_name(name: str) -> str:
    """A catalog name as it must be typed: bare when upper-case plain, else in backticks."""
    return name if _PLAIN_NAME.match(name) else "`" + name.replace("`", "``") + "`"


def _all_columns(meta: Metadata, sources: tuple[str, ...]) -> Iterable[str]:
    wanted = sources or tuple(meta.columns)
    names: dict[str, None] = {}
    for source in wanted:
        names.update(dict.fromkeys(meta.columns.get(source, ())))
    names.update(dict.fromkeys(PSEUDO_COLUMNS))
    return names


_NAMES: dict[Kind, Callable[[Metadata, Suggestion], Iterable[str]]] = {
    Kind.KEYWORD: lambda m, s: s.words or KEYWORDS,
    Kind.SOURCE: lambda m, s: (*m.streams, *m.tables),
    Kind.STREAM: lambda m, s: m.streams,
    Kind.TABLE: lambda m, s: m.tables,
    Kind.COLUMN: lambda m, s: _all_columns(m, s.sources),
    Kind.FUNCTION: lambda m, s: tuple(dict.fromkeys((*FUNCTIONS, *m.functions))),
    Kind.PROPERTY: lambda m, s: tuple(dict.fromkeys((*m.properties, *PROPERTIES))),
    Kind.VARIABLE: lambda m, s: m.variables,
    Kind.TOPIC: lambda m, s: m.topics,
    Kind.QUERY: lambda m, s: m.queries,
    Kind.TYPE: lambda m, s: m.types,
}
"""Kind -> the names of that kind."""


def _match(word: str, name: str) -> int | None:
    """0: prefix, 1: substring, 2: fuzzy (letters in order), None: no match (case-insensitive)."""
    w, n = word.lower(), name.lower()
    if n.startswith(w):
        return 0
    if w in n:
        return 1
    position = 0
    for char in w:
        position = n.find(char, position) + 1
        if position == 0:
            return None
    return 2


def complete(before_cursor: str, after_cursor: str, meta: Metadata) -> tuple[str, list[Candidate]]:
    """The typed word and the ranked candidates for the cursor position.

    Args:
        before_cursor: the buffer's text before the cursor.
        after_cursor: the buffer's text after it.
        meta: the catalog and session names.

    Returns:
        (the partial word the candidates replace, the candidates best first).
    """
    found = suggest(before_cursor, after_cursor)
    seen: set[str] = set()
    out: list[Candidate] = []
    for order, item in enumerate(found.items):
        for index, name in enumerate(_NAMES[item.kind](meta, item)):
            score = _match(found.word, name)
            if score is None or (score > 0 and not found.word):
                continue
            text = _display(name, item.kind, found.word, found.quoted)
            if text in seen:
                continue
            seen.add(text)
            rank = (score, order, len(name) if found.word else 0, index)
            out.append(Candidate(text, item.kind, rank))
    out.sort(key=lambda c: c.rank)
    return found.word, out


def _display(name: str, kind: Kind, word: str, quoted: bool) -> str:
    if kind is Kind.KEYWORD or kind is Kind.FUNCTION:
        return name.lower() if word and word.islower() else name
    if kind is Kind.PROPERTY:
        return name if quoted else f"'{name}'"
    if kind is Kind.VARIABLE:
        return name
    if kind is Kind.TOPIC:
        return name if _PLAIN_NAME.match(name.upper()) else f"'{name}'"
    return quote_name(name)


class ShellCompleter(Completer):
    """Completes keywords and the live catalog's names; `metadata` is replaced on refresh."""

    def __init__(self, metadata: Metadata | None = None) -> None:
        self.metadata = metadata or Metadata()

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterator[Completion]:
        word, candidates = complete(
            document.text_before_cursor, document.text_after_cursor, self.metadata
        )
        for candidate in candidates:
            yield Completion(
                candidate.text, start_position=-len(word), display_meta=candidate.kind.value
            )
