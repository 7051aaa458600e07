"""Linting cassettes from Python: ``lint(["c.db"])`` -> ``LintResult``.

Settings come from the arguments, over ``[lint]`` in ./mcprec.toml or ``[tool.mcprec.lint]``
in ./pyproject.toml (see ``load_settings``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..cassette import Cassette, Session, open_cassette
from ..errors import UsageError
from ..redact import Redactor, rules_from_config
# in the order the rules are listed: schema, lifecycle, ids, capabilities, progress, tools
from . import check_schema  # isort: skip
from . import check_lifecycle  # isort: skip
from . import check_ids  # isort: skip
from . import check_capabilities  # isort: skip
from . import check_progress  # isort: skip
from . import check_tools  # isort: skip
from .check_security import SecurityChecker
from .model import RULES, SEVERITIES, Finding, Rule, Selection, check_severity, severity_rank
from .patterns import Pattern, load_pack
from .walk import Checker, Context, Walk

PROTOCOL_CHECKERS: list[type[Checker]] = [
    check_schema.SchemaChecker, check_lifecycle.LifecycleChecker, check_ids.IdsChecker,
    check_capabilities.CapabilitiesChecker, check_progress.ProgressChecker,
    check_tools.ToolsChecker,
]
DEFAULT_FAIL_ON = "warning"
LINT_KEYS = ("select", "skip", "fail-on", "severity", "patterns")


@dataclass
class LintOptions:
    """What a lint run checks. Unset fields take the config file's value, then the default."""

    select: Sequence[str] = ()
    skip: Sequence[str] = ()
    severity: Mapping[str, str] = field(default_factory=dict)
    """Rule, family or pack -> severity."""
    fail_on: str | None = None
    patterns: Sequence[str | os.PathLike[str]] = ()
    """User pattern packs (TOML files)."""
    baseline: str | None = None
    """``CASSETTE[:SESSION]`` whose tools the linted ones are compared with (SEC007)."""
    config: str | os.PathLike[str] | None = None
    """A config file to read instead of ./mcprec.toml and ./pyproject.toml."""
    use_config: bool = True


@dataclass
class Run:
    """A resolved lint run, shared by the sessions it lints."""

    rules: dict[str, Rule]
    enabled: dict[str, str]
    fail_on: str
    patterns: list[Pattern]
    redactor: Redactor
    baseline_tools: dict[str, dict[str, Any]] | None
    warnings: list[str]


@dataclass
class LintedSession:
    cassette: str
    session: str
    version: str | None
    messages: int


@dataclass
class LintResult:
    """Findings of one run, in cassette, session and message order."""

    findings: list[Finding]
    sessions: list[LintedSession]
    rules: dict[str, Rule]
    enabled: dict[str, str]
    fail_on: str
    warnings: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """Whether a finding is at least as severe as ``fail_on``."""
        floor = severity_rank(self.fail_on)
        return any(severity_rank(f.severity) >= floor for f in self.findings)

    def counts(self) -> dict[str, int]:
        return {s: sum(f.severity == s for f in self.findings) for s in reversed(SEVERITIES)}


def prepare(options: LintOptions | None = None) -> Run:
    """Options + config file -> the rules on, their severities, packs, baseline."""
    o = options or LintOptions()
    cfg = load_settings(o.config) if o.use_config else {}
    warnings = list(cfg.pop("_warnings", []))
    patterns: list[Pattern] = []
    taken = set(RULES)
    for p in [*cfg.get("patterns", []), *o.patterns]:
        patterns.extend(load_pack(p, taken))
    rules = {**RULES, **{p.rule.code: p.rule for p in patterns}}
    severity = {**cfg.get("severity", {}), **dict(o.severity)}
    for key, value in severity.items():
        check_severity(value, f"severity of {key}")
    selection = Selection(select=tuple(o.select) or tuple(cfg.get("select", ())),
                          skip=(*cfg.get("skip", ()), *o.skip), severities=severity)
    enabled = selection.resolve(rules)
    fail_on = check_severity(o.fail_on or cfg.get("fail-on") or DEFAULT_FAIL_ON, "--fail-on")
    baseline = baseline_tools(o.baseline) if o.baseline else None
    return Run(rules, enabled, fail_on, patterns, Redactor(rules_from_config()), baseline,
               warnings)


def load_settings(path: str | os.PathLike[str] | None = None,
                  cwd: str | os.PathLike[str] = ".") -> dict[str, Any]:
    """``[lint]`` of the config files: ``select``, ``skip``, ``fail-on``, ``severity`` (a table
    of rule -> severity) and ``patterns`` (pack files, relative to the config file). The first
    file holding a key wins, as for ``[diff]``; lists add up."""
    from ..config import sections, string_list

    warnings: list[str] = []
    out: dict[str, Any] = {"_warnings": warnings}
    for p, table in sections("lint", path, cwd, warnings):
        unknown = sorted(set(table) - set(LINT_KEYS))
        if unknown:
            raise UsageError(f"config file {p}: unknown lint setting(s) {', '.join(unknown)}; "
                             f"known: {', '.join(LINT_KEYS)}")
        for key in ("select", "skip"):
            out[key] = [*out.get(key, []), *string_list(table, key, p)]
        out["patterns"] = [*out.get("patterns", []),
                           *(str(p.parent / f) for f in string_list(table, "patterns", p))]
        if "fail-on" in table and "fail-on" not in out:
            out["fail-on"] = check_severity(table["fail-on"], f"config file {p}: fail-on")
        sev = table.get("severity", {})
        if not isinstance(sev, dict):
            raise UsageError(f"config file {p}: severity must be a table of RULE = \"level\"")
        out["severity"] = {**sev, **out.get("severity", {})}
    return out


def baseline_tools(ref: str) -> dict[str, dict[str, Any]]:
    """The tools of a baseline session (``CASSETTE[:SESSION]``, default its latest), by name,
    as its last tools/list answers listed them."""
    from ..diff.api import parse_ref

    path, name = parse_ref(ref)
    if not path.is_file():
        raise UsageError(f"baseline cassette {path} not found")
    tools: dict[str, dict[str, Any]] = {}
    with open_cassette(path) as c:
        s = c.session(name)
        for m in c.messages(s, kinds=("response",)):
            if m.method != "tools/list":
                continue
            result = m.json.get("result") if isinstance(m.json, dict) else None
            listed = result.get("tools") if isinstance(result, dict) else None
            for t in listed if isinstance(listed, list) else ():
                if isinstance(t, dict) and isinstance(t.get("name"), str):
                    tools[t["name"]] = t
    return tools


def checkers(run: Run) -> list[type[Checker]]:
    pattern_codes = frozenset(p.rule.code for p in run.patterns)
    return [*PROTOCOL_CHECKERS, SecurityChecker.with_codes(pattern_codes)]


def lint_session(cassette: Cassette, session: Session, run: Run) -> list[Finding]:
    """The findings of one session of an open cassette."""
    ctx = Context(str(cassette.path), session, run.enabled, run)
    return Walk(ctx, checkers(run)).run(cassette)


def lint(cassettes: Iterable[str | os.PathLike[str]], *, session: str | None = None,
         all_sessions: bool = False, options: LintOptions | None = None) -> LintResult:
    """Lint the latest session of each cassette (or ``session`` in each, or all of them)."""
    run = prepare(options)
    findings: list[Finding] = []
    linted: list[LintedSession] = []
    for path in cassettes:
        if not Path(path).is_file():
            raise UsageError(f"cassette {path} not found")
        with open_cassette(path) as c:
            chosen = c.sessions() if all_sessions else [c.session(session)]
            for s in chosen:
                findings.extend(lint_session(c, s, run))
                linted.append(LintedSession(str(path), s.name, s.protocol_version,
                                            s.message_count))
    return LintResult(findings, linted, run.rules, run.enabled, run.fail_on, run.warnings)
