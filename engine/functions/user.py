"""Functions written in Python: how a module declares them (`udf`, `udaf`, `udtf`). Pure.

The public face is `headwater.functions`, which re-exports the decorators. A decorator reads a
function's (or class's) annotations into SQL types once, when its module is loaded, and attaches a
`Declaration` to it; `extensions` collects the declarations of the modules in the operator's
extension folder and `user_index` resolves calls against them.

Types come from the annotations, as ksqlDB's come from Java's types:

    int -> BIGINT, float -> DOUBLE, str -> STRING, bool -> BOOLEAN, bytes -> BYTES,
    decimal.Decimal -> DECIMAL (any precision: the result needs ``returns=``),
    datetime.date -> DATE, datetime.time -> TIME, datetime.datetime -> TIMESTAMP,
    list[X] -> ARRAY<X>, dict[K, V] -> MAP<K, V>, a TypeVar -> a generic type (ksqlDB's ``T``),
    typing.Any -> any type (ksqlDB's ``Object``)

or from SQL text (``params=["STRUCT<A STRING>", None]``, ``returns="DECIMAL(10, 2)"``; None keeps
the annotation), which is how INTEGER, DECIMAL(p, s) and STRUCT are declared. ``X | None`` (or an
unannotated parameter) says the function is called with NULL; a parameter annotated ``X`` gives
NULL without calling it (ksqlDB's boxed and primitive parameters). ``*args`` is variadic.
"""

from __future__ import annotations

import contextvars
import datetime as dt
import decimal
import inspect
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from headwater.engine.functions.types import (
    BIGINT,
    BOOLEAN,
    BYTES,
    DATE,
    DOUBLE,
    STRING,
    TIME,
    TIMESTAMP,
)
from headwater.sqlparse_ext.sqltypes import ArrayType, MapType, SqlType

DECLARATION = "__headwater_function__"
"""The attribute a decorator sets on what it declares."""

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=type)


class DeclarationError(Exception):
    """A function that cannot be declared as written (an annotation with no SQL type, ...)."""


@dataclass(frozen=True, slots=True)
class GenericType(SqlType):
    """A type variable (ksqlDB's ``T``): any type, the same wherever it appears in one call."""

    name: str

    def sql(self) -> str:
        """The variable's name."""
        return self.name


@dataclass(frozen=True, slots=True)
class AnyType(SqlType):
    """Any type at all, each argument its own (ksqlDB's ``Object``, as in ``Object...``)."""

    def sql(self) -> str:
        """``ANY``."""
        return "ANY"


ANY = AnyType()


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter: its name, SQL type (may hold `GenericType`s), whether it is called with
    NULL, and whether it is variadic (``*args``: any number of arguments of ``type``)."""

    name: str
    type: SqlType
    nullable: bool = True
    variadic: bool = False

    def text(self) -> str:
        """As DESCRIBE FUNCTION and error messages show it (``BIGINT x``, ``STRING... parts``)."""
        return f"{self.type.sql()}{'...' if self.variadic else ''} {self.name}".strip()


ReturnsProvider = Callable[[Sequence[SqlType]], SqlType]
"""The argument types of a call -> its result type (ksqlDB's schema provider)."""


@dataclass(frozen=True, slots=True)
class Overload:
    """One signature of a function and what computes it.

    Attributes:
        target: the Python function (scalar, table) or class (aggregate).
        params: the column parameters, in order (an aggregate's after its state).
        returns: the result type (a table function's: of each row's value), or a provider.
        init: an aggregate's literal parameters (its ``__init__``'s), after the columns.
        state: an aggregate's state type (None: opaque to SQL).
        table: an aggregate with ``undo``, usable over a TABLE.
        vectorized: a scalar function over pyarrow arrays (one call per batch).
    """

    target: Any
    params: tuple[Param, ...]
    returns: SqlType | ReturnsProvider
    description: str = ""
    init: tuple[Param, ...] = ()
    state: SqlType | None = None
    table: bool = False
    vectorized: bool = False

    @property
    def all_params(self) -> tuple[Param, ...]:
        """The columns, then the literal parameters: what a call's arguments match."""
        return (*self.params, *self.init)

    @property
    def variadic(self) -> bool:
        """Whether one of its parameters is variadic."""
        return any(p.variadic for p in self.all_params)

    def signature(self, name: str) -> str:
        """``NAME(BIGINT x, STRING... rest)``, as ksqlDB lists valid alternatives."""
        return f"{name}({', '.join(p.text() for p in self.all_params)})"

    def returns_text(self) -> str:
        """The result type's text (a provider's: ``(computed)``)."""
        return self.returns.sql() if isinstance(self.returns, SqlType) else "(computed)"


@dataclass(frozen=True, slots=True)
class Declaration:
    """What a decorator declares: one overload of the function ``name``, and its metadata."""

    kind: str  # SCALAR, AGGREGATE or TABLE
    name: str
    overload: Overload
    description: str = ""
    author: str = ""
    version: str = ""
    category: str = ""
    module: str = field(default="", compare=False)


# -- annotations to SQL types ----------------------------------------------------------------------

_PYTHON_TYPES: dict[Any, SqlType] = {
    int: BIGINT,
    float: DOUBLE,
    str: STRING,
    bool: BOOLEAN,
    bytes: BYTES,
    dt.date: DATE,
    dt.time: TIME,
    dt.datetime: TIMESTAMP,
}


class _AnyDecimal(SqlType):
    """DECIMAL of any precision and scale (a ``decimal.Decimal`` annotation)."""

    __slots__ = ()

    def sql(self) -> str:
        return "DECIMAL"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _AnyDecimal)

    def __hash__(self) -> int:
        return hash("DECIMAL")


ANY_DECIMAL: SqlType = _AnyDecimal()


def sql_type_of(annotation: Any, where: str) -> tuple[SqlType, bool]:
    """The SQL type of a Python annotation, and whether it admits None.

    Raises:
        DeclarationError: the annotation has no SQL type (``where`` names the parameter).
    """
    if annotation is inspect.Parameter.empty or annotation is Any:
        return ANY, True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) != 1:
            raise DeclarationError(f"{where}: a union of several types has no SQL type")
        inner, _ = sql_type_of(members[0], where)
        return inner, True
    if isinstance(annotation, TypeVar):
        return GenericType(annotation.__name__.upper()), False
    if annotation in _PYTHON_TYPES:
        return _PYTHON_TYPES[annotation], False
    if annotation is decimal.Decimal:
        return ANY_DECIMAL, False
    if origin in (list, Sequence, typing.Sequence) or annotation is list:
        (element,) = typing.get_args(annotation) or (Any,)
        return ArrayType(sql_type_of(element, where)[0]), False
    if origin is dict or annotation is dict:
        key, value = typing.get_args(annotation) or (str, Any)
        return MapType(sql_type_of(key, where)[0], sql_type_of(value, where)[0]), False
    raise DeclarationError(
        f"{where}: {annotation!r} has no SQL type; give it as text (params=[...] or returns=...)"
    )


def _admits_none(annotation: Any) -> bool:
    return annotation is Any or (
        typing.get_origin(annotation) in (typing.Union, types.UnionType)
        and type(None) in typing.get_args(annotation)
    )


def parse_sql_type(text: str, where: str) -> SqlType:
    """A type given as SQL text (``"STRUCT<A STRING>"``; single capital letters are generics)."""
    from headwater.sqlparse_ext.api import parse_type
    from headwater.sqlparse_ext.sqltypes import CustomType

    stripped = text.strip()
    if stripped.upper() in ("ANY", "OBJECT"):
        return ANY
    if len(stripped) == 1 and stripped.isalpha():
        return GenericType(stripped.upper())
    try:
        found = parse_type(stripped)
    except Exception as error:  # noqa: BLE001 - reported as the declaration's fault
        raise DeclarationError(f"{where}: {text!r} is not a SQL type ({error})") from None
    return _generics(found, CustomType)


def _generics(t: SqlType, custom: type) -> SqlType:
    """Single-letter custom type names (``ARRAY<T>``) read as generics."""
    if isinstance(t, custom) and len(t.name) == 1:  # type: ignore[attr-defined]
        return GenericType(t.name.upper())  # type: ignore[attr-defined]
    if isinstance(t, ArrayType):
        return ArrayType(_generics(t.element, custom))
    if isinstance(t, MapType):
        return MapType(_generics(t.key, custom), _generics(t.value, custom))
    return t


def _hints(target: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(target)
    except Exception as error:  # noqa: BLE001 - a forward reference that does not resolve
        raise DeclarationError(f"{target.__qualname__}: its annotations: {error}") from None


def _params(
    target: Callable[..., Any],
    given: Sequence[str | None] | None,
    skip: int,
    where: str,
) -> tuple[Param, ...]:
    """The SQL parameters of ``target`` (after its first ``skip`` ones: self, state)."""
    hints = _hints(target)
    signature = inspect.signature(target)
    found: list[Param] = []
    listed = list(signature.parameters.values())[skip:]
    for index, parameter in enumerate(listed):
        if parameter.kind in (parameter.KEYWORD_ONLY, parameter.VAR_KEYWORD):
            raise DeclarationError(f"{where}: keyword-only parameters cannot be called from SQL")
        annotation = hints.get(parameter.name, inspect.Parameter.empty)
        text = given[index] if given is not None and index < len(given) else None
        if text is not None:  # the SQL type as text; the annotation says only whether NULL comes
            sql_type = parse_sql_type(text, f"{where}, parameter {parameter.name}")
            nullable = annotation is inspect.Parameter.empty or _admits_none(annotation)
        else:
            sql_type, nullable = sql_type_of(annotation, f"{where}, parameter {parameter.name}")
        found.append(
            Param(
                parameter.name,
                sql_type,
                nullable,
                parameter.kind is parameter.VAR_POSITIONAL,
            )
        )
    if sum(p.variadic for p in found) > 1:
        raise DeclarationError(f"{where}: at most one variadic parameter")
    return tuple(found)


def _returns(
    target: Callable[..., Any], given: str | ReturnsProvider | None, where: str, element: bool
) -> SqlType | ReturnsProvider:
    if callable(given):
        return given
    if given is not None:
        return parse_sql_type(given, f"{where}, its result")
    annotation = _hints(target).get("return", inspect.Parameter.empty)
    if annotation is inspect.Parameter.empty:
        raise DeclarationError(f"{where}: annotate its result or give returns=")
    found, _ = sql_type_of(annotation, f"{where}, its result")
    if element:  # a table function returns a list of its rows' values
        if not isinstance(found, ArrayType):
            raise DeclarationError(f"{where}: a table function returns a list (list[X])")
        found = found.element
    return found


def _checked_name(name: str | None, target: Any) -> str:
    text = str(name or getattr(target, "__name__", "")).strip()
    if not text.replace("_", "").isalnum() or text[0].isdigit():
        raise DeclarationError(f"{text!r} is not a function name (letters, digits and _)")
    return text.upper()


def udf(
    name: str | None = None,
    *,
    description: str = "",
    author: str = "",
    version: str = "",
    category: str = "",
    params: Sequence[str | None] | None = None,
    returns: str | ReturnsProvider | None = None,
    vectorized: bool = False,
) -> Callable[[F], F]:
    """Declares a scalar function; the function itself is returned unchanged.

    Several functions declared with one name are its overloads, resolved as ksqlDB resolves
    them (an exact match first, then implicit widening INT -> BIGINT -> DECIMAL -> DOUBLE; fixed
    parameters before variadic ones). With ``vectorized=True`` the function takes one pyarrow
    array per parameter and returns an array of as many values: a persistent query that runs a
    batch at a time calls it once per batch (elsewhere, once per record with arrays of one value).
    Its parameters and result are INTEGER, BIGINT, DOUBLE, STRING or BOOLEAN, none variadic; a NULL
    reaches it only for a parameter annotated ``X | None`` (else the row's result is NULL).
    """

    def declare(target: F) -> F:
        sql_name = _checked_name(name, target)
        where = f"function {sql_name} ({target.__qualname__})"
        overload = Overload(
            target,
            _params(target, params, 0, where),
            _returns(target, returns, where, element=False),
            description or (inspect.getdoc(target) or "").split("\n", 1)[0],
            vectorized=vectorized,
        )
        if vectorized:
            _check_vectorized(overload, where)
        _attach(
            target,
            Declaration("SCALAR", sql_name, overload, description, author, version, category),
        )
        return target

    return declare


def udtf(
    name: str | None = None,
    *,
    description: str = "",
    author: str = "",
    version: str = "",
    params: Sequence[str | None] | None = None,
    returns: str | ReturnsProvider | None = None,
) -> Callable[[F], F]:
    """Declares a table function: it returns a list, and each element becomes an output row
    (``returns=`` gives the element's type, as ksqlDB's ``@Udtf(schema=)`` does)."""

    def declare(target: F) -> F:
        sql_name = _checked_name(name, target)
        where = f"table function {sql_name} ({target.__qualname__})"
        overload = Overload(
            target,
            _params(target, params, 0, where),
            _returns(target, returns, where, element=returns is None),
            description or (inspect.getdoc(target) or "").split("\n", 1)[0],
        )
        _attach(target, Declaration("TABLE", sql_name, overload, description, author, version))
        return target

    return declare


def udaf(
    name: str | None = None,
    *,
    description: str = "",
    author: str = "",
    version: str = "",
    params: Sequence[str | None] | None = None,
    init: Sequence[str | None] | None = None,
    state: str | None = None,
    returns: str | ReturnsProvider | None = None,
) -> Callable[[C], C]:
    """Declares an aggregate function: a class with ksqlDB's UDAF methods.

    ``__init__(self, *literals)`` takes the call's literal arguments (after its columns);
    ``initialize(self) -> S`` a group's first state; ``aggregate(self, state, *columns) -> S``
    adds one row; ``merge(self, a, b) -> S`` joins two session windows' states; ``map(self,
    state) -> R`` the result; ``undo(self, state, *columns) -> S``, when defined, removes a row,
    which makes the function usable over a TABLE. States must pickle (they are checkpointed).
    """

    def declare(target: C) -> C:
        sql_name = _checked_name(name, target)
        where = f"aggregate function {sql_name} ({target.__qualname__})"
        cls: Any = target
        for method in ("initialize", "aggregate", "merge", "map"):
            if not callable(getattr(target, method, None)):
                raise DeclarationError(f"{where}: it has no {method}() method")
        init_params = _params(cls.__init__, init, 1, where) if "__init__" in vars(cls) else ()
        column_params = _params(cls.aggregate, params, 2, where)
        if sum(p.variadic for p in (*column_params, *init_params)) > 1:
            raise DeclarationError(f"{where}: at most one variadic parameter in all")
        state_type: SqlType | None = None
        if state is not None:
            state_type = parse_sql_type(state, f"{where}, its state")
        else:
            annotation = _hints(cls.initialize).get("return")
            if annotation is not None:
                try:
                    state_type = sql_type_of(annotation, where)[0]
                except DeclarationError:
                    state_type = None  # a Python object: opaque to SQL
        overload = Overload(
            target,
            column_params,
            _returns(cls.map, returns, where, element=False),
            description or (inspect.getdoc(target) or "").split("\n", 1)[0],
            init=init_params,
            state=state_type,
            table=callable(getattr(target, "undo", None)),
        )
        _attach(target, Declaration("AGGREGATE", sql_name, overload, description, author, version))
        return target

    return declare


VECTOR_TYPES = frozenset({"INTEGER", "BIGINT", "DOUBLE", "STRING", "BOOLEAN"})
"""The types a vectorized function's parameters and result may have (those Arrow holds exactly)."""


def _check_vectorized(overload: Overload, where: str) -> None:
    returns = overload.returns
    if not isinstance(returns, SqlType) or returns.sql() not in VECTOR_TYPES:
        raise DeclarationError(
            f"{where}: a vectorized function returns INTEGER, BIGINT, DOUBLE, STRING or BOOLEAN"
        )
    for param in overload.params:
        if param.variadic or param.type.sql() not in VECTOR_TYPES:
            raise DeclarationError(
                f"{where}, parameter {param.name}: a vectorized function takes INTEGER, BIGINT, "
                "DOUBLE, STRING or BOOLEAN arrays, none variadic"
            )


_COLLECTING: contextvars.ContextVar[list[Declaration] | None] = contextvars.ContextVar(
    "headwater_functions_collecting", default=None
)


def _attach(target: Any, declaration: Declaration) -> None:
    setattr(target, DECLARATION, declaration)
    collected = _COLLECTING.get()
    if collected is not None:  # a module of the extension folder is being loaded
        collected.append(declaration)


def collecting(into: list[Declaration]) -> contextvars.Token[list[Declaration] | None]:
    """Every declaration made from now on (until `stop_collecting`) is appended to ``into``:
    how the loader finds overloads that share a Python name, or live inside classes."""
    return _COLLECTING.set(into)


def stop_collecting(token: contextvars.Token[list[Declaration] | None]) -> None:
    """Ends `collecting`."""
    _COLLECTING.reset(token)


def declaration_of(value: Any) -> Declaration | None:
    """The declaration a decorator attached to ``value``, if any."""
    found = getattr(value, DECLARATION, None)
    return found if isinstance(found, Declaration) else None


__all__ = [
    "ANY",
    "ANY_DECIMAL",
    "DECLARATION",
    "AnyType",
    "Declaration",
    "DeclarationError",
    "GenericType",
    "Overload",
    "Param",
    "ReturnsProvider",
    "collecting",
    "declaration_of",
    "parse_sql_type",
    "sql_type_of",
    "stop_collecting",
    "udaf",
    "udf",
    "udtf",
]
