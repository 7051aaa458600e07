"""``mcprec diff``: the click layer over ``mcprec.diff``.

Exit codes as diff(1): 0 equal, 1 different, 2 trouble (every ``McprecError``, printed as one
line ``mcprec: ...``). Registered in ``cli.py`` with ``cli.add_command(diff_command)``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
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


FORMATS = ["text", "json", "markdown", "html", "github"]
FAIL_ON = ["breaking", "warning", "any"]


@dataclass
class Gate:
    """The diff settings of one command: its options over the config file's ``[diff]``."""

    ignore: tuple[str, ...] = ()
    normalize: Any = None
    """A ``Normalizer``."""
    surface_only: bool = False
    fail_on: str = "any"
    fail_on_latency: bool = False
    latency_threshold: float = 1.5
    latency_min_ms: float = 5.0

    def diff(self, a: str, b: str | None) -> Any:
        from .diff import diff

        return diff(a, b, ignore=self.ignore, normalize=self.normalize,
                    surface_only=self.surface_only, latency_threshold=self.latency_threshold,
                    latency_min_ms=self.latency_min_ms)

    def exit_code(self, result: Any) -> int:
        failed = result.fails(self.fail_on, fail_on_latency=self.fail_on_latency)
        return EXIT_DIFFERENT if failed else EXIT_EQUAL


def resolve(config: str | None, ignore: tuple[str, ...] = (), normalize: tuple[str, ...] = (),
            fail_on: str | None = None, surface_only: bool | None = None,
            fail_on_latency: bool | None = None, latency_threshold: float | None = None,
            latency_min_ms: float | None = None) -> Gate:
    """The command line over the config file (``--config``, else ./mcprec.toml and
    ./pyproject.toml): ignores and normalizers add up, the rest the command line decides."""
    from .diff import load_config
    from .diff.api import DEFAULT_LATENCY_MIN_MS, DEFAULT_LATENCY_THRESHOLD
    from .normalize import Normalizer, split_specs

    settings = load_config(config)
    for warning in settings.warnings:
        click.echo(f"mcprec: warning: {warning}", err=True)
    specs = [*settings.normalize, *(x for x in split_specs(normalize)
                                    if x not in settings.normalize)]
    return Gate(
        ignore=(*settings.ignore, *(p for p in ignore if p not in settings.ignore)),
        normalize=Normalizer.build(specs, settings.normalizers),
        surface_only=bool(_first(surface_only, settings.surface_only, False)),
        fail_on=_first(fail_on, settings.fail_on, "any"),
        fail_on_latency=bool(_first(fail_on_latency, settings.fail_on_latency, False)),
        latency_threshold=_first(latency_threshold, settings.latency_threshold,
                                 DEFAULT_LATENCY_THRESHOLD),
        latency_min_ms=_first(latency_min_ms, settings.latency_min_ms, DEFAULT_LATENCY_MIN_MS),
    )


def _run(a: str, b: str | None, ignore: tuple[str, ...], config: str | None,
         latency_threshold: float | None, latency_min_ms: float | None,
         fail_on_latency: bool | None, fmt: str, color: bool | None, *,
         html: str | None = None, fail_on: str | None = None,
         surface_only: bool | None = None, normalize: tuple[str, ...] = ()) -> int:
    """Diff, print the report, return the exit status; errors become ``DiffCommandError``
    (exit 2). Also used by ``mcprec verify``. ``html``: also write the report as one HTML
    page there."""
    from .errors import McprecError

    try:
        gate = resolve(config, ignore, normalize, fail_on, surface_only, fail_on_latency,
                       latency_threshold, latency_min_ms)
        result = gate.diff(a, b)
        emit(result, fmt, color, html)
        return gate.exit_code(result)
    except McprecError as e:
        raise DiffCommandError(str(e)) from e
    except KeyboardInterrupt:
        raise DiffInterrupted("interrupted") from None


def emit(result: Any, fmt: str, color: bool | None, html: str | None = None) -> None:
    """Print ``result`` in ``fmt``; ``github``: annotations, then Markdown, which also goes to
    ``$GITHUB_STEP_SUMMARY`` when set. ``html``: also write the HTML page there."""
    if html is not None:
        from .diff.report import to_html

        write_file(html, to_html(result))
    if fmt == "json":
        click.echo(result.to_json())
    elif fmt == "html":
        from .diff.report import to_html

        click.echo(to_html(result), nl=False)
    elif fmt == "markdown":
        click.echo(result.to_markdown(), nl=False)
    elif fmt == "github":
        from .diff.report import annotations

        lines = annotations(result)
        github_output(lines, result.to_markdown())
    else:
        use_color = sys.stdout.isatty() if color is None else color
        click.echo(result.to_text(color=use_color), nl=False, color=use_color)


def github_output(lines: list[str], markdown: str) -> None:
    """Annotations and the Markdown on stdout; the Markdown appended to the job summary."""
    for line in lines:
        click.echo(line)
    if lines:
        click.echo("")
    click.echo(markdown, nl=False)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        write_file(summary, markdown + "\n", append=True)


def write_file(path: str, text: str, *, append: bool = False) -> None:
    try:
        with open(path, "ab" if append else "wb") as f:
            f.write(text.encode("utf-8", "replace"))
    except OSError as e:
        raise DiffCommandError(f"cannot write {path}: {e.strerror}") from e


def _first(*values: Any) -> Any:
    return next(v for v in values if v is not None)


def gate_options(f: Any) -> Any:
    """``--fail-on``, ``--surface-only``, ``--normalize``: shared by diff and verify."""
    f = click.option(
        "--normalize", "normalize", multiple=True, metavar="KINDS",
        help="Make volatile values compare equal by kind, anywhere in a message (also inside "
             "strings): timestamps (ISO-8601 and epoch times, 2000-2100), iso8601, epochs, "
             "uuids, a name from [diff.normalizers] in the config, or NAME=REGEX. Comma-"
             "separated or repeated, e.g. --normalize timestamps,uuids.")(f)
    f = click.option(
        "--surface-only/--no-surface-only", "surface_only", default=None,
        help="Compare the listed surface alone (server facts, tools, resources, templates, "
             "prompts), not call results or latency.")(f)
    f = click.option(
        "--fail-on", "fail_on", type=click.Choice(FAIL_ON), default=None,
        help="What makes the exit status 1: any difference (default), a warning or worse "
             "(e.g. a changed description or result), or only a breaking change.")(f)
    return f


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
                   "latency-min-ms, fail-on-latency, fail-on, surface-only, normalize = [...], "
                   "[diff.normalizers]). Default: ./mcprec.toml and [tool.mcprec.diff] in "
                   "./pyproject.toml, when present.")
@click.option("--latency-threshold", type=float, metavar="RATIO",
              help="Flag a method whose p50 latency in B is at least RATIO times A's "
                   "(default 1.5).")
@click.option("--latency-min-ms", type=float, metavar="MS",
              help="Do not flag methods whose p50 is below MS on both sides (default 5).")
@click.option("--fail-on-latency/--no-fail-on-latency", default=None,
              help="Count flagged latencies as a difference (exit 1). Default: report only.")
@gate_options
@click.option("-f", "--format", "fmt",
              type=click.Choice(FORMATS), default="text",
              show_default=True,
              help="Report format; markdown suits a pull-request comment, html is one "
                   "self-contained page (both sessions, exchanges side by side), github "
                   "prints workflow annotations (::error for breaking, ::warning for the "
                   "rest) and the Markdown, which also goes to $GITHUB_STEP_SUMMARY.")
@click.option("--color/--no-color", default=None,
              help="Colour the text report (default: when stdout is a terminal).")
def diff_command(a: str, b: str | None, ignore: tuple[str, ...], config: str | None,
                 latency_threshold: float | None, latency_min_ms: float | None,
                 fail_on_latency: bool | None, fail_on: str | None, surface_only: bool | None,
                 normalize: tuple[str, ...], fmt: str, color: bool | None) -> None:
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

    Each change has a severity: BREAKING, WARNING (what models read or what the server
    answers changed: a description, annotations, instructions, a result value) or
    compatible (see docs/diff.md).

    Exit status: 0 equal (after ignores and normalizers), 1 different (with --fail-on: a
    difference of that severity or worse), 2 on errors (unknown cassette or session, empty
    session, bad path). Latency alone makes a difference only with --fail-on-latency.
    """
    sys.exit(_run(a, b, ignore, config, latency_threshold, latency_min_ms, fail_on_latency,
                  fmt, color, fail_on=fail_on, surface_only=surface_only, normalize=normalize))
