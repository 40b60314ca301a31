"""headwater.engine.formats: record keys and values to and from the bytes of a Kafka topic.

`serde` builds a source's `RowSerde` (the KAFKA and NONE formats inline) over one module per
format: `_json` (JSON), `_delimited` (DELIMITED), `_avro` (AVRO), `_json_sr` (JSON_SR) and
`_protobuf` (PROTOBUF, PROTOBUF_NOSR, on `_proto_text`, .proto text to message classes); `windows`
is how Kafka Streams lays out a windowed key. The formats behind Confluent's wire header keep
their schemas in a `schema_registry` (the only module here that does I/O: HTTP to a registry);
`schema_inference` reads the columns a CREATE statement leaves out from it.
"""
