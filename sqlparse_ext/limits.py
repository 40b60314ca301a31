"""How big a request's statements may be: checked while parsing, before any costly step. Pure.

A server parses what any client sends, so a statement's cost must be bounded before it is paid:
its length is checked before it is tokenized, its token count before it is parsed, its nesting
depth before anything compiles it, and a request's statement count as it is split. Each refusal is
a :class:`ParseError` at the offending place, naming the limit and the setting that raises it.
Texts the server parses for itself (the command log, forwarded queries) are not limited: what was
accepted once must always replay.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

__all__ = ["ParseLimits", "too_deep"]


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """The bounds (0: no bound).

    Attributes:
        max_statement_chars: characters of one statement (``ksql.statement.max.chars``).
        max_tokens: tokens of one statement (``ksql.statement.max.tokens``).
        max_depth: nesting depth of one statement's syntax tree (``ksql.statement.max.depth``).
        max_statements: statements of one request (``ksql.request.max.statements``).
    """

    max_statement_chars: int = 100_000
    max_tokens: int = 20_000
    max_depth: int = 200
    max_statements: int = 1_000


def too_deep(root: exp.Expr, max_depth: int) -> exp.Expr | None:
    """The first node found deeper than ``max_depth`` below ``root`` (None if there is none).

    Iterative: a tree too deep for recursion is exactly what it must measure.
    """
    if max_depth <= 0:
        return None
    stack: list[tuple[exp.Expr, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            return node
        for child in node.iter_expressions():
            stack.append((child, depth + 1))
    return None
