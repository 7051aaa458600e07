"""``mcprec record`` (a stdio server, an HTTP server, or a scenario) and ``mcprec script``."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from ._common import (
    CASSETTE_HELP,
    SESSION_IDLE_HELP,
    CommandError,
    _duration,
    _session_idle,
    _parse_tags,
    _redactor,
    _ServerCommand,
    _size,
    redaction_options,
)


@click.command(cls=_ServerCommand, context_settings={"ignore_unknown_options": True,
                                                    "allow_interspersed_args": False})
@click.option("-c", "--cassette", type=click.Path(dir_okay=False), envvar="MCPREC_CASSETTE",
              help=CASSETTE_HELP)
@click.option("-s", "--session", help="Session name (default: <server>-<time>-<random>).",
              envvar="MCPREC_SESSION")
@click.option("-t", "--tag", "tags", multiple=True, metavar="KEY=VALUE",
              help="Tag the session (repeatable).")
@click.option("--durable", is_flag=True,
              help="Commit each message to disk before forwarding it (slower; survives kill -9).")
@click.option("--exit-timeout", type=float, default=5.0, show_default=True,
              help="Seconds to wait for the server to exit after the client closes, "
                   "before terminating it.")
@click.option("--target", metavar="URL",
              help="Record an HTTP MCP server instead: run a reverse proxy in front of URL.")
@click.option("--listen", default="127.0.0.1:0", show_default=True, metavar="HOST:PORT",
              help="With --target: where the proxy listens (port 0 picks a free port; the URL "
                   "is printed on stderr).")
@click.option("--upstream-timeout", type=float, default=300.0, show_default=True,
              help="With --target: seconds to wait for the upstream to begin each answer (an "
                   "event stream may then stay silent as long as it likes).")
@click.option("--allow-host", "allow_host", multiple=True, metavar="HOST",
              help="With --target: a Host name to accept besides local ones (NAME, NAME:PORT, "
                   "NAME:*; repeatable); others get 421.")
@click.option("--max-idle", "max_idle", metavar="DURATION",
              help="With --target: end the recording (exit 0) after DURATION (e.g. 30s, 500ms, "
                   "2m) with no request in flight and no traffic: for unattended recordings.")
@click.option("--session-idle", "session_idle", default="10m", show_default=True,
              metavar="DURATION|off", help=SESSION_IDLE_HELP)
@click.option("--sample", "sample", type=float, metavar="FRACTION",
              help="With --target: record this fraction of the client sessions (0 < FRACTION "
                   "<= 1, each drawn as it begins); every session is forwarded all the same.")
@click.option("--seed", type=int,
              help="With --sample or --fault: the same seed draws the same sessions, in "
                   "order, and the same faults and adversarial texts.")
@click.option("--fault", "fault_rules", multiple=True, metavar="RULE",
              help="Rewrite the server's answers before they reach the client, e.g. "
                   "'tools/call:search poison=injection' (repeatable; see docs/faults.md); "
                   "the cassette records what the client received, the fault marked.")
@click.option("--faults", "faults_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Fault rules from a TOML or JSON file (see docs/faults.md).")
@click.option("--report", type=click.Path(dir_okay=False), metavar="FILE",
              help="With --fault: write the faults injected, and what the client did after "
                   "each, as JSON to FILE at the end.")
@click.option("--rotate-size", "rotate_size", metavar="SIZE",
              help="With --target: rotate the cassette: record into NAME-<UTC time>.db files "
                   "next to -c NAME.db, a new one for the sessions that begin once the current "
                   "one is past SIZE (e.g. 100M, 1G); a session stays whole in its file.")
@click.option("--rotate-every", "rotate_every", metavar="DURATION",
              help="With --target: rotate the cassette (as --rotate-size) once the current "
                   "file's first session is DURATION old (e.g. 1h, 30m).")
@click.option("--allow-origin", "allow_origin", multiple=True, metavar="ORIGIN",
              help="With --target: a browser Origin to accept besides local ones "
                   "(repeatable); others get 403.")
@click.option("--max-message-size", "max_message_size", default="256M", show_default=True,
              metavar="SIZE", help="Record longer stdio messages as their first SIZE bytes "
              "(they are still forwarded whole); e.g. 64M, 1G.")
@click.option("--script", "scripts", multiple=True, metavar="SCENARIO",
              help="Be the client: play this scenario file (TOML) against the server and record "
                   "it, one session per scenario (repeatable; a directory means its *.toml "
                   "files). See docs/golden-cassettes.md.")
@click.option("--replace", is_flag=True,
              help="With --script: record a session again under a name the cassette already "
                   "has; the old one goes only once the new run passed.")
@click.option("--otlp", metavar="URL", envvar="MCPREC_OTLP",
              help="Also send the recording, as it is committed, to this OTLP/HTTP collector "
                   "as traces (from the recorder process; see docs/otel.md).")
@click.option("--otlp-header", "otlp_headers", multiple=True, metavar="KEY=VALUE",
              help="With --otlp: a header for the collector (repeatable).")
@redaction_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def record(cassette: str | None, session: str | None, tags: tuple[str, ...], durable: bool,
           exit_timeout: float, target: str | None, listen: str, upstream_timeout: float,
           allow_host: tuple[str, ...], max_idle: str | None, session_idle: str,
           sample: float | None, seed: int | None,
           fault_rules: tuple[str, ...], faults_file: str | None, report: str | None,
           rotate_size: str | None, rotate_every: str | None,
           allow_origin: tuple[str, ...],
           max_message_size: str, scripts: tuple[str, ...], replace: bool, otlp: str | None,
           otlp_headers: tuple[str, ...], redact_paths: tuple[str, ...],
           redact_keys: tuple[str, ...], redact_patterns: tuple[str, ...],
           command: tuple[str, ...]) -> None:
    """Record an MCP server: run COMMAND behind a transparent tap, or proxy --target URL.

    Point your MCP host at mcprec instead of the server, e.g. in a host's config replace
    "command": "python", "args": ["server.py"] with
    "command": "mcprec", "args": ["record", "--", "python", "server.py"].
    Every byte is forwarded unchanged; every message is recorded with its timing.
    mcprec exits with the server's exit code.

    For an HTTP server: mcprec record --target http://127.0.0.1:8000/mcp --listen 127.0.0.1:9000
    and point the client at http://127.0.0.1:9000/mcp. Stop with Ctrl-C.

    No client at hand? --script SCENARIO makes mcprec the client: it plays the scenario's
    steps, records the session and exits 0, or 1 naming the step that failed.
    """
    if otlp_headers and not otlp:
        raise click.UsageError("--otlp-header goes with --otlp URL")
    if otlp:  # the recorder process reads these (mcprec/otel/live.py)
        os.environ["MCPREC_OTLP"] = otlp
        if otlp_headers:
            os.environ["MCPREC_OTLP_HEADERS"] = ",".join(otlp_headers)
    idle = _duration(max_idle, "--max-idle") if max_idle is not None else None
    if idle is not None and (target is None or scripts):
        raise click.UsageError("--max-idle goes with --target URL (a stdio recording ends when "
                               "its client closes, a --script one when its steps are done)")
    faults = _faults(fault_rules, faults_file, seed)
    if (faults is not None or report is not None) and scripts:
        raise click.UsageError("--fault, --faults and --report go with a client's recording, "
                               "not --script")
    if report is not None and faults is None:
        raise click.UsageError("--report goes with --fault RULE or --faults FILE")
    if sample is not None and (target is None or scripts):
        raise click.UsageError("--sample and --seed go with --target URL")
    if seed is not None and faults is None and (target is None or scripts):
        raise click.UsageError("--sample and --seed go with --target URL")
    if (rotate_size is not None or rotate_every is not None) and (target is None or scripts):
        raise click.UsageError("--rotate-size and --rotate-every go with --target URL")
    size_bound = _size(rotate_size, "--rotate-size") if rotate_size is not None else None
    time_bound = _duration(rotate_every, "--rotate-every") if rotate_every is not None else None
    if seed is not None and sample is None and faults is None:
        raise click.UsageError("--seed goes with --sample FRACTION or --fault RULE")
    if sample is not None and not 0 < sample <= 1:
        raise click.BadParameter(f"a fraction in (0, 1] is needed, got {sample:g}",
                                 param_hint="--sample")
    if scripts:
        _record_scripts(scripts, cassette, session, tags, durable, exit_timeout, target, listen,
                        upstream_timeout, max_message_size, replace,
                        _redactor(redact_paths, redact_keys, redact_patterns), command)
    if replace:
        raise click.UsageError("--replace goes with --script")
    if target is not None:
        if command:
            raise click.UsageError("give either --target URL or a server COMMAND, not both")
        from ..record.api import record_http

        code = (record_http(target, listen=listen, cassette=cassette, session=session,
                             tags=_parse_tags(tags), timeout=upstream_timeout,
                             redact=_redactor(redact_paths, redact_keys, redact_patterns),
                             allowed_hosts=allow_host, allowed_origins=allow_origin,
                             max_idle=idle, session_idle=_session_idle(session_idle),
                             sample=sample, seed=seed, rotate_size=size_bound,
                             rotate_every=time_bound, faults=faults))
        _faults_done(faults, report)
        sys.exit(code)
    if not command:
        raise click.UsageError("missing the server command: mcprec record [OPTIONS] -- COMMAND...")
    from ..record.api import record_stdio

    code = record_stdio(list(command), cassette=cassette, session=session,
                        tags=_parse_tags(tags), durable=durable, exit_timeout=exit_timeout,
                        redact=_redactor(redact_paths, redact_keys, redact_patterns),
                        max_message_size=_size(max_message_size, "--max-message-size"),
                        faults=faults)
    _faults_done(faults, report)
    # everything is committed and our ends are closed: skip the interpreter's slow teardown,
    # hosts wait for this exit
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _faults(rules: tuple[str, ...], path: str | None, seed: int | None) -> Any:
    """The rules of ``--fault`` and ``--faults`` (None when none): ``replay.faults`` in the
    config file are for replay only."""
    if not rules and path is None:
        return None
    from ..faults.rules import Faults, load_file, parse_rule

    found = [parse_rule(r) for r in rules]
    if path is not None:
        found += load_file(path)
    return Faults(found, seed) if found else None


def _faults_done(faults: Any, report: str | None) -> None:
    """The one-line summary of the faults injected, and the report (``--report``)."""
    if faults is None:
        return
    from ..faults.rules import summary

    click.echo(f"mcprec: {summary(faults)}", err=True)
    if report is not None:
        import json

        try:
            Path(report).write_text(json.dumps({"faults": faults.report()}, indent=2,
                                               ensure_ascii=False), encoding="utf-8")
        except OSError as e:
            click.echo(f"mcprec: cannot write --report {report}: {e.strerror}", err=True)


def _record_scripts(scripts: tuple[str, ...], cassette: str | None, session: str | None,
                    tags: tuple[str, ...], durable: bool, exit_timeout: float,
                    target: str | None, listen: str, upstream_timeout: float,
                    max_message_size: str, replace: bool, redactor: Any,
                    command: tuple[str, ...]) -> None:
    """``record --script``: one line per scenario on stderr; exit 1 when a step failed."""
    from ..script import load_scenarios, record_scripts

    if target is not None and command:
        raise click.UsageError("give either --target URL or a server COMMAND, not both")
    runs = record_scripts(
        load_scenarios(scripts), server=command, target=target, cassette=cassette,
        session=session, tags=_parse_tags(tags), replace=replace, durable=durable,
        exit_timeout=exit_timeout, max_message_size=_size(max_message_size, "--max-message-size"),
        upstream_timeout=upstream_timeout, listen=listen, redact=redactor,
        on_run=lambda run: click.echo(f"mcprec: {run.summary()}", err=True))
    sys.exit(0 if all(run.ok for run in runs) else 1)


@click.command(cls=_ServerCommand, context_settings={"ignore_unknown_options": True,
                                                    "allow_interspersed_args": False})
@click.option("--init", is_flag=True,
              help="Write a starter scenario for the server after `--` (or --target URL): "
                   "every tool, prompt and resource it lists.")
@click.option("--check", "check", multiple=True, metavar="SCENARIO",
              help="Check scenario files (or directories of them) without running anything "
                   "(repeatable).")
@click.option("--target", metavar="URL",
              help="With --init: a Streamable HTTP server instead of a stdio command.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              help="With --init: write the scenario here instead of stdout.")
@click.option("--force", is_flag=True, help="With --init -o: overwrite an existing file.")
@click.option("--timeout", type=float, default=30.0, show_default=True,
              help="With --init: seconds to wait for each answer from the server.")
@click.argument("server", nargs=-1, type=click.UNPROCESSED)
def script(init: bool, check: tuple[str, ...], target: str | None, output: str, force: bool,
           timeout: float, server: tuple[str, ...]) -> None:
    """Write or check scenarios: scripted sessions that `mcprec record --script` plays.

    \b
      mcprec script --init -o golden.toml -- python server.py
      mcprec script --init --target http://127.0.0.1:8000/mcp
      mcprec script --check golden.toml
    """
    if init == bool(check):
        raise click.UsageError("give --init (write a starter scenario) or --check SCENARIO")
    if check:
        from ..script import load_scenarios

        for s in load_scenarios(check):
            n = len(s.steps)
            click.echo(f"{s.path}: ok, session {s.name!r}, {n} step{'s' if n != 1 else ''}",
                       err=True)
        return
    from ..script import starter_scenario

    if output != "-" and os.path.exists(output) and not force:
        raise CommandError(f"{output} exists; pass --force to overwrite it", 2)
    text = starter_scenario(server, target=target, timeout=timeout,
                            filename=None if output == "-" else output)
    if output == "-":
        click.echo(text, nl=False)
        return
    try:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise CommandError(f"cannot write {output}: {e.strerror}") from e
    click.echo(f"mcprec: wrote {output}; record it with: mcprec record --script {output} "
               "-c CASSETTE", err=True)
