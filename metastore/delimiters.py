"""The ``KEY_DELIMITER``/``VALUE_DELIMITER`` property: which character it names, or why it names
none, in ksqlDB's words (its ``Delimiter`` class). Pure.

Checked when a statement is planned, before anything else is (ksqlDB checks it while building the
statement's properties), and again by the DELIMITED serde that uses it.
"""

from __future__ import annotations

__all__ = ["NAMED_DELIMITERS", "DelimiterError", "delimiter"]

#: ksqlDB's names for delimiters that cannot be written as themselves.
NAMED_DELIMITERS = {"TAB": "\t", "SPACE": " "}

_EXAMPLE = "\nExample valid value: ';'"


class DelimiterError(ValueError):
    """A delimiter property that names no single character."""


def delimiter(value: object, prop: str) -> str:
    """The character ``value`` names (``TAB``, ``SPACE`` or one character).

    Raises:
        DelimiterError: With ksqlDB's message for an empty, blank or multi-character value.
    """
    text = str(value)
    if text.upper() in NAMED_DELIMITERS:
        return NAMED_DELIMITERS[text.upper()]
    if text.strip() == "":
        raise DelimiterError(
            f"Configuration {prop} is invalid: Delimiter cannot be empty, if you meant to have a "
            f"tab or space for delimiter, please use the special values 'TAB' or 'SPACE'{_EXAMPLE}"
        )
    if len(text) != 1:
        raise DelimiterError(
            f"Configuration {prop} is invalid: Invalid delimiter value: '{text}'. "
            f"Delimiter must be a single character or TAB,SPACE{_EXAMPLE}"
        )
    if text in '"\r\n':
        raise DelimiterError(f"Configuration {prop} is invalid: {text!r} cannot be a delimiter")
    return text
