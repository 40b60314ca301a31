"""Materialized tables: local persistent key-value stores per table partition (docs/architecture.md,
"The path of a statement").

- `keys`: order-preserving encoding of typed SQL key values to bytes (pure).
- `api`: the `PartitionStore` protocol, `WriteBatch`, `StoreId`, `StoreEngine` (pure).
- `memory`: the in-memory store every package tests with (pure).
- `lmdb`: the on-disk store, one LMDB environment per table partition (I/O).
- `local`: `LocalStores`, the stores under a server's state folder (I/O).
- `lag`: KIP-535 `LagInfo` (pure).
- `records`: the stored value envelope (timestamp, offset, raw value), restore batching, partition status (pure).
- `tables`: which topic partition feeds which table partition, and the status board (pure).
- `restorer`: `TableRestorer`, one consumer thread materializing table topics into the stores (I/O).
- `errors`: `StoreError` and its subclasses, with ksqlDB error codes (pure).
"""
