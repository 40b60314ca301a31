"""The ``headwater`` console command."""
from __future__ import annotations

import click


@click.group()
@click.version_option(package_name="headwater")
def main() -> None:
    """headwater: a SQL-first streaming database for Kafka."""
