"""Pure parts of the gateway: JSON text, admission, pull bounds, the OpenAPI document."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal

import pytest

from headwater.gateway.admission import Admission
from headwater.gateway.errors import KsqlError
from headwater.gateway.jsonout import dumps
from headwater.gateway.locate import located_message
from headwater.gateway.pull_options import PullOptions, pull_options
from headwater.gateway.scalable_push import is_scalable
from headwater.gateway.services import PullSettings
from headwater.metastore.catalog import Catalog, Query
from headwater.sqlparse_ext import Select, parse


def test_dumps_writes_decimals_exactly_and_matches_json_elsewhere() -> None:
    value = {
        "a": [1, 2.5, None, True, False, 'é"\n'],
        "d": Decimal("12345678901234567890.1234567890"),
    }
    text = dumps(value)
    assert '"d":12345678901234567890.1234567890' in text
    assert json.loads(text)["a"] == value["a"]
    assert dumps(Decimal("1.50")) == "1.50"
    assert dumps(Decimal("1E+3")) == "1000"
    assert dumps((1, (2,))) == "[1,[2]]"
    # ksqlDB's strings for non-finite DOUBLEs come from the value renderer, before JSON
    from headwater.engine.functions.types import DOUBLE
    from headwater.engine.values import to_json_output

    assert dumps(to_json_output(float("nan"), DOUBLE)) == '"NaN"'
    assert dumps([to_json_output(float("-inf"), DOUBLE)]) == '["-Infinity"]'
    # what orjson refuses goes through the pure-Python writer, ASCII-escaped
    assert dumps(["a\ud800", 2**70, "é"]) == '["a\\ud800",1180591620717411303424,"\\u00e9"]'
    assert dumps(["é"]) == '["é"]'
    with pytest.raises(TypeError, match="not JSON-writable: set"):
        dumps({1, 2})
    with pytest.raises(TypeError):
        dumps(Decimal("NaN"))


def test_admission_runs_n_queues_q_and_refuses_the_rest() -> None:
    async def scenario() -> tuple[int, list[str], int]:
        gate = Admission(running=2, waiting=1)
        release = asyncio.Event()
        peak = 0
        running = 0
        outcomes: list[str] = []

        async def query() -> None:
            nonlocal running, peak
            try:
                async with gate.slot():
                    running += 1
                    peak = max(peak, running)
                    await release.wait()
                    running -= 1
                outcomes.append("ok")
            except KsqlError as exc:
                assert exc.error_code == 42900 and exc.retriable
                outcomes.append("refused")

        tasks = [asyncio.create_task(query()) for _ in range(5)]
        await asyncio.sleep(0.01)
        queued = gate.queued
        release.set()
        await asyncio.gather(*tasks)
        return peak, sorted(outcomes), queued

    peak, outcomes, queued = asyncio.run(scenario())
    assert peak == 2
    assert queued == 1
    assert outcomes == ["ok", "ok", "ok", "refused", "refused"]


def test_admission_rejects_nonsense_bounds() -> None:
    with pytest.raises(ValueError):
        Admission(0, 1)


def test_pull_options_strictest_bound_wins() -> None:
    server = PullSettings(table_scan_enabled=True, max_allowed_offset_lag=1000)
    assert pull_options(server, {}) == PullOptions(1000, True)
    assert pull_options(server, {"acceptable.offset.lag": 5}).max_offset_lag == 5
    assert pull_options(server, {"ksql.query.pull.max.allowed.offset.lag": "7"}).max_offset_lag == 7
    assert pull_options(server, {"acceptable.offset.lag": 5000}).max_offset_lag == 1000
    assert (
        pull_options(
            server, {"acceptable.offset.lag": 50}, {"ACCEPTABLE.OFFSET.LAG": 3}
        ).max_offset_lag
        == 3
    )
    assert (
        pull_options(server, {"ksql.query.pull.table.scan.enabled": "false"}).table_scan_enabled
        is False
    )
    limit = "ksql.query.pull.limit.clause.enabled"
    assert pull_options(server, {limit: False}).limit_clause_enabled is False
    off = PullSettings(limit_clause_enabled=False)
    assert pull_options(off, {}).limit_clause_enabled is False
    assert pull_options(off, {limit: "true"}).limit_clause_enabled is True  # as in ksqlDB


@pytest.mark.parametrize(
    "properties",
    [
        {"acceptable.offset.lag": -1},
        {"acceptable.offset.lag": "x"},
        {"acceptable.offset.lag": True},
        {"ksql.query.pull.table.scan.enabled": "maybe"},
    ],
)
def test_pull_options_bad_values_are_400(properties: dict[str, object]) -> None:
    with pytest.raises(KsqlError) as caught:
        pull_options(PullSettings(), properties)
    assert caught.value.error_code == 40000


def test_bound_not_met_is_a_retriable_503_naming_each_partition() -> None:
    from headwater.engine.pull.tables import PartitionLag
    from headwater.gateway.pull import _check_bound

    lags = {0: PartitionLag(5, 5, "READY"), 1: PartitionLag(2, 90, "RESTORING")}
    _check_bound("T", lags, [0], 10)  # partition 0 alone is fine
    with pytest.raises(KsqlError) as caught:
        _check_bound("T", lags, [0, 1, 2], 10)
    error = caught.value
    assert error.error_code == 50302 and error.retriable
    assert "partition 1: RESTORING, position 2 of 90, lag 88" in error.message
    assert "partition 2: not materialized here" in error.message
    assert "partition 0" not in error.message


def test_ksqldb_locates_unknown_and_ambiguous_columns_and_insert_targets() -> None:
    script = (
        "CREATE STREAM A (ID INT KEY, V STRING) WITH (kafka_topic='a', value_format='JSON');\n"
        "CREATE STREAM B (ID INT KEY, V STRING) WITH (kafka_topic='b', value_format='JSON');\n"
        "CREATE STREAM OUTPUT as SELECT * FROM test1 t RIGHT JOIN test2 tt ON t.iid = tt.id;"
    )
    statement = parse(script)[2]
    offset = statement.text.index("t.iid")
    message = "JOIN ON column 'T.IID' cannot be resolved."
    assert located_message(statement, message, offset) == f"Line: 3, Col: 70: {message}"
    ambiguous = "Column 'ID' is ambiguous. Could be T.ID or TT.ID."
    assert located_message(statement, ambiguous, 31) == (  # found while preparing, in ksqlDB
        f"Exception while preparing statement: Line: 3, Col: 32: {ambiguous}"
    )
    other = "Invalid join condition: stream-stream joins require a WITHIN clause."
    assert located_message(statement, other, offset) == other  # ksqlDB does not locate these
    insert = parse("SELECT 1 FROM A;\nINSERT INTO UNKNOWN SELECT * FROM A;")[1]
    assert located_message(insert, "Source `UNKNOWN` does not exist.", 12) == (
        "Line: 2, Col: 13: Source `UNKNOWN` does not exist."
    )


def test_scalable_push_queries_are_the_ones_ksqldb_serves_from_a_persistent_query() -> None:
    catalog = Catalog(
        queries={
            "CSAS_OUT_1": Query(
                "CSAS_OUT_1", "CREATE STREAM OUT AS SELECT * FROM S;", "OUT", ("S",)
            ),
            "CSAS_TWICE_2": Query("CSAS_TWICE_2", "...", "TWICE", ("S",)),
            "INSERTQUERY_3": Query("INSERTQUERY_3", "...", "TWICE", ("S",)),
        }
    )
    on = {"ksql.query.push.v2.enabled": "true"}

    def scalable(text: str, overrides: dict | None = None, server: dict | None = None) -> bool:
        statement = parse(text)[0]
        assert isinstance(statement, Select)
        return is_scalable(statement, catalog, on if overrides is None else overrides, server or {})

    assert scalable("SELECT * FROM OUT EMIT CHANGES;")
    assert scalable("SELECT K FROM OUT WHERE K = 'a' EMIT CHANGES LIMIT 2;")
    assert not scalable("SELECT * FROM OUT EMIT CHANGES;", {})  # off by default, as in ksqlDB
    assert scalable("SELECT * FROM OUT EMIT CHANGES;", {}, on)  # the server's setting
    assert not scalable("SELECT * FROM S EMIT CHANGES;")  # no query writes S
    assert not scalable("SELECT * FROM TWICE EMIT CHANGES;")  # two queries write TWICE
    assert not scalable("SELECT * FROM OUT;")  # a pull query
    assert not scalable("SELECT K, COUNT(*) FROM OUT GROUP BY K EMIT CHANGES;")
    assert not scalable("SELECT ROWOFFSET FROM OUT EMIT CHANGES;")
    assert not scalable("SELECT * FROM OUT EMIT CHANGES;", {**on, "auto.offset.reset": "earliest"})
