"""How a parse error's message names its position."""

from __future__ import annotations


def names_position(message: str, line: int, column: int) -> bool:
    """The message starts with the position, in one of the forms ksqlDB's parser uses."""
    if message.startswith("Failed to prepare statement: ") and f"(line {line}:{column})" in message:
        return True
    return message.startswith(
        (
            f"line {line}:{column}: ",
            f"Line: {line}, Col: {column}: ",
            f"Failed to prepare statement: line {line}:{column}: ",
        )
    )
