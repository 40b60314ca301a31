"""The Spark configuration a server's settings give (pure), checked against the installed Spark."""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pyspark
import pytest

from headwater.engine.spark.settings import JVM_OPTIONS, EngineSettings

_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"


def test_local_checkpoints_use_the_file_system_manager_that_forks_no_readlink() -> None:
    for root in ("/var/lib/headwater/checkpoints", "file:///var/lib/headwater/checkpoints", ""):
        conf = EngineSettings(checkpoint_root=root).spark_conf()
        assert conf[_MANAGER].endswith(".FileSystemBasedCheckpointFileManager")


def test_checkpoints_on_another_file_system_keep_sparks_default_manager() -> None:
    conf = EngineSettings(checkpoint_root="hdfs://namenode:8020/headwater").spark_conf()
    assert _MANAGER not in conf


def test_the_manager_named_is_a_class_of_the_installed_spark() -> None:
    # Spark moved its streaming classes between releases: a name it cannot load fails every query
    wanted = EngineSettings().spark_conf()[_MANAGER].replace(".", "/") + ".class"
    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("spark-sql_*.jar"))
    assert jars
    assert any(wanted in zipfile.ZipFile(jar).namelist() for jar in jars)


def test_the_jvm_options_reach_the_driver_and_executors_and_can_be_emptied() -> None:
    conf = EngineSettings().spark_conf()
    assert conf["spark.driver.extraJavaOptions"] == JVM_OPTIONS
    assert conf["spark.executor.extraJavaOptions"] == JVM_OPTIONS
    bare = EngineSettings(jvm_options="").spark_conf()
    assert "spark.driver.extraJavaOptions" not in bare
    assert "spark.executor.extraJavaOptions" not in bare


def test_the_default_jvm_options_are_accepted_by_this_machines_java() -> None:
    # a JVM refuses to start on an option it does not know: every query would fail to start
    home = os.environ.get("JAVA_HOME", "").strip()
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if java is None:
        pytest.skip("no Java on this machine")
    done = subprocess.run(
        [java, *JVM_OPTIONS.split(), "-version"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
