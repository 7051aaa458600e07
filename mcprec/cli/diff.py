"""``mcprec diff``: the click layer over ``mcprec.diff``.

Exit codes as diff(1): 0 equal, 1 different, 2 trouble (every ``McprecError``, printed as one
line ``mcprec: ...``). Registered in ``cli/__init__.py``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from ..errors import McprecError
from ..verify.gate import FAIL_ON, Gate
from ..terminal import safe, safe_lines
from ._common import CommandError, _redactor, _ServerCommand, redaction_options, trouble

EXIT_EQUAL, EXIT_DIFFERENT, EXIT_TROUBLE = 0, 1, 2




FORMATS = ["text", "json", "markdown", "html", "github"]


def resolve(config: str | None, ignore: tuple[str, ...] = (), normalize: tuple[str, ...] = (),
            fail_on: str | None = None, surface_only: bool | None = None,
            fail_on_latency: bool | None = None, latency_threshold: float | None = None,
            latency_min_ms: float | None = None) -> Gate:
    """The command line over the config file (``--config``, else ./mcprec.toml and
    ./pyproject.toml), as ``verify.gate.resolve``; the config's warnings on stderr."""
    from ..verify.gate import resolve as resolve_gate

    gate = resolve_gate(config, ignore=ignore, normalize=normalize, fail_on=fail_on,
                        surface_only=surface_only, fail_on_latency=fail_on_latency,
                        latency_threshold=latency_threshold, latency_min_ms=latency_min_ms)
    for warning in gate.warnings:
        click.echo(f"mcprec: warning: {safe_lines(warning)}", err=True)
    return gate


def exit_code(gate: Gate, result: Any) -> int:
    return EXIT_DIFFERENT if gate.fails(result) else EXIT_EQUAL


def _run(a: str, b: str | None, ignore: tuple[str, ...], config: str | None,
         latency_threshold: float | None, latency_min_ms: float | None,
         fail_on_latency: bool | None, fmt: str, color: bool | None, *,
         html: str | None = None, fail_on: str | None = None,
         surface_only: bool | None = None, normalize: tuple[str, ...] = ()) -> int:
    """Diff, print the report, return the exit status; errors become ``CommandError``
    (exit 2). Also used by ``mcprec verify``. ``html``: also write the report as one HTML
    page there."""

    try:
        gate = resolve(config, ignore, normalize, fail_on, surface_only, fail_on_latency,
                       latency_threshold, latency_min_ms)
        result = gate.diff(a, b)
        emit(result, fmt, color, html, latency=gate.fail_on_latency)
        return exit_code(gate, result)
    except McprecError as e:
        raise trouble(str(e)) from e
    except KeyboardInterrupt:
        raise CommandError("interrupted", 130) from None


def emit(result: Any, fmt: str, color: bool | None, html: str | None = None, *,
         latency: bool = False) -> None:
    """Print ``result`` in ``fmt``; ``github``: annotations, then Markdown, which also goes to
    ``$GITHUB_STEP_SUMMARY`` when set. ``html``: also write the HTML page there."""
    if html is not None:
        from ..view.export import diff_html

        write_file(html, diff_html(result))
    if fmt == "json":
        click.echo(result.to_json())
    elif fmt == "html":
        from ..view.export import diff_html

        click.echo(diff_html(result), nl=False)
    elif fmt == "markdown":
        click.echo(result.to_markdown(), nl=False)
    elif fmt == "github":
        from ..diff.report import github_annotations

        lines = github_annotations(result, latency=latency)
        github_output(lines, result.to_markdown())
    else:
        use_color = sys.stdout.isatty() if color is None else color
        click.echo(result.to_text(color=use_color), nl=False, color=use_color)


def github_output(lines: list[str], markdown: str) -> None:
    """Annotations and the Markdown on stdout; the Markdown appended to the job summary."""
    for line in lines:
        click.echo(safe(line))
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
        raise trouble(f"cannot write {path}: {e.strerror}") from e


def gate_options(f: Any) -> Any:
    """``--fail-on``, ``--surface-only``, ``--normalize``: shared by diff and verify."""
    f = click.option(
        "--normalize", "normalize", multiple=True, metavar="KINDS",
        help="Make volatile values compare equal by kind, anywhere in a message (also inside "
             "strings): timestamps (ISO-8601 date-times, times of day, epoch times "
             "2000-2100), iso8601, times, epochs, uuids, a name from [diff.normalizers] in the "
             "config, or NAME=REGEX. Comma-separated or repeated, e.g. --normalize "
             "timestamps,uuids.")(f)
    f = click.option(
        "--surface-only/--no-surface-only", "surface_only", default=None,
        help="Compare the listed surface alone (server facts, tools, resources, templates, "
             "prompts), not call results or latency.")(f)
    f = click.option(
        "--fail-on", "fail_on", type=click.Choice(list(FAIL_ON)), default=None,
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


# --- mcprec verify ------------------------------------------------------------------------------


def verify_main(cassette: str, extra: tuple[str, ...], server: tuple[str, ...], *,
                all_sessions: bool, session: str | None, timeout: float, update: bool,
                target: str | None, gate: Gate, fmt: str, html: str | None,
                color: bool | None, lint_run: bool, redact: Any) -> int:
    """Verify one session (``-s``, default the latest reference) or, with ``all_sessions``,
    every reference session of every cassette given; report; return the exit status (0 all
    passed, 1 a session failed the gate, 2 a session could not be verified)."""
    from ..verify.all import plan, verify_all, verify_one

    options = dict(gate=gate, timeout=timeout, target=target, redact=redact,
                   lint_run=lint_run, update=update)
    if not all_sessions:
        if extra:
            raise trouble("several cassettes need --all")
        try:
            run = verify_one(Path(cassette), session, server, **options)  # type: ignore[arg-type]
        except McprecError as e:
            if fmt == "junit":  # the CI's report says it too: an error, not a missing file
                from ..verify.all import Run, junit

                click.echo(junit([Run(Path(cassette), session or "(latest)", error=str(e))]),
                           nl=False)
            raise trouble(str(e)) from e
        _after(run, update)
        if fmt == "junit":
            from ..verify.all import junit

            if html is not None:
                emit(run.result, "text", color, html)  # the page only; stdout gets the XML
            click.echo(junit([run]), nl=False)
        else:
            emit(run.result, fmt, color, html, latency=gate.fail_on_latency)
        return EXIT_DIFFERENT if run.failed else EXIT_EQUAL
    if session is not None:
        raise trouble("give -s SESSION or --all, not both")
    if target is None and not server:
        raise trouble("give the server to verify after `--`, or --target URL")
    if fmt == "html" or html is not None:
        raise trouble("--all makes one summary of many sessions: use --format "
                               "text, markdown, github, json or junit (not html)")
    try:
        planned = plan([cassette, *extra])
    except McprecError as e:
        raise trouble(str(e)) from e
    runs = verify_all(planned, server, **options)  # type: ignore[arg-type]
    for run in runs:
        _after(run, update)
    emit_all(runs, fmt, color, latency=gate.fail_on_latency)
    if any(r.error for r in runs):
        return EXIT_TROUBLE
    return EXIT_DIFFERENT if any(r.failed for r in runs) else EXIT_EQUAL


def _after(run: Any, update: bool) -> None:
    """What a run leaves to say on stderr: its lint findings, that it was accepted."""
    if run.lint is not None:
        from ..lint.report import render

        click.echo(render(run.lint, "text"), err=True, nl=False)
    if update and run.verification is not None:
        click.echo(safe(f"mcprec: the new run is now session {run.session!r} of "
                        f"{run.cassette}"), err=True)


def emit_all(runs: list[Any], fmt: str, color: bool | None, *, latency: bool = False) -> None:
    """The report of ``verify --all``: each session's diff, then one summary."""
    from ..verify.all import github_lines, json_summary, markdown_summary, text_summary

    if fmt == "json":
        click.echo(json_summary(runs))
        return
    if fmt == "junit":
        from ..verify.all import junit

        click.echo(junit(runs), nl=False)
        return
    if fmt in ("markdown", "github"):
        md = markdown_summary(runs)
        if fmt == "markdown":
            click.echo(md, nl=False)
        else:
            github_output(github_lines(runs, latency=latency), md)
        return
    use_color = sys.stdout.isatty() if color is None else color
    for r in runs:
        click.echo(safe(f"=== {r.cassette}:{r.session} ==="))
        if r.error:
            click.echo(f"mcprec: {safe_lines(r.error)}\n")
        else:
            click.echo(r.result.to_text(color=use_color), nl=False, color=use_color)
            click.echo("")
    click.echo(text_summary(runs))


class _VerifyCommand(_ServerCommand):
    """verify's positional arguments: with --all, the cassettes before ``--``, the server after."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["mcprec.server_args"] = (len(args) - args.index("--") - 1 if "--" in args
                                          else None)
        return super().parse_args(ctx, args)


@click.command(cls=_VerifyCommand, context_settings={"ignore_unknown_options": True})
@click.argument("cassette", type=click.Path())
@click.option("-s", "--session", help="The recorded session to verify against (default: latest).")
@click.option("--all", "all_sessions", is_flag=True,
              help="Verify every recorded session of CASSETTE, or of several cassettes (give "
                   "them before `--`) or directories of *.db files: one summary, one exit "
                   "status.")
@click.option("--timeout", type=float, default=30.0, show_default=True,
              help="Seconds to wait for each answer from the server under test.")
@click.option("--update", is_flag=True,
              help="Accept the new run as the reference: it replaces the recorded session.")
@click.option("--target", metavar="URL",
              help="Verify a Streamable HTTP server at URL instead of a stdio command.")
@click.option("--ignore", "ignore", multiple=True, metavar="PATH",
              help="JSON path to leave out of the comparison (repeatable), as for `diff`.")
@click.option("--config", type=click.Path(dir_okay=False),
              help="TOML file with a [diff] table, as for `diff`.")
@click.option("--fail-on-latency/--no-fail-on-latency", default=None,
              help="Count flagged latencies as a difference.")
@gate_options
@click.option("-f", "--format", "fmt",
              type=click.Choice(["text", "json", "markdown", "html", "github", "junit"]),
              default="text", show_default=True,
              help="Report format (html: one self-contained page; github: workflow annotations "
                   "and the Markdown, also to $GITHUB_STEP_SUMMARY; junit: JUnit XML, a test "
                   "case per session).")
@click.option("--html", "html", type=click.Path(dir_okay=False), metavar="OUT.html",
              help="Also write the report as one self-contained HTML page (a CI artifact).")
@click.option("--color/--no-color", default=None, help="Colour the text report.")
@click.option("--lint", "lint_run", is_flag=True,
              help="Also lint the new run against the spec (`mcprec lint`): findings make the "
                   "exit code 1.")
@redaction_options
@click.argument("server", nargs=-1, type=click.UNPROCESSED)
def verify(cassette: str, session: str | None, timeout: float, update: bool, target: str | None,
           ignore: tuple[str, ...], config: str | None, fail_on_latency: bool | None, fmt: str,
           html: str | None, color: bool | None, lint_run: bool, redact_paths: tuple[str, ...],
           redact_keys: tuple[str, ...], redact_patterns: tuple[str, ...],
           server: tuple[str, ...], all_sessions: bool = False, fail_on: str | None = None,
           surface_only: bool | None = None, normalize: tuple[str, ...] = ()) -> None:
    """Check a new build of a server against a recording: the regression test for servers.

    mcprec plays the recorded client (requests in order, the server's own requests answered
    from the recording) against SERVER, records that run as a new session tagged as a
    verification of the original, and diffs the two. Exits like `diff`: 0 same, 1 different
    (with --fail-on: a difference that severe), 2 trouble. With --all: every recorded session,
    one summary, and 2 if any session could not be verified, else 1 if any failed.

    \b
      mcprec verify cassettes/weather.db -- python weather_server.py --v2
      mcprec verify cassettes/remote.db --target http://127.0.0.1:8000/mcp
      mcprec verify --all cassettes/ --fail-on breaking --format github -- python srv.py
    """
    from .diff import resolve, verify_main

    extra: tuple[str, ...] = ()
    n = click.get_current_context().meta.get("mcprec.server_args")
    if all_sessions and n is not None:
        extra, server = server[:len(server) - n], server[len(server) - n:]
    elif all_sessions and target is not None:
        extra, server = server, ()
    if not all_sessions and os.path.isdir(cassette):
        raise CommandError(f"{cassette} is a directory; give a cassette file, or --all "
                                 "to verify every cassette under it", 2)
    try:
        gate = resolve(config, ignore, normalize, fail_on, surface_only, fail_on_latency)
    except McprecError as e:
        raise trouble(str(e)) from e
    code = verify_main(cassette, extra, server, all_sessions=all_sessions, session=session,
                       timeout=timeout, update=update, target=target, gate=gate, fmt=fmt,
                       html=html, color=color, lint_run=lint_run,
                       redact=_redactor(redact_paths, redact_keys, redact_patterns))
    sys.exit(code)
