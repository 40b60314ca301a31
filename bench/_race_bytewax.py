"""The race's peer: the peers' workloads as a bytewax 0.21 dataflow.

Run by `bench.race` with bytewax's own Python (a scratch virtual environment; this file imports
nothing of headwater): ``python -m bytewax.run _race_bytewax:flow``, the broker, topics and workload
in the environment (RACE_BOOTSTRAP, RACE_INPUT, RACE_OUTPUT, RACE_WORKLOAD: ``filter``, the
default, or ``count``). One worker, as measured in ../shared/notes/kafka-and-spark-here.md.

- ``filter``: ``AMOUNT > 50``, projected to the upper-cased item, amount * price and amount;
- ``count``: a count per record key (bytewax's keyed ``stateful_map``), each update written as
  ``{"N": n}`` under its key: bytewax's way of keeping a running count.
"""

from __future__ import annotations

import os

import bytewax.operators as op
import orjson
from bytewax.connectors.kafka import KafkaSinkMessage
from bytewax.connectors.kafka import operators as kop
from bytewax.dataflow import Dataflow
from confluent_kafka import OFFSET_BEGINNING

BROKERS = [os.environ["RACE_BOOTSTRAP"]]


def project(message):  # type: ignore[no-untyped-def]
    row = orjson.loads(message.value)
    amount = row.get("AMOUNT")
    if amount is None or amount <= 50:
        return None
    out = {"ITEM": row["ITEM"].upper(), "TOTAL": amount * row["PRICE"], "AMOUNT": amount}
    return KafkaSinkMessage(message.key, orjson.dumps(out))


def count(state, _message):  # type: ignore[no-untyped-def]
    n = (state or 0) + 1
    return n, n


def encode(item):  # type: ignore[no-untyped-def]
    key, n = item
    return KafkaSinkMessage(key.encode("latin-1"), orjson.dumps({"N": n}))


flow = Dataflow("race")
read = kop.input(
    "in",
    flow,
    brokers=BROKERS,
    topics=[os.environ["RACE_INPUT"]],
    starting_offset=OFFSET_BEGINNING,
    batch_size=10_000,
)
if os.environ.get("RACE_WORKLOAD", "filter") == "count":
    keyed = op.key_on("key", read.oks, lambda m: (m.key or b"").decode("latin-1"))
    written = op.map("encode", op.stateful_map("count", keyed, count), encode)
else:
    written = op.filter_map("project", read.oks, project)
kop.output(
    "out", written, brokers=BROKERS, topic=os.environ["RACE_OUTPUT"], add_config={"linger.ms": "5"}
)
