"""A catalog built as a server builds it, for the engine's pure tests: each statement planned with
the engine's query analysis and folded through the command log's `Fold`. No broker, no JVM."""

from __future__ import annotations

from headwater.engine.persistent import QUERY_ANALYZER
from headwater.metastore.catalog import Catalog
from headwater.metastore.plan import TopicFacts, plan
from headwater.metastore.records import CommandRecord, encode
from headwater.metastore.replay import Fold
from headwater.sqlparse_ext import parse_one


def catalog_of(facts: TopicFacts, *statements: str) -> Catalog:
    """The catalog after ``statements`` (each must succeed), over topics with ``facts``."""
    fold = Fold()
    for offset, text in enumerate(statements):
        planned = plan(parse_one(text), fold.catalog, facts, QUERY_ANALYZER)
        assert planned.command is not None, text
        outcome = fold.feed(
            offset, encode(CommandRecord(f"c{offset}", offset, text, planned.command))
        )
        assert outcome is not None and outcome.state.value == "SUCCESS", outcome
    return fold.catalog
