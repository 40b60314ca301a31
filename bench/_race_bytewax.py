"""The race's peer: the peers' filter + projection as a bytewax 0.21 dataflow.

Run by `bench.race` with bytewax's own Python (a scratch virtual environment; this file imports
nothing of headwater): ``python -m bytewax.run _race_bytewax:flow``, the broker and topics in the
environment (RACE_BOOTSTRAP, RACE_INPUT, RACE_OUTPUT). One worker, as measured in
../shared/notes/kafka-and-spark-here.md.
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


flow = Dataflow("race")
read = kop.input(
    "in",
    flow,
    brokers=BROKERS,
    topics=[os.environ["RACE_INPUT"]],
    starting_offset=OFFSET_BEGINNING,
    batch_size=10_000,
)
kop.output(
    "out",
    op.filter_map("project", read.oks, project),
    brokers=BROKERS,
    topic=os.environ["RACE_OUTPUT"],
    add_config={"linger.ms": "5"},
)
