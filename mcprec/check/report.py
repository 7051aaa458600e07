"""A check run's report: text (one line per check), JSON, GitHub workflow annotations, JUnit
XML. Text and annotations are terminal-safe (a server's words are escaped, ``terminal``)."""

from __future__ import annotations

import json

from ..terminal import safe_lines
from .model import FAIL, PASS, SKIP, CheckReport

FORMATS = ("text", "json", "github", "junit")
_MARK = {PASS: "pass", FAIL: "FAIL", SKIP: "skip"}


def render(report: CheckReport, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n"
    if fmt == "junit":
        return to_junit(report)
    return safe_lines(to_github(report) if fmt == "github" else to_text(report))


def _server(report: CheckReport) -> str:
    info = report.server
    name = f"{info.get('name', '')} {info.get('version', '')}".strip() or report.target
    return f"{name} ({report.transport}" + \
        (f", protocol {report.protocol})" if report.protocol else ")")


def summary(report: CheckReport) -> str:
    verdict = "FAILED" if report.failed else "PASSED"
    kept = (f"; the probe session is {report.sessions[0]!r} in {report.cassette}"
            if report.cassette and report.sessions else "")
    return f"Result: {verdict}: {report.summary()} in {report.seconds:.1f} s{kept}"


def to_text(report: CheckReport) -> str:
    width = max((len(r.id) for r in report.results), default=0)
    lines = [f"mcprec check: {_server(report)}"]
    lines += [f"  {_MARK[r.status]}  {r.id:{width}}  {r.why}" for r in report.results]
    lines.append(summary(report))
    return "\n".join(lines) + "\n"


def _gh(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def to_github(report: CheckReport) -> str:
    """An ``::error`` annotation per failed check, a ``::notice`` with the summary."""
    lines = [f"::error title={_gh('mcprec check ' + r.id, prop=True)}::"
             f"{_gh(_server(report) + ': ' + r.why)}"
             for r in report.results if r.status == FAIL]
    lines.append(f"::notice title=mcprec check::{_gh(_server(report) + ': ' + summary(report))}")
    return "\n".join(lines) + "\n"


def to_junit(report: CheckReport) -> str:
    """A test suite for the server, a test case per check (classname: its family)."""
    from ..junit import Case, Suite, to_xml

    suite = Suite(f"mcprec check {_server(report)}", time=report.seconds)
    for r in report.results:
        case = Case(r.id, f"mcprec.check.{r.id.split('.')[0]}", time=r.seconds)
        if r.status == FAIL:
            case.failure, case.kind, case.detail = r.why, "check", r.why
        elif r.status == SKIP:
            case.skipped = r.why
        else:
            case.output = r.why
        suite.cases.append(case)
    return to_xml([suite], "mcprec check")
