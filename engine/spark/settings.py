"""The settings of a server's Spark engine, and the Spark configuration they give. Pure (no I/O).

Defaults are the low-latency ones measured on 2 cores (November 2026): shuffle
partitions matched to a query's source partitions (Spark's 200 costs seconds per batch), the RocksDB
state store with changelog checkpointing, no UI, ANSI mode off (ksqlDB's semantics are ours, not
Spark SQL's), Arrow for Python data.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

#: Spark's checkpoint file manager over Hadoop's FileSystem API, for checkpoints in a local (or
#: mounted) folder. Spark's default there, the FileContext one, renames a new batch's offsets and
#: commit files through ``AbstractFileSystem``, which first asks for the target's link status: with
#: no native Hadoop library (pyspark ships none) each ask runs ``readlink`` in a child process of the
#: JVM. That was ~40 processes forked per micro-batch (measured: 2,900 in 20 s of 70 batches), a
#: fifth of the JVM's CPU per batch. Both managers check that the target is absent and then rename
#: (neither is atomic on a local file system), so the checkpoint keeps the same guarantees.
_FILE_SYSTEM_CHECKPOINTS = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
)


def _local(root: str) -> bool:
    """Whether a checkpoint root is a local (or mounted) folder rather than another file system's
    URI (``hdfs://...``: Spark's default manager stays)."""
    return "://" not in root or root.startswith("file:")


#: The Spark JVM's options by default. Spark's JVM here moves batches between Kafka's Python source
#: tasks, the Python operators and the sink; it computes little itself. Profiled per thread while an
#: aggregation ran (300k records), 4.8 s of its 7.7 s of CPU were its JIT compilers (C2 3.9 s, C1 0.9
#: s) and 1.3 s G1's collector threads, against 0.6 s of executor work: C1 alone compiles the hot
#: paths well enough for that work, and the serial collector spends the least CPU on a small heap.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """How a server runs persistent queries.

    Attributes:
        master: ``spark.master``: ``local[*]``, or a standalone master ``spark://host:port``.
        checkpoint_root: where queries keep their checkpoints (shared by every server of a cluster).
        log_file: where Spark's own logs go (never the user's terminal).
        log_format: how the child process writes its log (``engine.log_format``: text or json).
        start_at_startup: start Spark when the server starts, in the background, and warm it up
            (its Python workers started, the query modules imported), rather than with the
            first query to run.
        trigger_interval_ms: how often an idle query looks for new records (0: as fast as possible).
        max_records_per_batch: admission control: the most records one micro-batch reads. A
            query catching up pays Spark's per-batch cost (0.1 CPU s for a stateless query,
            0.3-0.5 s for an aggregation, whose batches rewrite every state bucket they touch)
            once per this many records: bench.race with 100k, 200k and 400k gave the 1M-key
            count 26.8k, 31.7k and 34.1k records/s, the 1k-key count 0.0153, 0.0132 and 0.0132
            CPU s per 1k records; 200k holds half the transient sink memory of 400k.
        processing_log_topic: where skipped records are reported (None: logged only).
        buffering: ``ksql.streams.cache.max.bytes.buffering`` > 0: an aggregate writes one update
            per group (per time window of a group) per micro-batch (ksqlDB's default); off, one
            update per input record.
        max_queries: ``ksql.query.persistent.active.limit``: the most persistent queries this
            server runs at once (`admission`).
        query_memory_mb: the memory one more query is expected to take (measured ~120 MB when its
            streaming-source runner was started afresh, `bench.query_memory`; forked, the runner
            takes ~22 MB, and the estimate is kept for what its micro-batches' workers hold).
        memory_reserve_mb: the available memory a query may not start into.
        max_starting_queries: how many queries may be starting at once (`admission`).
        python_idle_workers: ``spark.python.factory.idleWorkerMaxPoolSize``: the most idle Python
            workers Spark keeps (each ~60-120 MB); unset, Spark keeps every one it ever started
            for a minute, and N queries starting at once leave N workers behind.
        forked_source_runners: run Spark's streaming source runners (one Python process per query
            source) and PySpark's daemons forked from one warm process (`runner_forks`: a runner
            ~22 MB instead of ~63 MB) rather than each started afresh.
        jvm_options: the Spark JVM's options (``spark.driver.extraJavaOptions`` and, for
            executors of a standalone master, ``spark.executor.extraJavaOptions``); empty: the
            JVM's defaults. See `JVM_OPTIONS`.
        extra: further ``spark.*`` settings, passed through.
    """

    master: str = "local[*]"
    checkpoint_root: str = ""
    log_file: str = ""
    log_format: str = "text"
    start_at_startup: bool = False
    trigger_interval_ms: int = 100
    max_records_per_batch: int = 200_000
    processing_log_topic: str | None = None
    buffering: bool = True
    max_queries: int = 2**31 - 1
    query_memory_mb: int = 150
    memory_reserve_mb: int = 1024
    max_starting_queries: int = 1
    python_idle_workers: int = 2
    forked_source_runners: bool = True
    jvm_options: str = JVM_OPTIONS
    extra: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def spark_conf(self, python: str = sys.executable) -> dict[str, str]:
        """The SparkSession's configuration; ``python``: what Spark runs as its Python workers'
        interpreter (`runner_forks`' wrapper, or this interpreter)."""
        conf = {
            "spark.master": self.master,
            "spark.app.name": "headwater",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.ansi.enabled": "false",
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            "spark.sql.streaming.stateStore.providerClass": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
            "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
            "spark.sql.streaming.noDataMicroBatches.enabled": "false",
            # a query's checkpoint keeps this many batches of offsets and state changelogs (Spark's
            # default 100): a restart needs the last committed one; a bucketed aggregation's
            # changelog can approach its whole state per batch (`aggregation`)
            "spark.sql.streaming.minBatchesToRetain": "20",
            "spark.python.worker.reuse": "true",
            "spark.python.factory.idleWorkerMaxPoolSize": str(self.python_idle_workers),
            "spark.pyspark.python": python,
            "spark.pyspark.driver.python": sys.executable,
            "spark.executorEnv.PYSPARK_PYTHON": python,
        }
        if _local(self.checkpoint_root):
            conf["spark.sql.streaming.checkpointFileManagerClass"] = _FILE_SYSTEM_CHECKPOINTS
        if self.jvm_options:
            conf["spark.driver.extraJavaOptions"] = self.jvm_options
            conf["spark.executor.extraJavaOptions"] = self.jvm_options
        conf.update(dict(self.extra))
        return conf

    def checkpoint_of(self, query_id: str) -> str:
        """The checkpoint folder of a query."""
        return str(Path(self.checkpoint_root) / query_id)
