"""Scripts: splitting into statements, ``${name}`` variable substitution and ``?`` parameters.

Pure: no I/O. The splitter is a lexical scan, not a parser: it knows only quotes ('strings',
`identifiers`, "identifiers"), comments (``--`` and ``/* */``) and ``;``. Substitution runs on
one statement's text before parsing (``${x}`` can stand for any part of a statement, so it
cannot be a token of the grammar) and keeps a map back to the original offsets for errors.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping
from dataclasses import dataclass

from headwater.sqlparse_ext.errors import ParseError

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_@]*)\}")
_CLOSERS = {"'": "'", "`": "`", '"': '"'}
_KIND = {"'": "string literal", "`": "quoted identifier", '"': "quoted identifier"}


@dataclass(frozen=True, slots=True)
class Segment:
    """One statement's source: its text (through its ``;``) and where it starts."""

    text: str
    offset: int
    line: int
    column: int


class LineIndex:
    """Offsets to 1-based line and column in one text."""

    __slots__ = ("_starts",)

    def __init__(self, text: str) -> None:
        starts = [0]
        find = text.find
        position = find("\n")
        while position >= 0:
            starts.append(position + 1)
            position = find("\n", position + 1)
        self._starts = starts

    def position(self, offset: int) -> tuple[int, int]:
        """(line, column) of an offset."""
        line = bisect.bisect_right(self._starts, offset)
        return line, offset - self._starts[line - 1] + 1


def _skip_comment(text: str, i: int) -> int:
    """The offset after the comment starting at ``i`` (or -1 if it is unterminated)."""
    if text.startswith("--", i):
        end = text.find("\n", i)
        return len(text) if end < 0 else end + 1
    end = text.find("*/", i + 2)
    return -1 if end < 0 else end + 2


def _skip_quoted(text: str, i: int) -> int:
    """The offset after the quoted text starting at ``i`` (or -1 if it is unterminated)."""
    quote = _CLOSERS[text[i]]
    j = i + 1
    while True:
        end = text.find(quote, j)
        if end < 0:
            return -1
        if text.startswith(quote, end + 1):  # a doubled quote escapes itself
            j = end + 2
            continue
        return end + 1


_LEXEME = re.compile(
    r"""
      (?P<space>\s+)
    | (?P<comment>--[^\n]*\n?|/\*.*?\*/)
    | (?P<quoted>'(?:[^']|'')*'|`(?:[^`]|``)*`|"(?:[^"]|"")*")
    | (?P<semicolon>;)
    | (?P<unterminated>/\*|['`"])
    | (?P<other>[^\s;'`"/-]+|[/-])
    """,
    re.VERBOSE | re.DOTALL,
)


def split(script: str) -> list[Segment]:
    """The statements of a script, dropping empty ones and comment-only tails.

    Raises:
        ParseError: a string, quoted identifier or comment is not terminated.
    """
    index = LineIndex(script)
    segments: list[Segment] = []
    start = -1  # offset of the current statement's first significant character
    match_at = _LEXEME.match
    i, n = 0, len(script)
    while i < n:
        match = match_at(script, i)
        assert match is not None  # the alternatives cover every character
        kind = match.lastgroup
        if kind == "semicolon":
            if start >= 0:
                line, column = index.position(start)
                segments.append(Segment(script[start : i + 1], start, line, column))
            start = -1
        elif kind == "unterminated":
            what = "comment" if script[i] == "/" else _KIND[script[i]]
            _unterminated(script, index, i, start, what)
        elif kind not in ("space", "comment") and start < 0:
            start = i
        i = match.end()
    if start >= 0:
        line, column = index.position(start)
        segments.append(Segment(script[start:].rstrip(), start, line, column))
    return segments


def _unterminated(script: str, index: LineIndex, at: int, start: int, what: str) -> None:
    line, column = index.position(at)
    statement = script[start if start >= 0 else at :]
    closer = "*/" if what == "comment" else _CLOSERS[script[at]]
    raise ParseError(
        f"line {line}:{column}: expected the closing {closer} of this {what}, found end of script",
        line,
        column,
        statement,
    )


@dataclass(frozen=True, slots=True)
class Substituted:
    """A statement's text after substitution, with the map back to the original offsets."""

    text: str
    # (offset in text, offset in the original, length of a substituted value or 0)
    spans: tuple[tuple[int, int, int], ...]

    def original_offset(self, offset: int) -> int:
        """The original offset of an offset in the substituted text.

        Inside a substituted value, that is the offset of the ``${`` the value replaced.
        """
        if not self.spans:
            return offset
        k = bisect.bisect_right([s[0] for s in self.spans], offset) - 1
        if k < 0:
            return offset
        sub_start, orig_start, value_length = self.spans[k]
        if value_length and offset < sub_start + value_length:
            return orig_start
        return orig_start + (offset - sub_start)


class Bound:
    """Bound parameters' literal texts, handed out to the ``?`` placeholders in text order."""

    __slots__ = ("literals", "used")

    def __init__(self, literals: list[str]) -> None:
        self.literals = literals
        self.used = 0


def substitute(
    text: str,
    variables: Mapping[str, str] | None,
    segment: Segment,
    index: LineIndex,
    bound: Bound | None = None,
) -> Substituted:
    """Replace every ``${name}`` outside comments with its value (names case-insensitive), and,
    when ``bound`` is given, every ``?`` outside literals, identifiers and comments with the next
    bound parameter's literal.

    One scan over the statement as written: a variable's value is never searched for ``?`` and a
    bound literal is never searched for ``${...}`` (a parameter is data, whatever it contains).

    Args:
        text: The statement's original text.
        variables: Defined variables, keyed by upper-cased name; None when substitution is off
            (``${...}`` then stays as written).
        segment: Where the statement starts in the script (for error positions).
        index: The script's line index.
        bound: The request's bound parameters, or None when it has none.

    Raises:
        ParseError: a variable is not defined, or more placeholders than parameters.
    """
    if (variables is None or "${" not in text) and (bound is None or "?" not in text):
        return Substituted(text, ())
    pieces: list[str] = []
    spans: list[tuple[int, int, int]] = []
    state = [0, 0]  # [original offset copied so far, length of the output so far]

    def fail(at: int, message: str) -> ParseError:
        line, column = index.position(segment.offset + at)
        return ParseError(f"line {line}:{column}: {message}", line, column, segment.text)

    def replace(start: int, end: int, value: str) -> None:
        copied, length = state
        pieces.append(text[copied:start])
        length += start - copied
        spans.append((length, start, len(value)))
        pieces.append(value)
        length += len(value)
        spans.append((length, end, 0))
        state[:] = [end, length]

    def variable(match: re.Match[str]) -> None:
        assert variables is not None
        name = match.group(1)
        value = variables.get(name.upper())
        if value is None:
            raise fail(
                match.start(),
                f"variable '{name}' is not defined (expected DEFINE {name} = '...' before it)",
            )
        replace(match.start(), match.end(), value)

    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "-" and text.startswith("--", i) or c == "/" and text.startswith("/*", i):
            end = _skip_comment(text, i)
            i = n if end < 0 else end
        elif c in _CLOSERS:
            end = _skip_quoted(text, i)
            end = n if end < 0 else end
            if variables is not None:
                for found in _VARIABLE.finditer(text, i, end):
                    variable(found)
            i = end
        elif c == "$" and variables is not None and (match := _VARIABLE.match(text, i)):
            variable(match)
            i = match.end()
        elif c == "?" and bound is not None:
            if bound.used >= len(bound.literals):
                raise fail(
                    i,
                    f"expected {len(bound.literals)} bound parameter(s), found more "
                    "'?' placeholders than that",
                )
            replace(i, i + 1, bound.literals[bound.used])
            bound.used += 1
            i += 1
        else:
            i += 1
    pieces.append(text[state[0] :])
    return Substituted("".join(pieces), tuple(spans))
