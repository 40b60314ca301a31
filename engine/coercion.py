"""ksqlDB's coercion of user-supplied lists to one type (``CoercionUtil.coerceUserList``). Pure.

``x IN (a, b, ...)``, ``ARRAY[a, b, ...]`` and the keys and values of ``MAP(k := v, ...)`` are lists
of expressions that must share one SQL type. ksqlDB finds it in order, the first non-NULL element
setting the type and each next one widening it:

- a literal may convert both ways under ksqlDB's *lax* rules (a number to and from a string, a
  string to a boolean), any other expression only under its *strict* rules (a number to a wider
  number: INTEGER to BIGINT, DECIMAL or DOUBLE; a string to a date, time, timestamp or bytes);
- a string literal meeting a numeric type is read as the number it holds (``'4.000'`` is a
  DECIMAL(4, 3)), and one meeting a BOOLEAN must spell one (``'tr'``, a prefix of ``true``);
- an ``ARRAY[...]``, ``MAP(...)`` or ``STRUCT(...)`` constructor meeting its own kind is coerced
  element by element (a STRUCT's fields are the union of both sides' fields);
- anything else is refused: ``operator does not exist: BIGINT = STRING (VAL)``, or ``invalid input
  syntax for type INTEGER: "x"`` for a string literal that does not parse.

The elements are then converted to the common type: a literal's value is coerced, an expression is
CAST (:func:`literal_value` does the former; the compiler the latter).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from headwater.engine._bound import BoundValue
from headwater.engine._format import format_expression
from headwater.engine.errors import ExpressionError
from headwater.engine.functions.casts import cast_value
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
    is_numeric,
    wider,
)
from headwater.sqlparse_ext import expressions as hx
from headwater.sqlparse_ext.sqltypes import (
    ArrayType,
    DecimalType,
    MapType,
    SqlType,
    StructField,
    StructType,
    identifier_name,
)

TypeOf = Callable[[exp.Expr], SqlType]
"""The SQL type of an expression (NULL for a NULL literal)."""

_SAME = (BOOLEAN, INTEGER, BIGINT, DOUBLE, STRING, TIMESTAMP, TIME, DATE, BYTES)
_STRICT_WIDER = {(INTEGER, BIGINT), (INTEGER, DOUBLE), (BIGINT, DOUBLE)}
_STRICT_FROM_STRING = (TIMESTAMP, TIME, DATE, BYTES)
_LAX_TO_STRING = (BOOLEAN, INTEGER, BIGINT, DOUBLE, TIMESTAMP, TIME, DATE)
_LAX_FROM_STRING = (BOOLEAN, INTEGER, BIGINT, DOUBLE)
_INT_RANGE = 2**31
_BIGINT_RANGE = 2**63


def base_name(t: SqlType) -> str:
    """ksqlDB's base type name (``SqlBaseType``): DECIMAL, ARRAY, ... for the parameterised."""
    if isinstance(t, DecimalType):
        return "DECIMAL"
    if isinstance(t, ArrayType):
        return "ARRAY"
    if isinstance(t, MapType):
        return "MAP"
    if isinstance(t, StructType):
        return "STRUCT"
    return str(t)


def can_coerce(source: SqlType, target: SqlType, lax: bool) -> SqlType | None:
    """The type a value of ``source`` takes when coerced to ``target`` (``DefaultSqlValueCoercer
    .canCoerce``), or None when it may not be."""
    if source == target and source in _SAME:
        return target
    if (source, target) in _STRICT_WIDER:
        return target
    if is_numeric(source) and source != DOUBLE and isinstance(target, DecimalType):
        return wider(source, target)
    if isinstance(source, DecimalType) and target == DOUBLE:
        return target
    if source == STRING and target in _STRICT_FROM_STRING:
        return target
    if isinstance(source, ArrayType) and isinstance(target, ArrayType):
        element = can_coerce(source.element, target.element, lax)
        return None if element is None else ArrayType(element)
    if isinstance(source, MapType) and isinstance(target, MapType):
        key = can_coerce(source.key, target.key, lax)
        value = can_coerce(source.value, target.value, lax)
        return None if key is None or value is None else MapType(key, value)
    if isinstance(source, StructType) and isinstance(target, StructType):
        return _coerce_structs(source, target, lax)
    if lax:
        if target == STRING and (source in _LAX_TO_STRING or isinstance(source, DecimalType)):
            return target
        if source == STRING and (target in _LAX_FROM_STRING or isinstance(target, DecimalType)):
            return target
    return None


def _coerce_structs(source: StructType, target: StructType, lax: bool) -> SqlType | None:
    ours = {f.name: f.type for f in source.fields}
    theirs = {f.name: f.type for f in target.fields}
    fields = []
    for name in dict.fromkeys([*ours, *theirs]):
        if name not in ours:
            fields.append(StructField(name, theirs[name]))
        elif name not in theirs:
            fields.append(StructField(name, ours[name]))
        else:
            common = can_coerce(ours[name], theirs[name], lax)
            if common is None:
                return None
            fields.append(StructField(name, common))
    return StructType(tuple(fields))


class CoercionError(ExpressionError):
    """No common type: ksqlDB's ``operator does not exist`` (an InvalidCoercionException)."""


def _failure(node: exp.Expr, source: SqlType | None, target: SqlType) -> CoercionError:
    shown = "null" if source is None or source == NULL else str(source)
    return CoercionError(
        f"operator does not exist: {target} = {shown} ({format_expression(node)})\n"
        "Hint: You might need to add explicit type casts."
    )


def _syntax(text: str, target: SqlType) -> ExpressionError:
    return ExpressionError(f'invalid input syntax for type {base_name(target)}: "{text}".')


def is_literal(node: exp.Expr) -> bool:
    """Whether ksqlDB parses ``node`` as a literal (a cached plan's bound value was one)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Neg):
        return isinstance(node.this, exp.Literal) and not node.this.is_string
    return isinstance(node, (exp.Literal, exp.Boolean, exp.Null, BoundValue))


def _string_literal(node: exp.Expr) -> str | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Literal) and node.is_string:
        return str(node.this)
    return None


def decimal_type_of(value: Decimal) -> DecimalType:
    """ksqlDB's type of a decimal value (``DecimalUtil.fromValue``): within (-1, 1) the precision
    is the scale plus one (0.8 is DECIMAL(2, 1))."""
    if value.as_tuple().exponent > 0:  # type: ignore[operator]
        value = value.quantize(Decimal(1))
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    scale = -exponent
    if -1 < value < 1:
        return DecimalType(scale + 1, scale)
    return DecimalType(max(len(digits), scale), max(scale, 0))


def _string_number_type(text: str) -> SqlType:
    """ksqlDB's type of the number a string literal holds (``getStringNumericType``).

    Raises:
        ValueError: not a number.
    """
    try:
        number = Decimal(text.strip())
    except InvalidOperation as error:
        raise ValueError(text) from error
    if not number.is_finite():
        raise ValueError(text)
    exponent = number.as_tuple().exponent
    if not any(c in text for c in ".eE") and isinstance(exponent, int) and exponent >= 0:
        whole = int(number)
        if -_INT_RANGE < whole < _INT_RANGE - 1:
            return INTEGER
        if -_BIGINT_RANGE < whole < _BIGINT_RANGE - 1:
            return BIGINT
    return decimal_type_of(number)


def parse_boolean_exact(text: str) -> bool | None:
    """ksqlDB's ``SqlBooleans.parseBooleanExact``: a prefix of true/yes, or of false/no."""
    lowered = text.lower()
    if not lowered:
        return None
    if "true".startswith(lowered) or "yes".startswith(lowered):
        return True
    if "false".startswith(lowered) or "no".startswith(lowered):
        return False
    return None


def common_type(nodes: Sequence[exp.Expr], type_of: TypeOf) -> SqlType | None:
    """The type ksqlDB coerces ``nodes`` to, in order; None when every one is NULL.

    Raises:
        ExpressionError: ksqlDB's refusal (:class:`CoercionError` for ``operator does not
            exist``, or an ``invalid input syntax`` message).
    """
    result: SqlType | None = None
    for node in nodes:
        result = _widen(node, type_of(node), result, type_of)
    return result


def _widen(
    node: exp.Expr, source: SqlType, target: SqlType | None, type_of: TypeOf
) -> SqlType | None:
    if target is None or target == NULL:
        return None if source == NULL else source
    if source == NULL:
        return target
    inner = node
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, hx.ArrayConstructor):
        if not isinstance(target, ArrayType):
            raise _failure(inner, source, target)
        try:
            element = _structured(target.element, list(inner.expressions), type_of)
        except CoercionError as error:
            raise _failure(inner, source, target) from error
        return None if element is None else ArrayType(element)
    if isinstance(inner, hx.MapConstructor):
        if not isinstance(target, MapType):
            raise _failure(inner, source, target)
        try:
            key = _structured(target.key, [e.this for e in inner.expressions], type_of)
            value = _structured(target.value, [e.expression for e in inner.expressions], type_of)
        except CoercionError as error:
            raise _failure(inner, source, target) from error
        return None if key is None or value is None else MapType(key, value)
    if isinstance(inner, hx.StructConstructor):
        if not isinstance(target, StructType):
            raise _failure(inner, source, target)
        try:
            return _struct_constructor(inner, target, type_of)
        except CoercionError as error:
            raise _failure(inner, source, target) from error
    text = _string_literal(inner)
    if text is not None:
        if is_numeric(target):
            try:
                number = _string_number_type(text)
            except ValueError:
                raise _syntax(text, target) from None
            if number == DOUBLE or target == DOUBLE:
                return DOUBLE
            if isinstance(number, DecimalType) or isinstance(target, DecimalType):
                return wider(number, target)
            return target if can_coerce(number, target, False) else number
        if target == BOOLEAN:
            if parse_boolean_exact(text.strip()) is None:
                raise _syntax(text, target)
            return target
    lax = is_literal(inner)
    common = can_coerce(source, target, lax) or can_coerce(target, source, lax)
    if common is None:
        raise _failure(inner, source, target)
    return common


def _structured(target: SqlType, elements: list[exp.Expr], type_of: TypeOf) -> SqlType | None:
    """A constructor's elements coerced to ``target`` (``resolveStructuredCommonType``)."""
    result: SqlType | None = target
    for element in elements:
        result = _widen(element, type_of(element), result, type_of)
    return result


def _struct_constructor(
    node: hx.StructConstructor, target: StructType, type_of: TypeOf
) -> SqlType | None:
    given = {identifier_name(e.this): e.expression for e in node.expressions}
    theirs = {f.name: f.type for f in target.fields}
    fields = []
    for name in dict.fromkeys([*given, *theirs]):
        if name not in given:
            fields.append(StructField(name, theirs[name]))
            continue
        value = given[name]
        if name not in theirs:
            fields.append(StructField(name, type_of(value)))
            continue
        common = _widen(value, type_of(value), theirs[name], type_of)
        fields.append(StructField(name, common if common is not None else theirs[name]))
    return StructType(tuple(fields))


def literal_value(value: Any, source: SqlType, target: SqlType) -> Any:
    """A literal's value coerced to ``target`` under ksqlDB's lax rules (a string holding a
    number or a boolean, a number to text); None stays None.

    Raises:
        ExpressionError: the value does not fit (``invalid input syntax``).
    """
    if value is None or source == target:
        return value
    if source == STRING and target == BOOLEAN:
        parsed = parse_boolean_exact(str(value).strip())
        if parsed is None:
            raise _syntax(str(value), target)
        return parsed
    try:
        return cast_value(value, source, target)
    except EvalFailure as error:
        raise _syntax(str(value), target) from error
