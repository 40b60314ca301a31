"""PRINT in the shell: lines printed as they arrive, whatever the output format; Ctrl-C (or the end
of the answer) stops it with "Topic printing ceased", ends it on the server, and the session goes
on. The server is an httpx.MockTransport answering PRINT with text, as ksqlDB's /query does (lines
written by hand from ksqlDB's TopicStreamWriterTest)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
from click.testing import CliRunner

from headwater import dbapi
from headwater.shell.executor import Executor, TextStream
from headwater.shell.main import Hooks, run_command

LINES = [
    "Key format: KAFKA_STRING",
    "Value format: KAFKA_STRING",
    "",  # the server's keep-alive
    "rowtime: N/A, key: key-0, value: value-0, partition: 0",
    "rowtime: N/A, key: key-1, value: value-1, partition: 0",
]


class _Text(httpx.SyncByteStream):
    def __init__(self, interrupt: bool) -> None:
        self.interrupt = interrupt

    def __iter__(self) -> Iterator[bytes]:
        for line in LINES:
            yield (line + "\n").encode()
        if self.interrupt:
            raise KeyboardInterrupt  # Ctrl-C while waiting for the next record


class FakePrint:
    def __init__(self, *, interrupt: bool = False) -> None:
        self.interrupt = interrupt
        self.requests: list[tuple[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append((request.url.path, body))
        if request.url.path == "/query" and body["ksql"].startswith("PRINT"):
            return httpx.Response(
                200,
                headers={"Content-Type": "text/plain", "X-Query-Id": "transient_p"},
                stream=_Text(self.interrupt),
            )
        if request.url.path == "/close-query":
            return httpx.Response(200)
        return httpx.Response(
            200,
            json=[
                {"@type": "streams", "statementText": body["ksql"], "streams": [], "warnings": []}
            ],
        )


def test_the_executor_yields_the_lines_as_a_text_stream() -> None:
    fake = FakePrint()
    with dbapi.connect("http://ksql:8088", transport=httpx.MockTransport(fake)) as conn:
        [(_, result)] = list(Executor(conn).run("PRINT 'pageviews' FROM BEGINNING LIMIT 2;"))
        assert isinstance(result, TextStream) and result.query_id == "transient_p"
        assert list(result.lines) == [line for line in LINES if line]
    assert fake.requests[0] == (
        "/query",
        {
            "ksql": "PRINT 'pageviews' FROM BEGINNING LIMIT 2;",
            "streamsProperties": {},
            "sessionVariables": {},
        },
    )


def test_print_prints_lines_and_ceases() -> None:
    fake = FakePrint()
    for output in ("table", "json"):
        result = CliRunner().invoke(
            run_command,
            ["-e", "PRINT pageviews;", "-o", output],
            obj=Hooks(httpx.MockTransport(fake)),
        )
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines() == [line for line in LINES if line]
        assert result.stderr.strip() == "Topic printing ceased"


def test_ctrl_c_stops_print_ends_it_on_the_server_and_the_session_goes_on() -> None:
    fake = FakePrint(interrupt=True)
    result = CliRunner().invoke(
        run_command, ["-e", "PRINT pageviews; SHOW STREAMS;"], obj=Hooks(httpx.MockTransport(fake))
    )
    assert result.exit_code == 0, result.output
    assert "rowtime: N/A, key: key-1, value: value-1, partition: 0" in result.stdout
    assert "Topic printing ceased" in result.stderr
    paths = [path for path, _ in fake.requests]
    assert paths == ["/query", "/close-query", "/ksql"]
    assert fake.requests[1][1] == {"queryId": "transient_p"}
