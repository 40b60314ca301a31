"""The headwater SQL dialect (ksqlDB's SQL) on sqlglot."""
