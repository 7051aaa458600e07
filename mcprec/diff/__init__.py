"""Diff two recorded sessions: what changed between two runs or two releases of a server.

    from mcprec.diff import diff, diff_sessions, assert_no_breaking_changes

    result = diff("cassettes/srv.db:v1", "cassettes/srv.db:v2", ignore=["$..timestamp"])
    result.equal, result.breaking, result.summary, result.exchanges, result.latency
    print(result.to_text())            # or .to_markdown(), .to_json()

Modules: ``load`` (one pass over a session), ``engine`` (alignment and payload comparison),
``summary`` + ``schema_compat`` (the MCP-aware summary and what breaks clients), ``paths``
(``--ignore`` paths, JSON in strings, leaf differences), ``report`` (text, Markdown, JSON),
``config`` (TOML settings).
"""

from __future__ import annotations

from .api import assert_no_breaking_changes, diff, diff_sessions, parse_ref
from .config import DiffConfig, load_config
from .model import (
    Change,
    CountChange,
    DiffResult,
    ExchangeDiff,
    LatencyRow,
    SideInfo,
    Stats,
    Summary,
)
from .paths import PayloadDifference, parse_path

__all__ = [
    "Change",
    "CountChange",
    "DiffConfig",
    "DiffResult",
    "ExchangeDiff",
    "LatencyRow",
    "PayloadDifference",
    "SideInfo",
    "Stats",
    "Summary",
    "assert_no_breaking_changes",
    "diff",
    "diff_sessions",
    "load_config",
    "parse_path",
    "parse_ref",
]
