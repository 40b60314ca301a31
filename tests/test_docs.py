"""The docs point at what exists: file paths, sections and named workarounds in every tracked text file.

- A path whose first folder is one of the repository's own top-level folders (``engine/pull/query.py``,
  ``docs/architecture.md``) names a file or folder that exists, so a move that forgets a mention
  fails here; so does a mention of a design file the repository does not hold (``ARCHITECTURE.md``,
  ``notes/*.md``).
- ``docs/architecture.md, "Section"`` names a heading of that page.
- Every ``Workaround "name"`` in the code has a section of that name in docs/embedded-broker.md.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_TEXT_SUFFIXES = (".py", ".md", ".toml", ".txt", ".sh", ".cfg", ".ini", ".yaml", ".yml")

# A file with a suffix, or a folder written with its trailing slash ("engine/spark/").
_PATH = re.compile(r"(?<![\w/.:-])((?:[A-Za-z_][\w.-]*/)+(?:[\w-]+\.[a-z]+\b)?)")
_OUTSIDE = re.compile(r"(?<![\w/.-])(ARCHITECTURE\.md|notes/[\w.-]+\.md)")
_SECTION = re.compile(r"docs/architecture\.md,?\s+\"([^\"]+)\"")
_WORKAROUND = re.compile(r"Workaround \"([^\"]+)\"")


def _tracked_texts() -> dict[str, str]:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    texts = {}
    for name in listed.stdout.split():
        path = ROOT / name
        if (
            path.suffix in _TEXT_SUFFIXES or name.startswith((".ci/", "scripts/"))
        ) and path.is_file():
            texts[name] = path.read_text(encoding="utf-8", errors="replace")
    return texts


TEXTS = {name: text for name, text in _tracked_texts().items() if name != "tests/test_docs.py"}
TOP_FOLDERS = {name.split("/", 1)[0] for name in TEXTS if "/" in name} - {".ci"}


def _headings(page: str) -> set[str]:
    text = (ROOT / page).read_text(encoding="utf-8")
    return {line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")}


def test_every_path_into_the_repository_exists() -> None:
    missing = set()
    for name, text in TEXTS.items():
        for match in _PATH.finditer(text):
            ref = match.group(1).rstrip("/")
            if ref.split("/", 1)[0] in TOP_FOLDERS and not (ROOT / ref).exists():
                missing.add(f"{name}: {ref}")
    assert not missing, "mentions of paths the repository lacks:\n" + "\n".join(sorted(missing))


def test_no_file_names_a_design_document_outside_the_repository() -> None:
    found = {
        f"{name}: {m.group(1)}" for name, text in TEXTS.items() for m in _OUTSIDE.finditer(text)
    }
    assert not found, "\n".join(sorted(found))


def test_every_section_of_the_architecture_named_exists() -> None:
    headings = _headings("docs/architecture.md")
    named = {
        (name, " ".join(m.group(1).replace("#", " ").split()))  # a name may wrap in a comment
        for name, text in TEXTS.items()
        for m in _SECTION.finditer(text)
    }
    missing = {f"{name}: {section!r}" for name, section in named if section not in headings}
    assert not missing, f"sections not in docs/architecture.md ({sorted(headings)}):\n" + "\n".join(
        sorted(missing)
    )


def test_every_named_workaround_is_described() -> None:
    headings = _headings("docs/embedded-broker.md")
    named = {
        (name, m.group(1))
        for name, text in TEXTS.items()
        if name.endswith(".py")
        for m in _WORKAROUND.finditer(text)
    }
    assert named, "no workaround found: the pattern no longer matches the code"
    missing = sorted(
        f"{name}: {workaround!r}" for name, workaround in named if workaround not in headings
    )
    assert not missing, "workarounds without a section in docs/embedded-broker.md:\n" + "\n".join(
        missing
    )


@pytest.mark.parametrize("page", ["docs/architecture.md", "docs/embedded-broker.md", "README.md"])
def test_the_pages_exist_and_are_not_empty(page: str) -> None:
    assert (ROOT / page).read_text(encoding="utf-8").strip()
