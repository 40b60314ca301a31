"""ksqlDB's built-in aggregate functions (UDAFs) as plain state transitions. Pure (no I/O).

Owns what an aggregating query needs to run ``COUNT``, ``SUM``, ``AVG``, ``TOPK``, ... per group:
`resolve_udaf` picks the implementation for a call's argument types and literal arguments the way
ksqlDB's function index does (exact types, no implicit casts; the same error messages), and returns
a `Udaf`: an initial state, ``add`` (and ``undo`` for functions ksqlDB allows over a TABLE),
``merge`` (for session windows) and ``result``. States are plain Python data (ints, floats,
Decimals, tuples, lists, dicts, sets) and every callable is a module-level function or a
`functools.partial` of one, so both states and `Udaf` values survive `pickle`.

Semantics follow ksqlDB's Java sources (``io.confluent.ksql.function.udaf``), including their
quirks: INTEGER sums wrap at 32 bits and BIGINT sums at 64 (in SUM, AVG and the STDDEV functions),
STDDEV_SAMP returns the sample *variance* (ksqlDB never takes its square root), CORRELATION divides
with Java's double rules (0/0 is NaN), COLLECT_LIST's undo removes the last equal value, and values
order as Java's ``compareTo`` does (strings by UTF-16 code unit, BYTES by signed byte, -0.0 < 0.0,
NaN greatest). A DECIMAL SUM that outgrows its type raises `EvalFailure` with ksqlDB's message
(ksqlDB fails the query there).

Session windows merge states as ksqlDB's ``merge`` methods do (also their quirks: COLLECT_LIST,
COLLECT_SET and HISTOGRAM keep the earlier state's entries first and stop at their limits, a
DECIMAL merge never fails, STDDEV_SAMP's merge divides INTEGER/BIGINT sums by counts in integer
arithmetic, LATEST_BY_OFFSET(col, n) keeps the *oldest* n values of the two states).
EARLIEST/LATEST_BY_OFFSET need to know which value came first across two states: ksqlDB stamps
each value with a process-wide counter; here the caller passes each record's ``order`` to ``add``
(see `Udaf`), which is deterministic and survives restarts.

Not covered: COUNT_DISTINCT's HyperLogLog estimate (it counts exactly, see `_count_distinct_add`).
`intermediate_type` gives ksqlDB's type for a function's stored state, for the check that the
value format can hold it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal
from functools import lru_cache, partial
from typing import Any, Protocol

from headwater.engine.errors import ExpressionError
from headwater.engine.functions.types import (
    BIGINT,
    BOOLEAN,
    BYTES,
    DATE,
    DOUBLE,
    INTEGER,
    NULL,
    STRING,
    TIME,
    TIMESTAMP,
    EvalFailure,
    NullType,
    wrap_int,
)
from headwater.engine.functions.user_index import FunctionNames
from headwater.sqlparse_ext.sqltypes import (
    ArrayType,
    DecimalType,
    MapType,
    SqlType,
    StructField,
    StructType,
)

State = Any
Args = tuple[Any, ...]
Order = tuple[int, ...]

_INT_MAX = (1 << 31) - 1
COLLECT_LIST_LIMIT = "ksql.functions.collect_list.limit"
COLLECT_SET_LIMIT = "ksql.functions.collect_set.limit"
HISTOGRAM_LIMIT = 1000


class AddFunction(Protocol):
    """``add(state, args)`` or ``add(state, args, order)``: see `Udaf`."""

    def __call__(self, state: Any, args: tuple[Any, ...], order: Order | None = None, /) -> Any:
        """The state with one row's column-argument values added."""
        ...


@dataclass(frozen=True, slots=True)
class Udaf:
    """One resolved aggregate call: how to start, grow, shrink, merge and read a group's state.

    Attributes:
        name: The function's name, upper case (``"COUNT"``).
        return_type: The type of ``result``'s values.
        table: Whether the function can undo a row, so ksqlDB allows it over a TABLE source.
        initial: A fresh state.
        add: (state, the call's column-argument values for one row[, order]) -> the new state;
            may mutate and return the same object. ``order`` (optional, default None) says where
            the row falls in processing order: a tuple of ints that grows with every row the
            caller adds to this function's states, such as the record's (partition, offset) when
            a key's records come from one partition, or a running count. Only
            EARLIEST/LATEST_BY_OFFSET store it (ksqlDB's SEQ), for ``merge``; the other
            functions ignore it. Raises `EvalFailure` where ksqlDB fails the query (a DECIMAL SUM
            past its precision).
        undo: The inverse of ``add`` for table sources; None when ``table`` is false.
        result: State -> output value; never aliases the state (lists and dicts are copies).
        merge: (state_a, state_b) -> one state holding both, for a record that bridges two
            session windows of a key: ksqlDB's ``merge``, with ``state_a`` the earlier session's
            (or the states merged so far: Kafka Streams folds the sessions a record touches,
            oldest first, into an initial state, then adds the record). Returns a fresh state
            (or an immutable input) and mutates neither input. EARLIEST/LATEST_BY_OFFSET compare
            the orders given to ``add``; when a value was added without one, ``state_a``'s
            values count as the earlier.
    """

    name: str
    return_type: SqlType
    table: bool
    initial: Callable[[], Any]
    add: AddFunction
    undo: Callable[[Any, tuple[Any, ...]], Any] | None
    result: Callable[[Any], Any]
    merge: Callable[[Any, Any], Any]


# -- helpers: Java's orderings and arithmetic ------------------------------------------------------


def _const(value: Any) -> Any:
    return value


def _natural(value: Any) -> Any:
    return value


def _double_key(x: float) -> tuple[int, float, float]:
    """Java's ``Double.compareTo``: -0.0 before 0.0, NaN after everything and equal to itself."""
    if math.isnan(x):
        return (1, 0.0, 0.0)
    return (0, x, math.copysign(1.0, x))


def _string_key(s: str) -> bytes:
    """Java's ``String.compareTo`` compares UTF-16 code units; big-endian UTF-16 bytes sort alike."""
    return s.encode("utf-16-be", "surrogatepass")


_FLIP_SIGN = bytes(b ^ 0x80 for b in range(256))


def _bytes_key(b: bytes) -> bytes:
    """``ByteBuffer.compareTo`` compares signed bytes; flipping the top bit makes them unsigned."""
    return b.translate(_FLIP_SIGN)


def _order_key(t: SqlType) -> Callable[[Any], Any]:
    if t == DOUBLE:
        return _double_key
    if t == STRING:
        return _string_key
    if t == BYTES:
        return _bytes_key
    return _natural


def _java_div(a: float, b: float) -> float:
    """Java's double division: x/0.0 is +-Infinity, 0/0 NaN (Python raises instead)."""
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _java_long_div(a: int, b: int) -> int:
    """Java's ``long / long``: truncates toward zero (and Long.MIN_VALUE / -1 wraps)."""
    quotient = abs(a) // abs(b)
    return wrap_int(quotient if (a < 0) == (b < 0) else -quotient, BIGINT)


def _java_sqrt(x: float) -> float:
    return math.sqrt(x) if x >= 0.0 else math.nan


@lru_cache(maxsize=64)
def _context(precision: int) -> Context:
    return Context(prec=precision, rounding=ROUND_HALF_UP)


def _frozen(value: Any) -> Any:
    """A hashable stand-in for a value (ARRAY -> tuple, MAP/STRUCT -> frozenset, one NaN)."""
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return frozenset((k, _frozen(v)) for k, v in value.items())
    if isinstance(value, float) and math.isnan(value):
        return ("NaN",)
    return value


# -- COUNT, COUNT_DISTINCT ------------------------------------------------------------------------


def _count(sign: int, state: int, args: Args) -> int:
    """COUNT(col) counts non-null values; COUNT(*) (no arguments) counts rows."""
    return state if args and args[0] is None else state + sign


def _plus(a: Any, b: Any) -> Any:
    return a + b


def _count_distinct_merge(a: set[Any], b: set[Any]) -> set[Any]:
    """ksqlDB merges the two HyperLogLog register sets; the exact sets' union."""
    return a | b


def _count_distinct_add(state: set[Any], args: Args) -> set[Any]:
    # ksqlDB estimates with a HyperLogLog (standard error < 1%); an exact set gives the same
    # answer for the small cardinalities where the estimate is exact, at a state that grows.
    if args[0] is not None:
        state.add(_frozen(args[0]))
    return state


# -- SUM, SUM_LIST, AVG ----------------------------------------------------------------------------


def _add_typed(t: SqlType, a: Any, b: Any) -> Any:
    """``a + b`` in Java's arithmetic of ``t`` (INTEGER and BIGINT wrap)."""
    return a + b if t == DOUBLE else wrap_int(a + b, t)


def _sum(t: SqlType, sign: int, state: Any, args: Args) -> Any:
    return state if args[0] is None else _add_typed(t, state, sign * args[0])


def _sum_decimal(t: DecimalType, sign: int, state: Decimal, args: Args) -> Decimal:
    """Adds in the argument's precision (HALF_UP); an add past it fails, an undo never does."""
    if args[0] is None:
        return state
    if sign < 0:
        return _context(t.precision).subtract(state, args[0])
    value = _context(t.precision).add(state, args[0])
    digits = t.precision - t.scale
    if abs(value) >= Decimal(1).scaleb(digits):
        raise EvalFailure(
            f"Numeric field overflow: A field with precision {t.precision} and scale {t.scale} "
            f"must round to an absolute value less than 10^{digits}. Got {value:f}"
        )
    return value


def _sum_decimal_merge(t: DecimalType, a: Decimal, b: Decimal) -> Decimal:
    """ksqlDB adds in the type's precision and, unlike ``add``, never checks for overflow."""
    return _context(t.precision).add(a, b)


def _list_total(element: SqlType, values: list[Any]) -> Any:
    total: Any = 0.0 if element == DOUBLE else 0
    for v in values:  # in order: float sums depend on it
        if v is not None:
            total = _add_typed(element, total, v)
    return total


def _sum_list(element: SqlType, sign: int, state: Any, args: Args) -> Any:
    if args[0] is None:
        return state
    return _add_typed(element, state, sign * _list_total(element, args[0]))


def _avg(t: SqlType, sign: int, state: tuple[Any, int], args: Args) -> tuple[Any, int]:
    """State: (sum in the argument's Java type, count)."""
    if args[0] is None:
        return state
    return (_add_typed(t, state[0], sign * args[0]), state[1] + sign)


def _avg_merge(t: SqlType, a: tuple[Any, int], b: tuple[Any, int]) -> tuple[Any, int]:
    return (_add_typed(t, a[0], b[0]), a[1] + b[1])


def _avg_result(state: tuple[Any, int]) -> float:
    total, count = state
    return 0.0 if count == 0 else float(total) / float(count)


# -- MIN, MAX ------------------------------------------------------------------------------------


def _min_add(key: Callable[[Any], Any], state: Any, args: Args) -> Any:
    value = args[0]
    if value is None:
        return state
    if state is None:
        return value
    return state if key(value) > key(state) else value


def _max_add(key: Callable[[Any], Any], state: Any, args: Args) -> Any:
    value = args[0]
    if value is None:
        return state
    if state is None:
        return value
    return value if key(value) > key(state) else state


def _min_max_merge(add: Callable[[Any, Args], Any], a: Any, b: Any) -> Any:
    """ksqlDB merges as ``aggregate(a, b)``: ``a`` as the new value, so equal values keep ``b``."""
    return add(b, (a,))


# -- TOPK, TOPKDISTINCT ----------------------------------------------------------------------------


def _topk_add(
    k: int, key: Callable[[Any], Any], fields: tuple[str, ...] | None, state: list[Any], args: Args
) -> list[Any]:
    """TOPK(col[, other...], k): keep the k largest, sorted descending, stable among equals.

    With other columns each entry is a struct ``{"sort_col": col, "col0": other0, ...}``. k = 0
    keeps nothing (ksqlDB fails every record there); a negative k keeps every value, as ksqlDB does.
    """
    value = args[0]
    if value is None or k == 0:
        return state

    def sort_key(entry: Any) -> Any:
        return key(entry["sort_col"] if fields else entry)

    if len(state) == k and key(value) <= sort_key(state[-1]):
        return state
    entry = dict(zip(fields, args, strict=True)) if fields else value
    if len(state) == k:
        state[-1] = entry
    else:
        state.append(entry)
    state.sort(key=sort_key, reverse=True)
    return state


def _topk_merge(
    k: int, key: Callable[[Any], Any], fields: tuple[str, ...] | None, a: list[Any], b: list[Any]
) -> list[Any]:
    """Merges the two descending lists, ``a``'s entry first among equal values, up to k."""

    def sort_key(entry: Any) -> Any:
        return key(entry["sort_col"] if fields else entry)

    merged: list[Any] = []
    i = j = 0
    while len(merged) != k and (i < len(a) or j < len(b)):
        if j == len(b) or (i < len(a) and sort_key(a[i]) >= sort_key(b[j])):
            merged.append(a[i])
            i += 1
        else:
            merged.append(b[j])
            j += 1
    return merged


def _topk_distinct_add(
    k: int, key: Callable[[Any], Any], state: list[Any], args: Args
) -> list[Any]:
    value = args[0]
    if value is None or k == 0:
        return state
    value_key = key(value)
    if len(state) == k and value_key <= key(state[-1]):
        return state
    if any(key(v) == value_key for v in state):
        return state
    if len(state) == k:
        state[-1] = value
    else:
        state.append(value)
    state.sort(key=key, reverse=True)
    return state


def _topk_distinct_merge(
    k: int, key: Callable[[Any], Any], a: list[Any], b: list[Any]
) -> list[Any]:
    """Merges the two descending lists up to k, a value in both taken once."""
    merged: list[Any] = []
    i = j = 0
    while len(merged) != k and (i < len(a) or j < len(b)):
        if j == len(b) or (i < len(a) and key(a[i]) > key(b[j])):
            merged.append(a[i])
            i += 1
        elif i == len(a) or key(b[j]) > key(a[i]):
            merged.append(b[j])
            j += 1
        else:
            merged.append(a[i])
            i += 1
            j += 1
    return merged


# -- COLLECT_LIST, COLLECT_SET, HISTOGRAM ---------------------------------------------------------


def _collect_list_add(limit: int, state: list[Any], args: Args) -> list[Any]:
    if len(state) < limit:
        state.append(args[0])
    return state


def _collect_list_undo(state: list[Any], args: Args) -> list[Any]:
    """Removes the last value equal to the undone one (ksqlDB does not track which it added)."""
    for i in range(len(state) - 1, -1, -1):
        if state[i] == args[0]:
            del state[i]
            break
    return state


def _collect_list_merge(limit: int, a: list[Any], b: list[Any]) -> list[Any]:
    """``a`` then as much of ``b`` as the limit leaves room for."""
    return [*a, *b[: max(0, limit - len(a))]]


def _collect_set_add(limit: int, state: list[Any], args: Args) -> list[Any]:
    if len(state) < limit and args[0] not in state:
        state.append(args[0])
    return state


def _collect_set_merge(limit: int, a: list[Any], b: list[Any]) -> list[Any]:
    """``a`` then ``b``'s new values, until the limit."""
    merged = list(a)
    for value in b:
        if len(merged) >= limit:
            break
        if value not in merged:
            merged.append(value)
    return merged


def _histogram_add(state: dict[Any, int], args: Args) -> dict[Any, int]:
    value = args[0]
    if len(state) < HISTOGRAM_LIMIT or value in state:
        state[value] = state.get(value, 0) + 1
    return state


def _histogram_undo(state: dict[Any, int], args: Args) -> dict[Any, int]:
    value = args[0]
    if value in state:  # ksqlDB fails on a value it never counted (past the limit)
        if state[value] <= 1:
            del state[value]
        else:
            state[value] -= 1
    return state


def _histogram_merge(a: dict[Any, int], b: dict[Any, int]) -> dict[Any, int]:
    """Adds ``b``'s counts (in its insertion order) to ``a``'s; new values only below the limit."""
    merged = dict(a)
    for value, count in b.items():
        if len(merged) < HISTOGRAM_LIMIT or value in merged:
            merged[value] = merged.get(value, 0) + count
    return merged


# -- EARLIEST_BY_OFFSET, LATEST_BY_OFFSET ----------------------------------------------------------


# A taken value is an entry (value, order): ksqlDB's STRUCT<SEQ, VAL>, with the caller's order
# (None when it gave none) for ksqlDB's process-wide sequence number.
_Entry = tuple[Any, Order | None]


def _earliest_add(
    ignore_nulls: bool, state: tuple[Any, ...], args: Args, order: Order | None = None
) -> tuple[Any, ...]:
    """State: () until a value is taken, then its entry for good."""
    if state or (args[0] is None and ignore_nulls):
        return state
    return (args[0], order)


def _latest_add(
    ignore_nulls: bool, state: tuple[Any, ...], args: Args, order: Order | None = None
) -> tuple[Any, ...]:
    """State: () until a value is taken, then the last taken value's entry."""
    return state if args[0] is None and ignore_nulls else (args[0], order)


def _entry_value(state: tuple[Any, ...]) -> Any:
    return state[0] if state else None


def _earliest_n_add(
    n: int, ignore_nulls: bool, state: list[_Entry], args: Args, order: Order | None = None
) -> list[_Entry]:
    if len(state) < n and not (args[0] is None and ignore_nulls):
        state.append((args[0], order))
    return state


def _latest_n_add(
    n: int, ignore_nulls: bool, state: list[_Entry], args: Args, order: Order | None = None
) -> list[_Entry]:
    if not (args[0] is None and ignore_nulls):
        state.append((args[0], order))
        if len(state) > n:
            del state[: len(state) - n]
    return state


def _entry_values(state: list[_Entry]) -> list[Any]:
    return [value for value, _ in state]


def _earliest_merge(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    """The entry added first (ksqlDB: the smaller sequence; ``b`` on a tie)."""
    if not a or not b:
        return a or b
    if a[1] is None or b[1] is None:
        return a
    return a if a[1] < b[1] else b


def _latest_merge(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    """The entry added last (ksqlDB: the larger sequence; ``a`` on a tie).

    A state that never took a value loses. (ksqlDB's initial state holds a null with a fresh
    sequence, so with ignoreNulls false it wins over the sessions merged into it; the record that
    Kafka Streams then adds replaces it, so the results are the same.)
    """
    if not a or not b:
        return a or b
    if a[1] is None or b[1] is None:
        return b
    return a if a[1] >= b[1] else b


def _by_offset_n_merge(n: int, a: list[_Entry], b: list[_Entry]) -> list[_Entry]:
    """The first n of both states' entries in the order they were added (by order when every entry
    has one, a stable sort; else ``a``'s before ``b``'s). ksqlDB does this for LATEST_BY_OFFSET's
    n values too, keeping the oldest n where ``add`` keeps the newest."""
    merged = [*a, *b]
    if all(order is not None for _, order in merged):
        merged.sort(key=_entry_order)
    return merged[:n]


def _entry_order(entry: _Entry) -> Order:
    return entry[1] or ()  # only called when every entry has an order


# -- STDDEV_SAMP, STDDEV_SAMPLE, CORRELATION -----------------------------------------------------


def _stddev_delta(t: SqlType, total: Any, count: int, value: Any) -> float:
    """ksqlDB's ``value * (count + 1) - (sum + value)``, with Java's int/long/double arithmetic."""
    if t == DOUBLE:
        return float(value * (count + 1) - (total + value))
    scaled = wrap_int(value * (count + 1), BIGINT)
    return float(wrap_int(scaled - wrap_int(total + value, t), BIGINT))


def _stddev_add(t: SqlType, state: tuple[Any, int, float], args: Args) -> tuple[Any, int, float]:
    """Youngs-Cramer, exactly as ksqlDB computes it. State: (sum, count, m2)."""
    value = args[0]
    if value is None:
        return state
    total, count, m2 = state
    new_count = count + 1
    extra = 0.0
    if count > 0:
        delta = _stddev_delta(t, total, count, value)
        extra = delta * delta / float(new_count * count)
    return (_add_typed(t, value, total), new_count, extra + m2)


def _stddev_undo(t: SqlType, state: tuple[Any, int, float], args: Args) -> tuple[Any, int, float]:
    value = args[0]
    if value is None:
        return state
    total, count, m2 = state
    new_count = count - 1
    removed = 0.0
    if new_count > 0:
        delta = _stddev_delta(t, total, count, value)
        removed = delta * delta / float(new_count * (new_count + 1))
    return (_add_typed(t, total, -value), new_count, m2 - removed)


def _stddev_merge(
    t: SqlType, integral_means: bool, a: tuple[Any, int, float], b: tuple[Any, int, float]
) -> tuple[Any, int, float]:
    """Chan et al.'s pairwise update, as ksqlDB computes it: m2 grows by
    ``count_a * count_b * (mean_a - mean_b)**2 / (count_a + count_b)``. ``integral_means``:
    STDDEV_SAMP takes an INTEGER/BIGINT mean in Java's integer division, STDDEV_SAMPLE in doubles.
    """
    total_a, count_a, m2_a = a
    total_b, count_b, m2_b = b
    count = count_a + count_b
    if count_a == 0 or count_b == 0:
        m2 = m2_a + m2_b
    else:
        if t == DOUBLE:
            gap = total_a / count_a - total_b / count_b
        elif integral_means:
            mean_a, mean_b = _java_long_div(total_a, count_a), _java_long_div(total_b, count_b)
            gap = float(wrap_int(mean_a - mean_b, BIGINT))
        else:
            gap = float(total_a) / float(count_a) - float(total_b) / float(count_b)
        spread = float(wrap_int(count_a * count_b, BIGINT)) * gap * gap
        m2 = m2_a + m2_b + _java_div(spread, float(count))
    return (_add_typed(t, total_a, total_b), count, m2)


def _variance_result(state: tuple[Any, int, float]) -> float:
    """STDDEV_SAMP: ksqlDB returns m2 / (n - 1), the sample variance, under this name."""
    _, count, m2 = state
    return 0.0 if count < 2 else m2 / float(count - 1)


def _stddev_result(state: tuple[Any, int, float]) -> float:
    _, count, m2 = state
    return 0.0 if count < 2 else _java_sqrt(m2 / float(count - 1))


_Moments = tuple[float, float, float, float, float, int]


def _correlation(sign: int, state: _Moments, args: Args) -> _Moments:
    """State: the sums of x, y, x², y², xy as doubles, and the count."""
    if args[0] is None or args[1] is None:
        return state
    x, y = float(args[0]), float(args[1])
    xs, ys, xxs, yys, xys, count = state
    if sign > 0:
        return (xs + x, ys + y, xxs + x * x, yys + y * y, xys + x * y, count + 1)
    return (xs - x, ys - y, xxs - x * x, yys - y * y, xys - x * y, count - 1)


def _correlation_merge(a: _Moments, b: _Moments) -> _Moments:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4], a[5] + b[5])


def _correlation_result(state: _Moments) -> float:
    xs, ys, xxs, yys, xys, count = state
    n = float(count)
    numerator = n * xys - xs * ys
    denominator = _java_sqrt((n * xxs - xs * xs) * (n * yys - ys * ys))
    return _java_div(numerator, denominator)


# -- ATTR ------------------------------------------------------------------------------------------


def _attr(step: int, state: list[list[Any]], args: Args) -> list[list[Any]]:
    """State: [value, count] entries, nulls included; a count never drops below zero."""
    value = args[0]
    for entry in state:
        if entry[0] == value:
            entry[1] = max(0, entry[1] + step)
            return state
    if step > 0:
        state.append([value, step])
    return state


def _attr_merge(a: list[list[Any]], b: list[list[Any]]) -> list[list[Any]]:
    """``a``'s entries, each of ``b``'s counts added as ``add`` would (a copy: ``add`` mutates)."""
    merged = [list(entry) for entry in a]
    for value, count in b:
        _attr(count, merged, (value,))
    return merged


def _attr_result(state: list[list[Any]]) -> Any:
    """The single value seen (with a positive count), or NULL when there are none or several."""
    live = [entry[0] for entry in state if entry[1] > 0]
    return live[0] if len(live) == 1 else None


# -- resolution ----------------------------------------------------------------------------------

Resolved = tuple[Udaf, SqlType]  # the function and ksqlDB's intermediate (aggregate) type
Types = tuple[SqlType, ...]
Consts = tuple[Any, ...]
Config = Mapping[str, Any]
Builder = Callable[[Types, Consts, Config], Resolved | None]

_NUMERIC_JAVA = (INTEGER, BIGINT, DOUBLE)
_COMPARABLE = (INTEGER, BIGINT, DOUBLE, DATE, TIME, TIMESTAMP, STRING, BYTES)


def _is_int_literal(value: Any) -> bool:
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and -_INT_MAX - 1 <= value <= _INT_MAX
    )


def _struct(*fields: tuple[str, SqlType]) -> StructType:
    return StructType(tuple(StructField(name, t) for name, t in fields))


def _limit(config: Mapping[str, Any], key: str) -> int:
    """ksqlDB's ``Configurable`` limit: a number or numeric string; absent or negative: none."""
    raw = config.get(key)
    limit = _INT_MAX
    if isinstance(raw, (int, float, str)) and not isinstance(raw, bool):
        limit = int(raw)
    return _INT_MAX if limit < 0 else limit


def _unordered(
    add: Callable[[Any, Args], Any], state: Any, args: Args, order: Order | None = None
) -> Any:
    """``add`` for a function that has no use for the row's order."""
    return add(state, args)


def _udaf(
    name: str,
    t: SqlType,
    initial: Callable[[], Any],
    add: Callable[..., Any],
    merge: Callable[[Any, Any], Any],
    result: Callable[[Any], Any] = _natural,
    undo: Callable[[Any, Args], Any] | None = None,
    *,
    ordered: bool = False,
) -> Udaf:
    """``ordered``: ``add`` takes the row's order itself; otherwise it is ``add(state, args)``."""
    add_function: AddFunction = add if ordered else partial(_unordered, add)
    return Udaf(name, t, undo is not None, initial, add_function, undo, result, merge)


def _reversible(
    name: str,
    t: SqlType,
    zero: Any,
    step: Callable[..., Any],
    merge: Callable[[Any, Any], Any],
    result: Callable[[Any], Any] = _natural,
) -> Udaf:
    """A table function whose undo is its add with the sign flipped: ``step(sign, state, args)``."""
    return _udaf(name, t, partial(_const, zero), partial(step, 1), merge, result, partial(step, -1))


def _build_count(types: Types, consts: Consts, _: Config) -> Resolved | None:
    if len(types) > 1 or consts:
        return None
    return _reversible("COUNT", BIGINT, 0, _count, _plus), BIGINT


def _build_count_distinct(types: Types, consts: Consts, _: Config) -> Resolved | None:
    if len(types) != 1 or consts or isinstance(types[0], NullType):
        return None
    udaf = _udaf("COUNT_DISTINCT", BIGINT, set, _count_distinct_add, _count_distinct_merge, len)
    return udaf, ArrayType(INTEGER)


def _build_sum(types: Types, consts: Consts, _: Config) -> Resolved | None:
    if len(types) != 1 or consts:
        return None
    (t,) = types
    if isinstance(t, DecimalType):
        zero = Decimal(0).scaleb(-t.scale)
        add, undo = partial(_sum_decimal, t, 1), partial(_sum_decimal, t, -1)
        merge = partial(_sum_decimal_merge, t)
        return _udaf("SUM", t, partial(_const, zero), add, merge, undo=undo), t
    if t not in _NUMERIC_JAVA:
        return None
    start = 0.0 if t == DOUBLE else 0
    return _reversible("SUM", t, start, partial(_sum, t), partial(_add_typed, t)), t


def _build_sum_list(types: Types, consts: Consts, _: Config) -> Resolved | None:
    if len(types) != 1 or consts or not isinstance(types[0], ArrayType):
        return None
    t = types[0].element
    if t not in _NUMERIC_JAVA:
        return None
    zero = 0.0 if t == DOUBLE else 0
    return _reversible("SUM_LIST", t, zero, partial(_sum_list, t), partial(_add_typed, t)), t


def _build_avg(types: Types, consts: Consts, _: Config) -> Resolved | None:
    if len(types) != 1 or consts or types[0] not in _NUMERIC_JAVA:
        return None
    (t,) = types
    zero = (0.0 if t == DOUBLE else 0, 0)
    udaf = _reversible("AVG", DOUBLE, zero, partial(_avg, t), partial(_avg_merge, t), _avg_result)
    return udaf, _struct(("SUM", t), ("COUNT", BIGINT))


def _build_min_max(name: str, types: Types, consts: Consts, _: Config) -> Resolved | None:
    if len(types) != 1 or consts:
        return None
    (t,) = types
    if t not in _COMPARABLE and not isinstance(t, DecimalType):
        return None
    add = partial(_min_add if name == "MIN" else _max_add, _order_key(t))
    return _udaf(name, t, partial(_const, None), add, partial(_min_max_merge, add)), t


def _build_topk(types: Types, consts: Consts, _: Config) -> Resolved | None:
    if not types or len(consts) != 1 or not _is_int_literal(consts[0]):
        return None
    if types[0] not in (INTEGER, BIGINT, DOUBLE, STRING):
        return None
    element: SqlType = types[0]
    fields: tuple[str, ...] | None = None
    if len(types) > 1:  # TOPK(col, other..., k): structs {sort_col, col0, ...}
        fields = ("sort_col", *(f"col{i}" for i in range(len(types) - 1)))
        element = StructType(tuple(StructField(f, t) for f, t in zip(fields, types, strict=True)))
    k, key = consts[0], _order_key(types[0])
    add, merge = partial(_topk_add, k, key, fields), partial(_topk_merge, k, key, fields)
    return _udaf("TOPK", ArrayType(element), list, add, merge, list), ArrayType(element)


def _build_topk_distinct(types: Types, consts: Consts, _: Config) -> Resolved | None:
    if len(types) != 1 or len(consts) != 1 or not _is_int_literal(consts[0]):
        return None
    (t,) = types
    if t not in _COMPARABLE and not isinstance(t, DecimalType):
        return None
    k, key = consts[0], _order_key(t)
    add, merge = partial(_topk_distinct_add, k, key), partial(_topk_distinct_merge, k, key)
    return _udaf("TOPKDISTINCT", ArrayType(t), list, add, merge, list), ArrayType(t)


def _build_collect(name: str, types: Types, consts: Consts, config: Config) -> Resolved | None:
    if len(types) != 1 or consts or isinstance(types[0], NullType):
        return None
    t = ArrayType(types[0])
    if name == "COLLECT_LIST":
        limit = _limit(config, COLLECT_LIST_LIMIT)
        add, merge = partial(_collect_list_add, limit), partial(_collect_list_merge, limit)
        return _udaf(name, t, list, add, merge, list, _collect_list_undo), t
    limit = _limit(config, COLLECT_SET_LIMIT)
    add, merge = partial(_collect_set_add, limit), partial(_collect_set_merge, limit)
    return _udaf(name, t, list, add, merge, list), t


def _build_histogram(types: Types, consts: Consts, _: Config) -> Resolved | None:
    if types != (STRING,) or consts:
        return None
    t = MapType(STRING, BIGINT)
    return _udaf("HISTOGRAM", t, dict, _histogram_add, _histogram_merge, dict, _histogram_undo), t


def _build_by_offset(name: str, types: Types, consts: Consts, _: Config) -> Resolved | None:
    """The forms (col), (col, ignoreNulls), (col, n) and (col, n, ignoreNulls)."""
    if len(types) != 1 or isinstance(types[0], NullType):
        return None
    (t,) = types
    ignore_nulls = True
    if consts and isinstance(consts[-1], bool):
        *rest, ignore_nulls = consts
        consts = tuple(rest)
    if len(consts) > 1 or (consts and not _is_int_literal(consts[0])):
        return None
    entry = _struct(("SEQ", BIGINT), ("VAL", t))
    earliest = name == "EARLIEST_BY_OFFSET"
    if not consts:
        add = partial(_earliest_add if earliest else _latest_add, ignore_nulls)
        merge = _earliest_merge if earliest else _latest_merge
        return _udaf(name, t, tuple, add, merge, _entry_value, ordered=True), entry
    n = consts[0]
    if n <= 0:
        raise ExpressionError(f"{'earliestN' if earliest else 'latestN'} must be 1 or greater")
    add_n = partial(_earliest_n_add if earliest else _latest_n_add, n, ignore_nulls)
    merge_n = partial(_by_offset_n_merge, n)
    udaf = _udaf(name, ArrayType(t), list, add_n, merge_n, _entry_values, ordered=True)
    return udaf, ArrayType(entry)


def _build_stddev(name: str, types: Types, consts: Consts, _: Config) -> Resolved | None:
    if len(types) != 1 or consts or types[0] not in _NUMERIC_JAVA:
        return None
    (t,) = types
    zero = (0.0 if t == DOUBLE else 0, 0, 0.0)
    result = _variance_result if name == "STDDEV_SAMP" else _stddev_result
    merge = partial(_stddev_merge, t, name == "STDDEV_SAMP")
    udaf = _udaf(
        name,
        DOUBLE,
        partial(_const, zero),
        partial(_stddev_add, t),
        merge,
        result,
        partial(_stddev_undo, t),
    )
    return udaf, _struct(("SUM", t), ("COUNT", BIGINT), ("M2", DOUBLE))


def _build_correlation(types: Types, consts: Consts, _: Config) -> Resolved | None:
    if len(types) != 2 or consts or types[0] != types[1] or types[0] not in _NUMERIC_JAVA:
        return None
    zero = (0.0, 0.0, 0.0, 0.0, 0.0, 0)
    udaf = _reversible(
        "CORRELATION", DOUBLE, zero, _correlation, _correlation_merge, _correlation_result
    )
    names = ("X_SUM", "Y_SUM", "X_SQUARED_SUM", "Y_SQUARED_SUM", "XY_SUM")
    return udaf, _struct(*((n, DOUBLE) for n in names), ("COUNT", BIGINT))


def _build_attr(types: Types, consts: Consts, _: Config) -> Resolved | None:
    if len(types) != 1 or consts or isinstance(types[0], NullType):
        return None
    (t,) = types
    udaf = _udaf("ATTR", t, list, partial(_attr, 1), _attr_merge, _attr_result, partial(_attr, -1))
    return udaf, ArrayType(_struct(("VALUE", t), ("COUNT", INTEGER)))


@dataclass(frozen=True, slots=True)
class _Function:
    """A UDAF family as ksqlDB registers it: its declared name and its factory signatures."""

    display: str
    signatures: tuple[str, ...]
    build: Builder


def _sigs(display: str, *params: str) -> tuple[str, ...]:
    return tuple(f"{display}({p})" for p in params)


_OFFSET_PARAMS = (
    "T val1",
    "T val1, BOOLEAN ignoreNulls",
    "T val1, INT {n}",
    "T val1, INT {n}, BOOLEAN ignoreNulls",
)
_COMPARABLE_PARAMS = (
    "INT val1",
    "BIGINT val1",
    "DOUBLE val1",
    "DECIMAL val1",
    "DATE val1",
    "TIME val1",
    "TIMESTAMP val1",
    "VARCHAR val1",
    "BYTES val1",
)
_TOPK_TYPES = ("INT", "BIGINT", "DOUBLE", "VARCHAR")
_FUNCTIONS: dict[str, _Function] = {
    "COUNT": _Function("COUNT", _sigs("COUNT", "T val1"), _build_count),
    "COUNT_DISTINCT": _Function(
        "COUNT_DISTINCT", _sigs("COUNT_DISTINCT", "T val1"), _build_count_distinct
    ),
    "SUM": _Function(
        "SUM", _sigs("SUM", "DECIMAL val1", "DOUBLE val1", "BIGINT val1", "INT val1"), _build_sum
    ),
    "SUM_LIST": _Function(
        "sum_list",
        _sigs("sum_list", "ARRAY<DOUBLE> val1", "ARRAY<INT> val1", "ARRAY<BIGINT> val1"),
        _build_sum_list,
    ),
    "AVG": _Function("avg", _sigs("avg", "BIGINT val1", "INT val1", "DOUBLE val1"), _build_avg),
    "MIN": _Function("MIN", _sigs("MIN", *_COMPARABLE_PARAMS), partial(_build_min_max, "MIN")),
    "MAX": _Function("MAX", _sigs("MAX", *_COMPARABLE_PARAMS), partial(_build_min_max, "MAX")),
    "TOPK": _Function(
        "TOPK",
        _sigs("TOPK", *(f"{t} val1, ANY... val2, INT k" for t in _TOPK_TYPES)),
        _build_topk,
    ),
    "TOPKDISTINCT": _Function(
        "TOPKDISTINCT",
        _sigs("TOPKDISTINCT", *(f"{p}, INT k" for p in _COMPARABLE_PARAMS)),
        _build_topk_distinct,
    ),
    "COLLECT_LIST": _Function(
        "collect_list", _sigs("collect_list", "T val1"), partial(_build_collect, "COLLECT_LIST")
    ),
    "COLLECT_SET": _Function(
        "collect_set", _sigs("collect_set", "T val1"), partial(_build_collect, "COLLECT_SET")
    ),
    "HISTOGRAM": _Function("histogram", _sigs("histogram", "VARCHAR val1"), _build_histogram),
    "EARLIEST_BY_OFFSET": _Function(
        "EARLIEST_BY_OFFSET",
        _sigs("EARLIEST_BY_OFFSET", *(p.format(n="earliestN") for p in _OFFSET_PARAMS)),
        partial(_build_by_offset, "EARLIEST_BY_OFFSET"),
    ),
    "LATEST_BY_OFFSET": _Function(
        "LATEST_BY_OFFSET",
        _sigs("LATEST_BY_OFFSET", *(p.format(n="latestN") for p in _OFFSET_PARAMS)),
        partial(_build_by_offset, "LATEST_BY_OFFSET"),
    ),
    "STDDEV_SAMP": _Function(
        "STDDEV_SAMP",
        _sigs("STDDEV_SAMP", "BIGINT val1", "INT val1", "DOUBLE val1"),
        partial(_build_stddev, "STDDEV_SAMP"),
    ),
    "STDDEV_SAMPLE": _Function(
        "STDDEV_SAMPLE",
        _sigs("STDDEV_SAMPLE", "BIGINT val1", "INT val1", "DOUBLE val1"),
        partial(_build_stddev, "STDDEV_SAMPLE"),
    ),
    "CORRELATION": _Function(
        "correlation",
        _sigs("correlation", *(f"{t} val1, {t} val2" for t in ("DOUBLE", "INT", "BIGINT"))),
        _build_correlation,
    ),
    "ATTR": _Function("ATTR", _sigs("ATTR", "T val1"), _build_attr),
}

AGGREGATE_NAMES = FunctionNames(_FUNCTIONS, "AGGREGATE")
"""The aggregate functions' names: the built-in ones and the installed Python ones."""

_CONSTANTS = {"TOPK": 1, "TOPKDISTINCT": 1, "EARLIEST_BY_OFFSET": 2, "LATEST_BY_OFFSET": 2}


def constant_arity(name: str, total_args: int) -> int:
    """How many of a call's trailing arguments are literal init arguments rather than columns.

    As in ksqlDB, the first argument is always a column: ``TOPK(x, 3)`` and ``TOPK(x, y, 3)`` have
    one, ``LATEST_BY_OFFSET(x)`` none, ``LATEST_BY_OFFSET(x, false)`` and ``(x, 3)`` one,
    ``LATEST_BY_OFFSET(x, 3, false)`` two. Unknown names have none (`resolve_udaf` rejects them).
    """
    return max(0, min(_CONSTANTS.get(name.upper(), 0), total_args - 1))


def _type_text(t: SqlType) -> str:
    """ksqlDB's unescaped spelling of an argument type, as its function-index messages print it."""
    if isinstance(t, ArrayType):
        return f"ARRAY<{_type_text(t.element)}>"
    if isinstance(t, MapType):
        return f"MAP<{_type_text(t.key)}, {_type_text(t.value)}>"
    if isinstance(t, StructType):
        return "STRUCT<" + ", ".join(f"{f.name} {_type_text(f.type)}" for f in t.fields) + ">"
    return t.sql()


def _literal_type(value: Any) -> SqlType:
    """The type ksqlDB gives a literal init argument."""
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        return INTEGER if _is_int_literal(value) else BIGINT
    if isinstance(value, float):
        return DOUBLE
    if isinstance(value, Decimal):
        _, digits, exponent = value.as_tuple()
        scale = max(0, -int(exponent))
        return DecimalType(max(len(digits) + max(0, int(exponent)), scale, 1), scale)
    if isinstance(value, str):
        return STRING
    if isinstance(value, bytes):
        return BYTES
    return NULL


def _resolve(
    name: str,
    arg_types: Sequence[SqlType],
    constants: Sequence[Any],
    config: Mapping[str, Any] | None,
) -> Resolved:
    function = _FUNCTIONS.get(name.upper())
    if function is None:
        raise ExpressionError(
            f"Can not find any aggregate functions with the name '{name.upper()}'"
        )
    resolved = function.build(tuple(arg_types), tuple(constants), config or {})
    if resolved is None:
        shown = [*arg_types, *(_literal_type(c) for c in constants)]
        raise ExpressionError(
            f"Function '{function.display}' does not accept parameters "
            f"({', '.join(_type_text(t) for t in shown)}).\nValid alternatives are:\n"
            + "\n".join(function.signatures)
            + "\nFor detailed information on a function run: DESCRIBE FUNCTION <Function-Name>;"
        )
    return resolved


def resolve_udaf(
    name: str,
    arg_types: Sequence[SqlType],
    constants: Sequence[Any],
    *,
    config: Mapping[str, Any] | None = None,
) -> Udaf:
    """The aggregate function ``name`` for these argument types and literal arguments.

    Args:
        name: The function's name, any case.
        arg_types: Types of the column arguments (``COUNT(*)`` has none).
        constants: The evaluated literal trailing arguments (see `constant_arity`).
        config: Query properties; ``ksql.functions.collect_list.limit`` and
            ``ksql.functions.collect_set.limit`` cap COLLECT_LIST/COLLECT_SET (default: no cap).

    Returns:
        The resolved function.

    Raises:
        ExpressionError: ksqlDB's message for an unknown name, argument types (columns and
            literals) that match none of the function's signatures, or a bad literal value.
    """
    return _resolve(name, arg_types, constants, config)[0]


def intermediate_type(name: str, arg_types: Sequence[SqlType], constants: Sequence[Any]) -> SqlType:
    """ksqlDB's type for the function's stored state (e.g. AVG: ``STRUCT<SUM, COUNT>``).

    ksqlDB refuses a query whose value format cannot hold this type (DELIMITED takes no ARRAY,
    MAP or STRUCT: "One of the functions used in the statement has an intermediate type that the
    value format can not handle. ...").

    Raises:
        ExpressionError: As `resolve_udaf`.
    """
    return _resolve(name, arg_types, constants, None)[1]


__all__ = [
    "AGGREGATE_NAMES",
    "COLLECT_LIST_LIMIT",
    "COLLECT_SET_LIMIT",
    "HISTOGRAM_LIMIT",
    "AddFunction",
    "Order",
    "Udaf",
    "constant_arity",
    "intermediate_type",
    "resolve_udaf",
]
