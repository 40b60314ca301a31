"""The Spark configuration a server's settings give (pure), checked against the installed Spark."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pyspark

from headwater.engine.spark.settings import EngineSettings

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
