"""What a failed persistent query reports as its reason (no Spark needed)."""

from __future__ import annotations

from dataclasses import dataclass

from headwater.engine.spark.driver import _reason


@dataclass
class _Failure:
    desc: str


def test_an_error_raised_in_the_sink_is_named_not_sparks_wrapper() -> None:
    desc = (
        "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in "
        "foreach batch sink. Reason: An exception was raised by the Python Proxy. Return Message: "
        "Traceback (most recent call last):\n"
        '  File "/x/py4j/clientserver.py", line 644, in _call_proxy\n'
        "    return_value = getattr(self.pool[obj_id], method)(*params)\n"
        '  File "/x/headwater/engine/spark/sink.py", line 90, in write\n'
        "    self._check_resumable(batch_id)\n"
        "headwater.engine.spark.sink.CheckpointBehind: query Q: its output in topic t already "
        "holds batch 140 (partitions [0]) but this server's checkpoint resumes at batch 0\n"
        "\n"
        "=== Streaming Query ===\n"
        "Identifier: [id = 1]"
    )
    assert _reason(_Failure(desc)) == (
        "headwater.engine.spark.sink.CheckpointBehind: query Q: its output in topic t already "
        "holds batch 140 (partitions [0]) but this server's checkpoint resumes at batch 0"
    )


def test_without_a_traceback_the_first_line_is_the_reason() -> None:
    assert _reason(_Failure("Topic gone\nmore detail")) == "Topic gone"
    assert _reason(_Failure("   ")) == "_Failure"
    assert _reason(ValueError("bad value")) == "bad value"


class _JavaFailure(Exception):
    """As pyspark's captured exceptions: the text in ``_desc``, the Java trace in ``_stackTrace``,
    and a ``str()`` that asks the JVM (here: gone)."""

    def __init__(self, desc: str, trace: str) -> None:
        super().__init__()
        self._desc, self._stackTrace = desc, trace

    def __str__(self) -> str:
        raise AssertionError("SparkContext._jvm is None")


def test_an_error_without_a_message_still_has_a_text() -> None:
    trace = "java.util.concurrent.TimeoutException\n\tat org.apache.spark.X.run(X.java:1)"
    assert _reason(_JavaFailure("", trace)) == "_JavaFailure: java.util.concurrent.TimeoutException"
    assert _reason(_JavaFailure("Topic t gone", trace)) == "Topic t gone"
    assert _reason(_JavaFailure("", "")) == "_JavaFailure"
    assert _reason(TimeoutError()) == "TimeoutError"


def test_a_record_error_without_a_message_still_has_a_text() -> None:
    from headwater.engine.persistent.query_run import _message

    assert _message(TimeoutError()) == "TimeoutError"
    assert _message(ValueError("bad")) == "bad"


def test_a_failed_query_always_reports_a_reason() -> None:
    from headwater.engine.spark.driver import QueryDriver, _Running
    from headwater.engine.spark.settings import EngineSettings
    from headwater.kafka.clients import KafkaSettings

    driver = QueryDriver(EngineSettings(log_file="/state/logs/spark.log"), KafkaSettings("x:1"))
    driver._queries["Q"] = _Running({}, state="ERROR", message="")
    status = driver.statuses()["Q"]
    assert status["state"] == "ERROR"
    assert status["message"] == "the query failed without a reason (see /state/logs/spark.log)"
