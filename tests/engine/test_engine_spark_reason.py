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
