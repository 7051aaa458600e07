"""``mcprec lint``: recorded traffic checked against the spec of the revision it negotiated.

    from mcprec.lint import lint, LintOptions
    result = lint(["cassettes/weather.db"], options=LintOptions(skip=["security"]))
    for f in result.findings:
        print(f.seq, f.code, f.message, f.path)

Layout: ``model`` (rules, findings, selection), ``schemas`` (the shipped MCP schemas and the
validators compiled from them), ``walk`` (one pass over a session, with the state the rules
share), ``check_*`` (the rules, one module per family), ``patterns`` (the security pack's
heuristics and user pattern packs), ``api`` (options, config, running), ``report`` (formats),
``command`` (the CLI).

The names below are imported on first use: the CLI imports ``command`` at start-up, and the
validators cost nothing until a lint runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import LintOptions, LintResult, lint, lint_session, prepare
    from .model import RULES, SEVERITIES, Finding, Rule
    from .report import FORMATS, render

__all__ = ["FORMATS", "RULES", "SEVERITIES", "Finding", "LintOptions", "LintResult", "Rule",
           "lint", "lint_session", "prepare", "render"]

_WHERE = {"LintOptions": "api", "LintResult": "api", "lint": "api", "lint_session": "api",
          "prepare": "api", "RULES": "model", "SEVERITIES": "model", "Finding": "model",
          "Rule": "model", "FORMATS": "report", "render": "report"}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'mcprec.lint' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
