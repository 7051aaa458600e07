"""``mcprec diff``: the click layer over ``mcprec.diff``.

Exit codes as diff(1): 0 equal, 1 different, 2 trouble (every ``McprecError``, printed as one
line ``mcprec: ...``). Registered in ``cli.py`` with ``cli.add_command(diff_command)``.
"""

from __future__ import annotations

import sys
from typing import Any

import click

EXIT_EQUAL, EXIT_DIFFERENT, EXIT_TROUBLE = 0, 1, 2


class DiffCommandError(click.ClickException):
    """A domain error shown as one line, exit status 2."""

    exit_code = EXIT_TROUBLE

    def show(self, file: Any = None) -> None:
        click.echo(f"mcprec: {self.format_message()}", err=True)


class DiffInterrupted(DiffCommandError):
    exit_code = 130


def _run(a: str, b: str | None, ignore: tuple[str, ...], config: str | None,
         latency_threshold: float | None, latency_min_ms: float | None,
         fail_on_latency: bool | None, fmt: str, color: bool | None, *,
         html: str | None = None) -> int:
    """Diff, print the report, return the exit status; errors become ``DiffCommandError``
    (exit 2). Also used by ``mcprec verify``. ``html``: also write the report as one HTML
    page there."""
    from .errors import McprecError

    try:
        return _report(a, b, ignore, config, latency_threshold, latency_min_ms,
                       fail_on_latency, fmt, color, html)
    except McprecError as e:
        raise DiffCommandError(str(e)) from e
    except KeyboardInterrupt:
        raise DiffInterrupted("interrupted") from None


def _report(a: str, b: str | None, ignore: tuple[str, ...], config: str | None,
            latency_threshold: float | None, latency_min_ms: float | None,
            fail_on_latency: bool | None, fmt: str, color: bool | None,
            html: str | None = None) -> int:
    from .diff import diff, load_config
    from .diff.api import DEFAULT_LATENCY_MIN_MS, DEFAULT_LATENCY_THRESHOLD

    settings = load_config(config)
    for warning in settings.warnings:
        click.echo(f"mcprec: warning: {warning}", err=True)
    result = diff(
        a, b,
        ignore=(*settings.ignore, *(p for p in ignore if p not in settings.ignore)),
        latency_threshold=_first(latency_threshold, settings.latency_threshold,
                                 DEFAULT_LATENCY_THRESHOLD),
        latency_min_ms=_first(latency_min_ms, settings.latency_min_ms, DEFAULT_LATENCY_MIN_MS),
    )
    if html is not None:
        from .diff.report import to_html

        try:
            with open(html, "wb") as f:
                f.write(to_html(result).encode("utf-8", "replace"))
        except OSError as e:
            raise DiffCommandError(f"cannot write {html}: {e.strerror}") from e
    if fmt == "json":
        click.echo(result.to_json())
    elif fmt == "html":
        from .diff.report import to_html

        click.echo(to_html(result), nl=False)
    elif fmt == "markdown":
        click.echo(result.to_markdown(), nl=False)
    else:
        use_color = sys.stdout.isatty() if color is None else color
        click.echo(result.to_text(color=use_color), nl=False, color=use_color)
    fail_latency = bool(_first(fail_on_latency, settings.fail_on_latency, False))
    return EXIT_DIFFERENT if result.is_different(fail_on_latency=fail_latency) else EXIT_EQUAL


def _first(*values: Any) -> Any:
    return next(v for v in values if v is not None)


@click.command("diff", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("a", metavar="A")
@click.argument("b", metavar="[B]", required=False)
@click.option("--ignore", "ignore", multiple=True, metavar="PATH",
              help="JSON path to leave out of the comparison, in answers, notifications and "
                   "requests (repeatable): $.result.content[*].text, "
                   "result.structuredContent.timestamp, $..timestamp. A path may go on into "
                   "a string that holds JSON. The paths in the report can be pasted here.")
@click.option("--config", type=click.Path(dir_okay=False),
              help="TOML file with a [diff] table (ignore = [...], latency-threshold, "
                   "latency-min-ms, fail-on-latency). Default: ./mcprec.toml and "
                   "[tool.mcprec.diff] in ./pyproject.toml, when present.")
@click.option("--latency-threshold", type=float, metavar="RATIO",
              help="Flag a method whose p50 latency in B is at least RATIO times A's "
                   "(default 1.5).")
@click.option("--latency-min-ms", type=float, metavar="MS",
              help="Do not flag methods whose p50 is below MS on both sides (default 5).")
@click.option("--fail-on-latency/--no-fail-on-latency", default=None,
              help="Count flagged latencies as a difference (exit 1). Default: report only.")
@click.option("-f", "--format", "fmt",
              type=click.Choice(["text", "json", "markdown", "html"]), default="text",
              show_default=True,
              help="Report format; markdown suits a pull-request comment, html is one "
                   "self-contained page (both sessions, exchanges side by side).")
@click.option("--color/--no-color", default=None,
              help="Colour the text report (default: when stdout is a terminal).")
def diff_command(a: str, b: str | None, ignore: tuple[str, ...], config: str | None,
                 latency_threshold: float | None, latency_min_ms: float | None,
                 fail_on_latency: bool | None, fmt: str, color: bool | None) -> None:
    """Compare two recorded sessions: what changed in the server's behaviour.

    A and B are sessions written CASSETTE[:SESSION]. With one CASSETTE alone, its last two
    sessions are compared; a CASSETTE without a session name means its latest session.

    \b
      mcprec diff cassettes/srv.db                  # its last two sessions
      mcprec diff cassettes/srv.db:v1 cassettes/srv.db:v2
      mcprec diff old.db new.db --ignore '$..timestamp' --format markdown

    Requests are paired as replay matches them (method + params; identical requests in
    order; initialize by method). The report shows the server's protocol version, info and
    capabilities; tools, resources, templates and prompts added, removed or changed, with
    BREAKING changes (a tool or resource removed, a required input or argument added, an
    input's type changed or removed, an output schema narrowed) apart from compatible ones;
    every changed answer, path by path (JSON inside strings compared as JSON); requests on
    one side only; notifications and server requests that appeared or disappeared; errors
    that appeared; and the p50 latency of each method on both sides.

    Exit status: 0 equal (after ignores), 1 different, 2 on errors (unknown cassette or
    session, empty session, bad path). Latency alone makes a difference only with
    --fail-on-latency.
    """
    sys.exit(_run(a, b, ignore, config, latency_threshold, latency_min_ms, fail_on_latency,
                  fmt, color))
