"""The interactive loop: a prompt_toolkit session with multi-line statements ended by `;`, a
history file, completion, highlighting and the shell's own commands (exit, help, output, clear).
Does I/O: the terminal (or the input/output it is given, for tests) and the history file.
"""

from __future__ import annotations

from collections.abc import Callable

import click
from prompt_toolkit import PromptSession
from prompt_toolkit.application.current import get_app
from prompt_toolkit.filters import Condition
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.lexers import PygmentsLexer
from prompt_toolkit.output import Output

from headwater.sqlparse_ext import ParseError
from headwater.sqlparse_ext.script import split

from .completer import ShellCompleter
from .config import ShellSettings
from .format import OutputFormat
from .lexer import HeadwaterLexer
from .runner import Runner
from .vocabulary import LOCAL_COMMANDS

__all__ = ["HELP", "is_complete", "local_command", "repl"]

HELP = """\
Statements end with ';' and may span lines. Shell commands (no ';' needed):
  help                    this text
  output [table|json|csv] show or change how results are printed
  clear                   clear the screen
  exit, quit (or Ctrl-D)  leave
Client-side statements, as in ksqlDB's CLI:
  SET 'property' = 'value';   UNSET 'property';   SHOW PROPERTIES;
  DEFINE name = 'value';      UNDEFINE name;      SHOW VARIABLES;   (use as ${name})
  RUN SCRIPT 'file.sql';
Everything else goes to the server: SHOW STREAMS|TABLES|QUERIES|TOPICS; LIST TOPICS;
DESCRIBE name [EXTENDED]; CREATE ...; SELECT ... (pull queries show who served them, at what lag).
Tab completes keywords and the catalog's names; Ctrl-C cancels the current input."""


def local_command(text: str) -> tuple[str, str] | None:
    """(command, argument) when `text` is one of the shell's own commands, else None."""
    words = text.strip().rstrip(";").split()
    if not words or words[0].lower() not in LOCAL_COMMANDS or len(words) > 2:
        return None
    return words[0].lower(), words[1] if len(words) > 1 else ""


def is_complete(text: str) -> bool:
    """Whether Enter should run `text`: empty, a shell command, or statements ended by `;`
    (outside quotes and comments, as `sqlparse_ext` splits scripts)."""
    if not text.strip() or local_command(text) is not None:
        return True
    try:
        segments = split(text)
    except ParseError:  # an open string, quoted name or comment
        return False
    return not segments or segments[-1].text.rstrip().endswith(";")


def _handle_local(command: str, argument: str, runner: Runner) -> bool:
    """Run a shell command; False to leave the loop."""
    if command in ("exit", "quit"):
        return False
    if command == "help":
        click.echo(HELP)
    elif command == "clear":
        click.clear()
    elif command == "output":
        if argument:
            try:
                runner.output = OutputFormat(argument.lower())
            except ValueError:
                click.echo(f"Unknown output format {argument!r}: use table, json or csv", err=True)
                return True
        click.echo(f"Output format: {runner.output.value.upper()}")
    return True


def _history(settings: ShellSettings) -> History:
    path = settings.history_file
    if path is None:
        return InMemoryHistory()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(exist_ok=True)
    except OSError as exc:
        click.echo(f"Warning: history not kept ({path}: {exc.strerror})", err=True)
        return InMemoryHistory()
    return FileHistory(str(path))


def repl(
    runner: Runner,
    completer: ShellCompleter,
    settings: ShellSettings,
    *,
    after_each: Callable[[], None] | None = None,
    input: Input | None = None,
    output: Output | None = None,
) -> int:
    """Read, run and print until exit, quit or Ctrl-D.

    Args:
        runner: runs entries and prints their results.
        completer: the completer (its metadata is refreshed elsewhere).
        settings: history file and such.
        after_each: called after each entry (to refresh session names in the completer).
        input, output: prompt_toolkit devices instead of the terminal (tests).

    Returns:
        The exit status: 0.
    """
    multiline = Condition(lambda: not is_complete(get_app().current_buffer.text))
    session: PromptSession[str] = PromptSession(
        message="headwater> ",
        prompt_continuation=lambda width, line, wrap: "." * (width - 2) + "> ",
        multiline=multiline,
        history=_history(settings),
        completer=completer,
        complete_while_typing=True,
        lexer=PygmentsLexer(HeadwaterLexer),
        enable_history_search=True,
        input=input,
        output=output,
    )
    while True:
        try:
            text = session.prompt()
        except KeyboardInterrupt:
            continue
        except EOFError:
            break
        command = local_command(text)
        if command is not None:
            if not _handle_local(*command, runner):
                break
            continue
        if text.strip():
            runner.run(text, "<input>")
            if after_each is not None:
                after_each()
    click.echo("Exiting headwater.")
    return 0
