"""Functions written in Python, as the engine calls them: resolving a call's overload the way
ksqlDB's ``UdfIndex`` does, and wrapping the Python code with conversions, NULL rules and error
capture. Pure, apart from the process-wide table of installed functions (`install`).

Resolution: the overloads that take the argument types exactly (a NULL argument fits any
parameter, a generic binds to the first type it meets and must meet the same type again), else
those that take them with implicit widening (INTEGER -> BIGINT -> DECIMAL -> DOUBLE); among them
ksqlDB's order picks one: fixed before variadic, more parameters, fewer generics, no ``ANY...``,
the variadic parameter later. Two overloads equal in that order are ambiguous, an error.

A call that raises gives NULL and is recorded (`take_failures`): the operators turn what a record's
calls recorded into processing-log entries, and the query goes on, as ksqlDB does.
"""

from __future__ import annotations

import datetime as dt
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from headwater.engine.errors import ExpressionError
from headwater.engine.functions.types import (
    BIGINT,
    DATE,
    DOUBLE,
    INTEGER,
    TIME,
    TIMESTAMP,
    NullType,
)
from headwater.engine.functions.user import (
    ANY_DECIMAL,
    AnyType,
    Declaration,
    GenericType,
    Overload,
    Param,
)
from headwater.sqlparse_ext.sqltypes import ArrayType, DecimalType, MapType, SqlType, StructType

_WIDER: dict[str, tuple[str, ...]] = {
    "INTEGER": ("BIGINT", "DECIMAL", "DOUBLE"),
    "BIGINT": ("DECIMAL", "DOUBLE"),
    "DECIMAL": ("DOUBLE",),
}
#: ksqlDB's ``SqlBaseType.canImplicitlyCast`` whole: numbers widen, and a STRING is read as a
#: TIME, DATE, TIMESTAMP or BYTES (built-in functions; a Python function's STRING stays one).
IMPLICIT_CASTS: dict[str, tuple[str, ...]] = {
    **_WIDER,
    "STRING": ("TIME", "DATE", "TIMESTAMP", "BYTES"),
}
_MAX_FAILURES = 64  # kept per thread between two takes: a record's calls, not a batch's


# -- the installed functions -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UserFunction:
    """One installed function: every overload its modules declare, and their metadata."""

    kind: str
    name: str
    declarations: tuple[Declaration, ...]

    @property
    def overloads(self) -> tuple[Overload, ...]:
        """Its overloads, in declaration order."""
        return tuple(d.overload for d in self.declarations)

    @property
    def description(self) -> str:
        """The first description any of its declarations gives."""
        return next((d.description for d in self.declarations if d.description), "")


_installed: dict[str, UserFunction] = {}
_lock = threading.Lock()


def install(functions: Mapping[str, UserFunction]) -> None:
    """Makes ``functions`` the installed set (replacing what was installed)."""
    with _lock:
        _installed.clear()
        _installed.update(functions)


def installed() -> dict[str, UserFunction]:
    """The installed functions by name (a copy)."""
    with _lock:
        return dict(_installed)


def lookup(name: str, kind: str | None = None) -> UserFunction | None:
    """The installed function ``name`` (any case), of ``kind`` when given."""
    found = _installed.get(name.upper())
    return found if found is not None and (kind is None or found.kind == kind) else None


class FunctionNames:
    """A set of names over the engine's own functions of a kind and the installed user ones of
    that kind: ``name in names`` (any case) and iteration see both, as functions are installed."""

    def __init__(self, builtin: Iterable[str], kind: str) -> None:
        self._builtin = frozenset(n.upper() for n in builtin)
        self._kind = kind

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        upper = name.upper()
        return upper in self._builtin or lookup(upper, self._kind) is not None

    def __iter__(self) -> Iterator[str]:
        yield from sorted(self._builtin)
        with _lock:
            user = [n for n, f in _installed.items() if f.kind == self._kind]
        yield from sorted(user)

    @property
    def builtin(self) -> frozenset[str]:
        """The engine's own names only."""
        return self._builtin


# -- failures --------------------------------------------------------------------------------------

_failures = threading.local()
#: whether any user function ever raised in this process: until then the checks below, made for
#: every record, need not look in the thread's list (a missing thread-local attribute costs ~0.5 us)
_any_failed = False


def _record_failure(name: str, args: Sequence[SqlType], error: BaseException) -> None:
    global _any_failed
    _any_failed = True
    found: list[str] | None = getattr(_failures, "list", None)
    if found is None:
        found = _failures.list = []
    if len(found) < _MAX_FAILURES:
        shown = ", ".join(a.sql() for a in args)
        found.append(f"Error computing {name}({shown}): {type(error).__name__}: {error}")


def failures_pending() -> bool:
    """Whether a user function this thread called raised since the last `take_failures`."""
    return _any_failed and bool(getattr(_failures, "list", None))


def take_failures() -> list[str]:
    """What the user functions this thread called raised since the last take (and forget it)."""
    if not _any_failed:
        return []
    found: list[str] | None = getattr(_failures, "list", None)
    if not found:
        return []
    _failures.list = []
    return found


# -- time limits -----------------------------------------------------------------------------------


class CallTimeout(Exception):
    """A Python function ran longer than ``headwater.functions.call.timeout.ms`` allows."""


_limit_s: float | None = None
_MAIN = threading.main_thread().ident
_started = [0.0]  # when the main thread's current call started (0: none runs)
_watchdog: threading.Thread | None = None


def set_call_limit(ms: int | None) -> None:
    """Bounds each call of a Python function on this process's main thread (where Spark's
    workers run a query's stages) to ``ms`` milliseconds; None or 0: unbounded."""
    global _limit_s
    _limit_s = ms / 1000 if ms else None


def call_limit_ms() -> int:
    """The bound `set_call_limit` set (0: none)."""
    return int(_limit_s * 1000) if _limit_s else 0


def _on_alarm(signum: int, frame: Any) -> None:
    if _started[0] and _limit_s and time.monotonic() - _started[0] >= _limit_s:
        raise CallTimeout(f"the call ran longer than {int(_limit_s * 1000)} ms")


def _watch() -> None:
    """Wakes the main thread (SIGALRM: its handler raises there) when its call overruns."""
    while True:
        limit = _limit_s
        time.sleep(min(0.25, limit / 4) if limit else 0.25)
        started = _started[0]
        if limit and started and time.monotonic() - started >= limit and _MAIN is not None:
            signal.pthread_kill(_MAIN, signal.SIGALRM)


def _arm() -> bool:
    """Installs the alarm handler and the watchdog once (from the main thread); False when
    SIGALRM belongs to someone else."""
    global _watchdog
    if _watchdog is None:
        if signal.getsignal(signal.SIGALRM) not in (signal.SIG_DFL, None, _on_alarm):
            return False
        signal.signal(signal.SIGALRM, _on_alarm)
        _watchdog = threading.Thread(target=_watch, name="function-call-limit", daemon=True)
        _watchdog.start()
    return True


def bounded(target: Callable[..., Any], *args: Any) -> Any:
    """``target(*args)``, within the call limit when on the main thread (elsewhere, a server's
    pull and push queries, the request's own timeout bounds the answer, not the call)."""
    if _limit_s is None or threading.get_ident() != _MAIN or _started[0] or not _arm():
        return target(*args)
    _started[0] = time.monotonic()
    try:
        return target(*args)
    finally:
        _started[0] = 0.0


# -- resolution ------------------------------------------------------------------------------------


def _base(t: SqlType) -> str:
    return "DECIMAL" if isinstance(t, DecimalType) else t.sql()


def _accepts(
    param: SqlType,
    arg: SqlType,
    bound: dict[str, SqlType],
    casts: bool,
    wider: Mapping[str, tuple[str, ...]] = _WIDER,
) -> bool:
    if isinstance(arg, NullType) or isinstance(param, AnyType):
        return True
    if isinstance(param, GenericType):
        seen = bound.get(param.name)
        if seen is None:
            bound[param.name] = arg
            return True
        return seen == arg
    if isinstance(param, ArrayType):
        return isinstance(arg, ArrayType) and _accepts(
            param.element, arg.element, bound, casts, wider
        )
    if isinstance(param, MapType):
        return (
            isinstance(arg, MapType)
            and _accepts(param.key, arg.key, bound, casts, wider)
            and _accepts(param.value, arg.value, bound, casts, wider)
        )
    if param == ANY_DECIMAL or isinstance(param, DecimalType):  # any precision, as ksqlDB's
        return isinstance(arg, DecimalType) or casts and _base(arg) in ("INTEGER", "BIGINT")
    if param == arg:
        return True
    return casts and _base(param) in wider.get(_base(arg), ())


def expanded(params: Sequence[Param], count: int) -> list[Param] | None:
    """The parameter each of ``count`` arguments meets (a variadic one repeated), or None."""
    variadic = next((i for i, p in enumerate(params) if p.variadic), None)
    if variadic is None:
        return list(params) if count == len(params) else None
    fixed = len(params) - 1
    if count < fixed:
        return None
    return [
        *params[:variadic],
        *[params[variadic]] * (count - fixed),
        *params[variadic + 1 :],
    ]


def _matches(
    overload: Overload,
    args: Sequence[SqlType],
    casts: bool,
    wider: Mapping[str, tuple[str, ...]] = _WIDER,
) -> dict[str, SqlType] | None:
    params = expanded(overload.all_params, len(args))
    if params is None:
        return None
    bound: dict[str, SqlType] = {}
    for param, arg in zip(params, args, strict=True):
        if not _accepts(param.type, arg, bound, casts, wider):
            return None
    return bound


def _generic_count(t: SqlType) -> int:
    if isinstance(t, (GenericType, AnyType)):
        return 1
    if isinstance(t, ArrayType):
        return _generic_count(t.element)
    if isinstance(t, MapType):
        return _generic_count(t.key) + _generic_count(t.value)
    return 0


def _rank(overload: Overload) -> tuple[int, int, int, int, int]:
    """ksqlDB's order of candidates (greater is preferred)."""
    params = overload.all_params
    return (
        0 if overload.variadic else 1,
        len(params),
        -sum(1 for p in params if _generic_count(p.type)),
        0 if any(p.variadic and isinstance(p.type, AnyType) for p in params) else 1,
        next((i for i, p in enumerate(params) if p.variadic), -1),
    )


def _shown(args: Sequence[SqlType]) -> str:
    return ", ".join(a.sql() for a in args)


def resolve(
    function: UserFunction,
    args: Sequence[SqlType],
    wider: Mapping[str, tuple[str, ...]] = _WIDER,
) -> tuple[Overload, SqlType]:
    """The overload a call with ``args`` runs, and its result type (``wider``: the implicit
    casts, by base type).

    Raises:
        ExpressionError: no overload takes the arguments, or two fit equally well (ksqlDB's
            messages, with the valid alternatives).
    """
    alternatives = "\n".join(o.signature(function.name) for o in function.overloads)
    for casts in (False, True):
        found = [
            (overload, bound)
            for overload in function.overloads
            if (bound := _matches(overload, args, casts, wider)) is not None
        ]
        if not found:
            continue
        found.sort(key=lambda pair: _rank(pair[0]))
        if len(found) > 1 and _rank(found[-1][0]) == _rank(found[-2][0]):
            raise ExpressionError(
                f"Function '{function.name}' cannot be resolved due to ambiguous method "
                f"parameters ({_shown(args)}).\nUse CAST() to explicitly cast your parameters "
                f"to one of the supported function calls.\nValid function calls are:\n"
                f"{alternatives}\nFor detailed information on a function run: "
                "DESCRIBE FUNCTION <Function-Name>;"
            )
        overload, bound = found[-1]
        return overload, _result_type(function.name, overload, args, bound)
    raise ExpressionError(
        f"Function '{function.name}' does not accept parameters ({_shown(args)}).\n"
        f"Valid alternatives are:\n{alternatives}\n"
        "For detailed information on a function run: DESCRIBE FUNCTION <Function-Name>;"
    )


def _result_type(
    name: str, overload: Overload, args: Sequence[SqlType], bound: Mapping[str, SqlType]
) -> SqlType:
    returns = overload.returns
    if not isinstance(returns, SqlType):
        try:
            found = returns(list(args))
        except Exception as error:
            raise ExpressionError(f"Function '{name}': its result type: {error}") from error
        if isinstance(found, str):
            from headwater.engine.functions.user import parse_sql_type

            found = parse_sql_type(found, f"function {name}")
        return found
    return _substituted(name, returns, bound)


def _substituted(name: str, t: SqlType, bound: Mapping[str, SqlType]) -> SqlType:
    if isinstance(t, GenericType):
        found = bound.get(t.name)
        if found is None or isinstance(found, NullType):
            raise ExpressionError(
                f"Function '{name}': its result type {t.name} is not bound by the arguments"
            )
        return found
    if isinstance(t, ArrayType):
        return ArrayType(_substituted(name, t.element, bound))
    if isinstance(t, MapType):
        return MapType(_substituted(name, t.key, bound), _substituted(name, t.value, bound))
    if t == ANY_DECIMAL or isinstance(t, AnyType):
        raise ExpressionError(
            f"Function '{name}' returns {t.sql()} without a precise type: declare returns="
        )
    return t


# -- conversions between the engine's values and Python's ------------------------------------------

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)


def _identity(value: Any) -> Any:
    return value


def to_python(t: SqlType, param: SqlType) -> Callable[[Any], Any]:
    """Engine value of type ``t`` -> what a parameter of type ``param`` receives (temporal
    values as datetime objects, widened numbers as the wider Python type)."""
    if t == DATE:
        return lambda days: _EPOCH_DATE + dt.timedelta(days=days)
    if t == TIME:
        return lambda ms: (_EPOCH + dt.timedelta(milliseconds=ms)).time()
    if t == TIMESTAMP:
        return lambda ms: _EPOCH + dt.timedelta(milliseconds=ms)
    if t in (INTEGER, BIGINT) and param == DOUBLE:
        return float
    if t in (INTEGER, BIGINT) and (param == ANY_DECIMAL or isinstance(param, DecimalType)):
        return Decimal
    if isinstance(t, DecimalType) and param == DOUBLE:
        return float
    if isinstance(t, ArrayType) and _needs(t.element):
        inner = to_python(t.element, t.element)
        return lambda values: [None if v is None else inner(v) for v in values]
    return _identity


def to_engine(t: SqlType) -> Callable[[Any], Any]:
    """A Python result -> the engine's value of type ``t``."""
    if t == DATE:
        return lambda d: (d - _EPOCH_DATE).days if isinstance(d, dt.date) else int(d)
    if t == TIME:
        return _time_ms
    if t == TIMESTAMP:
        return _timestamp_ms
    if t == DOUBLE:
        return float
    if t in (INTEGER, BIGINT):
        return _integer
    if isinstance(t, DecimalType):
        return lambda value: value if isinstance(value, Decimal) else Decimal(str(value))
    if isinstance(t, ArrayType) and _needs(t.element):
        inner = to_engine(t.element)
        return lambda values: [None if v is None else inner(v) for v in values]
    if isinstance(t, StructType):
        return _struct(t)
    return _identity


def _needs(t: SqlType) -> bool:
    return t in (DATE, TIME, TIMESTAMP, DOUBLE) or isinstance(t, (DecimalType, StructType))


def _integer(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"returned {type(value).__name__} {value!r}, not an integer")
    return value


def _time_ms(value: Any) -> int:
    if isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + (
            value.microsecond // 1000
        )
    return int(value)


def _timestamp_ms(value: Any) -> int:
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return int((value - _EPOCH) // dt.timedelta(milliseconds=1))
    return int(value)


def _struct(t: StructType) -> Callable[[Any], Any]:
    names = [f.name for f in t.fields]

    def convert(value: Any) -> Any:
        if not isinstance(value, Mapping):
            raise TypeError(f"returned {type(value).__name__}, not a mapping for {t.sql()}")
        upper = {str(k).upper(): v for k, v in value.items()}
        return {n: value.get(n, upper.get(n.upper())) for n in names}

    return convert


# -- calls -----------------------------------------------------------------------------------------


def scalar_impl(
    name: str, overload: Overload, args: Sequence[SqlType], result: SqlType
) -> Callable[..., Any]:
    """The engine's implementation of a resolved call: engine values in, engine value out; NULL
    for a NULL where the parameter does not take one, and for a call that raises (recorded). A
    vectorized function is called with arrays of one value."""
    if overload.vectorized:
        return _one_row(name, overload, args, result)
    params = expanded(overload.all_params, len(args)) or []
    inputs = [to_python(a, p.type) for a, p in zip(args, params, strict=True)]
    strict = [not p.nullable for p in params]
    output = to_engine(result)
    target = overload.target
    shown = tuple(args)

    def call(*values: Any) -> Any:
        converted: list[Any] = []
        for value, convert, required in zip(values, inputs, strict, strict=True):
            if value is None:
                if required:
                    return None
                converted.append(None)
            else:
                converted.append(convert(value))
        try:
            found = bounded(target, *converted)
            return None if found is None else output(found)
        except Exception as error:  # noqa: BLE001 - the function's fault: NULL, recorded
            _record_failure(name, shown, error)
            return None

    return call


def _one_row(
    name: str, overload: Overload, args: Sequence[SqlType], result: SqlType
) -> Callable[..., Any]:
    import pyarrow as pa

    from headwater.engine.columnar.batch import arrow_type

    types = [arrow_type(p.type) for p in overload.params]
    strict = [not p.nullable for p in overload.params]
    target = overload.target
    shown = tuple(args)

    def call(*values: Any) -> Any:
        if any(v is None and s for v, s in zip(values, strict, strict=True)):
            return None
        try:
            arrays = [pa.array([v], t) for v, t in zip(values, types, strict=True)]
            found = pa.array(bounded(target, *arrays))
            if len(found) != 1:
                raise ValueError(f"returned {len(found)} values for 1 row")
            return found[0].as_py()
        except Exception as error:  # noqa: BLE001 - the function's fault: NULL, recorded
            _record_failure(name, shown, error)
            return None

    return call


def vectorized_impl(name: str, overload: Overload, result: SqlType) -> Callable[..., Any]:
    """A vectorized function over whole columns: arrays in (cast to its parameters' types), an
    array out, NULL where a parameter that takes none gets one. Raises what the function raises
    (the caller runs the batch's rows one by one then) or ValueError for an answer of another
    length or type."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from headwater.engine.columnar.batch import arrow_type

    types = [arrow_type(p.type) for p in overload.params]
    strict = [i for i, p in enumerate(overload.params) if not p.nullable]
    target = overload.target
    result_type = arrow_type(result)

    def call(*columns: Any) -> Any:
        arrays = [c.cast(t, safe=False) for c, t in zip(columns, types, strict=True)]
        size = len(arrays[0]) if arrays else 0
        found = bounded(target, *arrays)
        if not isinstance(found, (pa.Array, pa.ChunkedArray)):
            found = pa.array(found)
        if isinstance(found, pa.ChunkedArray):
            found = found.combine_chunks()
        if len(found) != size:
            raise ValueError(f"{name} returned {len(found)} values for {size} rows")
        found = found.cast(result_type)  # safe: a value the type cannot hold raises
        for i in strict:
            found = pc.if_else(pc.is_null(arrays[i]), pa.nulls(size, found.type), found)
        return found

    return call


def table_impl(
    name: str, overload: Overload, args: Sequence[SqlType], element: SqlType
) -> Callable[[Sequence[Any]], list[Any]]:
    """A resolved table function call: the argument values -> its rows' values (none when it
    raises, recorded)."""
    params = expanded(overload.all_params, len(args)) or []
    inputs = [to_python(a, p.type) for a, p in zip(args, params, strict=True)]
    strict = [not p.nullable for p in params]
    output = to_engine(element)
    target = overload.target
    shown = tuple(args)

    def rows(values: Sequence[Any]) -> list[Any]:
        converted = []
        for value, convert, required in zip(values, inputs, strict, strict=True):
            if value is None and required:
                return []
            converted.append(None if value is None else convert(value))
        try:
            found = bounded(target, *converted)
            return [None if v is None else output(v) for v in (found or ())]
        except Exception as error:  # noqa: BLE001 - the function's fault: no rows, recorded
            _record_failure(name, shown, error)
            return []

    return rows


class UserAggregate:
    """A resolved user aggregate call, in the shape of `aggregates.Udaf`'s callables. Pickles
    when its class does (its module is loaded by the same name in every process)."""

    def __init__(
        self,
        name: str,
        overload: Overload,
        columns: Sequence[SqlType],
        init_values: Sequence[Any],
        result: SqlType,
    ) -> None:
        self.name = name
        self.instance = overload.target(*init_values)
        params = expanded(overload.params, len(columns)) or []
        self._inputs = [to_python(a, p.type) for a, p in zip(columns, params, strict=True)]
        self._strict = [not p.nullable for p in params]
        self._output = to_engine(result)
        self._shown = tuple(columns)

    def _args(self, values: tuple[Any, ...]) -> list[Any] | None:
        found: list[Any] = []
        for value, convert, required in zip(values, self._inputs, self._strict, strict=True):
            if value is None:
                if required:
                    return None
                found.append(None)
            else:
                found.append(convert(value))
        return found

    def initial(self) -> Any:
        """A group's first state."""
        return bounded(self.instance.initialize)

    def add(self, state: Any, values: tuple[Any, ...], order: Any = None) -> Any:
        """The state with one row added (unchanged when the function raises, recorded)."""
        args = self._args(values)
        if args is None:
            return state
        try:
            return bounded(self.instance.aggregate, state, *args)
        except Exception as error:  # noqa: BLE001 - the function's fault: recorded
            _record_failure(self.name, self._shown, error)
            return state

    def undo(self, state: Any, values: tuple[Any, ...]) -> Any:
        """The state with one row taken away."""
        args = self._args(values)
        if args is None:
            return state
        try:
            return bounded(self.instance.undo, state, *args)
        except Exception as error:  # noqa: BLE001 - the function's fault: recorded
            _record_failure(self.name, self._shown, error)
            return state

    def merge(self, a: Any, b: Any) -> Any:
        """Two sessions' states as one."""
        return bounded(self.instance.merge, a, b)

    def result(self, state: Any) -> Any:
        """The value a group's state gives (NULL when ``map`` raises, recorded)."""
        try:
            found = bounded(self.instance.map, state)
            return None if found is None else self._output(found)
        except Exception as error:  # noqa: BLE001 - the function's fault: recorded
            _record_failure(self.name, self._shown, error)
            return None


def split_aggregate_args(overload: Overload, count: int) -> tuple[int, int]:
    """How many of a call's ``count`` arguments are columns, and how many literals."""
    params = expanded(overload.all_params, count) or []
    extra = count - len(overload.all_params)  # the variadic parameter's extra arguments
    columns = len(overload.params)
    if any(p.variadic for p in overload.params):
        columns += extra
    return columns, len(params) - columns


__all__ = [
    "CallTimeout",
    "FunctionNames",
    "UserAggregate",
    "UserFunction",
    "bounded",
    "call_limit_ms",
    "expanded",
    "failures_pending",
    "install",
    "installed",
    "lookup",
    "resolve",
    "scalar_impl",
    "set_call_limit",
    "split_aggregate_args",
    "table_impl",
    "take_failures",
    "to_engine",
    "to_python",
    "vectorized_impl",
]
