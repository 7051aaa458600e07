"""``mcprec lint``: the click layer over ``mcprec.lint``. Registered in ``mcprec/cli/__init__.py``.

Exit codes: 0 clean (nothing at or above ``--fail-on``), 1 findings, 2 trouble (bad arguments
or config, a cassette or session that does not exist), each printed as one line.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from ._common import trouble, write_report

EXIT_CLEAN, EXIT_FINDINGS, EXIT_TROUBLE = 0, 1, 2
FORMATS = ("text", "json", "markdown", "github", "sarif", "junit")
LEVELS = ("info", "warning", "error")



def _severities(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for v in values:
        rule, sep, level = v.partition("=")
        if not sep or not rule.strip() or level.strip() not in LEVELS:
            raise click.BadParameter(f"expected RULE=LEVEL with LEVEL one of "
                                     f"{', '.join(LEVELS)}, got {v!r}", param_hint="--severity")
        out[rule.strip()] = level.strip()
    return out


@click.command("lint", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("cassettes", nargs=-1, type=click.Path(dir_okay=False), metavar="CASSETTE...")
@click.option("-s", "--session", help="The session to lint in each cassette (default: the "
              "latest).")
@click.option("--all", "all_sessions", is_flag=True, help="Lint every session of each cassette.")
@click.option("-f", "--format", "fmt", type=click.Choice(FORMATS), default="text",
              show_default=True, help="Report format: github writes workflow annotations, "
              "sarif a SARIF 2.1.0 log for code scanning, junit JUnit XML for CI test "
              "reports (a test case per rule and finding).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              help="Write the report here instead of stdout.")
@click.option("--select", multiple=True, metavar="RULES",
              help="Run only these rules: codes (SCH002), families (SCH, schema, ids...), rule "
                   "names, packs (protocol, security) or all; comma-separated, repeatable.")
@click.option("--skip", multiple=True, metavar="RULES",
              help="Do not run these rules (as for --select).")
@click.option("--severity", "severity", multiple=True, metavar="RULE=LEVEL",
              help="Give rules another severity, e.g. SEC006=error or TOOL=warning "
                   "(repeatable).")
@click.option("--fail-on", type=click.Choice(LEVELS), default=None,
              help="Exit 1 when a finding is at least this severe (default: warning; info "
                   "findings are shown but pass).")
@click.option("--baseline", metavar="CASSETTE[:SESSION]",
              help="Compare the tools with those of this recording: a changed description, "
                   "title or schema is a finding (SEC007).")
@click.option("--patterns", "patterns", multiple=True, type=click.Path(dir_okay=False),
              metavar="FILE", help="A pattern pack (TOML) whose patterns become rules of their "
                                   "own (repeatable).")
@click.option("--config", type=click.Path(dir_okay=False),
              help="TOML file with a [lint] table. Default: ./mcprec.toml and "
                   "[tool.mcprec.lint] in ./pyproject.toml, when present.")
@click.option("--list-rules", is_flag=True, help="List the rules (with the packs given) and exit.")
def lint_command(cassettes: tuple[str, ...], session: str | None, all_sessions: bool, fmt: str,
                 output: str, select: tuple[str, ...], skip: tuple[str, ...],
                 severity: tuple[str, ...], fail_on: str | None, baseline: str | None,
                 patterns: tuple[str, ...], config: str | None, list_rules: bool) -> None:
    """Check recorded traffic against the spec of the protocol revision it negotiated.

    Every message is validated against that revision's JSON Schema, and the session against
    the protocol's rules: lifecycle, ids, capabilities, progress and cancellation, tools
    (arguments against inputSchema, structuredContent against outputSchema). A security pack
    looks for injection phrasing, hidden characters, lookalike or duplicate names and secrets.
    Each finding names the message (seq, direction, method, id), the rule and a JSON path.

    \b
      mcprec lint cassettes/weather.db
      mcprec lint cassettes/*.db --all --skip security --format github
      mcprec lint new.db --baseline old.db --format sarif -o lint.sarif

    Exit status: 0 clean, 1 findings (at least --fail-on), 2 on errors. The rules:
    docs/lint.md, or --list-rules.
    """
    from ..errors import McprecError
    from ..lint.model import split_selectors
    from ..terminal import safe_lines

    try:
        from ..lint.api import LintOptions, lint, prepare
        from ..lint.report import render, summary

        options = LintOptions(select=split_selectors(select), skip=split_selectors(skip),
                              severity=_severities(severity), fail_on=fail_on,
                              patterns=patterns, baseline=baseline, config=config)
        if list_rules:
            click.echo(_rules_table(prepare(options)), nl=False)
            sys.exit(EXIT_CLEAN)
        if not cassettes:
            raise click.UsageError("give at least one CASSETTE")
        if session is not None and all_sessions:
            raise click.UsageError("give either -s SESSION or --all, not both")
        result = lint(cassettes, session=session, all_sessions=all_sessions, options=options)
    except McprecError as e:
        raise trouble(str(e)) from e
    for warning in result.warnings:
        click.echo(f"mcprec: warning: {safe_lines(warning)}", err=True)
    write_report(render(result, fmt), output, f"lint: {summary(result)}")
    sys.exit(EXIT_FINDINGS if result.failed else EXIT_CLEAN)


def _rules_table(run: Any) -> str:
    lines = []
    for code, r in run.rules.items():
        state = run.enabled.get(code, "off")
        lines.append(f"{code:8} {state:8} {r.pack:9} {r.name:28} {r.summary}")
    return "\n".join(lines) + "\n"
