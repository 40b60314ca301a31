"""The Java check a server makes at start (engine.spark.java): no java, an old one, a good one."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from headwater.engine.spark.java import java_problem


def _fake_java(folder: Path, version_line: str) -> Path:
    java = folder / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    return java


def test_no_java_on_the_path_nor_java_home(tmp_path: Path) -> None:
    problem = java_problem({"PATH": str(tmp_path)})
    assert problem is not None
    assert problem.startswith(
        "Java was not found on the PATH (JAVA_HOME is not set); install Java 17"
    )


def test_java_home_without_java(tmp_path: Path) -> None:
    problem = java_problem({"PATH": os.environ.get("PATH", ""), "JAVA_HOME": str(tmp_path)})
    assert problem == (
        f"Java was not found: JAVA_HOME={tmp_path} has no bin/java; install Java 17 "
        "or newer (Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or set "
        "JAVA_HOME to one"
    )


def test_an_old_java_is_named(tmp_path: Path) -> None:
    java = _fake_java(tmp_path / "jdk8", 'openjdk version "1.8.0_392"')
    problem = java_problem({"PATH": str(tmp_path), "JAVA_HOME": str(tmp_path / "jdk8")})
    assert problem is not None and problem.startswith(f"Java 8 found ({java}), Spark needs 17")
    _fake_java(tmp_path / "jdk11", 'openjdk version "11.0.2" 2019-01-15')
    problem = java_problem({"PATH": str(tmp_path / "jdk11" / "bin")})
    assert problem is not None and problem.startswith("Java 11 found")


def test_java_17_or_newer_is_fine(tmp_path: Path) -> None:
    _fake_java(tmp_path / "jdk", 'openjdk version "21.0.1" 2023-10-17')
    assert java_problem({"PATH": str(tmp_path / "jdk" / "bin")}) is None
    assert java_problem(os.environ) is None  # this machine's, as scripts/test requires
