"""Verify one reference session under a gate, or every reference session of several cassettes
(``verify --all``): the plan, the runs, and the summary in text, Markdown, JSON and JUnit XML."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import _log
from ..cassette import Cassette
from ..cassette.sets import expand
from ..errors import McprecError, UsageError
from ..terminal import safe, safe_lines
from .gate import Gate
from .run import Verification, accept, describe, run_verification


def expand_cassettes(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Cassette files, the ``*.db`` files under directories and the matches of globs (sorted);
    each once (``cassette.sets.expand``)."""
    return expand(paths)


def reference_sessions(cassette: str | os.PathLike[str]) -> list[str]:
    """The sessions of a cassette that are not verification runs, oldest first."""
    with Cassette.open(cassette, read_only=True) as c:
        return [s.name for s in c.sessions() if "verify_of" not in s.tags]


def plan(paths: Sequence[str | os.PathLike[str]]) -> list[tuple[Path, str]]:
    """``verify --all``: every reference session of every cassette given (or under a directory
    given), in order."""
    cassettes = expand_cassettes(paths)
    out = [(c, s) for c in cassettes for s in reference_sessions(c)]
    if not out:
        raise UsageError("no recorded sessions to verify in "
                         + ", ".join(str(c) for c in cassettes))
    return out


@dataclass
class Run:
    """One reference session verified: its verification and diff, or what failed."""

    cassette: Path
    session: str
    verification: Verification | None = None
    result: Any = None
    """The ``DiffResult``."""
    error: str | None = None
    failed: bool = False
    """The gate (``--fail-on``...) failed, or a request went unanswered, or lint found."""
    lint: Any = None
    """The lint findings of the new run (``--lint``), or None."""

    @property
    def status(self) -> str:
        return "error" if self.error else "different" if self.failed else (
            "equal" if self.result is not None and self.result.equal else "passed")


def verify_one(cassette: Path, session: str | None, server: Sequence[str], *, gate: Gate,
               timeout: float, target: str | None = None, redact: Any = None,
               lint_run: bool = False, update: bool = False) -> Run:
    """Verify ``session`` of ``cassette`` (None: its latest reference) against ``server`` or
    ``target``, diff under ``gate``; ``update``: accept the new run as the reference.
    An ``McprecError`` when it could not be verified. A reference that cannot be written (a
    read-only filesystem or folder) is verified on a copy, whose run is not kept."""
    import tempfile

    from ..cassette.connect import copy_cassette, unwritable

    with tempfile.TemporaryDirectory(prefix="mcprec-verify-") as tmp:
        where = cassette
        if not update and unwritable(cassette):
            where = Path(tmp) / cassette.name
            copy_cassette(cassette, where)
            _log.info("verify", f"verify: {cassette} cannot be written; the run is compared "
                      "on a copy and not kept")
        v = run_verification(where, list(server), target=target, session=session,
                             timeout=timeout, redact=redact)
        result = gate.compare(where, v.original, v.new)
        run = Run(cassette, v.original, v, result)
        run.failed = gate.fails(result, v.drive.timed_out)
        if lint_run:
            from ..lint.api import lint

            run.lint = lint([str(where)], session=v.new)
            run.failed = run.failed or bool(run.lint.failed)
        describe(result, cassette, v, server, target, failed=run.failed)
    if update:
        accept(cassette, v)
    return run


def verify_all(targets: Sequence[tuple[Path, str]], server: Sequence[str], *, gate: Gate,
               timeout: float, target: str | None = None, redact: Any = None,
               lint_run: bool = False, update: bool = False) -> list[Run]:
    """Each planned session in turn; a session that could not be verified is a ``Run`` with
    its ``error``."""
    runs: list[Run] = []
    for c, s in targets:
        try:
            runs.append(verify_one(c, s, server, gate=gate, timeout=timeout, target=target,
                                   redact=redact, lint_run=lint_run, update=update))
        except McprecError as e:
            runs.append(Run(c, s, error=str(e)))
    return runs


# --- the summary -------------------------------------------------------------------------------


def overall(runs: Sequence[Run]) -> str:
    n = len(runs)
    bad = sum(1 for r in runs if r.failed)
    err = sum(1 for r in runs if r.error)
    parts = [f"{n - bad - err} passed"] + ([f"{bad} failed"] if bad else []) + (
        [f"{err} could not be verified"] if err else [])
    return f"{n} session(s): " + ", ".join(parts)


def _row(r: Run) -> tuple[str, str]:
    if r.error:
        return "ERROR", r.error
    counts = r.result.counts
    detail = ", ".join(f"{counts[k]} {k}" for k in ("breaking", "warning", "compatible")
                       if counts[k])
    verdict = "FAILED" if r.failed else ("EQUAL" if r.result.equal else "passed")
    return verdict, detail or "no differences"


def text_summary(runs: Sequence[Run]) -> str:
    out = [f"verify --all: {overall(runs)}"]
    for r in runs:
        verdict, detail = _row(r)
        out.append(safe(f"  {verdict:<7} {r.cassette}:{r.session}  {detail}"))
    return "\n".join(out)


def markdown_summary(runs: Sequence[Run]) -> str:
    from ..diff.report import _cell, _code

    failed = any(r.failed or r.error for r in runs)
    out = [f"## {'❌' if failed else '✅'} mcprec verify --all: {overall(runs)}", "",
           "| cassette | session | result | findings |", "|---|---|---|---|"]
    for r in runs:
        verdict, detail = _row(r)
        out.append(f"| {_cell(_code(str(r.cassette)))} | {_cell(_code(r.session))} | "
                   f"{verdict} | {_cell(detail)} |")
    for r in runs:
        if r.result is None or r.result.equal:
            continue
        body = r.result.to_markdown()  # its title one level down, under the summary
        out += ["", f"<details><summary>{r.cassette}:{r.session}</summary>", "",
                "#" + body, "</details>"]
    return safe_lines("\n".join(out).rstrip() + "\n")


def json_summary(runs: Sequence[Run]) -> str:
    from ..diff.report import to_dict

    return json.dumps({
        "format": "mcprec-verify-all", "version": 1, "verdict": overall(runs),
        "runs": [{"cassette": str(r.cassette), "session": r.session, "status": r.status,
                  "error": r.error, "failed": r.failed,
                  "new_session": r.verification.new if r.verification else None,
                  "diff": to_dict(r.result) if r.result is not None else None}
                 for r in runs],
    }, indent=2, default=str, ensure_ascii=False)


def github_lines(runs: Sequence[Run], *, latency: bool = False) -> list[str]:
    """The workflow annotations of every run."""
    from ..diff.report import annotation, github_annotations

    lines: list[str] = []
    for r in runs:
        if r.error:
            lines.append(annotation("error", f"mcprec verify: {r.session}", r.error,
                                    str(r.cassette)))
        elif r.result is not None:
            lines += github_annotations(r.result, str(r.cassette), latency=latency)
    return lines


def junit(runs: Sequence[Run]) -> str:
    """JUnit XML: a test suite per cassette, a test case per session verified: a failure with
    the change list when it failed the gate, an error when it could not be verified."""
    from ..diff.report import _verdict
    from ..junit import Case, Suite, to_xml

    suites: dict[str, Suite] = {}
    for r in runs:
        suite = suites.setdefault(str(r.cassette), Suite(f"mcprec verify {r.cassette}"))
        case = Case(r.session, str(r.cassette))
        if r.error:
            case.error, case.kind = r.error, "could not verify"
        else:
            detail = r.result.to_text(color=False)
            if r.lint is not None:
                from ..lint.report import to_text as lint_text

                detail += "\nlint of the new run:\n" + lint_text(r.lint)
            if r.failed:
                case.failure, case.kind, case.detail = _verdict(r.result), "different", detail
            else:
                case.output = detail
        suite.cases.append(case)
    return to_xml(list(suites.values()), f"mcprec verify: {overall(runs)}")


__all__ = ["Run", "expand_cassettes", "json_summary", "junit", "markdown_summary", "overall", "plan",
           "reference_sessions", "text_summary", "verify_all", "verify_one"]
