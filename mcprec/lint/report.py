"""Lint reports: text, JSON, Markdown, GitHub workflow annotations, SARIF 2.1.0 and JUnit XML."""

from __future__ import annotations

from typing import Any

import orjson

from .. import __version__
from ..terminal import safe, safe_lines
from .api import LintResult
from .model import Finding, severity_rank

FORMATS = ("text", "json", "markdown", "github", "sarif", "junit")
_DIR = {"client_to_server": "c2s", "server_to_client": "s2c"}


def render(result: LintResult, fmt: str) -> str:
    """The report in ``fmt``; text, Markdown and annotations terminal-safe (``terminal``)."""
    text = {"text": to_text, "json": to_json, "markdown": to_markdown, "github": to_github,
            "sarif": to_sarif, "junit": to_junit}[fmt](result)
    return text if fmt in ("json", "sarif", "junit") else safe_lines(text)


def _where(f: Finding) -> str:
    if f.seq < 0:
        return "session"
    parts = [f"seq {f.seq}", _DIR.get(f.direction or "", "")]
    if f.method:
        parts.append(f.method)
    if f.id is not None:
        parts.append(f"id={f.id}")
    return " ".join(p for p in parts if p)


def summary(result: LintResult) -> str:
    counts = result.counts()
    n = len(result.findings)
    sessions = len(result.sessions)
    if not n:
        return f"clean: {sessions} session(s), {len(result.enabled)} rule(s)"
    detail = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
    verdict = "FAILED" if result.failed else "passed"
    return (f"{n} finding(s) ({detail}) in {sessions} session(s); {verdict} "
            f"(--fail-on {result.fail_on})")


def to_text(result: LintResult) -> str:
    lines = []
    for f in result.findings:
        lines.append(safe(f"{f.cassette}:{f.session}: {_where(f)}: {f.code} {f.severity}: "
                          f"{f.message}"))
        lines.append(safe(f"    at {f.path}  [{f.rule}]"))
    lines.append(summary(result))
    return "\n".join(lines) + "\n"


def to_json(result: LintResult) -> str:
    doc = {
        "format": "mcprec-lint", "version": 1, "failed": result.failed,
        "fail_on": result.fail_on, "counts": result.counts(),
        "sessions": [{"cassette": s.cassette, "session": s.session,
                      "protocol_version": s.version, "messages": s.messages}
                     for s in result.sessions],
        "findings": [f.to_dict() for f in result.findings],
    }
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(result: LintResult) -> str:
    out = [f"### mcprec lint: {summary(result)}", ""]
    if result.findings:
        out += ["| severity | rule | session | message | where | path |",
                "|---|---|---|---|---|---|"]
        for f in result.findings:
            out.append(f"| {f.severity} | `{f.code}` {f.rule} | {_cell(f.session)} | "
                       f"{_cell(f.message)} | {_cell(_where(f))} | `{_cell(f.path)}` |")
        out.append("")
    return "\n".join(out) + "\n"


def _gh_escape(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


_GH_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def to_github(result: LintResult) -> str:
    """GitHub Actions workflow commands: one annotation per finding, on the cassette file."""
    lines = []
    for f in result.findings:
        title = _gh_escape(f"{f.code} {f.rule}", prop=True)
        message = _gh_escape(f"{f.session}: {_where(f)}: {f.message} (at {f.path})")
        lines.append(f"::{_GH_LEVEL[f.severity]} file={_gh_escape(f.cassette, prop=True)},"
                     f"title={title}::{message}")
    lines.append(summary(result))
    return "\n".join(lines) + "\n"


_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def sarif(result: LintResult) -> dict[str, Any]:
    """The run as a SARIF 2.1.0 log."""
    used = sorted({f.code for f in result.findings} | set(result.enabled))
    index = {code: i for i, code in enumerate(used)}
    rules = []
    for code in used:
        r = result.rules[code]
        rules.append({
            "id": code, "name": r.name,
            "shortDescription": {"text": r.summary},
            "defaultConfiguration": {"level": _SARIF_LEVEL[result.enabled.get(code,
                                                                              r.severity)]},
            "help": {"text": f"{code} {r.name}: {r.summary} (mcprec docs/lint.md)"},
            "properties": {"pack": r.pack},
        })
    results = []
    for f in result.findings:
        results.append({
            "ruleId": f.code, "ruleIndex": index[f.code], "level": _SARIF_LEVEL[f.severity],
            "message": {"text": f"{_where(f)}: {f.message}"},
            "locations": [{
                "physicalLocation": {"artifactLocation": {"uri": f.cassette}},
                "logicalLocations": [{"name": f.path, "kind": "member",
                                      "fullyQualifiedName": f"{f.session}/seq {f.seq}/{f.path}"}],
            }],
            "partialFingerprints": {"mcprecFinding/v1": _fingerprint(f)},
            "properties": {"session": f.session, "seq": f.seq, "direction": f.direction,
                           "method": f.method, "id": f.id, "path": f.path},
        })
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "mcprec", "version": __version__, "rules": rules}},
            "results": results,
        }],
    }


def _fingerprint(f: Finding) -> str:
    import hashlib

    key = "\0".join((f.session, f.code, f.method or "", f.path, f.message))
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def to_sarif(result: LintResult) -> str:
    return orjson.dumps(sarif(result), option=orjson.OPT_INDENT_2).decode() + "\n"


def to_junit(result: LintResult) -> str:
    """JUnit XML: a test suite per linted session, a test case per enabled rule that found
    nothing (passed) and one per finding, named by its rule and place; a finding at least as
    severe as ``--fail-on`` is a failure, a milder one passes with its message as output."""
    from ..junit import Case, Suite, to_xml

    floor = severity_rank(result.fail_on)
    suites = []
    for s in result.sessions:
        suite = Suite(f"mcprec lint {s.cassette}:{s.session}")
        found = [f for f in result.findings
                 if f.cassette == s.cassette and f.session == s.session]
        codes = {f.code for f in found}
        for code in result.enabled:
            if code not in codes:
                rule = result.rules[code]
                suite.cases.append(Case(f"{code} {rule.name}", f"{s.cassette}:{s.session}"))
        for f in found:
            text = (f"{f.cassette}:{f.session}: {_where(f)}: {f.code} {f.severity}: "
                    f"{f.message}\n    at {f.path}  [{f.rule}]")
            case = Case(f"{f.code} {f.rule}: {_where(f)}", f"{s.cassette}:{s.session}.{f.code}")
            if severity_rank(f.severity) >= floor:
                case.failure, case.kind, case.detail = f.message, f.severity, text
            else:
                case.output = text
            suite.cases.append(case)
        suites.append(suite)
    return to_xml(suites, f"mcprec lint: {summary(result)}")


def worst(result: LintResult) -> str | None:
    if not result.findings:
        return None
    return max((f.severity for f in result.findings), key=severity_rank)
