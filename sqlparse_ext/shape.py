"""A statement's literal-free shape, for plan caches: one regular-expression scan, no parse. Pure.

``SELECT * FROM T WHERE ID = 'u3';`` and ``... ID = 'u7';`` have the same shape; a cache keyed by
it can answer the second without parsing or planning, with the literal values this scan read.
The key also holds each literal's *kind*, the part of its text that decides its SQL type as the
compiler types literals: STRING, INTEGER or BIGINT (by magnitude, with 2**31 apart because
``-2147483648`` is an INTEGER), DOUBLE (an exponent) or DECIMAL(p, s) (its digits). Two texts with
the same key therefore parse to the same tree and type the same, literal values apart.

The scan gives up (None) on what it cannot read exactly as the parser would: ``${...}``
variables, ``?`` placeholders, backslashes in strings, unterminated quotes or comments. The cache
then simply is not used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

__all__ = ["Shape", "literal_shape"]

# Only what matters is matched (finditer skips the rest): literals, what hides text from the scan
# (quoted identifiers, comments), and what makes it give up. A number never continues a word.
_TOKEN = re.compile(
    r"""
      (?P<string>'(?:[^'\\]|'')*')
    | (?P<quoted>`(?:[^`]|``)*`|"(?:[^"]|"")*")
    | (?P<comment>--[^\n]*|/\*.*?\*/)
    | (?P<number>(?<![\w@$.])(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
    | (?P<refuse>['`"?\\$]|/\*)
    """,
    re.VERBOSE | re.DOTALL,
)

_INT_MAX = 2**31


@dataclass(frozen=True, slots=True)
class Shape:
    """A statement's shape.

    Attributes:
        key: the text with every literal replaced, then each literal's kind.
        values: the literal values in text order (str, int, float or Decimal, unsigned).
        starts: each literal's offset in the text.
    """

    key: str
    values: tuple[object, ...]
    starts: tuple[int, ...]


def literal_shape(text: str) -> Shape | None:
    """The shape of ``text``, or None when it holds something the scan does not read."""
    pieces: list[str] = []
    kinds: list[str] = []
    values: list[object] = []
    starts: list[int] = []
    last = 0
    for match in _TOKEN.finditer(text):
        group = match.lastgroup
        if group == "refuse":
            return None
        if group == "string":
            raw = match.group()
            values.append(raw[1:-1].replace("''", "'"))
            kinds.append("S")
        elif group == "number":
            raw = match.group()
            value, kind = _number(raw)
            values.append(value)
            kinds.append(kind)
        else:
            continue
        pieces.append(text[last : match.start()])
        pieces.append("\x00")
        starts.append(match.start())
        last = match.end()
    pieces.append(text[last:])
    pieces.append("\x01")
    pieces.append(",".join(kinds))
    return Shape("".join(pieces), tuple(values), tuple(starts))


def _number(raw: str) -> tuple[object, str]:
    """A number literal's value and kind, typed as the expression compiler types it."""
    if raw.isdigit():
        value = int(raw)
        return value, "I" if value < _INT_MAX else "B" if value == _INT_MAX else "L"
    if "e" in raw or "E" in raw:
        return float(raw), "F"
    number = Decimal(raw)
    _, digits, exponent = number.as_tuple()
    scale = max(-int(exponent), 0)
    return number, f"D{max(len(digits), scale, 1)}.{scale}"
