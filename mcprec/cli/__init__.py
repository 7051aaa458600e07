"""The ``mcprec`` command line: parses arguments, calls the library, maps errors to exit codes.

Imports of the heavier modules happen inside each command so that every command starts fast.
The commands live in this package's modules by what they work on (``record``, ``replay``,
``cassette``, ``diff``, ``view``, ``lint``, ``check``); this module holds the
group, registers them, and turns every error into one line and an exit code.
"""

from __future__ import annotations

import sys

import click

from .. import __version__
from ._common import CommandError, _Group

__all__ = ["CommandError", "cli", "main"]


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mcprec")
def cli() -> None:
    """Record, replay and diff Model Context Protocol (MCP) traffic.

    \b
    Record a stdio server (put mcprec in front of the server command):
      mcprec record -c cassettes/demo.db -- python server.py
    Look at what was recorded:
      mcprec sessions cassettes/demo.db
      mcprec show cassettes/demo.db
    """
    from .. import _log

    _log.to_stderr()


def _register() -> None:
    from .check import check as check_command
    from .lint import lint_command
    from .cassette import export, import_, redact, scan, sessions, show
    from .diff import diff_command, verify
    from .record import record, script
    from .replay import replay
    from .view import view_command

    for command in (record, script, replay, redact, scan, sessions, show, export, import_,
                    verify, diff_command, lint_command, check_command, view_command):
        cli.add_command(command)


_register()


def _named_command(args: list[str]) -> str:
    """``mcprec COMMAND`` for the command ``args`` name, else ``mcprec``: where an error that
    click reports without its context (an option missing its value) points for help."""
    name = next((a for a in args if not a.startswith("-")), None)
    return f"mcprec {name}" if name in cli.commands else "mcprec"


def main(argv: list[str] | None = None) -> None:
    """Run the command line; every error is one line ``mcprec: ...`` and an exit code."""
    try:
        code = cli.main(args=argv, prog_name="mcprec", standalone_mode=False)
    except click.UsageError as e:  # bad arguments: one line, and where to look
        if type(e).__name__ == "NoArgsIsHelpError":  # plain `mcprec`: the help it asked for
            click.echo(e.format_message())
            sys.exit(0)
        where = e.ctx.command_path if e.ctx is not None else _named_command(
            sys.argv[1:] if argv is None else argv)
        from ..terminal import safe_lines

        click.echo(f"mcprec: {safe_lines(e.format_message())} (see `{where} --help`)", err=True)
        sys.exit(e.exit_code)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        click.echo("mcprec: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:  # e.g. `mcprec show ... | head`
        sys.stderr.close()
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
