"""Every package folder is in pyproject's explicit package list, so a normal install misses none."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]
    listed = set(config["packages"])
    folders = {name: REPO / folder for name, folder in config["package-dir"].items()}
    found = set()
    for name, folder in folders.items():
        for init in folder.rglob("__init__.py"):
            relative = init.parent.relative_to(folder)
            found.add(".".join([name, *relative.parts]) if relative.parts else name)
    missing = sorted(found - listed)
    assert not missing, f"add these to [tool.setuptools] packages in pyproject.toml: {missing}"
    assert not sorted(listed - found), "pyproject lists packages that have no folder"


def test_the_readme_links_only_what_the_repository_holds() -> None:
    """A user's clone has no ../shared: every relative link of the README (and of the docs it
    links) resolves inside the repository."""
    import re

    for page in (REPO / "README.md", REPO / "docs" / "architecture.md"):
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" in target or target.startswith("mailto:"):
                continue
            resolved = (page.parent / target).resolve()
            assert resolved.is_relative_to(REPO) and resolved.exists(), f"{page.name}: {target}"
