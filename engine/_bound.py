"""Bound values: the literals of a cached plan, supplied per execution. Pure.

A cached pull plan (``engine.pull.template``) is compiled once from a statement whose literals were
replaced by :class:`BoundValue` nodes. The compiler gives each such node, and each subtree that
depends on nothing but such nodes and constants, a *slot* (:class:`BoundSlots`): where the
uncached compiler folds a constant subtree once at compile time, a template folds it once per
execution (:meth:`BoundSlots.fold`), before any row is read, with the same evaluators. Rows then
read the folded values through a context variable, so one template serves concurrent executions on
the event loop and on worker threads.

A fold that fails (a cast of a bad string, a division by zero) raises: the caller then runs the
statement through the uncached path, which reports it exactly as it always does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any, ClassVar

from sqlglot import exp

Evaluator = Callable[[Any], Any]

_FOLDED: ContextVar[list[Any]] = ContextVar("headwater_folded_values")
_BUILDING: ContextVar[BoundSlots | None] = ContextVar("headwater_bound_slots", default=None)


class BoundValue(exp.Expression):
    """A literal of a cached plan: ``this`` is its index among the statement's literals.

    ``meta["type"]`` is the SqlType the literal had (the compiler types a template exactly as it
    typed the statement it came from); ``meta["negate"]`` is True when it stands for ``-literal``.
    """

    arg_types: ClassVar[dict[str, Any]] = {"this": True}


class BoundSlots:
    """The slots of one template, in the order the compiler made them (children first)."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        # (literal index, negate) for a bound value; an evaluator for a folded subtree
        self._entries: list[tuple[int, bool] | Evaluator] = []

    def leaf(self, index: int, negate: bool) -> Evaluator:
        """A bound value's slot: its evaluator reads the value folded for this execution."""
        self._entries.append((index, negate))
        return _reader(len(self._entries) - 1)

    def subtree(self, evaluator: Evaluator) -> Evaluator:
        """A slot for a subtree of bound values and constants, folded once per execution."""
        self._entries.append(evaluator)
        return _reader(len(self._entries) - 1)

    def fold(self, values: Sequence[Any]) -> list[Any]:
        """Every slot's value for one execution's literal values.

        Raises:
            Exception: whatever a subtree's evaluator raises (the caller falls back).
        """
        folded: list[Any] = []
        token = _FOLDED.set(folded)
        try:
            for entry in self._entries:
                if isinstance(entry, tuple):
                    index, negate = entry
                    value = values[index]
                    folded.append(-value if negate else value)
                else:
                    folded.append(entry({}))
        finally:
            _FOLDED.reset(token)
        return folded

    @contextmanager
    def building(self) -> Iterator[BoundSlots]:
        """Compile the template's expressions inside this block (slots go here)."""
        token = _BUILDING.set(self)
        try:
            yield self
        finally:
            _BUILDING.reset(token)


def activate(folded: list[Any]) -> Token[list[Any]]:
    """Evaluate a template's expressions with these folded values (one execution) until
    :func:`deactivate` (call it in a ``finally``)."""
    return _FOLDED.set(folded)


def deactivate(token: Token[list[Any]]) -> None:
    """End what :func:`activate` began."""
    _FOLDED.reset(token)


def building_slots() -> BoundSlots | None:
    """The slots of the template being compiled, or None outside one."""
    return _BUILDING.get()


def _reader(k: int) -> Evaluator:
    get = _FOLDED.get
    return lambda row: get()[k]
