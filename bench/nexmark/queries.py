"""Nexmark's queries q0-q23 in headwater's SQL (ksqlDB's dialect), or why one is not written.

The Flink SQL of each query is nexmark/nexmark's ``nexmark-flink/src/main/resources/queries``;
ksqlDB's own dialect of q0-q4, q10-q12 and q20-q22 is timeplus-io/nexmark's
``docker/python/scripts/ksqldb``. Where Flink uses a subquery, the query here is a chain of
persistent queries, as ksqlDB's users build pipelines. Where a query's output differs in shape from
Flink's (a Flink TIMESTAMP is the event's text here, an extra key column is copied into the value),
`NexmarkQuery.note` says so; `bench.nexmark.reference` computes the same shape in plain Python.

Every object name starts with a per-run prefix ``{p}`` and every topic is ``{p}<kind>``, so runs
never share state. Each query's last statement creates ``{p}OUT``, the output it is judged by.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

_TIME = "TIMESTAMP='DATE_TIME', TIMESTAMP_FORMAT='yyyy-MM-dd HH:mm:ss.SSS'"

SOURCES: Final = (
    (
        "CREATE STREAM {p}PERSON (ID BIGINT, NAME STRING, EMAIL_ADDRESS STRING, CREDIT_CARD STRING, "
        "CITY STRING, STATE STRING, DATE_TIME STRING, EXTRA STRING) "
        f"WITH (KAFKA_TOPIC='{{p}}person', VALUE_FORMAT='JSON', {_TIME});"
    ),
    (
        "CREATE STREAM {p}AUCTION (ID BIGINT, ITEM_NAME STRING, DESCRIPTION STRING, INITIAL_BID BIGINT,"
        " RESERVE BIGINT, DATE_TIME STRING, EXPIRES STRING, SELLER BIGINT, CATEGORY BIGINT, "
        f"EXTRA STRING) WITH (KAFKA_TOPIC='{{p}}auction', VALUE_FORMAT='JSON', {_TIME});"
    ),
    (
        "CREATE STREAM {p}BID (AUCTION BIGINT, BIDDER BIGINT, PRICE BIGINT, CHANNEL STRING, "
        "URL STRING, DATE_TIME STRING, EXTRA STRING) "
        f"WITH (KAFKA_TOPIC='{{p}}bid', VALUE_FORMAT='JSON', {_TIME});"
    ),
)
"""The three event streams, on event time (the event's ``date_time``)."""

SIDE_INPUT: Final = (
    "CREATE TABLE {p}SIDE (K BIGINT PRIMARY KEY, V STRING) "
    "WITH (KAFKA_TOPIC='{p}side', KEY_FORMAT='JSON', VALUE_FORMAT='JSON');"
)
"""q13's side input: a table of 10,000 keys (`bench.nexmark.reference.side_input`)."""

_OUT = "{p}OUT"
_KEYED_OUT = "{p}OUT WITH (KEY_FORMAT='JSON')"  # a keyed output's key is JSON, as its value
_DAY = "SUBSTRING(DATE_TIME, 1, 10)"
_RANKS = (
    "SUM(CASE WHEN PRICE < 10000 THEN 1 ELSE 0 END) AS RANK1_BIDS, "
    "SUM(CASE WHEN PRICE >= 10000 AND PRICE < 1000000 THEN 1 ELSE 0 END) AS RANK2_BIDS, "
    "SUM(CASE WHEN PRICE >= 1000000 THEN 1 ELSE 0 END) AS RANK3_BIDS"
)


def _distinct(column: str, plural: str) -> str:
    return (
        f"COUNT_DISTINCT({column}) AS TOTAL_{plural}, "
        f"COUNT_DISTINCT(CASE WHEN PRICE < 10000 THEN {column} END) AS RANK1_{plural}, "
        f"COUNT_DISTINCT(CASE WHEN PRICE >= 10000 AND PRICE < 1000000 THEN {column} END) "
        f"AS RANK2_{plural}, "
        f"COUNT_DISTINCT(CASE WHEN PRICE >= 1000000 THEN {column} END) AS RANK3_{plural}"
    )


@dataclass(frozen=True)
class NexmarkQuery:
    """One Nexmark query: its statements after `SOURCES`, or why it is not written here."""

    name: str
    title: str
    kind: Literal["stream", "table"]  # the output: every record counts, or the last per key
    statements: tuple[str, ...] = ()
    refused: str | None = None
    note: str = ""
    side_input: bool = False  # reads `SIDE_INPUT` too

    def sql(self, prefix: str) -> list[str]:
        """The statements to run, sources first, with ``prefix`` on every name."""
        head = [*SOURCES, SIDE_INPUT] if self.side_input else list(SOURCES)
        return [s.replace("{p}", prefix) for s in (*head, *self.statements)]


QUERIES: Final[tuple[NexmarkQuery, ...]] = (
    NexmarkQuery(
        "q0",
        "pass through",
        "stream",
        (
            f"CREATE STREAM {_OUT} AS SELECT AUCTION, BIDDER, PRICE, DATE_TIME, EXTRA FROM {{p}}BID;",
        ),
    ),
    NexmarkQuery(
        "q1",
        "currency conversion",
        "stream",
        (
            (
                f"CREATE STREAM {_OUT} AS SELECT AUCTION, BIDDER, 0.908 * PRICE AS PRICE, DATE_TIME, "
                "EXTRA FROM {p}BID;"
            ),
        ),
        note="PRICE is DECIMAL(23, 3), as Flink's",
    ),
    NexmarkQuery(
        "q2",
        "selection",
        "stream",
        (f"CREATE STREAM {_OUT} AS SELECT AUCTION, PRICE FROM {{p}}BID WHERE AUCTION % 123 = 0;",),
    ),
    NexmarkQuery(
        "q3",
        "local item suggestion",
        "stream",
        (
            (
                f"CREATE STREAM {_KEYED_OUT} AS SELECT A.SELLER, P.NAME, P.CITY, P.STATE, A.ID AS ID "
                "FROM {p}AUCTION A JOIN {p}PERSON P WITHIN 1 HOUR GRACE PERIOD 1 HOUR "
                "ON A.SELLER = P.ID "
                "WHERE A.CATEGORY = 10 AND (P.STATE = 'OR' OR P.STATE = 'ID' OR P.STATE = 'CA');"
            ),
        ),
        note="a windowed stream-stream join (every event of a run is within the hour); "
        "the seller, the join key, is in the key",
    ),
    NexmarkQuery(
        "q4",
        "average price for a category",
        "table",
        (
            (
                "CREATE TABLE {p}FINAL_PRICE WITH (KEY_FORMAT='JSON') AS "
                "SELECT A.ID, A.CATEGORY, MAX(B.PRICE) AS FINAL "
                "FROM {p}AUCTION A JOIN {p}BID B WITHIN 1 HOUR GRACE PERIOD 1 HOUR "
                "ON A.ID = B.AUCTION WHERE B.DATE_TIME BETWEEN A.DATE_TIME AND A.EXPIRES "
                "GROUP BY A.ID, A.CATEGORY;"
            ),
            (
                f"CREATE TABLE {_KEYED_OUT} AS SELECT CATEGORY, AS_VALUE(CATEGORY) AS C, "
                "AVG(FINAL) AS AVG_FINAL FROM {p}FINAL_PRICE GROUP BY CATEGORY;"
            ),
        ),
        note="two persistent queries: the winning price per auction, then their average",
    ),
    NexmarkQuery(
        "q5",
        "hot items",
        "table",
        refused="aggregates a windowed table's counts per window and joins them back to it: "
        "ksqlDB's SQL neither aggregates nor joins windowed tables",
    ),
    NexmarkQuery(
        "q6",
        "average selling price by seller",
        "stream",
        refused="needs OVER (PARTITION BY ... ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) and "
        "ROW_NUMBER(): ksqlDB's SQL has no analytic functions",
    ),
    NexmarkQuery(
        "q7",
        "highest bid",
        "stream",
        refused="joins a windowed aggregate back to the bid stream: ksqlDB's SQL cannot join "
        "a windowed table",
    ),
    NexmarkQuery(
        "q8",
        "monitor new users",
        "stream",
        refused="joins two windowed tables on their windows: ksqlDB's SQL cannot join "
        "windowed tables",
    ),
    NexmarkQuery(
        "q9",
        "winning bids",
        "table",
        refused="needs ROW_NUMBER() OVER (PARTITION BY ... ORDER BY price DESC, dateTime ASC): "
        "TOPK orders by price alone, so a tie would pick another winner",
    ),
    NexmarkQuery(
        "q10",
        "log to file system",
        "stream",
        (
            (
                f"CREATE STREAM {_OUT} AS SELECT AUCTION, BIDDER, PRICE, DATE_TIME, EXTRA, "
                f"{_DAY} AS DT, SUBSTRING(DATE_TIME, 12, 5) AS HM FROM {{p}}BID;"
            ),
        ),
        note="to a topic, not files partitioned by DT and HM",
    ),
    NexmarkQuery(
        "q11",
        "user sessions",
        "table",
        (
            (
                f"CREATE TABLE {_KEYED_OUT} AS SELECT BIDDER, AS_VALUE(BIDDER) AS B, COUNT(*) AS BID_COUNT, "
                "WINDOWSTART AS STARTTIME, WINDOWEND AS ENDTIME "
                "FROM {p}BID WINDOW SESSION (10 SECONDS, GRACE PERIOD 1 HOUR) GROUP BY BIDDER;"
            ),
        ),
        note="ksqlDB's session windows: a session ends at its last event (Flink's at last + gap)",
    ),
    NexmarkQuery(
        "q12",
        "processing time windows",
        "table",
        (
            (
                "CREATE STREAM {p}BID_ARRIVAL (AUCTION BIGINT, BIDDER BIGINT, PRICE BIGINT) "
                "WITH (KAFKA_TOPIC='{p}bid', VALUE_FORMAT='JSON');"
            ),
            (
                f"CREATE TABLE {_KEYED_OUT} AS SELECT BIDDER, AS_VALUE(BIDDER) AS B, COUNT(*) AS BID_COUNT, "
                "WINDOWSTART AS STARTTIME, WINDOWEND AS ENDTIME "
                "FROM {p}BID_ARRIVAL WINDOW TUMBLING (SIZE 10 SECONDS, GRACE PERIOD 1 HOUR) "
                "GROUP BY BIDDER;"
            ),
        ),
        note="processing time is the record's Kafka timestamp, set when it is produced",
    ),
    NexmarkQuery(
        "q13",
        "bounded side input join",
        "stream",
        (
            (
                f"CREATE STREAM {_KEYED_OUT} AS SELECT S.K, B.AUCTION, B.BIDDER, B.PRICE, "
                "B.DATE_TIME, S.V AS VALUE FROM {p}BID B JOIN {p}SIDE S ON B.AUCTION % 10000 = S.K;"
            ),
        ),
        side_input=True,
        note="the side input is a table on a topic, written before the bids; its key, the "
        "join key, is the output's key",
    ),
    NexmarkQuery(
        "q14",
        "calculation",
        "stream",
        (
            (
                f"CREATE STREAM {_OUT} AS SELECT AUCTION, BIDDER, 0.908 * PRICE AS PRICE, "
                "CASE WHEN CAST(SUBSTRING(DATE_TIME, 12, 2) AS INT) >= 8 "
                "AND CAST(SUBSTRING(DATE_TIME, 12, 2) AS INT) <= 18 THEN 'dayTime' "
                "WHEN CAST(SUBSTRING(DATE_TIME, 12, 2) AS INT) <= 6 "
                "OR CAST(SUBSTRING(DATE_TIME, 12, 2) AS INT) >= 20 THEN 'nightTime' "
                "ELSE 'otherTime' END AS BID_TIME_TYPE, DATE_TIME, EXTRA, "
                "LEN(EXTRA) - LEN(REPLACE(EXTRA, 'c', '')) AS C_COUNTS FROM {p}BID "
                "WHERE 0.908 * PRICE > 1000000 AND 0.908 * PRICE < 50000000;"
            ),
        ),
        note="Flink's count_char UDF is LEN - LEN(REPLACE(...)); HOUR() is the text's hour",
    ),
    NexmarkQuery(
        "q15",
        "bidding statistics report",
        "table",
        (
            (
                f"CREATE TABLE {_KEYED_OUT} AS SELECT {_DAY} AS DAY, AS_VALUE({_DAY}) AS D, "
                f"COUNT(*) AS TOTAL_BIDS, {_RANKS}, {_distinct('BIDDER', 'BIDDERS')}, "
                f"{_distinct('AUCTION', 'AUCTIONS')} FROM {{p}}BID GROUP BY {_DAY};"
            ),
        ),
        note="COUNT(*) FILTER (WHERE ...) is SUM(CASE ...) and COUNT_DISTINCT(CASE ...)",
    ),
    NexmarkQuery(
        "q16",
        "channel statistics report",
        "table",
        (
            (
                f"CREATE TABLE {_KEYED_OUT} AS SELECT CHANNEL, {_DAY} AS DAY, AS_VALUE(CHANNEL) AS CH, "
                f"AS_VALUE({_DAY}) AS D, MAX(SUBSTRING(DATE_TIME, 12, 5)) AS MINUTE, "
                f"COUNT(*) AS TOTAL_BIDS, {_RANKS}, {_distinct('BIDDER', 'BIDDERS')}, "
                f"{_distinct('AUCTION', 'AUCTIONS')} FROM {{p}}BID GROUP BY CHANNEL, {_DAY};"
            ),
        ),
    ),
    NexmarkQuery(
        "q17",
        "auction statistics report",
        "table",
        (
            (
                f"CREATE TABLE {_KEYED_OUT} AS SELECT AUCTION, {_DAY} AS DAY, AS_VALUE(AUCTION) AS A, "
                f"AS_VALUE({_DAY}) AS D, COUNT(*) AS TOTAL_BIDS, {_RANKS}, MIN(PRICE) AS MIN_PRICE, "
                "MAX(PRICE) AS MAX_PRICE, AVG(PRICE) AS AVG_PRICE, SUM(PRICE) AS SUM_PRICE "
                f"FROM {{p}}BID GROUP BY AUCTION, {_DAY};"
            ),
        ),
        note="AVG is a DOUBLE (Flink's BIGINT truncates)",
    ),
    NexmarkQuery(
        "q18",
        "find last bid",
        "table",
        (
            (
                f"CREATE TABLE {_KEYED_OUT} AS SELECT BIDDER, AUCTION, AS_VALUE(BIDDER) AS B, "
                "AS_VALUE(AUCTION) AS A, LATEST_BY_OFFSET(PRICE) AS PRICE, "
                "LATEST_BY_OFFSET(CHANNEL) AS CHANNEL, LATEST_BY_OFFSET(URL) AS URL, "
                "LATEST_BY_OFFSET(DATE_TIME) AS DATE_TIME, LATEST_BY_OFFSET(EXTRA) AS EXTRA "
                "FROM {p}BID GROUP BY BIDDER, AUCTION;"
            ),
        ),
        note="the last bid by offset: all bids of an auction share a partition, in time order",
    ),
    NexmarkQuery(
        "q19",
        "auction TOP-10 price",
        "table",
        (
            (
                f"CREATE TABLE {_KEYED_OUT} AS SELECT AUCTION, AS_VALUE(AUCTION) AS A, "
                "TOPK(PRICE, BIDDER, DATE_TIME, 10) AS TOP_BIDS FROM {p}BID GROUP BY AUCTION;"
            ),
        ),
        note="one row per auction holding its top 10 bids (Flink: a row per bid and rank); "
        "verified by the top 10 prices and that each is a bid of that auction",
    ),
    NexmarkQuery(
        "q20",
        "expand bid with auction",
        "stream",
        (
            (
                f"CREATE STREAM {_KEYED_OUT} AS SELECT B.AUCTION, B.BIDDER, B.PRICE, B.CHANNEL, B.URL, "
                "B.DATE_TIME AS BID_DATE_TIME, B.EXTRA AS BID_EXTRA, A.ITEM_NAME, A.DESCRIPTION, "
                "A.INITIAL_BID, A.RESERVE, A.DATE_TIME AS AUCTION_DATE_TIME, A.EXPIRES, A.SELLER, "
                "A.CATEGORY, A.EXTRA AS AUCTION_EXTRA "
                "FROM {p}BID B JOIN {p}AUCTION A WITHIN 1 HOUR GRACE PERIOD 1 HOUR "
                "ON B.AUCTION = A.ID WHERE A.CATEGORY = 10;"
            ),
        ),
        note="a windowed stream-stream join (every event of a run is within the hour)",
    ),
    NexmarkQuery(
        "q21",
        "add channel id",
        "stream",
        (
            (
                f"CREATE STREAM {_OUT} AS SELECT AUCTION, BIDDER, PRICE, CHANNEL, "
                "CASE WHEN LCASE(CHANNEL) = 'apple' THEN '0' WHEN LCASE(CHANNEL) = 'google' THEN '1' "
                "WHEN LCASE(CHANNEL) = 'facebook' THEN '2' WHEN LCASE(CHANNEL) = 'baidu' THEN '3' "
                "ELSE REGEXP_EXTRACT('(&|^)channel_id=([^&]*)', URL, 2) END AS CHANNEL_ID "
                "FROM {p}BID WHERE REGEXP_EXTRACT('(&|^)channel_id=([^&]*)', URL, 2) IS NOT NULL "
                "OR LCASE(CHANNEL) IN ('apple', 'google', 'facebook', 'baidu');"
            ),
        ),
    ),
    NexmarkQuery(
        "q22",
        "get URL directories",
        "stream",
        (
            (
                f"CREATE STREAM {_OUT} AS SELECT AUCTION, BIDDER, PRICE, CHANNEL, "
                "SPLIT(URL, '/')[4] AS DIR1, SPLIT(URL, '/')[5] AS DIR2, SPLIT(URL, '/')[6] AS DIR3 "
                "FROM {p}BID;"
            ),
        ),
        note="ksqlDB's arrays count from 1: Flink's SPLIT_INDEX(url, '/', 3) is [4]",
    ),
    NexmarkQuery(
        "q23",
        "multi-way join",
        "stream",
        (
            (
                f"CREATE STREAM {_KEYED_OUT} AS SELECT B.BIDDER, B.PRICE, B.CHANNEL, B.URL, "
                "B.EXTRA AS BID_EXTRA, P.ID AS PERSON_ID, P.NAME, P.EMAIL_ADDRESS, P.CREDIT_CARD, "
                "P.CITY, P.STATE, P.EXTRA AS PERSON_EXTRA, A.ITEM_NAME, A.DESCRIPTION, "
                "A.INITIAL_BID, A.RESERVE, A.DATE_TIME AS AUCTION_DATE_TIME, A.EXPIRES, A.SELLER, "
                "A.CATEGORY, A.EXTRA AS AUCTION_EXTRA "
                "FROM {p}BID B JOIN {p}PERSON P WITHIN 1 HOUR GRACE PERIOD 1 HOUR ON P.ID = B.BIDDER "
                "JOIN {p}AUCTION A WITHIN 1 HOUR GRACE PERIOD 1 HOUR ON A.SELLER = B.BIDDER;"
            ),
        ),
        note="windowed stream-stream joins (every event of a run is within the hour)",
    ),
)

BY_NAME: Final = {q.name: q for q in QUERIES}
