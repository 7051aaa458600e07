"""Commands that look into or clean a cassette: ``sessions``, ``show``, ``export``, ``import``,
``redact``, ``scan``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from ..errors import McprecError, UsageError
from ..foreign import FORMATS as FOREIGN_FORMATS
from ..terminal import safe, safe_lines
from ._common import (
    _redactor,
    open_file,
    redaction_options,
    trouble,
    session_choice,
)


@click.command()
@click.argument("cassette", type=click.Path(dir_okay=False))
@redaction_options
def redact(cassette: str, redact_paths: tuple[str, ...], redact_keys: tuple[str, ...],
           redact_patterns: tuple[str, ...]) -> None:
    """Redact secrets in CASSETTE in place (then VACUUM, so nothing lingers on disk).

    Applies the default rules, those of [tool.mcprec.redact] in pyproject.toml or [redact] in
    mcprec.toml, each session's redaction manifest, and the options given; the manifests then
    name the packs applied. Redacted requests still match during replay.
    """
    from ..redact.inplace import redact_cassette

    n = redact_cassette(cassette, _redactor(redact_paths, redact_keys, redact_patterns))
    click.echo(f"{cassette}: redacted {n} row(s)", err=True)


@click.command()
@click.argument("cassettes", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--require-redaction", "require", multiple=True, metavar="PACK",
              help="Also fail for any session whose redaction manifest does not name this "
                   "pack (credentials, pii, paths, or a user pack's name; repeatable): the CI "
                   "gate. A bundled pack required is also scanned for.")
@redaction_options
def scan(cassettes: tuple[str, ...], require: tuple[str, ...], redact_paths: tuple[str, ...],
         redact_keys: tuple[str, ...], redact_patterns: tuple[str, ...]) -> None:
    """Report likely secrets left in CASSETTES; exit 1 if any (usable as a pre-commit hook),
    2 if a cassette cannot be read (the others are scanned all the same).

    Each session is also scanned with the rules of its redaction manifest (the packs it was
    recorded with)."""
    from ..redact.inplace import scan_cassette

    redactor = _redactor(redact_paths, redact_keys, redact_patterns)
    dirty = unreadable = 0
    for path in cassettes:
        try:
            findings = scan_cassette(path, redactor, require)
        except McprecError as e:
            if isinstance(e, UsageError):
                raise  # the options are wrong: every cassette would fail alike
            click.echo(f"mcprec: {safe_lines(str(e))}", err=True)
            unreadable += 1
            continue
        for f in findings:
            click.echo(safe(f"{path}: {f.where}: {', '.join(f.kinds)}"))
        dirty += bool(findings)
    if unreadable:
        if len(cassettes) > 1:
            click.echo(f"mcprec: {unreadable} of {len(cassettes)} cassettes could not be "
                       "scanned" + (f"; likely secrets in {dirty}" if dirty else ""), err=True)
        sys.exit(2)
    if dirty:
        what = "likely secrets, or sessions not redacted as required," if require else \
            "likely secrets"
        click.echo(f"mcprec: {what} in {dirty} cassette(s); run `mcprec redact CASSETTE`",
                   err=True)
        sys.exit(1)
    click.echo(f"no secrets found in {len(cassettes)} cassette(s)", err=True)


def _session_json(s: Any, redaction: dict[int, Any], backpressure: dict[int, Any],
                  losses: dict[int, Any]) -> dict[str, Any]:
    """A session for `sessions --json`, with its redaction manifest (null: none recorded), how
    forwarding paused for the recorder (null: it never did) and what recording lost (null:
    nothing)."""
    from ..show.timeline import session_dict

    return {**session_dict(s), "redaction": redaction.get(s.id),
            "backpressure": backpressure.get(s.id), "lost": losses.get(s.id)}


@click.command()
@click.argument("cassette")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def sessions(cassette: str, as_json: bool) -> None:
    """List the sessions in CASSETTE. UNANS counts the requests (either direction) that have
    no recorded answer: cut off, cancelled, or still in flight.

    CASSETTE may be a directory or a glob (quoted), e.g. the files of a rotated recording
    ('cassettes/staging-*.db'): then every file's sessions, with a FILE column (a "file"
    field in --json)."""
    from ..cassette import open_cassette
    from ..cassette.sets import expand, is_set
    from ..cassette.views import unanswered_counts
    from ..show.timeline import format_table, session_rows

    paths = expand([cassette]) if is_set(cassette) else [Path(cassette)]
    several = is_set(cassette)
    table: list[list[str]] = []
    records: list[dict[str, Any]] = []
    for path in paths:
        with open_cassette(path) as c:
            found = c.sessions()
            redaction = c.redaction_manifests()
            backpressure = c.backpressure()
            losses = c.losses()
            unanswered = unanswered_counts(c)
        if as_json:
            records += [{**({"file": str(path)} if several else {}),
                         **_session_json(s, redaction, backpressure, losses),
                         "unanswered": unanswered.get(s.id, 0)} for s in found]
            continue
        rows = session_rows(found, unanswered, losses)
        if several:
            rows = [["FILE", *rows[0]]] + [[safe(path.name), *r] for r in rows[1:]]
        table += rows if not table else rows[1:]
    if as_json:
        import orjson

        click.echo(orjson.dumps(records, option=orjson.OPT_INDENT_2))
    elif len(table) < 2:
        click.echo(f"{safe(cassette)}: no sessions")
    else:
        click.echo(format_table(table))


@click.command()
@click.argument("cassette", type=click.Path(dir_okay=False))
@click.argument("session", required=False)
@session_choice
@click.option("--json", "as_json", is_flag=True, help="One JSON object per message (JSON Lines).")
@click.option("--body/--no-body", default=False, help="Also print each message's text.")
@click.option("--stderr/--no-stderr", "with_stderr", default=False,
              help="Also print the server's stderr lines.")
@click.option("--method", "methods", multiple=True, metavar="GLOB",
              help="Only messages of this method, answers included; a glob such as 'tools/*' "
                   "(repeatable: any of them).")
@click.option("--grep", "grep", metavar="REGEX",
              help="Only messages whose JSON text matches this regular expression.")
@click.option("--tools", "tools", is_flag=True,
              help="Instead of the timeline: the tools the server listed in the session, with "
                   "their descriptions and input schemas in short.")
def show(cassette: str, session: str | None, as_json: bool, body: bool, with_stderr: bool,
         methods: tuple[str, ...], grep: str | None, tools: bool) -> None:
    """Print the timeline of SESSION (default: the latest) in CASSETTE.

    \b
      mcprec show cassettes/demo.db --method 'tools/*' --body
      mcprec show cassettes/demo.db --grep 'Paris|London'
      mcprec show cassettes/demo.db --tools
    """
    import orjson

    from ..cassette import open_cassette
    from ..show.dump import message_filter
    from ..show.timeline import backpressure_line, format_message_line, human_duration_ns, \
        message_dict, timeline

    if tools and (methods or grep or body or with_stderr):
        raise click.UsageError("--tools lists tools; --method, --grep, --body and --stderr "
                               "are for the timeline")
    try:
        keep = message_filter(methods, grep)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--grep") from None
    color = sys.stdout.isatty() and not as_json
    with open_cassette(cassette) as c:
        s = c.session(session)
        if tools:
            _show_tools(c, s, as_json)
            return
        if not as_json:
            server = s.server_label or "?"
            click.echo(safe(f"session {s.name}  [{s.status}]  {s.transport}  {s.target_label}"))
            click.echo(safe(f"server {server}  protocol {s.protocol_version or '?'}  "
                            f"{s.message_count} messages  {human_duration_ns(s.duration_ns)}"))
            manifest = c.redaction_manifests([s]).get(s.id)
            if manifest is not None:
                from ..redact.manifest import describe

                click.echo(safe(f"redaction {describe(manifest)}"))
            paused = c.backpressure([s]).get(s.id)
            if paused is not None:
                click.echo(backpressure_line(paused))
            lost = c.losses([s]).get(s.id)
            if lost is not None:
                click.echo(safe(f"lost {lost['lost_messages']} message(s) that were forwarded "
                                f"but not recorded: {lost['reason']}"))
        shown = 0
        for m, latency in timeline(c, s):
            if keep is not None and not keep(m):
                continue
            shown += 1
            if as_json:
                d = message_dict(m, latency)
                if body:
                    d["raw"] = m.raw.decode("utf-8", "replace")
                click.echo(orjson.dumps(d))
            else:
                click.echo(format_message_line(m, latency, color=color))
                if body:
                    click.echo("        " + safe(m.raw.decode("utf-8", "replace")))
        if with_stderr:
            for err in c.stderr(s):
                if as_json:
                    click.echo(orjson.dumps({"stderr": err.line, "t_ns": err.t_ns}))
                else:
                    click.echo(safe(f"{'':5}  {err.t_ns / 1e6:>10.3f} ms  ! stderr  {err.line}"))
        if keep is not None:
            click.echo(f"mcprec: {shown} of {s.message_count} messages match", err=True)


def _show_tools(c: Any, s: Any, as_json: bool) -> None:
    """``show --tools``: the session's tools, from its tools/list answers (every page)."""
    import orjson

    from ..show.dump import session_tools, tool_line

    found = session_tools(c, s)
    if as_json:
        for tool in found:
            click.echo(orjson.dumps(tool))
        return
    if not found:
        click.echo(safe(f"session {s.name}: no tools/list answer recorded"), err=True)
        return
    for tool in found:
        click.echo(safe_lines(tool_line(tool)))


@click.command()
@click.argument("cassette", type=click.Path(dir_okay=False))
@click.argument("session", required=False)
@session_choice
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              help="Write here instead of stdout.")
@click.option("--timing/--no-timing", default=True,
              help="Include timestamps (leave them out for review-friendly diffs).")
@click.option("--otlp", metavar="URL",
              help="Instead of JSON Lines, send every exchange as an OpenTelemetry span, and "
                   "duration histograms, to this OTLP/HTTP collector (e.g. "
                   "http://localhost:4318). Needs mcprec[otel].")
@click.option("--header", "headers", multiple=True, metavar="KEY=VALUE",
              help="A header for the OTLP collector, e.g. for its API key (repeatable).")
@click.option("--otlp-timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              metavar="SECONDS", help="How long to wait for the collector's answer.")
@click.option("--otlp-retries", type=click.IntRange(min=0), default=4, show_default=True,
              metavar="N", help="Retries (with back-off) when the collector is unreachable, "
                                "busy or failing (429, 502, 503, 504).")
def export(cassette: str, session: str | None, output: str, timing: bool, otlp: str | None,
           headers: tuple[str, ...], otlp_timeout: float, otlp_retries: int) -> None:
    """Write CASSETTE (or one SESSION of it) as deterministic JSON Lines, or send it to an
    OpenTelemetry collector (--otlp): one trace per session.

    Usable as a git textconv driver so cassette changes diff as text:
    git config diff.mcprec.textconv "mcprec export --no-timing" and, in .gitattributes,
    cassettes/*.db diff=mcprec
    """
    from ..cassette import open_cassette
    from ..show.dump import export_to

    if otlp is None and headers:
        raise click.UsageError("--header is for --otlp")
    if otlp is not None and (output != "-" or not timing):
        raise click.UsageError("-o and --no-timing are for JSON Lines, not --otlp")
    with open_cassette(cassette) as c:
        chosen = [c.session(session)] if session else c.sessions()
        if otlp is not None:
            _export_otlp(c, chosen, otlp, headers, otlp_timeout, otlp_retries)
        elif output == "-":
            export_to(sys.stdout.buffer, c, chosen, timing=timing)
            sys.stdout.buffer.flush()
        else:
            with open_file(output, "wb") as f:
                export_to(f, c, chosen, timing=timing)


def _export_otlp(c: Any, sessions: list[Any], url: str, headers: tuple[str, ...],
                 timeout: float, retries: int) -> None:
    from ..otel.otlp import OtlpTarget, export_otlp, parse_headers

    target = OtlpTarget(url, parse_headers(headers), timeout=timeout, retries=retries)
    report = export_otlp(c, sessions, target)
    for warning in report.warnings:
        click.echo(f"mcprec: warning: {safe_lines(warning)}", err=True)
    click.echo(f"exported {report.sessions} session(s) to {target.shown}: {report.spans} span(s) "
               f"in {report.requests} request(s), {report.durations} duration(s)", err=True)


@click.command("import")
@click.argument("dump", type=click.Path(dir_okay=False, allow_dash=True), metavar="FILE")
@click.argument("cassette", type=click.Path(dir_okay=False))
@click.option("--from", "tool", type=click.Choice(["mcprec", *FOREIGN_FORMATS]),
              default="mcprec", show_default=True,
              help="What wrote FILE: an `mcprec export` dump, or a recording of another MCP "
                   "tool (the MCP Inspector's history, mcp-cassette, mcp-recorder, mcp-vcr, "
                   "agent-vcr), which becomes one session (docs/import.md).")
@click.option("-s", "--session", "name", metavar="NAME",
              help="With --from TOOL: the session's name (default: FILE's name without its "
                   "extensions).")
@click.option("--replace", is_flag=True, help="Replace sessions that already exist.")
def import_(dump: str, cassette: str, replace: bool, tool: str = "mcprec",
            name: str | None = None) -> None:
    """Read FILE into CASSETTE: a JSON Lines dump (from `mcprec export`), or with --from a
    recording made by another MCP tool.

    \b
      mcprec import v1.jsonl cassettes/copy.db
      mcprec import --from mcp-recorder recording.json cassettes/imported.db
      mcprec import --from agent-vcr session.vcr cassettes/imported.db -s login

    Another tool's recording keeps what its format keeps: stderr says in one line what it
    lost. The session then replays, diffs, verifies, lints and shows like a recorded one.
    """
    if tool != "mcprec":
        from ..foreign import import_file

        if dump == "-":
            raise trouble("--from TOOL reads a file, not stdin")
        session, rec = import_file(tool, dump, cassette, name=name, replace=replace)
        click.echo(safe(f"imported 1 session into {cassette}: {session}"), err=True)
        click.echo(safe(f"mcprec: from {tool}: {len(rec.messages)} message(s); its format "
                        f"does not keep {rec.lost}"), err=True)
        return
    if name is not None:
        raise trouble("-s NAME goes with --from TOOL; an export names its own sessions")
    from ..show.dump import import_dump

    if dump == "-":
        names = import_dump(sys.stdin.buffer, cassette, replace=replace, source="<stdin>")
    else:
        with open_file(dump, "rb") as f:
            names = import_dump(f, cassette, replace=replace, source=dump)
    click.echo(safe(f"imported {len(names)} session(s) into {cassette}: {', '.join(names)}"),
               err=True)
