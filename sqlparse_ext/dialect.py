"""The headwater SQL dialect (ksqlDB's SQL) as a sqlglot ``Dialect``.

Pure: no I/O. Importing this module registers the dialect under the name ``"headwater"``.
"""

from __future__ import annotations

from sqlglot import tokens
from sqlglot.dialects.dialect import Dialect, NormalizationStrategy

from headwater.sqlparse_ext.generator import Generator
from headwater.sqlparse_ext.parser import Parser
from headwater.sqlparse_ext.tokenizer import Tokenizer

if tokens.SQLGLOTC_INSTALLED:  # pragma: no cover - depends on the environment
    raise ImportError(
        "headwater.sqlparse_ext needs the pure-Python sqlglot: the compiled add-on "
        "(sqlglot[c] / sqlglotc) forbids subclassing sqlglot's Parser and Generator. "
        "Run `pip uninstall sqlglotc` and keep plain `sqlglot==30.30.0`."
    )


class Headwater(Dialect):
    """ksqlDB's SQL: streams, tables, windows, EMIT, struct dereference and lambdas."""

    NORMALIZATION_STRATEGY = NormalizationStrategy.UPPERCASE
    """Unquoted identifiers mean their upper-cased name; quoted ones keep their case."""

    INDEX_OFFSET = 0
    """Subscripts stay as written: ksqlDB's are 1-based and negative ones count from the end."""

    IDENTIFIERS_CAN_START_WITH_DIGIT = True
    """ksqlDB's DIGIT_IDENTIFIER: names such as ``1AB`` are identifiers."""

    Tokenizer = Tokenizer
    Parser = Parser
    Generator = Generator
