"""Where ksqlDB's test corpus is, and how its files read. Reads files; writes nothing.

The corpus is not part of the repository (its licence keeps it out): it lives in
``../shared/ksql-corpus`` next to the repository, whose README.md says where it comes from.
``statements.sql`` holds every distinct statement, one a line; ``qtt/*.json`` ksqlDB's
query-validation tests; ``rqtt/*.json`` its REST query tests (JSON with Java-style comments).
Every runner and test that reads the corpus takes its paths from here.
"""

from __future__ import annotations

from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
CORPUS = REPOSITORY.parent / "shared" / "ksql-corpus"
STATEMENTS = CORPUS / "statements.sql"
QTT = CORPUS / "qtt"
RQTT = CORPUS / "rqtt"


def missing(path: Path) -> str:
    """What to say when ``path`` (the corpus or a file of it) is not there."""
    return (
        f"ksqlDB corpus not found at {path}: it lives in ../shared/ksql-corpus next to the "
        "repository (see that folder's README.md)"
    )


def require(path: Path = CORPUS) -> Path:
    """``path``, or a clear error when it is missing.

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    if not path.exists():
        raise FileNotFoundError(missing(path))
    return path


def read_statements(path: Path = STATEMENTS) -> list[str]:
    """The corpus statements, one per line (blank lines left out).

    Raises:
        FileNotFoundError: the statements file is missing.
    """
    lines = require(path).read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip()]


def strip_comments(text: str) -> str:
    """JSON with Java-style comments -> JSON (comments outside strings removed)."""
    out: list[str] = []
    i, n, in_string = 0, len(text), False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i)
            i = n if end < 0 else end + 2
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)
