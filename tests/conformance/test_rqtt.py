"""The pure parts of ``conformance/rqtt.py``: case loading, skip causes, topic renaming, and judging
responses as ksqlDB's RestTestExecutor does. No broker, no server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance import rqtt
from conformance.cases import Mismatch
from headwater.gateway.protobuf_rows import protobuf_items

HEADER = {"header": {"queryId": "q1", "schema": "`ID` STRING KEY, `C` BIGINT"}}
SERVED = {"servedBy": [{"partition": 0, "host": "h", "position": 1, "lag": 0}]}


def _case(**fields: object) -> dict:
    create = "CREATE STREAM S (ID STRING KEY) WITH (kafka_topic='t', value_format='JSON');"
    return {"name": "c", "statements": [create, "SELECT * FROM S;"], **fields}


def test_load_cases_strips_comments_and_expands_formats(tmp_path: Path) -> None:
    (tmp_path / "f.json").write_text(
        '{"tests": [ // a comment\n {"name": "n", "format": ["JSON", "AVRO"], "statements": '
        "[\"CREATE STREAM S (A INT) WITH (kafka_topic='t', value_format='{FORMAT}');\"]}]}"
    )
    cases = list(rqtt.load_cases([tmp_path / "f.json"]))
    assert [c["name"] for _, c in cases] == ["n - JSON", "n - AVRO"]
    assert "value_format='AVRO'" in cases[1][1]["statements"][0]


def test_split_statements_at_first_select() -> None:
    assert rqtt.split_statements(["CREATE X;", "SELECT 1;", "SELECT 2;"]) == (
        ["CREATE X;"],
        ["SELECT 1;", "SELECT 2;"],
    )
    with pytest.raises(Mismatch):
        rqtt.split_statements(["SELECT 1;", "CREATE X;"])


def test_pull_queries_are_selects_without_emit_changes() -> None:
    assert rqtt.is_pull_query("SELECT * FROM T WHERE ID='1';")
    assert not rqtt.is_pull_query("SELECT * FROM S EMIT   changes;")
    assert rqtt.has_pull_query(_case())


@pytest.mark.parametrize(
    ("fields", "cause"),
    [
        ({"enabled": False}, "disabled in the corpus"),
        ({"statements": ["CREATE STREAM S WITH (kafka_topic='t', format='AVRO');"]}, None),
        ({"statements": ["CREATE STREAM S WITH (kafka_topic='t', format='PROTOBUF');"]}, None),
        ({"testPullWithProtoFormat": True}, None),
        (
            {
                "statements": [
                    "CREATE STREAM S (A INT) WITH (kafka_topic='t', value_format='JSON');",
                    "SELECT * FROM S EMIT CHANGES;",
                ]
            },
            "push queries without LIMIT (this runner cannot end them)",
        ),
        (
            {
                "statements": [
                    "CREATE STREAM S (A INT) WITH (kafka_topic='t', value_format='JSON');",
                    "SELECT 1 + NULL FROM S EMIT CHANGES;",
                ],
                "expectedError": {"message": "Error processing expression"},
            },
            None,
        ),
        ({}, None),
    ],
)
def test_skip_cause(fields: dict, cause: str | None) -> None:
    found = rqtt.skip_cause(_case(**fields))
    assert (found[0] if found else None) == cause


def test_refusal_cause_names_the_construct() -> None:
    windowed = (
        "CREATE TABLE W AS SELECT ID, COUNT(*) FROM S WINDOW TUMBLING (SIZE 1 SECOND) GROUP BY ID;"
    )
    assert (
        rqtt.refusal_cause("WINDOW is not supported yet", windowed)
        == "unsupported construct (windowed)"
    )
    assert rqtt.refusal_cause(
        "joins arrive with issue 12", "SELECT * FROM A JOIN B ON A.X=B.X;"
    ) == ("unsupported construct (join)")
    assert rqtt.refusal_cause("Column X cannot be resolved", windowed) is None


def test_topics_of_reads_statements_topics_and_records() -> None:
    create = (
        "CREATE TABLE T (ID STRING PRIMARY KEY) WITH (kafka_topic='a', partitions=3, "
        "value_format='JSON');"
    )
    case = _case(
        statements=[create], topics=[{"name": "b", "partitions": 2}], inputs=[{"topic": "c"}]
    )
    assert rqtt.topics_of(case) == {"b": 2, "a": 3, "c": 1}


def test_suffix_topics_renames_and_restores() -> None:
    case = _case(
        statements=[
            "CREATE STREAM S (ID STRING KEY) WITH (kafka_topic='t', value_format='JSON');",
            "CREATE TABLE AGG AS SELECT ID, COUNT(1) AS C FROM S GROUP BY ID;",
            "CREATE STREAM `low` WITH (value_format='JSON') AS SELECT * FROM S;",
            "SELECT * FROM AGG;",
        ],
        inputs=[{"topic": "t"}],
        outputs=[{"topic": "AGG"}],
    )
    renamed, back = rqtt.suffix_topics(case, "_rq7")
    assert "kafka_topic='t_rq7'" in renamed["statements"][0]
    assert renamed["statements"][1].startswith("CREATE TABLE AGG WITH (KAFKA_TOPIC='AGG_rq7') AS")
    assert "WITH (KAFKA_TOPIC='low_rq7', value_format='JSON')" in renamed["statements"][2]
    assert renamed["statements"][3] == "SELECT * FROM AGG;"
    assert renamed["inputs"] == [{"topic": "t_rq7"}] and renamed["outputs"] == [
        {"topic": "AGG_rq7"}
    ]
    answer = {"statementText": renamed["statements"][1], "message": "topic t_rq7 exists"}
    assert rqtt.restore_names(answer, back) == {
        "statementText": case["statements"][1],
        "message": "topic t exists",
    }


def test_query_rows_compare_as_a_multiset_unless_verify_order() -> None:
    expected = [
        {"header": {"schema": "`ID` STRING KEY, `C` BIGINT"}},
        {"row": {"columns": ["a", 1]}},
        {"row": {"columns": ["b", 2]}},
    ]
    got = rqtt.query_items(
        [HEADER, {"row": {"columns": ["b", 2]}}, {"row": {"columns": ["a", 1]}}, SERVED]
    )
    rqtt.verify_query(got, expected, [], 0, verify_order=False)
    with pytest.raises(Mismatch) as caught:
        rqtt.verify_query(got, expected, [], 0, verify_order=True)
    assert caught.value.cause == "wrong rows"


def test_query_numbers_keep_their_kind() -> None:
    expected = [{"header": {"schema": "x"}}, {"row": {"columns": ["a", 1]}}]
    got = [{"header": {"schema": "x"}}, {"row": {"columns": ["a", 1.0]}}]
    with pytest.raises(Mismatch) as caught:
        rqtt.verify_query(got, expected, [], 0, verify_order=False)
    assert caught.value.cause == "wrong rows"


def test_query_item_counts() -> None:
    expected = [{"header": {"schema": "x"}}, {"finalMessage": "Query Completed"}]
    with pytest.raises(Mismatch) as caught:
        rqtt.verify_query([{"header": {"schema": "x"}}], expected, [], 0, verify_order=False)
    assert caught.value.cause == "final message missing"
    with pytest.raises(Mismatch) as caught:
        rqtt.verify_query(
            [{"header": {"schema": "x"}}, {"row": {"columns": [1]}}],
            [{"header": {"schema": "x"}}],
            [],
            0,
            verify_order=False,
        )
    assert caught.value.cause == "extra rows"
    with pytest.raises(Mismatch) as caught:
        rqtt.verify_query(
            [{"header": {"schema": "y"}}], [{"header": {"schema": "x"}}], [], 0, False
        )
    assert caught.value.cause == "wrong header"


def test_admin_responses_compare_given_keys_with_macros_and_prefixes() -> None:
    statements = ["CREATE STREAM S (A INT) WITH (kafka_topic='t', value_format='JSON');"]
    actual = [
        (
            "admin",
            {
                "@type": "currentStatus",
                "statementText": statements[0],
                "commandStatus": {"status": "SUCCESS", "message": "Stream created"},
            },
        )
    ]
    rqtt.verify_responses(actual, [{"admin": {"@type": "currentStatus"}}], statements, False)
    rqtt.verify_responses(
        actual,
        [
            {
                "admin": {
                    "statementText": "{STATEMENT}",
                    "commandStatus": {"message|starts_with": "Stream"},
                }
            }
        ],
        statements,
        False,
    )
    with pytest.raises(Mismatch) as caught:
        rqtt.verify_responses(
            actual, [{"admin": {"@type": "sourceDescription"}}], statements, False
        )
    assert caught.value.cause == "wrong admin response"
    with pytest.raises(Mismatch, match="not enough"):
        rqtt.verify_responses(actual, [{"admin": {}}, {"admin": {}}], statements, False)


def test_errors_match_by_type_message_and_status() -> None:
    body = {
        "@type": "statement_error",
        "error_code": 40001,
        "message": "Pull queries don't support "
        "GROUP BY clauses. See https://cnfl.io/queries for more info.",
    }
    statement_error = "io.confluent.ksql.rest.entity.KsqlStatementErrorMessage"
    assert (
        rqtt.error_mismatch(
            {"type": statement_error, "message": "GROUP BY clauses", "status": 400}, 400, body
        )
        is None
    )
    assert (
        rqtt.error_mismatch(
            {"type": "io.confluent.ksql.rest.entity.KsqlErrorMessage"},
            400,
            {**body, "@type": "generic_error"},
        )
        is None
    )
    assert "statement_error" in (
        rqtt.error_mismatch({"type": statement_error}, 400, {**body, "@type": "generic_error"})
        or ""
    )
    assert "contain" in (rqtt.error_mismatch({"message": "JOIN"}, 400, body) or "")
    assert "status" in (rqtt.error_mismatch({"status": 400}, 500, body) or "")


def test_report_counts_pull_cases_apart() -> None:
    outcomes = [
        rqtt.Outcome("f", "a", "passed", pull=True),
        rqtt.Outcome("f", "b", "failed", "wrong rows", "x", pull=True),
        rqtt.Outcome("f", "c", "skipped", "disabled in the corpus", pull=False),
    ]
    text = rqtt.report(outcomes, verbose=False)
    assert "1 passed, 1 failed, 1 skipped" in text
    assert "pull-query cases: 1 of 2 passed (50.0%" in text
    assert json.dumps(text)  # plain text


def test_values_are_judged_as_ksqldbs_expected_record_comparator_judges_them() -> None:
    from decimal import Decimal

    from conformance.cases import same

    assert same(3, 3.0)  # compareNumber: expected.intValue() == actual
    assert same(3, 3.7)  # (Java truncates, so this matches too)
    assert not same(3, 4.0)
    assert same(2.5, 2.5000000001)  # doubles within 1e-6
    assert not same(1, True)
    assert not same(Decimal("3.4"), "3.40")  # BigDecimal.equals: the scale counts
    assert same(Decimal("3.40"), "3.40")
    assert same({"A": 1}, {"a": 1.0})  # a field by its name, then upper-cased


def _proto_answer(rows: list[list[object]], final: str | None) -> tuple[list[dict], str]:
    items = list(protobuf_items("q", [("K", "INTEGER"), ("T", "STRING")], "", iter(rows), final))
    return items, items[0]["header"]["protoSchema"]


def test_protobuf_rows_are_judged_by_their_text_as_ksqldb_judges_them() -> None:
    items, schema = _proto_answer([[1, "a1"], [2, "a2"]], "Query Completed")
    expected = [
        {"header": {"protoSchema": schema}},
        {"row": 'K: 2\nT: "a2"\n'},
        {"row": 'K: 1\nT: "a1"\n'},
        {"finalMessage": "Query Completed"},
    ]
    rqtt.verify_query_proto(items, expected, 3, verify_order=False)
    with pytest.raises(Mismatch, match="wrong protobuf rows"):
        rqtt.verify_query_proto(items, expected, 3, verify_order=True)
    wrong = [*expected[:1], {"row": 'K: 2\nT: "a3"\n'}, *expected[2:]]
    with pytest.raises(Mismatch, match="wrong protobuf rows"):
        rqtt.verify_query_proto(items, wrong, 3, verify_order=False)
    with pytest.raises(Mismatch, match="wrong final message"):
        rqtt.verify_query_proto(items, [*expected[:3], {"finalMessage": "Limit Reached"}], 3, False)
    with pytest.raises(Mismatch, match="wrong protobuf schema"):
        rqtt.verify_query_proto(items, [{"header": {"protoSchema": "x"}}, *expected[1:]], 3, False)
    with pytest.raises(Mismatch):
        rqtt.verify_query_proto(items[:-1], expected, 3, verify_order=False)
