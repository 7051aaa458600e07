"""``mcprec check``: the click layer over ``mcprec.check``. Registered in ``mcprec/cli/__init__.py``.

Exit codes: 0 every check passed (or was skipped), 1 a check failed, 2 the check could not run
(bad arguments, a server that cannot be started or reached, a cassette that cannot be
written), each printed as one line.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ._common import _ServerCommand, trouble, write_report

EXIT_PASSED, EXIT_FAILED = 0, 1


def _tool_call(value: str | None, option: str) -> tuple[str, dict[str, Any] | None] | None:
    """``TOOL`` or ``TOOL={"json": "arguments"}``."""
    if value is None:
        return None
    name, sep, args = value.partition("=")
    if not name:
        raise click.BadParameter(f"expected TOOL or TOOL=JSON, got {value!r}", param_hint=option)
    if not sep:
        return name, None
    try:
        parsed = json.loads(args)
    except ValueError as e:
        raise click.BadParameter(f"the arguments of {name} are not JSON: {e}",
                                 param_hint=option) from None
    if not isinstance(parsed, dict):
        raise click.BadParameter(f"the arguments of {name} must be a JSON object",
                                 param_hint=option)
    return name, parsed


def _headers(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for v in values:
        name, sep, value = v.partition(":")
        if not sep or not name.strip():
            raise click.BadParameter(f"expected 'Name: value', got {v!r}", param_hint="--header")
        out[name.strip()] = value.strip()
    return out


@click.command("check", cls=_ServerCommand,
               context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False,
                                 "help_option_names": ["-h", "--help"]})
@click.option("--target", metavar="URL", help="A Streamable HTTP server to check, instead of a "
              "stdio server command after `--`.")
@click.option("-c", "--cassette", type=click.Path(dir_okay=False),
              help="Keep the recorded probe session in this cassette (default: a temporary "
                   "cassette, removed at the end).")
@click.option("-s", "--session", metavar="NAME",
              help="The probe session's name (default: check, or check-2... when taken).")
@click.option("--call", "call", metavar="TOOL[=JSON]",
              help="The tool tools.call and tools.invalid-arguments call, with these arguments "
                   "(default: the first tool annotated readOnlyHint, arguments made from its "
                   "inputSchema).")
@click.option("--slow", "slow", metavar="TOOL[=JSON]",
              help="A tool call that takes a while (a second or so), for the progress and "
                   "cancellation checks (without it they are skipped).")
@click.option("-H", "--header", "headers", multiple=True, metavar="'NAME: VALUE'",
              help="With --target: a header sent with every request, e.g. 'Authorization: "
                   "Bearer ...' (repeatable).")
@click.option("--timeout", type=float, default=10.0, show_default=True,
              help="Seconds to wait for each answer.")
@click.option("--exit-timeout", type=float, default=5.0, show_default=True,
              help="Seconds a stdio server may take to exit once its input is closed.")
@click.option("-f", "--format", "fmt", type=click.Choice(["text", "json", "github", "junit"]),
              default="text", show_default=True,
              help="Report format: one line per check, JSON, GitHub workflow annotations, or "
                   "JUnit XML for CI test reports (a test case per check).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              help="Write the report here instead of stdout.")
@click.option("--no-lint", is_flag=True, help="Do not lint the recorded probe session.")
@click.option("--list", "list_checks", is_flag=True, help="List the checks and exit.")
@click.argument("server", nargs=-1, type=click.UNPROCESSED)
def check(target: str | None, cassette: str | None, session: str | None, call: str | None,
          slow: str | None, headers: tuple[str, ...], timeout: float, exit_timeout: float,
          fmt: str, output: str, no_lint: bool, list_checks: bool,
          server: tuple[str, ...]) -> None:
    """Check a live MCP server against the spec, as a CI gate.

    mcprec plays a probe session as the client: the lifecycle, then every capability the
    server declares, with valid input and with bad input (an unknown method, tool, resource
    or prompt; invalid params; an invalid cursor), pagination, progress and cancellation; over
    HTTP also a foreign Host and Origin (DNS rebinding), a missing or stale session id, a wrong
    protocol version header, resumption. The session is recorded into a cassette and linted.
    Every request waits at most --timeout; every bad input is a few bytes.

    \b
      mcprec check -- python server.py
      mcprec check --call echo --slow 'slow={"steps": 5}' -- python server.py
      mcprec check --target http://127.0.0.1:8000/mcp --format junit -o check.xml

    Exit status: 0 every check passed or was skipped, 1 a check failed, 2 the check could not
    run. The checks: docs/check.md, or --list.
    """
    from ..errors import McprecError

    if list_checks:
        from ..check.model import CHECKS

        width = max(len(c) for c in CHECKS)
        click.echo("".join(f"{c:{width}}  {what}\n" for c, what in CHECKS.items()), nl=False)
        sys.exit(EXIT_PASSED)
    if headers and not target:
        raise click.UsageError("--header goes with --target URL")
    if timeout <= 0 or exit_timeout <= 0:
        raise click.UsageError("--timeout and --exit-timeout must be more than 0")
    from ..check import CheckOptions, render, run_check
    from ..check.report import summary

    options = CheckOptions(timeout=timeout, call=_tool_call(call, "--call"),
                           slow=_tool_call(slow, "--slow"), headers=_headers(headers),
                           exit_timeout=exit_timeout, lint=not no_lint)
    try:
        report = run_check(server=server, target=target, cassette=cassette, session=session,
                           options=options)
    except McprecError as e:
        raise trouble(str(e)) from e
    write_report(render(report, fmt), output, f"check: {summary(report)}")
    sys.exit(EXIT_FAILED if report.failed else EXIT_PASSED)
