"""The words the shell knows without asking a server: keywords, statement openers, functions,
pseudo-columns and well-known streams properties. Pure: no I/O.

Keywords start from the reserved words of ``headwater.sqlparse_ext``'s tokenizer and add the
ksqlDB words its parser matches by text (ksqlDB reserves few words, see the tokenizer's docstring).
The lexer (highlighting) and the completer read the same tuples, so both agree.
"""

from __future__ import annotations

from headwater.sqlparse_ext.tokenizer import RESERVED_WORDS

__all__ = [
    "DATA_TYPES",
    "FUNCTIONS",
    "KEYWORDS",
    "LOCAL_COMMANDS",
    "PROPERTIES",
    "PSEUDO_COLUMNS",
    "SHOWABLE",
    "STATEMENT_STARTS",
]

#: ksqlDB words the parser matches by text (non-reserved), beyond the tokenizer's reserved words.
_NON_RESERVED = (
    "ADVANCE",
    "ALTER",
    "ASSERT",
    "BEGINNING",
    "BY",
    "CHANGES",
    "COLUMN",
    "CONNECTOR",
    "CONNECTORS",
    "DEFINE",
    "DELETE",
    "DESCRIBE",
    "EMIT",
    "EXPLAIN",
    "EXTENDED",
    "FINAL",
    "FUNCTION",
    "FUNCTIONS",
    "GRACE",
    "HEADER",
    "HEADERS",
    "HOPPING",
    "IF",
    "INTERVAL",
    "KEY",
    "LIST",
    "PAUSE",
    "PERIOD",
    "PRIMARY",
    "PRINT",
    "PROPERTIES",
    "QUERIES",
    "REPLACE",
    "RESUME",
    "RETENTION",
    "RUN",
    "SCHEMA",
    "SCRIPT",
    "SESSION",
    "SET",
    "SHOW",
    "SIZE",
    "SOURCE",
    "STREAM",
    "STREAMS",
    "SUBJECT",
    "TABLES",
    "TERMINATE",
    "TIMEOUT",
    "TOPIC",
    "TOPICS",
    "TUMBLING",
    "TYPE",
    "TYPES",
    "UNDEFINE",
    "UNSET",
    "VARIABLES",
    "WITHIN",
)

KEYWORDS: tuple[str, ...] = tuple(
    sorted({w for phrase in RESERVED_WORDS for w in phrase.split()} | set(_NON_RESERVED))
)
"""Every keyword, one word each, sorted."""

STATEMENT_STARTS: tuple[str, ...] = (
    "SELECT",
    "CREATE",
    "INSERT",
    "DROP",
    "SHOW",
    "LIST",
    "DESCRIBE",
    "EXPLAIN",
    "TERMINATE",
    "PAUSE",
    "RESUME",
    "PRINT",
    "SET",
    "UNSET",
    "DEFINE",
    "UNDEFINE",
    "RUN",
    "ASSERT",
    "ALTER",
)
"""Words a statement can start with, in the order a user most often wants them."""

SHOWABLE: tuple[str, ...] = (
    "STREAMS",
    "TABLES",
    "QUERIES",
    "TOPICS",
    "PROPERTIES",
    "VARIABLES",
    "TYPES",
    "FUNCTIONS",
    "CONNECTORS",
    "ALL",
)
"""What SHOW/LIST can list (the parser's _SHOWABLE)."""

DATA_TYPES: tuple[str, ...] = (
    "ARRAY",
    "BIGINT",
    "BOOLEAN",
    "BYTES",
    "DATE",
    "DECIMAL",
    "DOUBLE",
    "INT",
    "INTEGER",
    "MAP",
    "STRING",
    "STRUCT",
    "TIME",
    "TIMESTAMP",
    "VARCHAR",
)

FUNCTIONS: tuple[str, ...] = (
    "ABS",
    "ARRAY_CONTAINS",
    "ARRAY_LENGTH",
    "AS_VALUE",
    "AVG",
    "CAST",
    "CEIL",
    "COALESCE",
    "COLLECT_LIST",
    "COLLECT_SET",
    "CONCAT",
    "CONCAT_WS",
    "COUNT",
    "COUNT_DISTINCT",
    "EARLIEST_BY_OFFSET",
    "EXTRACTJSONFIELD",
    "FLOOR",
    "FORMAT_TIMESTAMP",
    "HISTOGRAM",
    "IFNULL",
    "INSTR",
    "LATEST_BY_OFFSET",
    "LCASE",
    "LEN",
    "MAX",
    "MIN",
    "PARSE_TIMESTAMP",
    "REPLACE",
    "ROUND",
    "SPLIT",
    "SUBSTRING",
    "SUM",
    "TIMESTAMPTOSTRING",
    "TOPK",
    "TOPKDISTINCT",
    "TRIM",
    "UCASE",
    "UNIX_TIMESTAMP",
)
"""Built-in functions offered where an expression may start."""

PSEUDO_COLUMNS: tuple[str, ...] = (
    "ROWTIME",
    "ROWPARTITION",
    "ROWOFFSET",
    "WINDOWSTART",
    "WINDOWEND",
)
"""Columns every source has in ksqlDB without declaring them."""

PROPERTIES: tuple[str, ...] = (
    "acceptable.offset.lag",
    "auto.offset.reset",
    "cache.max.bytes.buffering",
    "commit.interval.ms",
    "ksql.persistence.default.format.key",
    "ksql.persistence.default.format.value",
    "ksql.query.pull.enable.standby.reads",
    "ksql.query.pull.max.allowed.offset.lag",
    "ksql.query.pull.range.scan.enabled",
    "ksql.query.pull.table.scan.enabled",
    "ksql.streams.num.stream.threads",
    "ksql.variable.substitution.enable",
    "processing.guarantee",
)
"""Streams properties offered after SET/UNSET (any name may be set)."""

LOCAL_COMMANDS: tuple[str, ...] = ("exit", "quit", "help", "clear", "output")
"""Shell commands (no `;` needed), handled by the REPL itself as ksqlDB's CLI does."""
