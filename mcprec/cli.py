"""The ``mcprec`` command line: parses arguments, calls the library, maps errors to exit codes.

Imports of the heavier modules happen inside each command so that every command starts fast.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from . import __version__
from .errors import McprecError
from .modes import MODES
from .cli_diff import gate_options


class McprecCommandError(click.ClickException):
    """A domain error shown as one line: ``mcprec: <message>``."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click reads it per instance

    def show(self, file: Any = None) -> None:
        click.echo(f"mcprec: {self.format_message()}", err=True)


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except McprecError as e:
            raise McprecCommandError(str(e), e.exit_code) from e
        except KeyboardInterrupt:
            raise McprecCommandError("interrupted", 130) from None


class _ServerCommand(click.Command):
    """A command whose last argument is a server's command line. The server's own options must
    pass through unparsed, but an option of ours that does not exist, given before the
    server, is a typo: "no such option", not a server called ``--script``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rest = super().parse_args(ctx, args)
        for param in self.params:
            value = ctx.params.get(param.name or "") if isinstance(param, click.Argument) else None
            first = value[0] if isinstance(value, tuple) and value else value
            if isinstance(first, str) and first.startswith("-") and first != "-":
                import difflib

                name = first.split("=", 1)[0]
                known = [o for p in self.params if isinstance(p, click.Option)
                         for o in (*p.opts, *p.secondary_opts) if o.startswith("--")]
                raise click.NoSuchOption(name, possibilities=difflib.get_close_matches(
                    name, known, n=1), ctx=ctx)
        return rest


def _parse_tags(values: tuple[str, ...]) -> dict[str, str]:
    tags = {}
    for v in values:
        key, sep, value = v.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {v!r}", param_hint="--tag")
        tags[key] = value
    return tags


CASSETTE_HELP = "Cassette file (SQLite). Default: $MCPREC_CASSETTE or cassettes/<server>.db."


_REDACT_META = "mcprec.redact"


def _redact_option(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Packs, strategy and env names reach ``_redactor`` through the context, so that the
    commands' signatures stay as they are."""
    ctx.meta.setdefault(_REDACT_META, {})[param.name] = value
    return value


def redaction_options(f: Any) -> Any:
    """--redact-path / --redact-key / --redact-pattern / --redact-pack / --redact-strategy /
    --redact-env / --no-default-redactions, shared by every command that redacts."""
    f = click.option("--no-default-redactions", "no_default_redactions", is_flag=True,
                     expose_value=False, callback=_redact_option,
                     help="Turn the credentials pack (the default rules) off; the packs and "
                          "rules given still apply.")(f)
    f = click.option("--redact-env", "redact_env", multiple=True, metavar="NAME",
                     expose_value=False, callback=_redact_option,
                     help="Also redact the value of the environment variable NAME, whatever "
                          "its name (repeatable; the name is kept in the manifest, the value "
                          "never).")(f)
    f = click.option("--redact-strategy", "redact_strategy",
                     type=click.Choice(["replace", "hash", "mask"]), expose_value=False,
                     callback=_redact_option,
                     help="How rules without a strategy of their own replace what they find: "
                          "replace ([REDACTED]), hash (a stable pseudonym such as "
                          "<email:3f9a1c2b>) or mask (****1111). Credentials are always "
                          "replaced.")(f)
    f = click.option("--redact-pack", "redact_packs", multiple=True, metavar="PACK|FILE",
                     expose_value=False, callback=_redact_option,
                     help="Also apply a pack of rules: pii (emails, phones, IP addresses, "
                          "IBANs, card numbers, SSNs, JWTs, private keys), paths (home and "
                          "absolute paths), or a TOML file of your own (repeatable).")(f)
    f = click.option("--redact-pattern", "redact_patterns", multiple=True, metavar="REGEX",
                     help="Also redact what this regular expression matches (repeatable).")(f)
    f = click.option("--redact-key", "redact_keys", multiple=True, metavar="NAME",
                     help="Also redact the values of keys with this name (repeatable).")(f)
    f = click.option("--redact-path", "redact_paths", multiple=True, metavar="PATH",
                     help="Also redact the value at this JSON path in every message, e.g. "
                          "params.arguments.password (repeatable).")(f)
    return f


def _redactor(paths: tuple[str, ...], keys: tuple[str, ...], patterns: tuple[str, ...]) -> Any:
    """Defaults + the project's config file + the command line. (Replay, verify, redact and
    scan add each session's own rules, from its redaction manifest.)"""
    from .redact import Redactor, Rules, rules_from_config, split_packs

    ctx = click.get_current_context(silent=True)
    more = ctx.meta.get(_REDACT_META, {}) if ctx is not None else {}
    packs, files = split_packs(more.get("redact_packs") or ())
    return Redactor(rules_from_config().merged(Rules(
        paths=paths, keys=keys, patterns=patterns, packs=packs, user_packs=files,
        strategy=more.get("redact_strategy"), env_names=more.get("redact_env") or (),
        defaults=not more.get("no_default_redactions"))))


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
    from . import _log

    _log.to_stderr()


@cli.command(cls=_ServerCommand,
             context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
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
           allow_host: tuple[str, ...], max_idle: str | None, allow_origin: tuple[str, ...],
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
    if scripts:
        _record_scripts(scripts, cassette, session, tags, durable, exit_timeout, target, listen,
                        upstream_timeout, max_message_size, replace,
                        _redactor(redact_paths, redact_keys, redact_patterns), command)
    if replace:
        raise click.UsageError("--replace goes with --script")
    if target is not None:
        if command:
            raise click.UsageError("give either --target URL or a server COMMAND, not both")
        from .record import record_http

        sys.exit(record_http(target, listen=listen, cassette=cassette, session=session,
                             tags=_parse_tags(tags), timeout=upstream_timeout,
                             redact=_redactor(redact_paths, redact_keys, redact_patterns),
                             allowed_hosts=allow_host, allowed_origins=allow_origin,
                             max_idle=idle))
    if not command:
        raise click.UsageError("missing the server command: mcprec record [OPTIONS] -- COMMAND...")
    from .record import record_stdio

    code = record_stdio(list(command), cassette=cassette, session=session,
                        tags=_parse_tags(tags), durable=durable, exit_timeout=exit_timeout,
                        redact=_redactor(redact_paths, redact_keys, redact_patterns),
                        max_message_size=_size(max_message_size, "--max-message-size"))
    # everything is committed and our ends are closed: skip the interpreter's slow teardown,
    # hosts wait for this exit
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _record_scripts(scripts: tuple[str, ...], cassette: str | None, session: str | None,
                    tags: tuple[str, ...], durable: bool, exit_timeout: float,
                    target: str | None, listen: str, upstream_timeout: float,
                    max_message_size: str, replace: bool, redactor: Any,
                    command: tuple[str, ...]) -> None:
    """``record --script``: one line per scenario on stderr; exit 1 when a step failed."""
    from .script import load_scenarios, record_scripts

    if target is not None and command:
        raise click.UsageError("give either --target URL or a server COMMAND, not both")
    runs = record_scripts(
        load_scenarios(scripts), server=command, target=target, cassette=cassette,
        session=session, tags=_parse_tags(tags), replace=replace, durable=durable,
        exit_timeout=exit_timeout, max_message_size=_size(max_message_size, "--max-message-size"),
        upstream_timeout=upstream_timeout, listen=listen, redact=redactor,
        on_run=lambda run: click.echo(f"mcprec: {run.summary()}", err=True))
    sys.exit(0 if all(run.ok for run in runs) else 1)


@cli.command(cls=_ServerCommand,
             context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
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
        from .script import load_scenarios

        for s in load_scenarios(check):
            n = len(s.steps)
            click.echo(f"{s.path}: ok, session {s.name!r}, {n} step{'s' if n != 1 else ''}",
                       err=True)
        return
    from .script import starter_scenario

    if output != "-" and os.path.exists(output) and not force:
        raise McprecCommandError(f"{output} exists; pass --force to overwrite it", 2)
    text = starter_scenario(server, target=target, timeout=timeout,
                            filename=None if output == "-" else output)
    if output == "-":
        click.echo(text, nl=False)
        return
    try:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise McprecCommandError(f"cannot write {output}: {e.strerror}") from e
    click.echo(f"mcprec: wrote {output}; record it with: mcprec record --script {output} "
               "-c CASSETTE", err=True)


def _size(value: str, hint: str) -> int:
    """``256M`` -> 268435456 (K, M, G are powers of 1024; a plain number is bytes)."""
    text = value.strip().upper().rstrip("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    number = text[:-1] if scale > 1 else text
    try:
        size = int(float(number) * scale)
    except ValueError:
        raise click.BadParameter(f"expected a size such as 64M or 1G, got {value!r}",
                                 param_hint=hint) from None
    if size < 1024:
        raise click.BadParameter("must be at least 1K", param_hint=hint)
    return size


def _duration(value: str, hint: str, *, zero: bool = False) -> float:
    """``500ms``, ``2s``, ``1.5m`` (or a plain number of seconds) -> seconds."""
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m)?\s*", value)
    if m is None:
        raise click.BadParameter(f"expected a duration such as 500ms, 2s or 1m, got {value!r}",
                                 param_hint=hint)
    seconds = float(m.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0}[m.group(2) or "s"]
    if seconds <= 0 and not zero:
        raise click.BadParameter("must be more than 0", param_hint=hint)
    return seconds


def _timing(value: str) -> float | None:
    if value == "none":
        return None
    if value == "recorded":
        return 1.0
    try:
        scale = float(value)
    except ValueError:
        raise click.BadParameter(f"expected none, recorded or a number, got {value!r}",
                                 param_hint="--timing") from None
    if scale < 0:
        raise click.BadParameter("the scale must not be negative", param_hint="--timing")
    return scale


@cli.command()
@click.argument("cassette", type=click.Path(dir_okay=False))
@click.option("-s", "--session", help="Session to replay (default: each client gets the "
              "recorded session its traffic matches; see docs/replay.md).",
              envvar="MCPREC_SESSION")
@click.option("-m", "--mode", type=click.Choice(MODES),
              default="none", show_default=True, envvar="MCPREC_MODE",
              help="none: replay only. once: record if missing, else replay. new_episodes: "
                   "replay, and pass unmatched requests to the server after `--`, appending them. "
                   "all: always record.")
@click.option("--timing", default="none", show_default=True, metavar="none|recorded|SCALE",
              help="Answer at once, with the recorded latencies, or with them scaled.")
@click.option("--max-gap", "max_gap", metavar="DURATION",
              help="With --timing: cap every recorded pause at DURATION (e.g. 500ms, 2s), so a "
                   "slow recording replays without its long waits.")
@click.option("--protocol-version", "protocol_version",
              type=click.Choice(["recorded", "rewrite"]), default="recorded", show_default=True,
              help="When the client offers another protocol version than the recorded client "
                   "(said once on stderr and in --report): answer initialize with the recorded "
                   "version, or rewrite it to the client's.")
@click.option("--strict-order", is_flag=True,
              help="Requests must come in exactly the recorded order.")
@click.option("--ignore", "ignore", multiple=True, metavar="PATH",
              help="JSON path in requests to ignore when matching, e.g. params.arguments.ts "
                   "(repeatable; * matches any key).")
@click.option("--normalize", "normalize", multiple=True, metavar="KINDS",
              help="Match volatile values in requests by kind, on both sides: timestamps, "
                   "iso8601, times, epochs, uuids, a name from [replay.normalizers] or "
                   "[diff.normalizers] in the config, or NAME=REGEX (comma-separated or "
                   "repeated; [replay] normalize = [...] in the config adds to it).")
@click.option("--repeat", type=click.Choice(["last", "error"]), default="last", show_default=True,
              help="When identical requests outnumber the recorded answers: reuse the last, "
                   "or answer with an error.")
@click.option("--report", type=click.Path(dir_okay=False),
              help="Write a JSON report of played/unplayed/unmatched requests here at exit.")
@click.option("--http", "http", is_flag=True,
              help="Serve over Streamable HTTP (and legacy HTTP+SSE at /sse) instead of stdio.")
@click.option("--listen", default="127.0.0.1:0", show_default=True, metavar="HOST:PORT",
              help="With --http: where to listen; port 0 picks a free port. The URL is printed "
                   "on stdout.")
@click.option("--path", "url_path", default="/mcp", show_default=True,
              help="With --http: the endpoint path to announce.")
@click.option("--allow-origin", "allow_origin", multiple=True, metavar="ORIGIN",
              help="With --http: an Origin to accept besides local ones (repeatable).")
@click.option("--allow-host", "allow_host", multiple=True, metavar="HOST",
              help="With --http: a Host to accept besides the local names (repeatable).")
@click.option("--target", metavar="URL",
              help="With --http and a recording mode: the real Streamable HTTP server (for "
                   "new_episodes, the requests the recording cannot answer go there and are "
                   "appended; once/all record through a proxy in front of it).")
@click.option("--allow-unmatched", is_flag=True,
              help="Exit 0 even when a request had no recorded match (by default: exit 3).")
@click.option("--fault", "fault_rules", multiple=True, metavar="RULE",
              help="Misbehave on purpose: 'SELECTOR EFFECT [nth=N|after=N|p=P]', e.g. "
                   "'tools/call:search error=-32000:busy' (repeatable; see docs/faults.md).")
@click.option("--faults", "faults_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Fault rules from a TOML or JSON file (mcp-cassette overlays too).")
@click.option("--seed", type=int, help="Seed for faults drawn with p=: the same seed, the "
              "same faults.")
@redaction_options
@click.argument("server", nargs=-1, type=click.UNPROCESSED)
def replay(cassette: str, session: str | None, mode: str, timing: str, max_gap: str | None,
           protocol_version: str, strict_order: bool, ignore: tuple[str, ...], repeat: str,
           report: str | None, http: bool, listen: str,
           url_path: str, allow_origin: tuple[str, ...], allow_host: tuple[str, ...],
           target: str | None, allow_unmatched: bool, fault_rules: tuple[str, ...],
           faults_file: str | None, seed: int | None,
           redact_paths: tuple[str, ...], redact_keys: tuple[str, ...],
           redact_patterns: tuple[str, ...], server: tuple[str, ...],
           normalize: tuple[str, ...] = ()) -> None:
    """Serve a recorded session from CASSETTE as a stdio MCP server.

    Launch `mcprec replay CASSETTE` wherever the client would launch the real server. Requests
    are matched to recorded ones (method + params, key order and _meta ignored) and answered
    with the recorded notifications, server requests and response. Give the real server
    after `--` for the recording modes.
    """
    from .matching import MatchOptions
    from .normalize import from_config
    from .replay import replay_stdio

    options = MatchOptions(ignore=ignore, strict_order=strict_order,
                           repeat=repeat,  # type: ignore[arg-type]
                           normalize=from_config("replay", normalize))
    redactor = _redactor(redact_paths, redact_keys, redact_patterns)
    faults = _faults(fault_rules, faults_file, seed)
    scale = _timing(timing)
    gap = None
    if max_gap is not None:
        gap = _duration(max_gap, "--max-gap", zero=True)
        if scale is None:
            raise click.UsageError("--max-gap goes with --timing recorded (or a scale)")
    if target is not None and not http:
        raise click.UsageError("--target goes with --http (over stdio, give the real server's "
                               "command after `--`)")
    if http:
        if server:
            raise click.UsageError("--http takes the real server as --target URL, not a "
                                   "command after `--`")
        if target is not None and mode == "none":
            raise click.UsageError("--target goes with a recording mode (--mode new_episodes, "
                                   "once or all)")
        from .replay import replay_http

        sys.exit(replay_http(cassette, session=session, listen=listen, path=url_path,
                             options=options, timing=scale, report=report,
                             allowed_origins=allow_origin, allowed_hosts=allow_host,
                             redact=redactor, allow_unmatched=allow_unmatched, faults=faults,
                             protocol_version=protocol_version, max_gap=gap, mode=mode,
                             target=target))
    code = replay_stdio(cassette, session=session, mode=mode, server=list(server),
                        options=options, timing=scale, report=report, redact=redactor,
                        allow_unmatched=allow_unmatched, faults=faults,
                        protocol_version=protocol_version, max_gap=gap)
    sys.exit(code)


def _faults(rules: tuple[str, ...], path: str | None, seed: int | None) -> Any:
    """The command line's fault rules, then the file's, then the config's; None when none."""
    from .replay.faults import Faults, from_config, load_file, parse_rule

    found = [parse_rule(r) for r in rules]
    if path is not None:
        found.extend(load_file(path))
    found.extend(from_config())
    return Faults(found, seed) if found else None


@cli.command()
@click.argument("cassette", type=click.Path(dir_okay=False))
@redaction_options
def redact(cassette: str, redact_paths: tuple[str, ...], redact_keys: tuple[str, ...],
           redact_patterns: tuple[str, ...]) -> None:
    """Redact secrets in CASSETTE in place (then VACUUM, so nothing lingers on disk).

    Applies the default rules, those of [tool.mcprec.redact] in pyproject.toml or [redact] in
    mcprec.toml, each session's redaction manifest, and the options given; the manifests then
    name the packs applied. Redacted requests still match during replay.
    """
    from .cassette.maintenance import redact_cassette

    n = redact_cassette(cassette, _redactor(redact_paths, redact_keys, redact_patterns))
    click.echo(f"{cassette}: redacted {n} row(s)", err=True)


@cli.command()
@click.argument("cassettes", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--require-redaction", "require", multiple=True, metavar="PACK",
              help="Also fail for any session whose redaction manifest does not name this "
                   "pack (credentials, pii, paths, or a user pack's name; repeatable): the CI "
                   "gate. A bundled pack required is also scanned for.")
@redaction_options
def scan(cassettes: tuple[str, ...], require: tuple[str, ...], redact_paths: tuple[str, ...],
         redact_keys: tuple[str, ...], redact_patterns: tuple[str, ...]) -> None:
    """Report likely secrets left in CASSETTES; exit 1 if any (usable as a pre-commit hook).

    Each session is also scanned with the rules of its redaction manifest (the packs it was
    recorded with)."""
    from .cassette.maintenance import scan_cassette

    redactor = _redactor(redact_paths, redact_keys, redact_patterns)
    dirty = 0
    for path in cassettes:
        findings = scan_cassette(path, redactor, require)
        for f in findings:
            click.echo(f"{path}: {f.where}: {', '.join(f.kinds)}")
        dirty += bool(findings)
    if dirty:
        what = "likely secrets, or sessions not redacted as required," if require else \
            "likely secrets"
        click.echo(f"mcprec: {what} in {dirty} cassette(s); run `mcprec redact CASSETTE`",
                   err=True)
        sys.exit(1)
    click.echo(f"no secrets found in {len(cassettes)} cassette(s)", err=True)


def _session_json(s: Any, redaction: dict[int, Any]) -> dict[str, Any]:
    """A session for `sessions --json`, with its redaction manifest (null: none recorded)."""
    from .timeline import session_dict

    return {**session_dict(s), "redaction": redaction.get(s.id)}


@cli.command()
@click.argument("cassette", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def sessions(cassette: str, as_json: bool) -> None:
    """List the sessions in CASSETTE. UNANS counts the requests (either direction) that have
    no recorded answer: cut off, cancelled, or still in flight."""
    from .cassette import open_cassette
    from .cassette.views import unanswered_counts
    from .timeline import format_table, session_dict, session_rows

    with open_cassette(cassette) as c:
        found = c.sessions()
        redaction = c.redaction_manifests()
        unanswered = unanswered_counts(c)
    if as_json:
        import orjson

        click.echo(orjson.dumps([{**_session_json(s, redaction), "unanswered": unanswered.get(s.id, 0)}
                                 for s in found], option=orjson.OPT_INDENT_2))
    elif not found:
        click.echo(f"{cassette}: no sessions")
    else:
        click.echo(format_table(session_rows(found, unanswered)))


@cli.command()
@click.argument("cassette", type=click.Path(dir_okay=False))
@click.argument("session", required=False)
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

    from .cassette import open_cassette
    from .dump import message_filter
    from .timeline import format_message_line, human_duration_ns, message_dict, timeline

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
            click.echo(
                f"session {s.name}  [{s.status}]  {s.transport}  {s.target_label}\n"
                f"server {server}  protocol {s.protocol_version or '?'}  "
                f"{s.message_count} messages  {human_duration_ns(s.duration_ns)}"
            )
            manifest = c.redaction_manifests([s]).get(s.id)
            if manifest is not None:
                from .redact_manifest import describe

                click.echo(f"redaction {describe(manifest)}")
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
                    click.echo("        " + m.raw.decode("utf-8", "replace"))
        if with_stderr:
            for err in c.stderr(s):
                if as_json:
                    click.echo(orjson.dumps({"stderr": err.line, "t_ns": err.t_ns}))
                else:
                    click.echo(f"{'':5}  {err.t_ns / 1e6:>10.3f} ms  ! stderr  {err.line}")
        if keep is not None:
            click.echo(f"mcprec: {shown} of {s.message_count} messages match", err=True)


def _show_tools(c: Any, s: Any, as_json: bool) -> None:
    """``show --tools``: the session's tools, from its tools/list answers (every page)."""
    import orjson

    from .dump import session_tools, tool_line

    found = session_tools(c, s)
    if as_json:
        for tool in found:
            click.echo(orjson.dumps(tool))
        return
    if not found:
        click.echo(f"session {s.name}: no tools/list answer recorded", err=True)
        return
    for tool in found:
        click.echo(tool_line(tool))


@cli.command()
@click.argument("cassette", type=click.Path(dir_okay=False))
@click.argument("session", required=False)
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
    from .cassette import open_cassette
    from .dump import export_to

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
            try:
                f = open(output, "wb")
            except OSError as e:
                raise McprecCommandError(f"cannot write {output}: {e.strerror}") from e
            with f:
                export_to(f, c, chosen, timing=timing)


def _export_otlp(c: Any, sessions: list[Any], url: str, headers: tuple[str, ...],
                 timeout: float, retries: int) -> None:
    from .otel.otlp import OtlpTarget, export_otlp, parse_headers

    target = OtlpTarget(url, parse_headers(headers), timeout=timeout, retries=retries)
    report = export_otlp(c, sessions, target)
    for warning in report.warnings:
        click.echo(f"mcprec: warning: {warning}", err=True)
    click.echo(f"exported {report.sessions} session(s) to {target.url}: {report.spans} span(s) "
               f"in {report.requests} request(s), {report.durations} duration(s)", err=True)


@cli.command("import")
@click.argument("dump", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("cassette", type=click.Path(dir_okay=False))
@click.option("--replace", is_flag=True, help="Replace sessions that already exist.")
def import_(dump: str, cassette: str, replace: bool) -> None:
    """Read a JSON Lines DUMP (from `mcprec export`) into CASSETTE."""
    from .dump import import_dump

    if dump == "-":
        names = import_dump(sys.stdin.buffer, cassette, replace=replace, source="<stdin>")
    else:
        try:
            f = open(dump, "rb")
        except OSError as e:
            raise McprecCommandError(f"cannot read {dump}: {e.strerror}") from e
        with f:
            names = import_dump(f, cassette, replace=replace, source=dump)
    click.echo(f"imported {len(names)} session(s) into {cassette}: {', '.join(names)}", err=True)


class _VerifyCommand(_ServerCommand):
    """verify's positional arguments: with --all, the cassettes before ``--``, the server after."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["mcprec.server_args"] = (len(args) - args.index("--") - 1 if "--" in args
                                          else None)
        return super().parse_args(ctx, args)


@cli.command(cls=_VerifyCommand, context_settings={"ignore_unknown_options": True})
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
              type=click.Choice(["text", "json", "markdown", "html", "github"]), default="text",
              show_default=True, help="Report format (html: one self-contained page; github: "
              "workflow annotations and the Markdown, also to $GITHUB_STEP_SUMMARY).")
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
    from .cli_diff import DiffCommandError, resolve, verify_main

    extra: tuple[str, ...] = ()
    n = click.get_current_context().meta.get("mcprec.server_args")
    if all_sessions and n is not None:
        extra, server = server[:len(server) - n], server[len(server) - n:]
    elif all_sessions and target is not None:
        extra, server = server, ()
    if not all_sessions and os.path.isdir(cassette):
        raise McprecCommandError(f"{cassette} is a directory; give a cassette file, or --all "
                                 "to verify every cassette under it", 2)
    try:
        gate = resolve(config, ignore, normalize, fail_on, surface_only, fail_on_latency)
    except McprecError as e:
        raise DiffCommandError(str(e)) from e
    code = verify_main(cassette, extra, server, all_sessions=all_sessions, session=session,
                       timeout=timeout, update=update, target=target, gate=gate, fmt=fmt,
                       html=html, color=color, lint_run=lint_run,
                       redact=_redactor(redact_paths, redact_keys, redact_patterns))
    sys.exit(code)


def _register_diff() -> None:
    from .cli_diff import diff_command

    cli.add_command(diff_command)


_register_diff()


def _register_lint() -> None:
    from .lint.command import lint_command

    cli.add_command(lint_command)


_register_lint()


def _register_view() -> None:
    from .cli_view import view_command

    cli.add_command(view_command)


_register_view()


def main(argv: list[str] | None = None) -> None:
    """Run the command line; every error is one line ``mcprec: ...`` and an exit code."""
    try:
        code = cli.main(args=argv, prog_name="mcprec", standalone_mode=False)
    except click.UsageError as e:  # bad arguments: one line, and where to look
        if type(e).__name__ == "NoArgsIsHelpError":  # plain `mcprec`: the help it asked for
            click.echo(e.format_message())
            sys.exit(0)
        where = e.ctx.command_path if e.ctx is not None else "mcprec"
        click.echo(f"mcprec: {e.format_message()} (see `{where} --help`)", err=True)
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
