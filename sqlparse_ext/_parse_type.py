"""Parsing of ksqlDB types into sqlglot ``DataType`` nodes.

Pure: no I/O. ksqlDB types: BOOLEAN, INT/INTEGER, BIGINT, DOUBLE, DECIMAL(p, s), STRING/VARCHAR,
BYTES, DATE, TIME, TIMESTAMP, ARRAY<T>, MAP<K, V>, STRUCT<name T, ...> and custom type names
(CREATE TYPE). A base type may carry parameters (``VARCHAR(STRING)``), kept as written.
"""

from __future__ import annotations

from sqlglot import TokenType, exp

from headwater.sqlparse_ext._parse_common import NAME_TOKENS, CommonParser

#: ksqlDB's primitive type names and the sqlglot type each maps to.
PRIMITIVE_TYPES: dict[str, exp.DType] = {
    "BOOLEAN": exp.DType.BOOLEAN,
    "INT": exp.DType.INT,
    "INTEGER": exp.DType.INT,
    "BIGINT": exp.DType.BIGINT,
    "DOUBLE": exp.DType.DOUBLE,
    "STRING": exp.DType.VARCHAR,
    "VARCHAR": exp.DType.VARCHAR,
    "BYTES": exp.DType.VARBINARY,
    "DATE": exp.DType.DATE,
    "TIME": exp.DType.TIME,
    "TIMESTAMP": exp.DType.TIMESTAMP,
}


class TypeParser(CommonParser):
    """``type`` of ksqlDB's grammar."""

    def _parse_ksql_type(self) -> exp.DataType:
        """One type, e.g. ``MAP<STRING, ARRAY<DECIMAL(4, 2)>>``."""
        token = self._curr
        if token.token_type not in NAME_TOKENS:
            self._expected("a type")
        name = token.text.upper()
        quoted = token.token_type == TokenType.IDENTIFIER
        self._advance()
        if not quoted:
            if name == "ARRAY":
                return self._parse_nested(exp.DType.ARRAY, 1)
            if name == "MAP":
                return self._parse_nested(exp.DType.MAP, 2)
            if name == "STRUCT":
                return self._parse_struct_type()
            if name == "DECIMAL":
                return self._parse_decimal()
            primitive = PRIMITIVE_TYPES.get(name)
            if primitive is not None:
                params = self._parse_type_params()
                return self.expression(
                    exp.DataType(this=primitive, expressions=params or None), token
                )
        udt = exp.Identifier(this=token.text, quoted=quoted)
        return self.expression(exp.DataType(this=exp.DType.USERDEFINED, kind=udt), token)

    def _parse_nested(self, kind: exp.DType, arity: int) -> exp.DataType:
        """``ARRAY<T>`` or ``MAP<K, V>``."""
        label = "ARRAY" if kind == exp.DType.ARRAY else "MAP"
        self._expect(TokenType.LT, f"'<' after {label}")
        inner = [self._parse_ksql_type()]
        while len(inner) < arity:
            self._expect(TokenType.COMMA, f"',' between the key and value types of {label}")
            inner.append(self._parse_ksql_type())
        self._expect(TokenType.GT, f"'>' to close {label}<...>")
        return exp.DataType(this=kind, expressions=inner, nested=True)

    def _parse_struct_type(self) -> exp.DataType:
        """``STRUCT<name T, ...>`` (possibly empty)."""
        fields: list[exp.Expr] = []
        if self._match(TokenType.NEQ) and self._prev.text == "<>":  # STRUCT<>: no fields
            return exp.DataType(this=exp.DType.STRUCT, expressions=fields, nested=True)
        self._expect(TokenType.LT, "'<' after STRUCT")
        if not self._match(TokenType.GT):
            while True:
                name = self._parse_name("a field name")
                fields.append(exp.ColumnDef(this=name, kind=self._parse_ksql_type()))
                if not self._match(TokenType.COMMA):
                    break
            self._expect(TokenType.GT, "',' or '>' to close STRUCT<...>")
        return exp.DataType(this=exp.DType.STRUCT, expressions=fields, nested=True)

    def _parse_decimal(self) -> exp.DataType:
        """``DECIMAL(precision, scale)``."""
        self._expect(TokenType.L_PAREN, "'(' after DECIMAL")
        precision = self._parse_integer("the precision of DECIMAL")
        self._expect(TokenType.COMMA, "',' then the scale of DECIMAL")
        scale = self._parse_integer("the scale of DECIMAL")
        self._expect(TokenType.R_PAREN, "')' to close DECIMAL(...)")
        params = [exp.DataTypeParam(this=precision), exp.DataTypeParam(this=scale)]
        return exp.DataType(this=exp.DType.DECIMAL, expressions=params)

    def _parse_type_params(self) -> list[exp.Expr]:
        """Optional ``(param, ...)`` after a base type; a param is an integer or STRING."""
        if not self._match(TokenType.L_PAREN):
            return []
        params: list[exp.Expr] = []
        while True:
            if self._curr.token_type == TokenType.NUMBER and self._curr.text.isdigit():
                value: exp.Expr = exp.Literal.number(self._curr.text)
            elif self._is_word("STRING"):
                value = exp.var("STRING")
            else:
                self._expected(
                    "an integer or STRING type parameter", expecting=("'STRING'", "INTEGER_VALUE")
                )
            self._advance()
            params.append(exp.DataTypeParam(this=value))
            if not self._match(TokenType.COMMA):
                break
        self._expect(TokenType.R_PAREN, "',' or ')'")
        return params
