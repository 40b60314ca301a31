"""``ksql.query.persistent.active.limit`` when a statement is planned: ksqlDB's check and message,
no broker, no Spark."""

from __future__ import annotations

import pytest

from headwater.config import ConfigError, ServerConfig, load
from headwater.engine.persistent import QUERY_ANALYZER
from headwater.metastore.catalog import Catalog
from headwater.metastore.errors import TooManyPersistentQueries, ValidationError
from headwater.metastore.plan import TopicFacts, check_capacity, plan
from headwater.metastore.records import CommandRecord, encode
from headwater.metastore.replay import Fold
from headwater.sqlparse_ext import parse_one

FACTS = TopicFacts({"orders": 2})
ORDERS = (
    "CREATE STREAM orders (id STRING KEY, qty INT) WITH (kafka_topic='orders', "
    "value_format='JSON');"
)

#: ksqlDB's QueryCapacityUtilTest, word for word (count 3, limit 2).
KSQLDB_MESSAGE = (
    "Not executing statement(s) as it would cause the number of active, persistent queries to "
    "exceed the configured limit. Use the TERMINATE command to terminate existing queries, or "
    "increase the 'ksql.query.persistent.active.limit' setting via the 'ksql-server.properties' "
    "file. Current persistent query count: 3. Configured limit: 2."
)


class _Log:
    """Statements planned and folded in order, as the command runner applies them."""

    def __init__(self) -> None:
        self.fold = Fold()
        self.offset = 0

    @property
    def catalog(self) -> Catalog:
        return self.fold.catalog

    def plan(self, text: str, limit: int) -> dict[str, object]:
        planned = plan(parse_one(text), self.catalog, FACTS, QUERY_ANALYZER, limit)
        assert planned.command is not None, text
        return dict(planned.command)

    def apply(self, text: str, limit: int = 2**31 - 1) -> None:
        command = self.plan(text, limit)
        outcome = self.fold.feed(
            self.offset, encode(CommandRecord(f"c{self.offset}", self.offset, text, command))
        )
        assert outcome is not None and outcome.state.value == "SUCCESS", outcome
        self.offset += 1


def test_check_capacity_is_ksqldbs_check_and_message() -> None:
    check_capacity(2, 2)  # at the limit: accepted (ksqlDB refuses only count > limit)
    with pytest.raises(TooManyPersistentQueries) as refused:
        check_capacity(3, 2)
    assert refused.value.message == KSQLDB_MESSAGE
    assert refused.value.error_code == 40000  # ksqlDB: a request error, 400 / 40000


def test_the_limit_counts_persistent_queries_and_terminate_frees_a_slot() -> None:
    log = _Log()
    log.apply(ORDERS)
    log.apply("CREATE STREAM a AS SELECT id, qty FROM orders;", limit=2)
    log.apply("INSERT INTO a SELECT id, qty * 2 AS qty FROM orders;", limit=2)
    assert len(log.catalog.queries) == 2
    for text in (
        "CREATE STREAM b AS SELECT id, qty FROM orders;",
        "INSERT INTO a SELECT id, qty + 1 AS qty FROM orders;",
    ):
        with pytest.raises(
            TooManyPersistentQueries,
            match="Current persistent query count: 3. Configured limit: 2.",
        ):
            log.plan(text, limit=2)
    # statements that start no query are not counted, at the limit or beyond it
    log.apply(
        "CREATE STREAM more (id STRING KEY, v INT) WITH (kafka_topic='orders', "
        "value_format='JSON');",
        limit=1,
    )
    # an invalid statement is told what is wrong with it first, as in ksqlDB
    with pytest.raises(ValidationError, match="NOPE does not exist") as invalid:
        log.plan("CREATE STREAM c AS SELECT id FROM nope;", limit=2)
    assert not isinstance(invalid.value, TooManyPersistentQueries)
    # TERMINATE frees a slot
    victim = min(log.catalog.queries)
    log.apply(f"TERMINATE {victim};")
    log.apply("CREATE STREAM b AS SELECT id, qty FROM orders;", limit=2)
    assert len(log.catalog.queries) == 2
    # a lower limit than the queries there are (a restart with a smaller setting): no new one
    with pytest.raises(TooManyPersistentQueries, match="count: 3. Configured limit: 1."):
        log.plan("CREATE STREAM c AS SELECT id, qty FROM orders;", limit=1)


def test_the_setting_is_read_and_checked() -> None:
    assert ServerConfig().persistent_active_limit == 20
    config = load(overrides=["ksql.query.persistent.active.limit=3"])
    assert config.persistent_active_limit == 3
    assert (
        load(overrides=["ksql.query.persistent.active.limit=2147483647"]).persistent_active_limit
        == 2**31 - 1
    )
    with pytest.raises(ConfigError, match=r"ksql.query.persistent.active.limit='0'.*\[1, "):
        load(overrides=["ksql.query.persistent.active.limit=0"])
