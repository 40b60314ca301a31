"""The expression compiler: typing, evaluation (NULL logic included), naming, messages, INSERT."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from sqlglot import exp

from headwater.engine.errors import ExpressionError
from headwater.engine.expressions import (
    NULL,
    Scope,
    UnresolvedColumn,
    compile_expression,
    format_expression,
    resolve_type,
    select_names,
)
from headwater.engine.insert_values import coerce_value, evaluate_insert_values
from headwater.metastore.catalog import Column, CustomType, Source, SourceKind
from headwater.sqlparse_ext import InsertValues, parse_one, parse_type

TYPES = {
    "I": "INTEGER",
    "B": "BIGINT",
    "S": "STRING",
    "D": "DECIMAL(4, 2)",
    "F": "DOUBLE",
    "BO": "BOOLEAN",
    "ST": "STRUCT<`X` INTEGER, `Y` STRING>",
    "AR": "ARRAY<INTEGER>",
    "M": "MAP<STRING, INTEGER>",
    "N": "INTEGER",
    "NS": "STRING",
    "TS": "TIMESTAMP",
    "BY": "BYTES",
}
SCOPE = Scope(
    {k: parse_type(v) for k, v in TYPES.items()},
    frozenset({"T", "A"}),
    {"POINT": "STRUCT<`X` INTEGER>"},
)
ROW = {
    "I": 7,
    "B": 10,
    "S": "hello",
    "D": Decimal("1.25"),
    "F": 2.5,
    "BO": True,
    "ST": {"X": 1, "Y": "y"},
    "AR": [1, 2, 3],
    "M": {"k": 5},
    "N": None,
    "NS": None,
    "TS": 0,
    "BY": b"ab",
}


def node(text: str) -> Any:
    return parse_one(f"SELECT {text} FROM T AS A;").query.select[0]


def ev(text: str, row: dict[str, Any] | None = None) -> Any:
    return compile_expression(node(text), SCOPE).evaluate(ROW if row is None else row)


def typ(text: str) -> str:
    return str(compile_expression(node(text), SCOPE).type)


@pytest.mark.parametrize(
    ("text", "type_", "value"),
    [
        ("1", "INTEGER", 1),
        ("-2147483648", "INTEGER", -2147483648),
        ("2147483648", "BIGINT", 2147483648),
        ("10000000000", "BIGINT", 10**10),
        ("1.5", "DECIMAL(2, 1)", Decimal("1.5")),
        ("0.05", "DECIMAL(3, 2)", Decimal("0.05")),
        ("1.5e0", "DOUBLE", 1.5),
        ("'it''s'", "STRING", "it's"),
        ("TRUE", "BOOLEAN", True),
        ("NULL", "null", None),
        ("I + B", "BIGINT", 17),
        ("I + 1.5", "DECIMAL(12, 1)", Decimal("8.5")),
        ("I + F", "DOUBLE", 9.5),
        ("D + D", "DECIMAL(5, 2)", Decimal("2.50")),
        ("D * D", "DECIMAL(9, 4)", Decimal("1.5625")),
        ("D / 4", "DECIMAL(15, 13)", Decimal("0.3125000000000")),
        ("-7 / 2", "INTEGER", -3),
        ("-7 % 2", "INTEGER", -1),
        ("I / 0", "INTEGER", None),
        ("F / 0", "DOUBLE", float("inf")),
        ("2147483647 + 1", "INTEGER", -2147483648),
        ("S + '!'", "STRING", "hello!"),
        ("-I", "INTEGER", -7),
        ("N + 1", "INTEGER", None),
        ("ST->Y", "STRING", "y"),
        ("AR[1]", "INTEGER", 1),
        ("AR[-1]", "INTEGER", 3),
        ("AR[0]", "INTEGER", None),
        ("AR[9]", "INTEGER", None),
        ("M['k']", "INTEGER", 5),
        ("M['z']", "INTEGER", None),
        ("T.I", "INTEGER", 7),
        ("A.S", "STRING", "hello"),
        ("ARRAY[1, 2]", "ARRAY<INTEGER>", [1, 2]),
        ("ARRAY[1, 2.5e0]", "ARRAY<DOUBLE>", [1.0, 2.5]),
        ("MAP('a' := I)", "MAP<STRING, INTEGER>", {"a": 7}),
        ("STRUCT(Q := 1, `r` := S)", "STRUCT<`Q` INTEGER, `r` STRING>", {"Q": 1, "r": "hello"}),
    ],
)
def test_engine_expressions_types_and_values(text: str, type_: str, value: Any) -> None:
    compiled = compile_expression(node(text), SCOPE)
    assert (str(compiled.type), compiled.evaluate(ROW)) == (type_, value)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("I = 7", True),
        ("I <> 7", False),
        ("I >= 7.0", True),
        ("F < D", False),
        ("S > 'a'", True),
        # ksqlDB's comparisons are false, never NULL, when a side is NULL (codegen and interpreter)
        ("N = 1", False),
        ("N <> 1", False),
        ("N IS NULL", True),
        ("N IS NOT NULL", False),
        ("N IS DISTINCT FROM 1", True),
        ("N IS NOT DISTINCT FROM NULL", True),
        ("BO AND N = 1", False),
        ("NOT BO AND N = 1", False),
        ("BO OR N = 1", True),
        ("NOT BO OR N = 1", False),
        ("NOT (N = 1)", True),
        ("I BETWEEN 1 AND 7", True),
        ("I NOT BETWEEN 1 AND 6", True),
        ("N BETWEEN 1 AND 2", False),
        ("I BETWEEN N AND 5", False),
        ("I BETWEEN N AND 9", False),
        ("I IN (1, 7)", True),
        ("I IN (1, 2)", False),
        ("F = 2.5", True),  # DOUBLE and DECIMAL compare as Java's BigDecimal.valueOf(double)
        ("1.1E0 = 1.1", True),  # the double nearest 1.1 reads as "1.1", as in Java
        ("0.1E0 + 0.2E0 = 0.3", False),  # 0.30000000000000004
        ("F IS DISTINCT FROM 2.50", False),
        ("F BETWEEN 2.4 AND 2.5", True),
        ("I IN (1, NULL)", False),  # ksqlDB's IN is never NULL: NULLs never match
        ("I IN (7, NULL)", True),
        ("I NOT IN (1, NULL)", True),
        ("N IN (1)", False),
        ("I IN (7.0, '8')", True),  # coerced to one type: DECIMAL, as ksqlDB does
        ("I IN (1, '7')", True),
        ("I IN (B - 3, 0)", True),
        ("AR IN (ARRAY[1, 2, 3])", True),
        ("S LIKE 'h%o'", True),
        ("S LIKE 'h_llo'", True),
        ("S LIKE 'H%'", False),
        ("S NOT LIKE '%z%'", True),
        ("S LIKE '%.%'", False),
        ("NS LIKE 'x'", None),
        ("'a%b' LIKE 'a!%b' ESCAPE '!'", True),
        ("'axb' LIKE 'a!%b' ESCAPE '!'", False),
        ("ST = STRUCT(X := 1, Y := 'y')", True),
        ("BY = BY", True),
    ],
)
def test_engine_expressions_predicates(text: str, value: Any) -> None:
    assert ev(text) is value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("CASE WHEN I > 5 THEN 'big' ELSE 'small' END", "big"),
        ("CASE WHEN N > 5 THEN 'big' END", None),
        ("CASE I WHEN 1 THEN 'one' WHEN 7 THEN 'seven' ELSE 'many' END", "seven"),
        ("CASE WHEN I > 5 THEN 1.5 ELSE 2 END", Decimal("1.5")),
        ("CAST(S AS INT)", None),
        ("CAST('12' AS INT)", 12),
        ("CAST('1970-01' AS DATE)", 0),  # ksqlDB completes a partial date
        ("CAST('1970-01-10' AS DATE)", 9),
        ("CAST('00:01:02.5' AS TIME)", 62_500),
        ("CAST('1970-01-01T00:00:01' AS TIMESTAMP)", 1000),
        ("CAST('1970-01-01T01' AS TIMESTAMP)", 3_600_000),  # a partial time, zeros filled
        ("CAST(S AS DATE)", None),  # 'hello' is no date: NULL, logged
        ("CAST(' 12 ' AS BIGINT)", 12),
        ("CAST(F AS INT)", 2),
        ("CAST(-2.7e0 AS INT)", -2),
        ("CAST(I AS DOUBLE)", 7.0),
        ("CAST(F AS DECIMAL(4, 1))", Decimal("2.5")),
        ("CAST(D AS DECIMAL(3, 1))", Decimal("1.3")),
        ("CAST(I AS STRING)", "7"),
        ("CAST(F AS STRING)", "2.5"),
        ("CAST(1e10 AS STRING)", "1.0E10"),
        ("CAST(BO AS STRING)", "true"),
        ("CAST('yes' AS BOOLEAN)", True),
        ("CAST(D AS STRING)", "1.25"),
        ("CAST(TS AS STRING)", "1970-01-01T00:00:00.000"),
        ("CAST('1970-01-02' AS DATE)", 1),
        ("CAST('00:00:01.5' AS TIME)", 1500),
        ("CAST('1970-01-01T00:00:01Z' AS TIMESTAMP)", 1000),
        ("CAST(NULL AS POINT)", None),
        ("ABS(-I)", 7),
        ("ABS(D - 2)", Decimal("0.75")),
        ("ROUND(F)", 3),
        ("ROUND(-2.5e0)", -2),
        ("ROUND(D)", Decimal(1)),
        ("ROUND(D, 1)", Decimal("1.30")),
        ("ROUND(F, 0)", 3.0),
        ("FLOOR(D)", Decimal(1)),
        ("CEIL(F)", 3.0),
        ("FLOOR(I)", 7),
        ("UCASE(S)", "HELLO"),
        ("LCASE('AB')", "ab"),
        ("LEN(S)", 5),
        ("LEN(NS)", None),
        ("CONCAT(S, NULL, '!')", "hello!"),
        ("CONCAT(NS)", ""),
        ("SUBSTRING(S, 2, 3)", "ell"),
        ("SUBSTRING(S, -2)", "lo"),
        ("SUBSTRING(S, 0, 2)", "he"),
        ("SUBSTRING(S, 4, 10)", "lo"),
        ("SUBSTRING(S, 2, -1)", ""),
        ("TRIM('  x ')", "x"),
        ("REPLACE(S, 'l', 'L')", "heLLo"),
        ("COALESCE(N, NULL, 3)", 3),
        ("COALESCE(N, 1.5)", Decimal("1.5")),
        ("IFNULL(N, I)", 7),
        ("IFNULL(S, 'x')", "hello"),
        ("ARRAY_LENGTH(AR)", 3),
        (
            "TIMESTAMPTOSTRING(1600000000123, 'yyyy-MM-dd''T''HH:mm:ss.SSS')",
            "2020-09-13T12:26:40.123",
        ),
        ("TIMESTAMPTOSTRING(0, 'yyyy-MM-dd HH:mm', 'America/New_York')", "1969-12-31 19:00"),
        ("STRINGTOTIMESTAMP('2020-09-13 12:26:40', 'yyyy-MM-dd HH:mm:ss')", 1600000000000),
    ],
)
def test_engine_expressions_case_cast_functions(text: str, value: Any) -> None:
    result = ev(text)
    assert result == value and type(result) is type(value)


def test_engine_expressions_constants_fold_and_references() -> None:
    folded = compile_expression(node("CAST('12' AS INT) + 1"), SCOPE)
    assert folded.constant and folded.references == frozenset() and folded.evaluate({}) == 13
    column = compile_expression(node("T.I + ST->X"), SCOPE)
    assert not column.constant and column.references == frozenset({"I", "ST"})
    assert column.text == "(T.I + ST->X)"


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("I", "I"),
        ("T.I", "I"),
        ("I AS `lower`", "lower"),
        ("ST->X", "X"),
        ("I + 1", "KSQL_COL_0"),
    ],
)
def test_engine_expressions_names(text: str, name: str) -> None:
    assert compile_expression(node(text), SCOPE).name == name


def test_engine_expressions_select_names_follow_ksqldb() -> None:
    items = parse_one("SELECT I, I + 1, ST->X, UCASE(S), ST->X, 2 AS KSQL_COL_2, 3 FROM T;")
    assert select_names(items.query.select) == [
        "I",
        "KSQL_COL_0",
        "X",
        "KSQL_COL_1",
        "X_1",
        "KSQL_COL_2",
        "KSQL_COL_3",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("X", "Column 'X' cannot be resolved."),
        ("FOO(I)", "Can't find any functions with the name 'FOO'"),
        ("ABS(S)", "Function 'ABS' does not accept parameters (STRING)."),
        ("COALESCE()", "Function 'COALESCE' does not accept parameters ()"),
        ("I = 'x'", "Cannot compare I (INTEGER) to 'x' (STRING) with EQUAL."),
        ("S >= 10", "Cannot compare S (STRING) to 10 (INTEGER) with GREATER_THAN_OR_EQUAL."),
        ("AR < AR", "Cannot compare AR (ARRAY<INTEGER>) to AR (ARRAY<INTEGER>) with LESS_THAN."),
        (
            "I = NULL",
            (
                "Comparison with NULL not supported: INTEGER = NULL\n"
                "Use 'IS NULL' or 'IS NOT NULL' instead."
            ),
        ),
        ("NULL <> NULL", "Comparison with NULL not supported: NULL <> NULL"),
        (
            "1 + NULL",
            (
                "Error processing expression: (1 + null). Arithmetic on types INTEGER and null "
                "are not supported."
            ),
        ),
        ("5.0 / NULL", "Arithmetic on types DECIMAL(2, 1) and null are not supported."),
        (
            "MAP(1:='cat') + NULL",
            (
                "Error processing expression: (MAP(1:='cat') + null). Arithmetic on "
                "types MAP<INTEGER, STRING> and null are not supported."
            ),
        ),
        (
            "TRUE + 1.5",
            (
                "Error processing expression: (true + 1.5). Unsupported arithmetic types. "
                "BOOLEAN DECIMAL"
            ),
        ),
        (
            "I LIKE 'x'",
            ("The column type for Like condition must be VARCHAR. The column type is INTEGER"),
        ),
        ("S LIKE 12", "Like condition must be between strings"),
        ("I IN (1, 'x')", 'Invalid Predicate: invalid input syntax for type INTEGER: "x".'),
        ("I IN (1, TRUE)", "Invalid Predicate: operator does not exist: INTEGER = BOOLEAN (true)"),
        ("I IN (10, S)", "Invalid Predicate: operator does not exist: INTEGER = STRING (S)"),
        ("CAST('x' AS INT)", 'invalid input syntax for type INTEGER: "x".'),
        ("CAST(S AS ARRAY<INT>)", "Cast of STRING to ARRAY<INTEGER> is not supported"),
        ("CAST(I AS NOPE)", "Unknown type: NOPE"),
        ("ARRAY[]", "Array constructor cannot be empty."),
        ("ARRAY[NULL]", "Cannot construct an array with all NULL elements"),
        ("MAP(NULL := 1)", "Cannot construct a map with all NULL keys"),
        ("MAP('a' := NULL)", "Cannot construct a map with all NULL values"),
        ("STRUCT(A := 1, A := 2)", "Duplicate field names found in STRUCT"),
        ("CASE WHEN BO THEN NULL END", "Invalid Case expression. All case branches have NULL type"),
        ("CASE WHEN BO THEN 1 ELSE 'x' END", "Invalid Case expression."),
        ("ST->Z", "Could not find field 'Z' in 'ST'."),
        ("I AND BO", "Operator AND requires BOOLEAN operands"),
        ("AR['x']", "Array index must be INTEGER"),
        ("CAST(99.5 AS DECIMAL(2, 0))", "Numeric field overflow"),
    ],
)
def test_engine_expressions_errors(text: str, message: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        compile_expression(node(text), SCOPE)
    assert message in caught.value.message and caught.value.error_code == 40001


def test_engine_expressions_refuse_a_qualifier_the_scope_lacks() -> None:
    # the parser refuses these in statements; a tree built otherwise meets the same rule
    with pytest.raises(ExpressionError) as caught:
        compile_expression(exp.column("I", table="Q"), SCOPE)
    assert caught.value.message == "'Q' is not a valid stream/table name or alias."


def test_engine_expressions_unresolved_column_names_the_column() -> None:
    with pytest.raises(UnresolvedColumn) as caught:
        compile_expression(node("A.NOPE"), SCOPE)
    assert caught.value.column == "A.NOPE"


def test_engine_expressions_resolve_type_of_custom_types() -> None:
    custom = {"P": CustomType("P", "STRUCT<`X` INTEGER>"), "L": "ARRAY<P>"}
    assert str(resolve_type("MAP<STRING, L>", custom)) == "MAP<STRING, ARRAY<STRUCT<`X` INTEGER>>>"


@pytest.mark.parametrize(
    ("value", "source", "target", "result"),
    [
        (1, "INTEGER", "BIGINT", 1),
        (1, "INTEGER", "DOUBLE", 1.0),
        (1, "INTEGER", "DECIMAL(4, 2)", Decimal("1.00")),
        (Decimal("0.05"), "DECIMAL(2, 2)", "DECIMAL(12, 2)", Decimal("0.05")),
        ("1.5", "STRING", "DECIMAL(3, 1)", Decimal("1.5")),
        ("1970-01-01T00:00:01", "STRING", "TIMESTAMP", 1000),
        ([1], "ARRAY<INTEGER>", "ARRAY<BIGINT>", [1]),
        ({"A": 1}, "STRUCT<`A` INTEGER>", "STRUCT<`A` DOUBLE, `B` STRING>", {"A": 1.0, "B": None}),
        # a field the column's STRUCT lacks is dropped (ksqlDB's coerceToStruct)
        ({"A": 1, "Z": "x"}, "STRUCT<`A` INTEGER, `Z` STRING>", "STRUCT<`A` INTEGER>", {"A": 1}),
        (None, "null", "INTEGER", None),
    ],
)
def test_engine_expressions_coerce_value(value: Any, source: str, target: str, result: Any) -> None:
    from_type = NULL if source == "null" else parse_type(source)
    assert coerce_value(value, from_type, parse_type(target), "C") == result


@pytest.mark.parametrize(
    ("value", "source", "target"),
    [
        ("x", "STRING", "INTEGER"),
        (10**10, "BIGINT", "INTEGER"),
        (1.5, "DOUBLE", "DECIMAL(4, 2)"),
        (Decimal("1.234"), "DECIMAL(4, 3)", "DECIMAL(4, 2)"),
        (True, "BOOLEAN", "STRING"),
    ],
)
def test_engine_expressions_coerce_value_refuses(value: Any, source: str, target: str) -> None:
    with pytest.raises(ExpressionError, match=f"Expected type {target.split('(')[0]}"):
        coerce_value(value, parse_type(source), parse_type(target), "C")


STREAM = Source(
    SourceKind.STREAM,
    "TEST",
    (
        Column("K", "STRING", key=True),
        Column("ID", "INTEGER"),
        Column("D", "DECIMAL(12, 2)"),
        Column("V", "STRUCT<`FOO` DECIMAL(2, 1), `bar` ARRAY<STRING>>"),
    ),
    "t",
    1,
)
TABLE = Source(
    SourceKind.TABLE, "TAB", (Column("K", "INTEGER", key=True), Column("V", "STRING")), "t", 1
)


def insert(sql: str, source: Source = STREAM) -> Any:
    statement = parse_one(sql)
    assert isinstance(statement, InsertValues)
    return evaluate_insert_values(statement, source, {})


def test_engine_expressions_insert_values() -> None:
    record = insert("INSERT INTO TEST (ID, ROWTIME, K) VALUES (10, 1234, 'key');")
    assert (record.key, record.value, record.rowtime) == (
        ("key",),
        {"ID": 10, "D": None, "V": None},
        1234,
    )
    record = insert("INSERT INTO TEST VALUES ('k', 1 + 1, 0.05, STRUCT(FOO := 2.1));")
    assert record.key == ("k",) and record.rowtime is None
    assert record.value == {
        "ID": 2,
        "D": Decimal("0.05"),
        "V": {"FOO": Decimal("2.1"), "bar": None},
    }
    assert insert("INSERT INTO TEST (ID) VALUES (1);").key == (None,)
    assert insert("INSERT INTO TAB (K, V) VALUES (1, NULL);", TABLE).value == {"V": None}


@pytest.mark.parametrize(
    ("sql", "source", "message"),
    [
        (
            "INSERT INTO TEST (K, ID) VALUES ('10');",
            STREAM,
            "Expected number columns and values to match: 2, 1",
        ),
        (
            "INSERT INTO TEST VALUES ('10');",
            STREAM,
            (
                "Failed to insert values into 'TEST'. Expected a "
                "value for each column. Expected Columns: [`K`, `ID`, `D`, `V`]. Got ['10']"
            ),
        ),
        (
            "INSERT INTO TEST (K, ROWPARTITION) VALUES ('a', 5);",
            STREAM,
            "Inserting into column `ROWPARTITION` is not allowed.",
        ),
        (
            "INSERT INTO TEST (ROWOFFSET) VALUES (5);",
            STREAM,
            "Inserting into column `ROWOFFSET` is not allowed.",
        ),
        ("INSERT INTO TEST (NOPE) VALUES (5);", STREAM, "Column name `NOPE` does not exist."),
        (
            "INSERT INTO TEST (ID) VALUES ('x');",
            STREAM,
            (
                "Failed to insert values into 'TEST'. "
                "Expected type INTEGER for field ID but got 'x'(STRING)"
            ),
        ),
        (
            "INSERT INTO TAB (V) VALUES ('x');",
            TABLE,
            (
                "Failed to insert values into 'TAB'. Value for "
                "primary key column(s) K is required for tables"
            ),
        ),
    ],
)
def test_engine_expressions_insert_values_errors(sql: str, source: Source, message: str) -> None:
    with pytest.raises(ExpressionError) as caught:
        insert(sql, source)
    assert message in caught.value.message


def test_engine_expressions_insert_values_refuses_headers_and_read_only() -> None:
    headers = Source(
        SourceKind.STREAM,
        "SOURCE1",
        (
            Column("K", "STRING", key=True),
            Column("H1", "BYTES", header_key="abc"),
            Column("V", "BIGINT"),
        ),
        "t",
        1,
    )
    with pytest.raises(ExpressionError, match="Cannot insert into HEADER columns: H1"):
        insert("INSERT INTO SOURCE1 VALUES ('abc', NULL, 44);", headers)
    with pytest.raises(ExpressionError, match="Cannot insert into HEADER columns: H1"):
        insert("INSERT INTO SOURCE1 (H1) VALUES (NULL);", headers)
    read_only = Source(SourceKind.TABLE, "INPUT", TABLE.columns, "t", 1, read_only=True)
    with pytest.raises(ExpressionError, match="Cannot insert values into read-only table: INPUT"):
        insert("INSERT INTO INPUT VALUES (1, 'b');", read_only)


def test_greatest_and_least_ignore_nulls_and_widen() -> None:
    """ksqlDB's GREATEST/LEAST (QTT greatest.json, least.json): NULL arguments are ignored, all
    NULL gives NULL, mixed numbers widen to their common type."""
    from headwater.engine.expressions import Scope, compile_expression
    from headwater.sqlparse_ext.sqltypes import PrimitiveType

    def value(text: str, row: dict[str, object]) -> object:
        item = parse_one(f"SELECT {text} FROM s;").query.select[0]  # type: ignore[attr-defined]
        scope = Scope({"A": PrimitiveType("INTEGER"), "B": PrimitiveType("INTEGER")})
        return compile_expression(item, scope).evaluate(row)

    assert value("GREATEST(A, B, NULL, 5)", {"A": 2147483647, "B": None}) == 2147483647
    assert value("LEAST(A, B)", {"A": None, "B": -3}) == -3
    assert value("LEAST(A, B)", {"A": None, "B": None}) is None
    assert value("GREATEST('apple', 'zebra', NULL)", {}) == "zebra"
    assert value("LEAST(2.5, NULL, 1.25)", {}) == Decimal("1.25")
    assert value("GREATEST(A, 2.5e0)", {"A": 3}) == 3.0  # INTEGER widens to DOUBLE only
    # a STRING is read as the temporal type the other arguments have (canImplicitlyCast)
    assert value("GREATEST(FROM_DAYS(A), '2022-06-14')", {"A": 3}) == 19157
    with pytest.raises(ExpressionError) as caught:  # INTEGER and BIGINT fit three overloads
        value("LEAST(A, CAST(B AS BIGINT))", {"A": 1, "B": 2})
    assert caught.value.message.startswith(
        "Function 'least' cannot be resolved due to ambiguous method parameters (INTEGER, BIGINT)."
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [  # values from ksqlDB's QTT instr.json, string-lpad-rpad.json and split.json
        ("INSTR('corporate floor', 'or')", 2),
        ("INSTR('no substring', 'or')", 0),
        ("INSTR('corporate floor', 'or', 4)", 5),
        ("INSTR('corporate floor', 'or', 4, 2)", 14),
        ("INSTR('corporate floor', 'or', -4)", 5),
        ("INSTR('corporate floor', 'or', -4, 2)", 2),
        ("LPAD('foo', 7, 'Bar')", "BarBfoo"),
        ("LPAD('foo', 2, 'Bar')", "fo"),
        ("LPAD('foo', -1, 'Bar')", None),
        ("RPAD('foo', 5, 'Bar')", "fooBa"),
        ("SPLIT('..a..', '.')", ["", "", "a", "", ""]),
        ("SPLIT('abc', '')", ["a", "b", "c"]),
        ("SPLIT('', '')", [""]),  # Java: Pattern.compile("").split("")
        ("SPLIT(TO_BYTES('a.b', 'utf8'), TO_BYTES('.', 'utf8'))", [b"a", b"b"]),
        ("SPLIT(TO_BYTES('ab', 'utf8'), TO_BYTES('', 'utf8'))", [b"a", b"b"]),
        ("SPLIT(TO_BYTES('', 'utf8'), TO_BYTES('', 'utf8'))", [b""]),
        ("SUBSTRING(TO_BYTES('abcd', 'utf8'), 2)", b"bcd"),
        ("SUBSTRING(TO_BYTES('abcd', 'utf8'), -2, 1)", b"c"),
        ("LPAD(TO_BYTES('ab', 'utf8'), 5, TO_BYTES('xy', 'utf8'))", b"xyxab"),
        ("RPAD(TO_BYTES('ab', 'utf8'), 1, TO_BYTES('xy', 'utf8'))", b"a"),
        ("GENERATE_SERIES(1, 3)", [1, 2, 3]),
        ("GENERATE_SERIES(4, 0)", [4, 3, 2, 1, 0]),
        ("GENERATE_SERIES(-2, 1, 2)", [-2, 0]),
        ("GENERATE_SERIES(CAST(1 AS BIGINT), CAST(7 AS BIGINT), 3)", [1, 4, 7]),
    ],
)
def test_instr_pad_and_split(text: str, expected: object) -> None:
    """(And their BYTES forms, GENERATE_SERIES.)"""
    from headwater.engine.expressions import Scope, compile_expression

    item = parse_one(f"SELECT {text} FROM s;").query.select[0]  # type: ignore[attr-defined]
    assert compile_expression(item, Scope({})).evaluate({}) == expected


def test_what_a_record_can_make_pad_and_series_build_is_bounded() -> None:
    """LPAD to 700M characters or a 7M-value series from one row's values: NULL, not gigabytes."""
    assert ev("LPAD(S, I * 100000000, 'x')") is None
    assert ev("GENERATE_SERIES(0, I * 1000000)") is None
    assert ev("GENERATE_SERIES(0, I, 0)") is None  # a zero step fails (NULL), as in ksqlDB


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("TS < '1970-01-02'", True),
        ("TS = '1970-01-01T00:00'", True),
        ("TS > '2020'", False),
        ("'1969-12-31T23:59:59.999' < TS", True),
        ("TS = S", None),  # 'hello' is no timestamp
        ("TS >= FROM_DAYS(0)", True),
        ("FROM_DAYS(1) > TS", True),
        ("FROM_DAYS(10) > '1970-01-04'", True),
        ("PARSE_TIME('10:00', 'HH:mm') < '10:00:01'", True),
    ],
)
def test_times_compare_with_strings_and_dates_as_ksqldb_does(text: str, value: Any) -> None:
    assert ev(text) is value


def test_engine_expressions_nested_struct_stars_expand_to_the_inner_fields() -> None:
    from headwater.engine.expressions import struct_star_fields

    columns = {"V": parse_type("STRUCT<A STRUCT<B STRUCT<F1 INT, F2 STRING>>>")}
    expanded = struct_star_fields(node("V->A->B->*"), columns)
    assert expanded is not None
    assert [format_expression(e) for e in expanded] == ["V->A->B->F1", "V->A->B->F2"]
    with pytest.raises(ExpressionError, match="Cannot expand V->A->B->F1->\\*"):
        struct_star_fields(node("V->A->B->F1->*"), columns)
