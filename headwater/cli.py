"""The ``headwater`` console command."""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from typing import IO

import click

from headwater.shell.login import login_of
from headwater.shell.main import (
    Hooks,
    open_shell,
    parse_defines,
    remember_group_options,
    run_command,
    run_text,
    script_text,
    settings_for,
    shell_command,
    shell_options,
)


@click.group(invoke_without_command=True)
@click.version_option(package_name="headwater")
@shell_options
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="State folder of the local node started when none runs  "
    "[default: $XDG_DATA_HOME/headwater/node]",
)
@click.option(
    "--port",
    "node_port",
    type=click.IntRange(1, 65535),
    default=None,
    help="HTTP port of the local node on 127.0.0.1, found or started  [default: 8088]",
)
@click.option(
    "--execute",
    "-e",
    "statements",
    multiple=True,
    metavar="SQL",
    help="Run these statements without a prompt and exit, as `ksql -e` (repeatable).",
)
@click.option(
    "--file",
    "-f",
    "file_",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Run this script without a prompt and exit, as `ksql -f`.",
)
@click.pass_context
def main(
    ctx: click.Context,
    servers: tuple[str, ...],
    output: str,
    defines: tuple[str, ...],
    state_dir: Path | None,
    node_port: int | None,
    statements: tuple[str, ...],
    file_: str | None,
) -> None:
    """headwater: a SQL-first streaming database for Kafka.

    With no command: open the shell on the local node (http://127.0.0.1:8088, or --port), starting
    the node first if none is running (it is stopped again when the shell exits), or on the
    --server URLs.
    With -e SQL or -f FILE: run them there without a prompt, as `headwater run` does, and exit.
    """
    if ctx.invoked_subcommand is not None:
        if statements or file_:
            raise click.UsageError("-e and -f go without a command (or after `headwater run`)")
        if node_port is not None:
            raise click.UsageError(
                "--port is the local node's, without a command (`headwater "
                "server` has its own --port)"
            )
        remember_group_options(ctx, servers, output, defines)  # `headwater -s URL run -`
        return
    if statements and file_:
        raise click.UsageError("give -e SQL or -f FILE, not both")
    script = script_text(statements, file_) if statements or file_ else None
    node = None
    if servers and node_port is not None:
        raise click.UsageError("--port picks the local node's port; with --server it has none")
    if not servers:
        from headwater.localnode import (
            LocalNodeError,
            announcement,
            answering,
            ensure_local_node,
        )
        from headwater.server import default_state_dir

        url = f"http://127.0.0.1:{node_port or 8088}"
        if not answering(url):
            click.echo(f"starting a local node on {url} ...", err=True)
        try:
            node = ensure_local_node(state_dir or default_state_dir(), url)
        except LocalNodeError as exc:
            raise click.ClickException(str(exc)) from None
        where = announcement(node, state_dir or default_state_dir())
        if where is not None:  # where its Kafka listens: kcat and console producers need it
            click.echo(f"local node: {where}", err=True)
        servers = (node.url,)
        # A closed terminal (SIGHUP) or a kill (SIGTERM) must still stop the node we started.
        for hangup in (signal.SIGHUP, signal.SIGTERM):
            signal.signal(hangup, _exit_for_signal)
    try:
        if script is not None:
            text, name = script
            hooks = ctx.find_object(Hooks) or Hooks()
            code = run_text(
                text,
                name,
                settings_for(
                    servers,
                    output,
                    defines=parse_defines(defines),
                    history_file=None,
                    login=login_of(ctx),
                ),
                transport=hooks.transport,
            )
        elif sys.stdin.isatty():
            code = open_shell(
                list(servers), output, defines=parse_defines(defines), login=login_of(ctx)
            )
        else:  # `headwater < script.sql`: run it as `headwater run -` would
            code = run_text(
                sys.stdin.read(),
                "<stdin>",
                settings_for(
                    servers,
                    output,
                    defines=parse_defines(defines),
                    history_file=None,
                    login=login_of(ctx),
                ),
            )
    finally:
        if node is not None and node.process is not None:
            try:
                click.echo(
                    f"stopping the local node (pid {node.process.pid}; it finishes in the "
                    "background) ...",
                    err=True,
                )
            except OSError:  # the terminal is gone (closed window): stop the node all the same
                pass
            node.stop(wait=False)
    ctx.exit(code)


def _exit_for_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


@main.command()
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=9092,
    show_default=True,
    help="Kafka port on 127.0.0.1; 0 picks a free one.",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep topics and records in this folder (durable, on SeaweedFS).",
)
@click.option("--in-memory", is_flag=True, help="Keep everything in memory (the default).")
def broker(port: int, data_dir: Path | None, in_memory: bool) -> None:
    """Run an embedded Kafka broker (Tansu) on 127.0.0.1 until stopped with Ctrl-C or SIGTERM."""
    from headwater.kafka.broker import EmbeddedBroker, run_until_signalled
    from headwater.kafka.errors import BrokerError

    if data_dir is not None and in_memory:
        raise click.UsageError("--data-dir and --in-memory exclude each other")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    def ready(running: EmbeddedBroker) -> None:
        click.echo(f"broker ready: {running.bootstrap_servers} ({running.describe()})")

    try:
        run_until_signalled(EmbeddedBroker(data_dir, port), ready)
    except BrokerError as exc:
        raise click.ClickException(str(exc)) from exc
    except KeyboardInterrupt:  # Ctrl-C before the signal handlers were installed
        raise SystemExit(130) from None
    click.echo("broker stopped")


_SERVER_TEXT_FORMAT = "%(levelname)s %(name)s: %(message)s"


def _settings_help() -> str:
    from headwater.config import SETTINGS, defaults

    shown = defaults()
    lines = ["Settings (--config FILE, --set KEY=VALUE; options above win):", ""]
    for setting in SETTINGS:
        lines.append(
            f"\b\n  {setting.key} = {shown[setting.key] or '(unset)'}\n      {setting.doc}"
        )
    lines.append(
        "\b\n  client.tag.<name> = (unset)\n      This server's tags (e.g. client.tag.zone=z1), "
        "for rack-aware standbys."
    )
    return "\n".join(lines)


@main.command(epilog=_settings_help())
@click.option(
    "--port", type=click.IntRange(0, 65535), default=None, help="HTTP port  [default: 8088]"
)
@click.option("--host", default=None, help="Address to listen on  [default: 127.0.0.1]")
@click.option(
    "--bootstrap-servers",
    "-b",
    default=None,
    metavar="HOST:PORT[,...]",
    help="The Kafka cluster; without it the node starts the embedded broker.",
)
@click.option(
    "--service-id",
    default=None,
    help="The ksqlDB service id; servers with the same id share one catalog  [default: default_]",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Catalog snapshots, table stores and the embedded broker's data  "
    "[default: $XDG_DATA_HOME/headwater/node]",
)
@click.option(
    "--in-memory",
    is_flag=True,
    help="A throwaway node: embedded broker, stores and catalog in memory.",
)
@click.option(
    "--peers",
    default=None,
    metavar="HOST:PORT[,...]",
    help="Servers of the same service to contact first (cluster.peers); the members "
    "topic finds the rest.",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="A properties file of settings (see below).",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="One setting (repeatable); applied after --config.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default=None,
    help="text (for people) or json (one object a line, for log shippers); "
    "headwater.log.format  [default: text]",
)
def server(
    port: int | None,
    host: str | None,
    bootstrap_servers: str | None,
    service_id: str | None,
    state_dir: Path | None,
    in_memory: bool,
    peers: str | None,
    config_file: Path | None,
    overrides: tuple[str, ...],
    log_format: str | None,
) -> None:
    """Run a headwater node (ksqlDB's REST API) until stopped with Ctrl-C or SIGTERM."""
    from headwater.config import ConfigError, load
    from headwater.engine.log_format import configure
    from headwater.http_server import PortInUse, UnknownHttpServer, UnsupportedTls
    from headwater.kafka.errors import BrokerError, KafkaEdgeError
    from headwater.server import Node, StateDirInUse, serve

    configure("text", logging.WARNING, _SERVER_TEXT_FORMAT)
    if log_format is not None:
        overrides = (*overrides, f"headwater.log.format={log_format}")
    try:
        config = load(
            config_file,
            overrides,
            bootstrap_servers=bootstrap_servers,
            service_id=service_id,
            state_dir=str(state_dir) if state_dir else None,
            peers=tuple(p.strip() for p in peers.split(",") if p.strip()) if peers else None,
        )
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    configure(config.log_format, logging.WARNING, _SERVER_TEXT_FORMAT)
    if host is not None or port is not None:
        from dataclasses import replace

        config = replace(
            config, listener=(host or config.host, config.port if port is None else port)
        )
    if in_memory and (config.state_dir or state_dir):
        raise click.UsageError("--in-memory and --state-dir exclude each other")

    def ready(node: Node) -> None:
        click.echo(f"catalog loaded; {node.serving(config.service_id)}")

    try:
        serve(config, in_memory=in_memory, on_ready=ready)
    except (KafkaEdgeError, BrokerError, StateDirInUse, ConfigError, PortInUse) as exc:
        raise click.ClickException(str(exc)) from exc
    except (UnknownHttpServer, UnsupportedTls) as exc:  # HEADWATER_HTTP_SERVER / _LOOP / ...
        raise click.UsageError(str(exc)) from exc
    click.echo("server stopped")


@main.command()
@click.argument("script", type=click.File("r", encoding="utf-8"), default="-")
@click.option(
    "--define",
    "-d",
    "defines",
    multiple=True,
    metavar="NAME=VALUE",
    help="Define a variable for ${NAME} substitution (repeatable).",
)
@click.option(
    "--sql", "print_sql", is_flag=True, help="Print each statement back as normalized SQL."
)
def parse(script: IO[str], defines: tuple[str, ...], print_sql: bool) -> None:
    """Check a SQL script (a file, or - for standard input) without running it.

    Prints one line per statement (its line, kind and name), or the first error with its line,
    column and a caret under the failing position; exits 1 on an error.
    """
    from headwater.sqlparse_ext import ParseError, to_sql
    from headwater.sqlparse_ext import parse as parse_script

    variables = {}
    for item in defines:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--define")
        variables[name] = value
    text = script.read()
    try:
        statements = parse_script(text, variables)
    except ParseError as exc:
        click.echo(_caret(text, exc), err=True)
        raise SystemExit(1) from None
    for statement in statements:
        name = getattr(statement, "name", None) or getattr(statement, "target", None) or ""
        click.echo(f"line {statement.line}: {type(statement).__name__} {name}".rstrip())
        if print_sql:
            click.echo(f"  {to_sql(statement)}")
    click.echo(f"{len(statements)} statement(s) parsed")


def _caret(text: str, error: Exception) -> str:
    """The error, the line of the script it is on, and a caret under its column."""
    line = getattr(error, "line", 0)
    column = getattr(error, "column", 0)
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return f"Error: {error}"
    source = lines[line - 1]
    message = str(error).split("\nStatement: ", 1)[0]  # the line and caret show the statement
    return f"Error: {message}\n  {source}\n  {' ' * max(column - 1, 0)}^"


main.add_command(run_command)
main.add_command(shell_command)

if __name__ == "__main__":
    main()
