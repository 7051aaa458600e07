"""``mcprec check``: a live server probed by a session made from the spec and from what the
server declares, recorded into a cassette, linted, and judged check by check.

    from mcprec.check import run_check, CheckOptions
    report = run_check(server=["python", "server.py"], options=CheckOptions(timeout=5))
    for r in report.results:
        print(r.id, r.status, r.why)

Layout: ``model`` (results, the report, the list of checks), ``probe`` (the probe session over
any link: lifecycle, capabilities, bad input, pagination, progress, cancellation), ``http``
(the Streamable HTTP checks, straight to the server), ``run`` (recording, linting),
``report`` (text, JSON, GitHub, JUnit).
"""

from __future__ import annotations

from .model import CHECKS, FAIL, PASS, SKIP, CheckReport, Result
from .probe import ProbeOptions
from .report import FORMATS, render
from .run import CheckOptions, run_check

__all__ = ["CHECKS", "FAIL", "FORMATS", "PASS", "SKIP", "CheckOptions", "CheckReport",
           "ProbeOptions", "Result", "render", "run_check"]
