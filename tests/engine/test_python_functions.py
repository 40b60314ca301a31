"""Python functions (issue 31): declared with headwater.functions in an extension folder, loaded,
resolved as ksqlDB resolves overloads, and called by persistent queries (projection, aggregation,
table function), pull and push queries. A function that raises gives NULL and is logged, and the
query goes on. Pure: no broker, no JVM (the live node and Spark: tests/gateway/
test_python_functions_live.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from headwater.engine.errors import ExpressionError
from headwater.engine.functions import extensions, user_index
from headwater.engine.functions.catalog import all_functions, describe_function
from headwater.engine.functions.types import BIGINT, DOUBLE, INTEGER, NULL, STRING
from headwater.engine.functions.user import DeclarationError, udf
from headwater.engine.persistent import InputRecord, RecordPipeline
from headwater.engine.persistent.aggregate_run import AggregatePipeline, LocalAggregation
from headwater.engine.pull.query import Row, plan_pull, select_rows
from headwater.engine.push import plan_push, push_rows
from headwater.engine.spark.host import missing_functions, query_payload
from headwater.metastore.errors import ValidationError
from headwater.metastore.plan import TopicFacts
from headwater.sqlparse_ext import parse_one
from headwater.sqlparse_ext.sqltypes import DecimalType
from tests.support.catalogs import catalog_of

MODULE = '''
"""Functions a user writes."""
import datetime as dt
from typing import TypeVar

from headwater.functions import udaf, udf, udtf

T = TypeVar("T")


@udf(description="twice the number", author="tests", version="1.2")
def twice(x: int) -> int:
    return 2 * x


@udf(name="twice")
def twice_text(x: str | None) -> str:
    return (x or "?") * 2


@udf(params=["INTEGER", "STRING"], returns="STRING")
def picked(a: int, b: str | None) -> str:
    return "int-string"


@udf(name="picked", params=["BIGINT", "STRING"], returns="STRING")
def picked_long(a: int, b: str | None) -> str:
    return "bigint-string"


@udf(name="picked")
def picked_many(*longs: int) -> str:
    return "bigint-varargs"


@udf()
def first_of(values: list[T]) -> T:
    return values[0]


@udf()
def explode_if(flag: bool) -> int:
    if flag:
        raise RuntimeError("asked to fail")
    return 1


@udf()
def day_after(d: dt.date) -> dt.date:
    return d + dt.timedelta(days=1)


@udaf(description="sum of squares", author="tests")
class sum_sq:
    def initialize(self) -> int:
        return 0

    def aggregate(self, state: int, x: int) -> int:
        return state + x * x

    def merge(self, a: int, b: int) -> int:
        return a + b

    def map(self, state: int) -> int:
        return state

    def undo(self, state: int, x: int) -> int:
        return state - x * x


@udaf()
class joined:
    def __init__(self, separator: str) -> None:
        self.separator = separator

    def initialize(self) -> list:
        return []

    def aggregate(self, state: list, x: str | None) -> list:
        return [*state, x or "-"]

    def merge(self, a: list, b: list) -> list:
        return a + b

    def map(self, state: list) -> str:
        return self.separator.join(state)


@udtf(description="the words of a text")
def words(text: str) -> list[str]:
    return text.split()
'''

FACTS = TopicFacts({"orders": 1, "users": 1})
ORDERS = (
    "CREATE STREAM orders (id STRING KEY, item STRING, qty INT, d DATE) "
    "WITH (kafka_topic='orders', value_format='JSON');"
)


@pytest.fixture
def functions(tmp_path: Path) -> Iterator[extensions.Loaded]:
    folder = tmp_path / "ext"
    folder.mkdir()
    (folder / "mine.py").write_text(MODULE)
    loaded = extensions.load_folder(folder)
    assert not loaded.problems, loaded.problems
    yield loaded
    extensions.activate(extensions.Loaded({}, ()))


def _records(*values: dict[str, object]) -> list[InputRecord]:
    return [
        InputRecord(b"k%d" % i, json.dumps(v).encode(), 100 + i, 0, i) for i, v in enumerate(values)
    ]


def test_types_come_from_the_annotations_and_from_sql_text(functions: extensions.Loaded) -> None:
    twice = functions.functions["TWICE"]
    assert [(o.params[0].type, o.params[0].nullable) for o in twice.overloads] == [
        (BIGINT, False),
        (STRING, True),
    ]
    picked = functions.functions["PICKED"]
    assert [p.type for p in picked.overloads[0].params] == [INTEGER, STRING]
    assert picked.overloads[2].params[0].variadic


def test_overloads_resolve_as_ksqldb_resolves_them(functions: extensions.Loaded) -> None:
    picked = functions.functions["PICKED"]

    def chosen(*args: object) -> str:
        overload, _ = user_index.resolve(picked, list(args))  # type: ignore[arg-type]
        return str(overload.target.__name__)

    assert chosen(INTEGER, STRING) == "picked"  # the exact match first
    assert chosen(BIGINT, STRING) == "picked_long"
    assert chosen(BIGINT, NULL) == "picked_long"  # NULL fits any parameter; fixed before varargs
    assert chosen(BIGINT, BIGINT, BIGINT) == "picked_many"
    assert chosen(INTEGER, INTEGER) == "picked_many"  # INTEGER widens to BIGINT...
    with pytest.raises(ExpressionError, match="does not accept parameters \\(DOUBLE\\)"):
        chosen(DOUBLE)  # ... but DOUBLE never narrows
    first = functions.functions["FIRST_OF"]
    from headwater.sqlparse_ext.sqltypes import ArrayType

    assert user_index.resolve(first, [ArrayType(DecimalType(4, 2))])[1] == DecimalType(4, 2)


def test_a_decimal_parameter_takes_any_precision_and_integers_widen_to_it(tmp_path: Path) -> None:
    (tmp_path / "money.py").write_text(
        textwrap.dedent(
            """
            from decimal import Decimal
            from headwater.functions import udf

            @udf(params=["DECIMAL(10, 2)"], returns="DECIMAL(10, 2)")
            def cents(x: Decimal) -> Decimal:
                return x
            """
        )
    )
    cents = extensions.load(extensions.read_folder(tmp_path)[0]).functions["CENTS"]
    assert user_index.resolve(cents, [DecimalType(4, 1)])[1] == DecimalType(10, 2)
    assert user_index.resolve(cents, [INTEGER])[1] == DecimalType(10, 2)
    with pytest.raises(ExpressionError):
        user_index.resolve(cents, [DOUBLE])


def test_equally_good_overloads_are_ambiguous(tmp_path: Path) -> None:
    (tmp_path / "amb.py").write_text(
        textwrap.dedent(
            """
            from headwater.functions import udf

            @udf(name="amb")
            def a(x: int, y: float) -> int:
                return 1

            @udf(name="amb")
            def b(x: float, y: int) -> int:
                return 2
            """
        )
    )
    loaded = extensions.load(extensions.read_folder(tmp_path)[0])
    with pytest.raises(ExpressionError, match="ambiguous method parameters"):
        user_index.resolve(loaded.functions["AMB"], [BIGINT, BIGINT])


def test_a_persistent_query_calls_them_and_a_raising_call_gives_null_and_a_log_entry(
    functions: extensions.Loaded,
) -> None:
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE STREAM out AS SELECT id, twice(qty) AS t, twice(item) AS w, "
        "explode_if(qty > 2) AS e, day_after(d) AS nd FROM orders;",
    )
    pipeline = RecordPipeline.for_query(catalog.queries["CSAS_OUT_1"], catalog)
    out, errors = pipeline.process(
        _records(
            {"ITEM": "a", "QTY": 1, "D": 0},
            {"ITEM": None, "QTY": 3, "D": 10},
            {"ITEM": "c", "QTY": None, "D": None},
        )
    )
    assert [json.loads(o.value or b"") for o in out] == [
        {"T": 2, "W": "aa", "E": 1, "ND": 1},
        {"T": 6, "W": "??", "E": None, "ND": 11},
        {"T": None, "W": "cc", "E": 1, "ND": None},  # a NULL for `x: int`: NULL, no call
    ]
    assert [(e.kind, e.offset) for e in errors] == [("function", 1)]
    assert "EXPLODE_IF(BOOLEAN)" in errors[0].message
    assert "RuntimeError: asked to fail" in errors[0].message


def test_an_aggregate_function_with_literal_arguments_counts_and_undoes(
    functions: extensions.Loaded,
) -> None:
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE TABLE n AS SELECT id, sum_sq(qty) AS s, joined(item, '+') AS j "
        "FROM orders GROUP BY id;",
    )
    local = LocalAggregation(AggregatePipeline.for_query(catalog.queries["CTAS_N_1"], catalog))
    records = [
        r._replace(key=b"k")
        for r in _records(
            {"ITEM": "a", "QTY": 1}, {"ITEM": "b", "QTY": 2}, {"ITEM": None, "QTY": 3}
        )
    ]
    out, errors = local.process(records)
    assert errors == []
    assert json.loads(out[-1].value or b"") == {"S": 14, "J": "a+b+-"}


def test_an_aggregate_literal_argument_must_be_a_literal(functions: extensions.Loaded) -> None:
    with pytest.raises(
        ValidationError, match="Parameter 2 passed to function JOINED must be a literal constant"
    ):
        catalog_of(
            FACTS,
            ORDERS,
            "CREATE TABLE n AS SELECT id, joined(item, item) AS j FROM orders GROUP BY id;",
        )


def test_a_table_function_gives_a_row_per_element(functions: extensions.Loaded) -> None:
    catalog = catalog_of(
        FACTS, ORDERS, "CREATE STREAM w AS SELECT id, words(item) AS word FROM orders;"
    )
    pipeline = RecordPipeline.for_query(catalog.queries["CSAS_W_1"], catalog)
    out, _ = pipeline.process(_records({"ITEM": "to be", "QTY": 1}))
    assert [json.loads(o.value or b"") for o in out] == [{"WORD": "to"}, {"WORD": "be"}]


def test_pull_and_push_queries_call_them(functions: extensions.Loaded) -> None:
    catalog = catalog_of(
        FACTS,
        "CREATE TABLE users (id STRING PRIMARY KEY, name STRING, n INT) "
        "WITH (kafka_topic='users', value_format='JSON');",
    )
    source = catalog.sources["USERS"]
    rows = [Row(("a",), {"NAME": "ann", "N": 4}, 1, 0, 0)]
    select = parse_one("SELECT id, twice(n) AS t, twice(name) AS w FROM users;")
    pulled = plan_pull(select, source, {})  # type: ignore[arg-type]
    assert list(select_rows(pulled, iter(rows))) == [["a", 8, "annann"]]
    select = parse_one("SELECT id, twice(n) AS t FROM users WHERE twice(n) > 7 EMIT CHANGES;")
    pushed = plan_push(select, source, {})  # type: ignore[arg-type]
    assert push_rows(pushed, [(r, False) for r in rows], 0) == ([(["a", 8], False)], False)


def test_show_and_describe_functions_list_them_with_their_module(
    functions: extensions.Loaded,
) -> None:
    listed = {f.name: f for f in all_functions()}
    assert listed["TWICE"].kind == "SCALAR"
    assert listed["SUM_SQ"].kind == "AGGREGATE"
    assert listed["WORDS"].kind == "TABLE"
    assert listed["TWICE"].path.endswith("mine.py")
    assert listed["COUNT"].path == "internal"
    found = describe_function("twice")
    assert found is not None
    assert (found.description, found.author, found.version) == ("twice the number", "tests", "1.2")
    assert [v.params for v in found.variants] == [
        (("x", "BIGINT", False),),
        (("x", "STRING", False),),
    ]


def test_a_module_that_fails_or_clashes_is_left_out_and_the_rest_load(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import not_a_module_anywhere\n")
    (tmp_path / "clash.py").write_text(
        "from headwater.functions import udf\n\n@udf()\ndef abs(x: int) -> int:\n    return x\n"
    )
    (tmp_path / "good.py").write_text(
        "from headwater.functions import udf\n\n@udf()\ndef one() -> int:\n    return 1\n"
    )
    loaded = extensions.load(extensions.read_folder(tmp_path)[0], extensions.builtin_names())
    assert list(loaded.functions) == ["ONE"]
    assert any("No module named 'not_a_module_anywhere'" in p for p in loaded.problems)
    assert any("ABS is a built-in function's name" in p for p in loaded.problems)


def test_a_declaration_without_sql_types_is_refused_when_declared() -> None:
    with pytest.raises(DeclarationError, match="has no SQL type"):

        @udf()
        def bad(x: object) -> int:
            return 1

    with pytest.raises(DeclarationError, match="annotate its result"):

        @udf()
        def unannotated(x: int):  # type: ignore[no-untyped-def]
            return 1


def test_a_query_that_needs_a_missing_function_is_refused_by_name() -> None:
    with pytest.raises(ValidationError, match="Can't find any functions with the name 'TWICE'"):
        catalog_of(FACTS, ORDERS, "CREATE STREAM out AS SELECT id, twice(qty) FROM orders;")


def test_a_query_payload_carries_the_modules_and_a_fresh_process_loads_them(
    functions: extensions.Loaded, tmp_path: Path
) -> None:
    """What a Spark worker does: it never reads the folder, only the payload."""
    catalog = catalog_of(
        FACTS, ORDERS, "CREATE STREAM out AS SELECT id, twice(qty) AS t FROM orders;"
    )
    payload = query_payload(catalog.queries["CSAS_OUT_1"], catalog)
    assert [m["stem"] for m in payload["catalog"]["extensions"]["modules"]] == ["mine"]
    (tmp_path / "ext" / "mine.py").unlink()  # the worker must not need it
    body = tmp_path / "payload.json"
    body.write_text(json.dumps({"queryId": "CSAS_OUT_1", "catalog": payload["catalog"]}))
    script = textwrap.dedent(
        f"""
        import json
        from headwater.engine.spark.source_rows import _pipeline
        from headwater.engine.persistent import InputRecord
        batch = _pipeline(open({str(body)!r}).read())([InputRecord(b"k", b'{{"QTY": 21}}', 1, 0, 0)])
        print(json.loads(batch.column("value")[0].as_py()))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{'T': 42}"


def test_the_readme_example_module_loads_and_runs_in_a_query() -> None:
    path = Path(__file__).resolve().parents[2] / "examples" / "functions" / "shipping.py"
    text = path.read_text()
    loaded = extensions.load([extensions.ModuleSource("shipping", text, "example", str(path))])
    extensions.activate(loaded)
    try:
        catalog = catalog_of(
            TopicFacts({"parcels": 1}),
            "CREATE STREAM parcels (parcel STRING KEY, kg DOUBLE, express BOOLEAN, "
            "contents STRING) WITH (kafka_topic='parcels', value_format='JSON');",
            "CREATE STREAM costs AS SELECT parcel, shipping_cost(kg, express) AS c, "
            "items(contents) AS item FROM parcels;",
        )
        pipeline = RecordPipeline.for_query(catalog.queries["CSAS_COSTS_1"], catalog)
        out, errors = pipeline.process(
            [InputRecord(b"p1", b'{"KG": 2.0, "EXPRESS": true, "CONTENTS": "a, b"}', 1, 0, 0)]
        )
        assert errors == []
        assert [json.loads(o.value or b"") for o in out] == [
            {"C": 19.0, "ITEM": "a"},
            {"C": 19.0, "ITEM": "b"},
        ]
    finally:
        extensions.activate(extensions.Loaded({}, ()))


def test_a_group_key_that_raises_skips_its_record_and_its_failure_stays_with_it(
    functions: extensions.Loaded,
) -> None:
    """The record whose GROUP BY gives NULL (the function raised) is skipped with its function's
    log entry; nothing is left over to be pinned on a later record or another query."""
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE TABLE n AS SELECT explode_if(qty > 1) AS g, COUNT(*) AS c FROM orders "
        "GROUP BY explode_if(qty > 1);",
    )
    local = LocalAggregation(AggregatePipeline.for_query(catalog.queries["CTAS_N_1"], catalog))
    out, errors = local.process(_records({"QTY": 1}, {"QTY": 2}, {"QTY": 1}))
    assert [json.loads(o.value or b"") for o in out] == [{"C": 1}, {"C": 2}]
    assert [(e.kind, e.offset) for e in errors] == [("function", 1), ("serialization", 1)]
    assert user_index.take_failures() == []


def test_a_server_without_the_module_names_what_a_catalog_query_lacks(
    functions: extensions.Loaded,
) -> None:
    """A query planned on a server that had the function, run by one that has not (its folder
    lacks the module): refused by name before it reaches Spark (`QueryEngine` reports ERROR)."""
    catalog = catalog_of(
        FACTS,
        ORDERS,
        "CREATE TABLE n AS SELECT id, sum_sq(qty) AS s, COUNT(*) AS c FROM orders "
        "WHERE twice(qty) > 2 GROUP BY id;",
    )
    query = catalog.queries["CTAS_N_1"]
    assert missing_functions(query) == []
    extensions.activate(extensions.Loaded({}, ()))
    assert missing_functions(query) == ["SUM_SQ", "TWICE"]


def test_the_engine_watcher_parses_a_query_once_not_at_every_look(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`QueryEngine` asks five times a second for every query; its text is parsed once."""
    from headwater.engine.spark import host

    parsed: list[str] = []
    real = host.parse_persistent

    def counting(text: str) -> Any:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(host, "parse_persistent", counting)
    host._called_functions.cache_clear()
    catalog = catalog_of(
        FACTS, ORDERS, "CREATE TABLE m AS SELECT id, COUNT(*) AS c FROM orders GROUP BY id;"
    )
    for _ in range(5):
        assert missing_functions(catalog.queries["CTAS_M_1"]) == []
    assert len(parsed) == 1


VECTORIZED = """
import pyarrow as pa
import pyarrow.compute as pc

from headwater.functions import udf

CALLS = []


@udf(vectorized=True, params=["INTEGER"], returns="BIGINT")
def plus_ten(x: int) -> int:
    CALLS.append(len(x))
    return pc.add(x.cast(pa.int64()), 10)


@udf(vectorized=True)
def fragile(x: int) -> int:
    if pc.any(pc.equal(x, 3)).as_py():
        raise ValueError("three")
    return x
"""


def _vectorized(tmp_path: Path) -> extensions.Loaded:
    source = extensions.ModuleSource("vec", VECTORIZED, extensions._digest(VECTORIZED))
    loaded = extensions.load([source])
    assert not loaded.problems, loaded.problems
    extensions.activate(loaded)
    return loaded


def test_a_vectorized_function_is_called_once_per_batch_and_agrees_with_the_per_record_path(
    tmp_path: Path,
) -> None:
    from headwater.engine.persistent.columnar_run import ColumnarPipeline, refusal

    loaded = _vectorized(tmp_path)
    module = sys.modules[loaded.modules[0].module_name]
    try:
        catalog = catalog_of(
            FACTS,
            ORDERS,
            "CREATE STREAM v AS SELECT id, plus_ten(qty) AS p, fragile(qty) AS f FROM orders "
            "WHERE plus_ten(qty) > 11;",
        )
        records = RecordPipeline.for_query(catalog.queries["CSAS_V_1"], catalog)
        assert refusal(records.compiled, records.sink) is None  # it runs a batch at a time
        batch = _records(*({"QTY": q} for q in (1, 2, None, 4, 5)))
        per_record, errors = records.process(batch)
        module.CALLS.clear()
        columnar = ColumnarPipeline(records).process(batch)
        assert module.CALLS == [5, 3]  # one call for the WHERE's 5 rows, one for the 3 it keeps
        assert [json.loads(o.value or b"") for o in per_record] == [
            {"P": 12, "F": 2},
            {"P": 14, "F": 4},
            {"P": 15, "F": 5},
        ]
        assert columnar.column("value").to_pylist() == [o.value for o in per_record]
        assert errors == []

        failing = _records({"QTY": 2}, {"QTY": 3}, {"QTY": 4})  # fragile raises on the batch
        per_record, errors = records.process(failing)
        columnar = ColumnarPipeline(records).process(failing)
        rows = sorted(columnar.to_pylist(), key=lambda r: r["source_offset"])  # in any order
        written = [json.loads(r["value"]) for r in rows if r["error"] is None]
        assert written == [json.loads(o.value or b"") for o in per_record]
        assert written == [{"P": 12, "F": 2}, {"P": 13, "F": None}, {"P": 14, "F": 4}]
        logged = [(r["error"], r["source_offset"]) for r in rows if r["error"] is not None]
        assert logged == [("function", 1)] == [(e.kind, e.offset) for e in errors]
    finally:
        extensions.activate(extensions.Loaded({}, ()))


def test_a_vectorized_declaration_takes_only_arrow_types() -> None:
    with pytest.raises(DeclarationError, match="vectorized function takes"):

        @udf(vectorized=True)
        def spread(*xs: int) -> int:
            return 1


def test_a_call_that_hangs_is_stopped_at_the_limit_on_a_workers_main_thread() -> None:
    """As in a Spark worker (a process of its own, the query's stages on its main thread): a
    sleeping and a spinning function are both stopped, each record gets NULL and a log entry."""
    script = textwrap.dedent(
        """
        import time
        from headwater.engine.functions import extensions, user_index
        from headwater.engine.functions.types import BIGINT

        TEXT = '''
        import time
        from headwater.functions import udf

        @udf()
        def sleepy(x: int) -> int:
            time.sleep(60)
            return x

        @udf()
        def spinning(x: int) -> int:
            while True:
                x += 1
        '''
        loaded = extensions.load([extensions.ModuleSource("hang", TEXT, "d")])
        extensions.activate(loaded)
        user_index.set_call_limit(300)
        for name in ("SLEEPY", "SPINNING"):
            function = loaded.functions[name]
            overload, result = user_index.resolve(function, [BIGINT])
            call = user_index.scalar_impl(name, overload, [BIGINT], result)
            started = time.monotonic()
            value = call(1)
            print(name, value, round(time.monotonic() - started, 1))
        print(user_index.take_failures())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    for line, name in zip(lines, ("SLEEPY", "SPINNING"), strict=False):
        called, value, seconds = line.split()
        assert (called, value) == (name, "None")
        assert 0.25 <= float(seconds) < 3, line
    assert lines[2].count("ran longer than 300 ms") == 2, lines[2]
