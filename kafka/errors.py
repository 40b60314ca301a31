"""The error tree of ``headwater.kafka``: one root, structured fields, no I/O.

Every error this package raises derives from :class:`KafkaEdgeError`. ``error_code`` follows ksqlDB's
numbering (HTTP status x 100 + n) so the gateway can map the root to a response without a table per
subclass; ``retriable`` says whether trying again later may succeed.
"""

from __future__ import annotations


class KafkaEdgeError(Exception):
    """Root of every error raised by ``headwater.kafka``."""

    error_code: int = 50000
    retriable: bool = False


class BrokerError(KafkaEdgeError):
    """The embedded broker could not be started, or stopped working."""

    def __init__(self, message: str, *, log_tail: str = "") -> None:
        self.message = message
        self.log_tail = log_tail
        text = message if not log_tail else f"{message}\n--- last lines of the log ---\n{log_tail}"
        super().__init__(text)


class BinaryNotFound(BrokerError):
    """A program the embedded broker needs (tansu, weed) is not installed."""


class PortInUse(BrokerError):
    """The requested listener port is already taken on 127.0.0.1."""


class DataDirUnusable(BrokerError):
    """The data folder cannot be created or written, or another broker is using it."""


class ChildDied(BrokerError):
    """A child process (tansu, weed) exited while starting or running."""


class StartTimeout(BrokerError):
    """A child process did not become ready in time."""

    retriable = True


class KafkaConfigError(KafkaEdgeError):
    """Client settings that headwater cannot honour (for example, overriding a broker workaround)."""

    error_code = 40000


class TopicError(KafkaEdgeError):
    """A topic could not be created as requested."""

    def __init__(self, topic: str, message: str, *, retriable: bool = False) -> None:
        self.topic = topic
        self.retriable = retriable
        super().__init__(f"topic {topic!r}: {message}")


class TransactionOutcomeUnknown(KafkaEdgeError):
    """``init_transactions``/``commit_transaction`` ran out of time: the outcome is not known.

    On the embedded broker a fenced producer's commit never fails fast (the broker drops the connection),
    so a timeout is the only signal; the caller must look its command id up in the log before retrying.
    """

    retriable = True

    def __init__(self, operation: str, timeout_ms: int, cause: str) -> None:
        self.operation = operation
        self.timeout_ms = timeout_ms
        super().__init__(
            f"{operation} gave no answer within {timeout_ms} ms ({cause}); outcome unknown"
        )


class EndOffsetsUnavailable(KafkaEdgeError):
    """The end offsets of some partitions could not be learned in time."""

    retriable = True

    def __init__(self, topic: str, partitions: tuple[int, ...], timeout_ms: int) -> None:
        self.topic = topic
        self.partitions = partitions
        super().__init__(
            f"no fetch response for {topic!r} partitions {list(partitions)} within {timeout_ms} ms"
        )


class ProduceFailed(KafkaEdgeError):
    """A record was not written (the broker refused it, or no acknowledgement came in time).

    ``retriable`` follows librdkafka's verdict; when no acknowledgement came the record may still
    have been written.
    """

    error_code = 50300

    def __init__(self, topic: str, message: str, *, retriable: bool = True) -> None:
        self.topic = topic
        self.retriable = retriable
        super().__init__(f"could not write to topic {topic!r}: {message}")
