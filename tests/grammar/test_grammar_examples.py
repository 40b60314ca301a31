"""Keeps grammar/README.md and the parser in step.

Every ```sql block of the grammar page is parsed with ``headwater.sqlparse_ext.parse`` (one test case per
block, named after its section); each statement must print back (``to_sql``) to SQL that parses to an
equal statement. The page's structure is checked too: every ```ebnf production is followed by at least
one example, and every statement family has its section.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

import pytest

README = Path(__file__).resolve().parents[2] / "grammar" / "README.md"

# The statement families the page must document, as its `## ` section titles.
FAMILIES = [
    "Lexical structure",
    "Scripts and statements",
    "CREATE STREAM",
    "CREATE TABLE",
    "WITH properties",
    "CREATE SOURCE STREAM and CREATE SOURCE TABLE",
    "OR REPLACE and IF NOT EXISTS",
    "CREATE STREAM AS SELECT and CREATE TABLE AS SELECT",
    "INSERT INTO ... SELECT",
    "INSERT INTO ... VALUES",
    "SELECT: push queries",
    "SELECT: pull queries",
    "Windows: TUMBLING, HOPPING, SESSION",
    "JOIN",
    "GROUP BY and HAVING",
    "PARTITION BY",
    "LIMIT",
    "Expressions",
    "Pseudo-columns",
    "Data types",
    "CREATE TYPE and DROP TYPE",
    "ALTER STREAM and ALTER TABLE",
    "DROP STREAM and DROP TABLE",
    "TERMINATE, PAUSE and RESUME",
    "SHOW and LIST",
    "DESCRIBE",
    "EXPLAIN",
    "PRINT",
    "SET and UNSET",
    "DEFINE and UNDEFINE",
    "RUN SCRIPT",
]


class Block(NamedTuple):
    lang: str
    text: str
    line: int  # 1-based line of the opening fence
    section: str  # title of the enclosing `## ` section
    case_id: str


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "top"


def _read_blocks() -> tuple[list[Block], list[str]]:
    """The fenced code blocks of the page, in order, and its `## ` section titles."""
    blocks: list[Block] = []
    sections: list[str] = []
    section = ""
    counts: dict[tuple[str, str], int] = {}
    fence: tuple[str, int] | None = None
    body: list[str] = []
    for number, line in enumerate(README.read_text(encoding="utf-8").splitlines(), start=1):
        if fence is None:
            opening = re.match(r"^```\s*([A-Za-z0-9_+-]*)\s*$", line)
            if opening:
                fence, body = (opening.group(1).lower(), number), []
            elif line.startswith("## "):
                section = line[3:].strip()
                sections.append(section)
            continue
        if line.strip() == "```":
            lang, start = fence
            key = (lang, section)
            counts[key] = counts.get(key, 0) + 1
            case_id = f"{_slug(section)}-{counts[key]}"
            blocks.append(Block(lang, "\n".join(body), start, section, case_id))
            fence = None
        else:
            body.append(line)
    assert fence is None, f"grammar/README.md: code block opened at line {fence[1]} is never closed"
    return blocks, sections


BLOCKS, SECTIONS = _read_blocks()
SQL_BLOCKS = [block for block in BLOCKS if block.lang == "sql"]


# ---------------------------------------------------------------------------------------------------
# Comparing statements. The parser's statements are frozen dataclasses (headwater.sqlparse_ext
# .statements) whose equality covers their typed fields and leaves out the source text, the position
# (line, column, offset) and the sqlglot expression they were built from: `==` is the round-trip check.


def _same_statement(reparsed: Any, original: Any) -> bool:
    return type(reparsed) is type(original) and reparsed == original


def _describe(statement: Any) -> str:
    return f"{type(statement).__name__}: {statement!r}"


def _parse_error_text(error: Exception) -> str:
    line, column = getattr(error, "line", None), getattr(error, "column", None)
    message = getattr(error, "message", None) or str(error)
    return message if message.startswith("line ") else f"line {line}:{column}: {message}"


# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("block", SQL_BLOCKS, ids=[block.case_id for block in SQL_BLOCKS])
def test_example_parses_and_round_trips(block: Block) -> None:
    from headwater.sqlparse_ext import ParseError, parse, parse_one, to_sql

    where = f"grammar/README.md line {block.line} ({block.section})"
    try:
        statements = parse(block.text)
    except ParseError as error:
        pytest.fail(f"{where}: example does not parse: {_parse_error_text(error)}\n{block.text}")
    assert statements, f"{where}: example parsed to no statement\n{block.text}"

    for statement in statements:
        printed = to_sql(statement)
        assert isinstance(printed, str) and printed.strip(), f"{where}: to_sql gave {printed!r}"
        try:
            reparsed = parse_one(printed)
        except ParseError as error:
            pytest.fail(
                f"{where}: to_sql output does not parse: {_parse_error_text(error)}\n"
                f"printed: {printed}"
            )
        assert _same_statement(reparsed, statement), (
            f"{where}: statement changes when printed and parsed again\n"
            f"printed:  {printed}\n"
            f"original: {_describe(statement)}\n"
            f"reparsed: {_describe(reparsed)}"
        )
        reprinted = to_sql(reparsed)
        assert reprinted == printed, (
            f"{where}: printing is not stable\nfirst:  {printed}\nsecond: {reprinted}"
        )


def test_page_has_examples() -> None:
    assert len(SQL_BLOCKS) >= 30, f"only {len(SQL_BLOCKS)} ```sql examples in grammar/README.md"
    assert all(block.text.strip() for block in BLOCKS), "empty code block in grammar/README.md"
    assert len({block.case_id for block in SQL_BLOCKS}) == len(SQL_BLOCKS)


def test_every_production_has_an_example() -> None:
    missing = []
    ebnf_count = 0
    for index, block in enumerate(BLOCKS):
        if block.lang != "ebnf":
            continue
        ebnf_count += 1
        following = []
        for later in BLOCKS[index + 1 :]:
            if later.lang == "ebnf":
                break
            following.append(later)
        if not any(later.lang == "sql" for later in following):
            missing.append(f"line {block.line} ({block.section})")
    assert ebnf_count > 0, "no ```ebnf block in grammar/README.md"
    assert not missing, "```ebnf blocks without a ```sql example after them: " + ", ".join(missing)


def test_every_ebnf_block_defines_a_production() -> None:
    undefined = [
        f"line {block.line} ({block.section})"
        for block in BLOCKS
        if block.lang == "ebnf"
        and not re.search(r"^\s*[a-z_][a-z0-9_]*\s*=", block.text, re.MULTILINE)
    ]
    assert not undefined, "```ebnf blocks without a production: " + ", ".join(undefined)


def test_every_statement_family_has_a_section() -> None:
    missing = [family for family in FAMILIES if family not in SECTIONS]
    assert not missing, f"grammar/README.md has no `## ` section for: {missing}"
    for family in FAMILIES:
        in_section = [block for block in BLOCKS if block.section == family]
        assert any(block.lang == "sql" for block in in_section), (
            f"section {family!r} has no example"
        )
