"""A schema registry inside the node: Confluent's REST API over a compacted topic.

Clients that speak Confluent Schema Registry's v1 API (confluent-kafka's SchemaRegistryClient and
serializers, Confluent's Java serdes, curl) use a headwater node as their registry; the node's
own AVRO, PROTOBUF and JSON_SR formats use it unless ``ksql.schema.registry.url`` names another.

- ``errors``: the API's errors, with Confluent's HTTP statuses and error codes.
- ``compatibility``: Confluent's compatibility levels over each kind's rules
  (``avro_rules``, ``protobuf_rules``, ``json_rules``: parsing, canonical text, whether a new
  schema can read what an old one wrote). Pure.
"""
