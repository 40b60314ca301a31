"""A persistent query on Spark over the node's own schema registry (issue 33): records written by
confluent-kafka's AvroSerializer are read by a CSAS, which writes AVRO that confluent-kafka's
AvroDeserializer reads back, every schema coming from ``<server>/registry``. The server asks for
BASIC logins, so Spark's processes reach the registry with the server's token, as they must.
Real broker, real server, Spark (~30 s with its start)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from headwater.kafka.broker import EmbeddedBroker
from headwater.kafka.clients import consumer

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

USER, PASSWORD = "fred", "let me in"
ORDER = (
    '{"type":"record","name":"Order","namespace":"shop","fields":'
    '[{"name":"ID","type":"int"},{"name":"ITEM","type":"string"},{"name":"QTY","type":"int"}]}'
)


def _read(broker: EmbeddedBroker, topic: str, want: int, timeout_s: float = 120.0) -> list[bytes]:
    reader = consumer(broker.settings(), f"check-{uuid.uuid4().hex[:6]}")
    got: list[bytes] = []
    try:
        reader.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout_s
        while len(got) < want and time.monotonic() < deadline:
            for message in reader.consume(100, 0.5):
                if message.error() is None and message.value() is not None:
                    got.append(message.value())
    finally:
        reader.close()
    return got


def test_a_csas_reads_and_writes_avro_through_the_nodes_registry(  # type: ignore[no-untyped-def]
    memory_broker: EmbeddedBroker, server_factory, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6].upper()  # unquoted names are upper-cased: topics too
    users = tmp_path / "users.properties"
    users.write_text(f"{USER}: {PASSWORD},user\n", encoding="utf-8")
    server = server_factory(
        "-b",
        memory_broker.bootstrap_servers,
        "--state-dir",
        str(tmp_path / "node"),
        "--service-id",
        f"srs_{suffix}_",
        "--set",
        f"headwater.schema.registry.topic=_schemas_{suffix}",
        "--set",
        "authentication.method=BASIC",
        "--set",
        f"authentication.basic.credentials.file={users}",
    )
    server.auth = (USER, PASSWORD)
    source, sink = f"orders_{suffix}", f"BIG_{suffix}"
    made = server.ksql(
        f"CREATE STREAM PRE_{suffix} (X INT) WITH (kafka_topic='{source}', partitions=1, "
        "value_format='JSON');"
    )
    assert made.status_code == 200, made.text
    registry = SchemaRegistryClient(
        {"url": f"{server.url}/registry", "basic.auth.user.info": f"{USER}:{PASSWORD}"}
    )
    try:
        to_avro = AvroSerializer(registry, ORDER)
        producer = Producer({"bootstrap.servers": memory_broker.bootstrap_servers})
        where = SerializationContext(source, MessageField.VALUE)
        for i in range(5):
            producer.produce(
                source, value=to_avro({"ID": i, "ITEM": f"i{i}", "QTY": i * 10}, where)
            )
        assert producer.flush(10) == 0
        created = server.ksql(
            f"CREATE STREAM ORDERS_{suffix} WITH (kafka_topic='{source}', value_format='AVRO');"
            f"CREATE STREAM {sink} WITH (value_format='AVRO') AS SELECT ID, UCASE(ITEM) AS ITEM, "
            f"QTY * 2 AS QTY FROM ORDERS_{suffix} WHERE QTY >= 20;",
            streamsProperties={"auto.offset.reset": "earliest"},
        )
        assert created.status_code == 200, created.text
        written = _read(memory_broker, sink, 3)
        assert len(written) == 3, server.log()[-3000:]
        from_avro = AvroDeserializer(registry)
        rows: list[Any] = [
            from_avro(value, SerializationContext(sink, MessageField.VALUE)) for value in written
        ]
        assert sorted((r["ID"], r["ITEM"], r["QTY"]) for r in rows) == [
            (2, "I2", 40),
            (3, "I3", 60),
            (4, "I4", 80),
        ]
        assert f"{sink}-value" in registry.get_subjects()
    finally:
        registry.close()
