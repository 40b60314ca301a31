"""headwater.engine.spark: persistent queries on Apache Spark (session, Kafka source, sink, runner).

Spark distributes and keeps offsets and checkpoints; what a query computes per record is
`headwater.engine.persistent`'s, run inside Spark's Python workers.
"""
