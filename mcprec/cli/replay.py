"""``mcprec replay``: a cassette as a mock server, on stdio or HTTP."""

from __future__ import annotations

import sys

import click

from ..modes import MODES
from ._common import (
    SESSION_IDLE_HELP,
    _redactor,
    _session_idle,
    redaction_options,
)


@click.command()
@click.argument("cassette", type=click.Path(), required=False)
@click.option("-c", "--cassette", "cassette_opt", type=click.Path(),
              metavar="FILE", help="The cassette, given as `record -c` takes it (instead of "
              "the CASSETTE argument).")
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
@click.option("--session-idle", "session_idle", default="10m", show_default=True,
              metavar="DURATION|off", help=SESSION_IDLE_HELP)
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
def replay(cassette: str | None, cassette_opt: str | None, session: str | None, mode: str,
           timing: str, max_gap: str | None,
           protocol_version: str, strict_order: bool, ignore: tuple[str, ...], repeat: str,
           report: str | None, http: bool, listen: str,
           url_path: str, allow_origin: tuple[str, ...], allow_host: tuple[str, ...],
           target: str | None, session_idle: str, allow_unmatched: bool,
           fault_rules: tuple[str, ...],
           faults_file: str | None, seed: int | None,
           redact_paths: tuple[str, ...], redact_keys: tuple[str, ...],
           redact_patterns: tuple[str, ...], server: tuple[str, ...],
           normalize: tuple[str, ...] = ()) -> None:
    """Serve a recorded session from CASSETTE as a stdio MCP server.

    Launch `mcprec replay CASSETTE` wherever the client would launch the real server. Requests
    are matched to recorded ones (method + params, key order and _meta ignored) and answered
    with the recorded notifications, server requests and response. Give the real server
    after `--` for the recording modes.

    CASSETTE may also be a directory or a (quoted) glob, e.g. the files of a rotated
    recording: they replay as one cassette (mode none).
    """
    if cassette_opt is not None:
        if cassette is not None:  # no CASSETTE argument: it was the server's first word
            server = (cassette, *server)
        cassette = cassette_opt
    elif cassette is None:
        raise click.UsageError("Missing argument 'CASSETTE' (or -c FILE).")
    from ..matching import MatchOptions
    from ..normalize import from_config
    from ..replay import replay_stdio
    from ..replay.settings import ReplaySettings, SettingError

    options = MatchOptions(ignore=ignore, strict_order=strict_order,
                           repeat=repeat,  # type: ignore[arg-type]
                           normalize=from_config("replay", normalize))
    redactor = _redactor(redact_paths, redact_keys, redact_patterns)
    try:
        settings = ReplaySettings(timing=timing, max_gap=max_gap,
                                  protocol_version=protocol_version,
                                  faults=_fault_rules(fault_rules, faults_file), seed=seed,
                                  allow_unmatched=allow_unmatched)
    except SettingError as e:
        raise click.UsageError(e.for_cli()) from None
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
        from ..replay import replay_http

        sys.exit(replay_http(cassette, session=session, listen=listen, path=url_path,
                             options=options, settings=settings, report=report,
                             allowed_origins=allow_origin, allowed_hosts=allow_host,
                             redact=redactor, mode=mode, target=target,
                             session_idle=_session_idle(session_idle), on_ready=click.echo))
    code = replay_stdio(cassette, session=session, mode=mode, server=list(server),
                        options=options, settings=settings, report=report, redact=redactor)
    sys.exit(code)


def _fault_rules(rules: tuple[str, ...], path: str | None) -> list[str]:
    """The command line's fault rules, then the file's, then the config's."""
    from ..faults.rules import from_config, load_file, parse_rule

    found = [parse_rule(r) for r in rules]  # said as the rule it is, before the file's
    if path is not None:
        found.extend(load_file(path))
    found.extend(from_config())
    return [f.text for f in found]
