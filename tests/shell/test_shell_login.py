"""The shell's login options (-u, --password, HEADWATER_PASSWORD, the prompt) and how a 401 reads,
through click's CliRunner over an in-process transport that plays a BASIC-protected server."""

from __future__ import annotations

import base64

import httpx
import pytest
from click.testing import CliRunner
from shell_fakes import FakeKsql

from headwater.shell.main import Hooks, run_command

USER, PASSWORD = "fred", "let me in"
GOOD = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


class Guarded:
    """FakeKsql behind HTTP Basic: 401 in ksqlDB's shape without the right credentials."""

    def __init__(self) -> None:
        self.fake = FakeKsql()
        self.seen: list[str | None] = []

    def transport(self) -> httpx.MockTransport:
        inner = self.fake.transport()

        def handle(request: httpx.Request) -> httpx.Response:
            self.seen.append(request.headers.get("authorization"))
            if request.headers.get("authorization") != GOOD:
                return httpx.Response(
                    401,
                    headers={"WWW-Authenticate": 'Basic realm="r"'},
                    json={"@type": "generic_error", "error_code": 40100, "message": "Unauthorized"},
                )
            return inner.handle_request(request)

        return httpx.MockTransport(handle)


def run(
    server: Guarded, *args: str, input: str | None = None, env: dict[str, str] | None = None
) -> object:
    return CliRunner().invoke(
        run_command,
        ["-e", "SHOW STREAMS;", *args],
        obj=Hooks(server.transport()),
        input=input,
        env=env,
    )


def test_user_and_password_options() -> None:
    server = Guarded()
    result = run(server, "-u", USER, "-p", PASSWORD)
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    assert server.seen and set(server.seen) == {GOOD}


def test_password_from_the_environment_and_from_the_prompt() -> None:
    server = Guarded()
    result = run(server, "--user", USER, env={"HEADWATER_PASSWORD": PASSWORD})
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    result = run(server, "-u", USER, input=f"{PASSWORD}\n", env={"HEADWATER_PASSWORD": ""})
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    assert f"Password for {USER}" in result.stderr  # type: ignore[attr-defined]
    assert PASSWORD not in result.output  # type: ignore[attr-defined]


@pytest.mark.parametrize("args", [(), ("-u", USER, "--password", "guess")])
def test_a_401_reads_as_authentication_failed_without_a_traceback(args: tuple[str, ...]) -> None:
    result = run(Guarded(), *args)
    assert result.exit_code == 1  # type: ignore[attr-defined]
    stderr = result.stderr  # type: ignore[attr-defined]
    assert "authentication failed: Unauthorized" in stderr and "Traceback" not in stderr


def test_the_headwater_command_itself_takes_the_login_options() -> None:
    from headwater.cli import main

    server = Guarded()
    result = CliRunner().invoke(
        main,
        ["-s", "http://ksql:8088", "-u", USER, "-e", "SHOW STREAMS;"],
        obj=Hooks(server.transport()),
        env={"HEADWATER_PASSWORD": PASSWORD},
    )
    assert result.exit_code == 0, result.output
    assert set(server.seen) == {GOOD}
    help_text = CliRunner().invoke(main, ["run", "--help"]).output
    assert "--ca-file" in help_text and "HEADWATER_PASSWORD" in help_text


def test_the_repl_stops_at_a_refused_login(capsys: pytest.CaptureFixture[str]) -> None:
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from headwater.shell.login import Login
    from headwater.shell.main import open_shell

    with create_pipe_input() as pipe:
        pipe.send_text("SHOW STREAMS;\r")
        pipe.close()
        code = open_shell(
            ["http://ksql:8088"],
            history_file=None,
            refresh_catalog=False,
            login=Login(USER, "guess"),
            transport=Guarded().transport(),
            input=pipe,
            output_device=DummyOutput(),
        )
    assert code == 1
    assert "authentication failed: Unauthorized (http://ksql:8088)" in capsys.readouterr().err
