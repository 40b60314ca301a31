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
