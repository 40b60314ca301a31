"""The shell's settings: one frozen dataclass, built once at the entry point from the command
line and the environment (passed in as a mapping, never read deep in the code). Pure: no I/O
(the history file is only named here; prompt_toolkit's FileHistory reads and writes it).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEFAULT_SERVER", "OutputFormat", "ShellSettings", "history_path"]

DEFAULT_SERVER = "http://127.0.0.1:8088"


class OutputFormat(enum.StrEnum):
    """`--output`: how results are printed."""

    TABLE = "table"
    JSON = "json"
    CSV = "csv"


def history_path(environ: Mapping[str, str], home: Path | None = None) -> Path:
    """Where the REPL keeps its history: $XDG_DATA_HOME/headwater/history, else
    ~/.local/share/headwater/history (the XDG base directory default).

    Args:
        environ: the process environment (os.environ at the entry point).
        home: the user's home folder (Path.home() when None).
    """
    data_home = environ.get("XDG_DATA_HOME", "").strip()
    base = Path(data_home) if data_home and Path(data_home).is_absolute() else None
    if base is None:
        base = (home or Path.home()) / ".local" / "share"
    return base / "headwater" / "history"


@dataclass(frozen=True, slots=True)
class ShellSettings:
    """How one shell or script run behaves.

    Attributes:
        servers: server URLs, tried in order (the driver fails over to the next).
        output: table, json or csv.
        variables: variables defined up front (`--define NAME=VALUE`).
        history_file: the REPL's history file (None: keep history in memory only).
        pager: page output taller or wider than the terminal (interactive only).
        refresh_catalog: rebuild completion names from the server in a background thread.
        connect_timeout_s: seconds to wait for each server's TCP connection.
        timeout_s: seconds to wait for an answer.
        user, password: HTTP Basic credentials (None: none sent).
        ca_file: the CA file https:// servers are verified with (None: the system's CAs).
    """

    servers: tuple[str, ...] = (DEFAULT_SERVER,)
    output: OutputFormat = OutputFormat.TABLE
    variables: Mapping[str, str] | None = None
    history_file: Path | None = None
    pager: bool = True
    refresh_catalog: bool = True
    connect_timeout_s: float = 5.0
    timeout_s: float = 60.0
    user: str | None = None
    password: str | None = None
    ca_file: str | None = None
