"""The ``headwater`` console command."""
from __future__ import annotations

import logging
from pathlib import Path

import click


@click.group()
@click.version_option(package_name="headwater")
def main() -> None:
    """headwater: a SQL-first streaming database for Kafka."""


@main.command()
@click.option("--port", type=click.IntRange(0, 65535), default=9092, show_default=True,
              help="Kafka port on 127.0.0.1; 0 picks a free one.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep topics and records in this folder (durable, on SeaweedFS).")
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


@main.command()
@click.option("--bootstrap-servers", "-b", default="127.0.0.1:9092", show_default=True,
              help="The Kafka cluster (host:port[,host:port...]).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8088, show_default=True,
              help="HTTP port.")
@click.option("--service-id", default="default_", show_default=True,
              help="The ksqlDB service id; servers with the same id share one catalog.")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep catalog snapshots in this folder (faster restarts).")
def server(bootstrap_servers: str, host: str, port: int, service_id: str,
           data_dir: Path | None) -> None:
    """Run the headwater server (ksqlDB's REST API) until stopped with Ctrl-C or SIGTERM."""
    from headwater.kafka.clients import KafkaSettings
    from headwater.kafka.errors import KafkaEdgeError
    from headwater.server import serve

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    def ready(_services: object) -> None:
        click.echo(f"catalog loaded; serving http://{host}:{port} (Kafka {bootstrap_servers}, "
                   f"service id {service_id})")

    try:
        serve(KafkaSettings(bootstrap_servers), service_id, data_dir, host=host, port=port,
              on_ready=ready)
    except KafkaEdgeError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo("server stopped")


@main.command()
@click.argument("script", type=click.File("r", encoding="utf-8"), default="-")
@click.option("--define", "-d", "defines", multiple=True, metavar="NAME=VALUE",
              help="Define a variable for ${NAME} substitution (repeatable).")
@click.option("--sql", "print_sql", is_flag=True, help="Print each statement back as normalized SQL.")
def parse(script: click.utils.LazyFile, defines: tuple[str, ...], print_sql: bool) -> None:
    """Check a SQL script (a file, or - for standard input) without running it.

    Prints one line per statement (its line, kind and name), or the first error with its line,
    column and a caret under the failing position; exits 1 on an error.
    """
    from headwater.sqlparse_ext import ParseError, parse as parse_script, to_sql

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
    return f"Error: {error}\n  {source}\n  {' ' * max(column - 1, 0)}^"
