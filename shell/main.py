"""The shell's entry points: `open_shell` (the interactive REPL), `run_text` (scripts and `-e`),
and the click pieces `headwater.cli` wires in: `run_command`, `shell_command`, `shell_options`.
Wiring only: building the connection, executor, runner, completer and refresher. Does I/O only
through what it wires (the network, the terminal, files).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from .config import DEFAULT_SERVER, OutputFormat, ShellSettings, history_path
from .login import Login, login_of, login_options

if TYPE_CHECKING:
    import httpx
    from prompt_toolkit.input import Input
    from prompt_toolkit.output import Output

    from headwater import dbapi

__all__ = [
    "Hooks",
    "open_shell",
    "parse_defines",
    "run_command",
    "run_text",
    "settings_for",
    "shell_command",
    "shell_options",
]

F = TypeVar("F", bound=Callable[..., Any])
_DEFAULT_HISTORY = object()


@dataclass(frozen=True, slots=True)
class Hooks:
    """What tests put in click's context object (`CliRunner.invoke(..., obj=Hooks(...))`)."""

    transport: httpx.BaseTransport | None = None


def _servers(values: Iterable[str]) -> tuple[str, ...]:
    urls = tuple(u.strip() for v in values for u in v.split(",") if u.strip())
    return urls or (DEFAULT_SERVER,)


def parse_defines(items: Iterable[str]) -> dict[str, str]:
    """`--define NAME=VALUE` items as a dict (a click BadParameter for a malformed one)."""
    variables: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--define")
        variables[name.strip()] = value
    return variables


def settings_for(
    servers: Sequence[str],
    output: str,
    *,
    defines: Mapping[str, str] | None = None,
    history_file: Path | None | object = _DEFAULT_HISTORY,
    refresh_catalog: bool = True,
    login: Login | None = None,
) -> ShellSettings:
    """The settings of one run, from the command line (and the environment for the history)."""
    login = login or Login()
    history = history_path(os.environ) if history_file is _DEFAULT_HISTORY else history_file
    return ShellSettings(
        servers=_servers(servers),
        output=OutputFormat(output.lower()),
        variables=dict(defines or {}),
        history_file=history if isinstance(history, Path) else None,
        refresh_catalog=refresh_catalog,
        user=login.user,
        password=login.password,
        ca_file=login.ca_file,
    )


def _connect(settings: ShellSettings, transport: httpx.BaseTransport | None) -> dbapi.Connection:
    from headwater import dbapi

    return dbapi.connect(
        list(settings.servers),
        timeout=settings.timeout_s,
        connect_timeout=settings.connect_timeout_s,
        session_variables=settings.variables,
        retries=1,
        transport=transport,
        user=settings.user,
        password=settings.password if settings.user is not None else None,
        verify=settings.ca_file or True,
    )


def run_text(
    text: str,
    source_name: str,
    settings: ShellSettings,
    *,
    transport: httpx.BaseTransport | None = None,
) -> int:
    """Run a script (or `-e` statements) non-interactively.

    Returns:
        0 when every statement succeeded; 1 at the first failure (nothing after it runs).
    """
    from .executor import Executor
    from .runner import Runner

    with _connect(settings, transport) as connection:
        runner = Runner(Executor(connection), settings.output, interactive=False, pager=False)
        return 0 if runner.run(text, source_name) else 1


def open_shell(
    servers: list[str],
    output: str = "table",
    *,
    defines: Mapping[str, str] | None = None,
    history_file: Path | None | object = _DEFAULT_HISTORY,
    refresh_catalog: bool = True,
    login: Login | None = None,
    transport: httpx.BaseTransport | None = None,
    input: Input | None = None,
    output_device: Output | None = None,
) -> int:
    """Run the interactive shell until the user leaves.

    Args:
        servers: server URLs (each may hold several, comma-separated); failover goes in order.
        output: "table", "json" or "csv".
        defines: variables defined up front.
        history_file: the history file; default $XDG_DATA_HOME/headwater/history; None: none.
        refresh_catalog: keep completion names in step with the server (background thread).
        login: the user, password and CA file (``-u``, ``--password``, ``--ca-file``).
        transport, input, output_device: an httpx transport and prompt_toolkit devices (tests).

    Returns:
        The process exit status (0).
    """
    import dataclasses

    from headwater import dbapi

    from .completer import ShellCompleter
    from .executor import Executor
    from .refresh import Refresher, fetch_metadata
    from .repl import repl
    from .runner import Runner

    settings = settings_for(
        servers,
        output,
        defines=defines,
        history_file=history_file,
        refresh_catalog=refresh_catalog,
        login=login,
    )
    with _connect(settings, transport) as connection:
        if not _banner(connection):
            return 1
        completer = ShellCompleter()

        def publish(metadata: Any) -> None:
            completer.metadata = metadata

        refresher = Refresher(lambda: fetch_metadata(connection), publish)

        def on_statement(_statement: object, changed_catalog: bool) -> None:
            if changed_catalog and settings.refresh_catalog:
                refresher.refresh()

        def after_each() -> None:  # session names need no server
            completer.metadata = dataclasses.replace(
                completer.metadata,
                properties=tuple(sorted(connection.properties)),
                variables=tuple(sorted(connection.session_variables)),
            )

        if settings.refresh_catalog:
            refresher.refresh()
        runner = Runner(
            Executor(connection),
            settings.output,
            interactive=True,
            pager=settings.pager,
            on_statement=on_statement,
        )
        try:
            return repl(
                runner,
                completer,
                settings,
                after_each=after_each,
                input=input,
                output=output_device,
            )
        except dbapi.Error as exc:  # never a traceback
            click.echo(f"Error: {exc.message}", err=True)
            return 1


def _banner(connection: dbapi.Connection) -> bool:
    """Greets; False (and says why) when the server refuses the credentials."""
    from headwater import dbapi

    try:
        info = connection.server_info()
    except dbapi.AuthorizationError as exc:
        click.echo(f"authentication failed: {exc.message} ({connection.server_url})", err=True)
        return False
    except dbapi.Error as exc:
        click.echo(
            f"Warning: no server answered yet ({exc.message}); statements will be sent to "
            f"{', '.join(connection.urls)} when you run them.",
            err=True,
        )
        return True
    click.echo(
        f"headwater shell, connected to {connection.server_url} "
        f"(ksqlDB {info.get('version', '?')} API, "
        f"service id {info.get('ksqlServiceId', '?')}). Type 'help' for help."
    )
    return True


# -- click -------------------------------------------------------------------------------------------


def shell_options(function: F) -> F:
    """--server (repeatable), --output, --define and the login options (``shell.login``), for
    `headwater` itself and its commands."""
    options = [
        click.option(
            "--server",
            "-s",
            "servers",
            multiple=True,
            metavar="URL",
            help=f"A server URL (repeatable, or comma-separated); the next one is "
            f"tried when one does not answer. Default {DEFAULT_SERVER}.",
        ),
        click.option(
            "--output",
            "-o",
            type=click.Choice([f.value for f in OutputFormat], case_sensitive=False),
            default="table",
            show_default=True,
            help="How results are printed.",
        ),
        click.option(
            "--define",
            "-d",
            "defines",
            multiple=True,
            metavar="NAME=VALUE",
            help="Define a variable for ${NAME} substitution (repeatable).",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return login_options(function)


_GROUP_OPTIONS = "headwater.shell.options"


def remember_group_options(
    ctx: click.Context, servers: tuple[str, ...], output: str, defines: tuple[str, ...]
) -> None:
    """Keep the group's --server/--output/--define for its command (``headwater -s URL run -``):
    click gives a group's options to the group only."""
    given = ctx.get_parameter_source("output") not in (None, click.core.ParameterSource.DEFAULT)
    ctx.meta[_GROUP_OPTIONS] = (servers, output if given else None, defines)


def _with_group_options(
    ctx: click.Context, servers: tuple[str, ...], output: str, defines: tuple[str, ...]
) -> tuple[tuple[str, ...], str, tuple[str, ...]]:
    """A command's --server/--output/--define, the group's filling what the command leaves out
    (the command's own win; defines add up, the command's last)."""
    group_servers, group_output, group_defines = ctx.meta.get(_GROUP_OPTIONS, ((), None, ()))
    own_output = ctx.get_parameter_source("output") not in (
        None,
        click.core.ParameterSource.DEFAULT,
    )
    return (
        servers or group_servers,
        output if own_output or group_output is None else group_output,
        group_defines + defines,
    )


@click.command("shell")
@shell_options
@click.option("--no-history", is_flag=True, help="Keep no history file.")
@click.pass_context
def shell_command(
    ctx: click.Context,
    servers: tuple[str, ...],
    output: str,
    defines: tuple[str, ...],
    no_history: bool,
) -> None:
    """Open the interactive shell (also what `headwater` alone does)."""
    servers, output, defines = _with_group_options(ctx, servers, output, defines)
    hooks = ctx.find_object(Hooks) or Hooks()
    history: Path | None | object = None if no_history else _DEFAULT_HISTORY
    ctx.exit(
        open_shell(
            list(servers),
            output,
            defines=parse_defines(defines),
            history_file=history,
            login=login_of(ctx),
            transport=hooks.transport,
        )
    )


def script_text(statements: tuple[str, ...], path: str | None) -> tuple[str, str]:
    """The text to run and its name: ``-e`` statements (each ended by ``;``), else the file at
    ``path`` (``-``: standard input).

    Raises:
        click.FileError: the file cannot be read.
    """
    if statements:
        text = "\n".join(s if s.rstrip().endswith(";") else s + ";" for s in statements)
        return text, "<command line>"
    assert path is not None
    try:
        with click.open_file(path, encoding="utf-8") as stream:
            return stream.read(), "<stdin>" if path == "-" else path
    except (OSError, UnicodeDecodeError) as exc:
        raise click.FileError(path, str(exc)) from None


@click.command("run")
@click.argument("script", required=False, type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--file",
    "-f",
    "file_",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="The script to run (same as the SCRIPT argument).",
)
@click.option(
    "--execute",
    "-e",
    "statements",
    multiple=True,
    metavar="SQL",
    help="Run these statements instead of a script (repeatable).",
)
@shell_options
@click.pass_context
def run_command(
    ctx: click.Context,
    script: str | None,
    file_: str | None,
    statements: tuple[str, ...],
    servers: tuple[str, ...],
    output: str,
    defines: tuple[str, ...],
) -> None:
    """Run a SQL script (SCRIPT, -f FILE, - for standard input) or -e statements, without a
    prompt. Stops at the first error, saying which statement failed, and exits with status 1."""
    sources = [s for s in (script, file_) if s is not None]
    if len(sources) + bool(statements) != 1:
        raise click.UsageError("give exactly one of SCRIPT, -f FILE or -e SQL")
    text, name = script_text(statements, sources[0] if sources else None)
    servers, output, defines = _with_group_options(ctx, servers, output, defines)
    hooks = ctx.find_object(Hooks) or Hooks()
    settings = settings_for(
        servers, output, defines=parse_defines(defines), history_file=None, login=login_of(ctx)
    )
    ctx.exit(run_text(text, name, settings, transport=hooks.transport))
