"""Materialized tables: local persistent key-value stores per table partition (ARCHITECTURE.md, store/)."""
