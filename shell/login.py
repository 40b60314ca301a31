"""Who the shell logs in as, and how it checks https:// servers: the ``-u/--user``,
``-p/--password`` (or ``HEADWATER_PASSWORD``; ksqlDB's CLI has the same two) and ``--ca-file``
options. Asks for the password on the terminal when only a user is given (I/O: the terminal);
nothing else.

The options store their values in the click context's ``meta`` (shared by a group and its
commands), so ``headwater -u fred`` and ``headwater run -u fred`` both work and every entry
point reads them with :func:`login_of`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

__all__ = ["PASSWORD_ENV", "Login", "login_of", "login_options"]

F = TypeVar("F", bound=Callable[..., Any])
PASSWORD_ENV = "HEADWATER_PASSWORD"
"""The environment variable holding the password (for scripts: no prompt)."""
_KEY = "headwater.login"


@dataclass(frozen=True, slots=True)
class Login:
    """HTTP Basic credentials (the server's ``authentication.method=BASIC``) and the CA file
    https:// servers are verified with (None: the system's CAs)."""

    user: str | None = None
    password: str | None = None
    ca_file: str | None = None


def _store(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    if value is not None and param.name is not None:
        ctx.meta.setdefault(_KEY, {})[param.name] = value
    return value


def login_options(function: F) -> F:
    """Add ``-u/--user``, ``--password`` and ``--ca-file`` to a click command."""
    options = [
        click.option(
            "--user",
            "-u",
            metavar="USER",
            expose_value=False,
            callback=_store,
            help="Log in as USER (HTTP Basic); the password is asked for unless "
            f"--password or ${PASSWORD_ENV} gives it.",
        ),
        click.option(
            "--password",
            "-p",
            metavar="PASSWORD",
            expose_value=False,
            callback=_store,
            envvar=PASSWORD_ENV,
            show_envvar=True,
            help="The password of --user (prefer the environment variable: a command "
            "line is visible to other users).",
        ),
        click.option(
            "--ca-file",
            metavar="PEM",
            expose_value=False,
            callback=_store,
            type=click.Path(dir_okay=False, exists=True),
            help="Verify https:// servers with this CA file (e.g. their self-signed "
            "certificate) instead of the system's CAs.",
        ),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def login_of(ctx: click.Context, *, prompt: Callable[..., Any] = click.prompt) -> Login:
    """The login the options gave, asking for the password when only a user was given."""
    given = ctx.meta.get(_KEY, {})
    user, password = given.get("user"), given.get("password")
    if user is not None and password is None:
        password = str(prompt(f"Password for {user}", hide_input=True, err=True))
    return Login(user, password, given.get("ca_file"))
