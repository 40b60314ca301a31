"""ksqlDB's JSON objects to columns and back, a batch at a time. Pure.

Reading: each value is parsed as `_json.loads` parses it (orjson, with the careful path for what
orjson refuses) and its fields are found as `_json.object_reader` finds them (exact name, else the
upper-cased JSON name, the last of equal names winning); a column then becomes an Arrow array in
one step when Arrow's inferred type proves every value is already the column's (`batch.to_column`),
and goes value by value through the per-record decoder otherwise (strings of digits into an
INTEGER, fractions into a DECIMAL, ...). A record the per-record reader would refuse (not an object,
a value that does not fit its column) is reported by index, for the per-record path to skip and
report with its own message.

Writing: a value column becomes one JSON fragment per row (INTEGER and BIGINT as Arrow's decimal
text, BOOLEAN as ``true``/``false``, STRING quoted, escaped per value only where it holds ``"``,
``\\`` or a control character, DOUBLE as Java prints it: Arrow's shortest text for
1e-3 <= |x| < 1e7, where Java and Python agree and only ``.0`` needs adding, `format_double`
otherwise; other types by the per-record encoder), and the fragments are joined with the field
names into objects by one kernel. tests/engine/test_columnar_json.py holds the text equal to the
per-record encoder's.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from headwater.engine.columnar.batch import Column, arrow_type, to_column
from headwater.engine.formats import _json as jsonfmt
from headwater.engine.functions.types import BIGINT, BOOLEAN, DOUBLE, INTEGER, STRING
from headwater.engine.values import checker
from headwater.sqlparse_ext.sqltypes import SqlType

_NEEDS_ESCAPE = r'["\\\x00-\x1f]'
_PLAIN_DOUBLE = (1e-3, 1e7)
_DIGITS = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN = b"0" * 19  # `_json.LONG_NUMBER`, in text whose digits are all 0
_SHAPES = 256  # field-name orders remembered per batch  # Java's Double.toString prints plain decimals in [1e-3, 1e7)


class JsonObjects:
    """Reads JSON object values into columns of ``columns`` (name, type), as ksqlDB reads them."""

    def __init__(self, columns: Sequence[tuple[str, SqlType]]) -> None:
        self.columns = tuple(columns)
        self._exact = any(jsonfmt.needs_exact_floats(t) for _, t in self.columns)
        self._exact_fields = tuple(n for n, t in self.columns if t != DOUBLE)
        self._decoders = tuple(jsonfmt.decoder(t) for _, t in self.columns)

    def read(self, values: Sequence[bytes]) -> tuple[dict[str, Column], dict[int, str]]:
        """The columns of ``values`` (never None: tombstones are the caller's), and the rows the
        per-record reader would refuse (index -> why): those rows hold NULL."""
        names = tuple(n for n, _ in self.columns)
        loads, exact, fields = jsonfmt.loads, self._exact, self._exact_fields
        # what makes `_json.loads` take its careful path, looked for once in the whole batch
        careful = _LONG_RUN in b"\0".join(values).translate(_DIGITS)
        deep = jsonfmt.MAX_NESTING_DEPTH
        getters: dict[tuple[str, ...], Callable[[dict[str, Any]], tuple[Any, ...]]] = {}
        missing = (None,) * len(names)
        rows: list[tuple[Any, ...]] = []
        bad: dict[int, str] = {}
        for i, data in enumerate(values):
            parsed: Any
            try:
                if careful:
                    parsed = loads(data, exact, fields)
                else:
                    try:
                        parsed = orjson.loads(data)
                    except orjson.JSONDecodeError:
                        parsed = loads(data, exact, fields)
                    else:
                        # nesting deeper than `deep` takes more than `deep` bytes of brackets
                        if len(data) > deep and data.count(b"[") + data.count(b"{") > deep:
                            parsed = loads(data, exact, fields)
            except Exception as exc:  # noqa: BLE001 - the per-record path reports it
                parsed = exc
            if type(parsed) is not dict:
                bad[i] = "not a JSON object"
                rows.append(missing)
                continue
            shape = tuple(parsed)
            get = getters.get(shape)
            if get is None:
                if len(getters) >= _SHAPES:  # records of ever new field names: bounded
                    getters.clear()
                get = getters[shape] = _getter(shape, names)
            rows.append(get(parsed))
        raw = [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in names]
        out: dict[str, Column] = {}
        slow: list[int] = []
        for c, (name, t) in enumerate(self.columns):
            if arrow_type(t) is not None:
                fast, wrong = to_column(raw[c], t)
                if not wrong:
                    out[name] = fast
                    continue
            slow.append(c)
        if exact and not careful and slow:
            # `_json.loads` parses a record again, with exact fractions, when a field other than
            # a DOUBLE's holds a fraction (a column read in one step above held none)
            again = {i for c in slow if names[c] in fields for i in _floats(raw[c])}
            for i in sorted(again):
                exact_row = _getter(tuple(p := loads(values[i], exact, fields)), names)(p)
                for c in slow:
                    raw[c][i] = exact_row[c]
        for c in slow:
            name, t = self.columns[c]
            out[name] = self._column(name, t, self._decoders[c], raw[c], bad)
        return {name: out[name] for name, _ in self.columns}, bad

    @staticmethod
    def _column(name: str, t: SqlType, decode: Any, raw: list[Any], bad: dict[int, str]) -> Column:
        values: list[Any] = []
        for i, v in enumerate(raw):
            if i in bad:
                values.append(None)
                continue
            try:
                values.append(decode(v, name))
            except Exception as exc:  # noqa: BLE001 - the per-record path reports it
                bad[i] = str(exc)
                values.append(None)
        column, wrong = to_column(values, t)
        for i, why in wrong.items():
            bad.setdefault(i, why)
        return column


def _getter(
    shape: tuple[str, ...], names: tuple[str, ...]
) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """For objects whose fields are ``shape`` (in order): their values of ``names``, each found
    as `object_reader` finds it (the exact name, else the last field upper-cased to it)."""
    keys: list[str | None] = []
    for name in names:
        if name in shape:
            keys.append(name)
        else:
            keys.append(next((k for k in reversed(shape) if k.upper() == name), None))
    if all(k is not None for k in keys) and len(keys) > 1:
        return operator.itemgetter(*keys)
    return lambda obj: tuple([obj.get(k) if k is not None else None for k in keys])


def _floats(column: list[Any]) -> list[int]:
    """The rows whose value holds a fraction (parsed as float) anywhere."""
    return [
        i
        for i, v in enumerate(column)
        if type(v) is float or (type(v) in (dict, list) and jsonfmt.has_float(v))
    ]


def json_fragments(column: Column, sql_type: SqlType) -> tuple[pa.Array, dict[int, str]]:
    """Each row's value of ``column`` as ksqlDB's JSON text (a string array without NULLs), and
    the rows the per-record writer would refuse (index -> why)."""
    if isinstance(column, list) or arrow_type(sql_type) is None:
        return _per_value(list(column) if not isinstance(column, list) else column, sql_type)
    if sql_type in (INTEGER, BIGINT):
        text = column.cast(pa.string())
    elif sql_type == BOOLEAN:
        text = pc.if_else(column, "true", "false")
    elif sql_type == STRING:
        text = _strings(column)
    elif sql_type == DOUBLE:
        text = _doubles(column)
    else:  # pragma: no cover - arrow_type covers exactly the types above
        raise TypeError(sql_type)
    return pc.fill_null(text, "null"), {}


def json_objects(names: Sequence[str], fragments: Sequence[pa.Array]) -> pa.Array:
    """Rows of JSON objects (binary) with fields ``names`` holding ``fragments``, in that order,
    written as the per-record `object_encoder` writes them."""
    parts: list[Any] = []
    for i, (name, fragment) in enumerate(zip(names, fragments, strict=True)):
        parts.append(("{" if i == 0 else ",") + jsonfmt.encode_string(name) + ":")
        parts.append(fragment)
    parts.append("}" if names else "{}")
    if not names:
        return pa.array([b"{}"], pa.binary())  # pragma: no cover - a query has value columns
    joined = pc.binary_join_element_wise(*parts, "")
    return joined.cast(pa.binary())


def _strings(column: pa.Array) -> pa.Array:
    quoted = pc.binary_join_element_wise('"', column, '"', "")
    escape = pc.match_substring_regex(column, _NEEDS_ESCAPE)
    if not pc.any(escape).as_py():
        return quoted
    values = column.to_pylist()
    texts = quoted.to_pylist()
    for i, flagged in enumerate(escape.to_pylist()):
        if flagged:
            texts[i] = jsonfmt.encode_string(values[i])
    return pa.array(texts, pa.string())


def _doubles(column: pa.Array) -> pa.Array:
    magnitude = pc.abs(column)
    plain = pc.and_(
        pc.greater_equal(magnitude, _PLAIN_DOUBLE[0]), pc.less(magnitude, _PLAIN_DOUBLE[1])
    )
    text = column.cast(pa.string())
    whole = pc.invert(pc.match_substring(text, "."))
    text = pc.if_else(whole, pc.binary_join_element_wise(text, ".0", ""), text)
    if pc.all(pc.fill_null(plain, True)).as_py():
        return text
    values = column.to_pylist()
    texts = text.to_pylist()
    for i, fits in enumerate(plain.to_pylist()):
        if fits is False:
            texts[i] = jsonfmt.encoder(DOUBLE)(values[i])
    return pa.array(texts, pa.string())


def _per_value(values: list[Any], sql_type: SqlType) -> tuple[pa.Array, dict[int, str]]:
    check, encode = checker(sql_type), jsonfmt.encoder(sql_type)
    texts: list[str] = []
    bad: dict[int, str] = {}
    for i, v in enumerate(values):
        try:
            texts.append(encode(check(v, "")))
        except Exception as exc:  # noqa: BLE001 - the per-record path reports it
            bad[i] = str(exc)
            texts.append("null")
    try:
        return pa.array(texts, pa.string()), bad
    except (pa.ArrowException, UnicodeError):  # text Arrow cannot hold (a lone surrogate)
        kept = []
        for i, text in enumerate(texts):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                bad[i] = "text cannot be written as UTF-8"
                text = "null"
            kept.append(text)
        return pa.array(kept, pa.string()), bad
