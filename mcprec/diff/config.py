"""``mcprec diff`` settings from TOML: ``--config FILE``, else ./mcprec.toml and ./pyproject.toml.

    # mcprec.toml (or --config FILE)          # pyproject.toml
    [diff]                                    [tool.mcprec.diff]
    ignore = ["$.result.contents[*].text"]    ignore = ["$..timestamp"]
    latency-threshold = 2.0
    latency-min-ms = 10
    fail-on-latency = false
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import sections, string_list
from ..errors import UsageError

KEYS = ("ignore", "latency-threshold", "latency-min-ms", "fail-on-latency")


@dataclass
class DiffConfig:
    ignore: tuple[str, ...] = ()
    latency_threshold: float | None = None
    latency_min_ms: float | None = None
    fail_on_latency: bool | None = None
    sources: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def load_config(path: str | os.PathLike[str] | None = None,
                cwd: str | os.PathLike[str] = ".") -> DiffConfig:
    """The explicit ``path`` alone, or else ./mcprec.toml then ./pyproject.toml, merged."""
    config = DiffConfig()
    for p, table in sections("diff", path, cwd, config.warnings):
        _merge(config, _check(table, p), p)
    return config


def _check(out: dict[str, Any], p: Path) -> dict[str, Any]:
    unknown = sorted(set(out) - set(KEYS))
    if unknown:
        raise UsageError(f"config file {p}: unknown diff setting(s) {', '.join(unknown)}; "
                         f"known: {', '.join(KEYS)}")
    string_list(out, "ignore", p)
    for key in ("latency-threshold", "latency-min-ms"):
        if key in out and (isinstance(out[key], bool) or not isinstance(out[key], (int, float))):
            raise UsageError(f"config file {p}: {key} must be a number")
    if "fail-on-latency" in out and not isinstance(out["fail-on-latency"], bool):
        raise UsageError(f"config file {p}: fail-on-latency must be true or false")
    return out


def _merge(config: DiffConfig, table: dict[str, Any], source: Path) -> None:
    """Ignores add up; for the other settings the first file that sets them wins."""
    config.sources.append(source)
    config.ignore += tuple(x for x in table.get("ignore", []) if x not in config.ignore)
    if config.latency_threshold is None and "latency-threshold" in table:
        config.latency_threshold = float(table["latency-threshold"])
    if config.latency_min_ms is None and "latency-min-ms" in table:
        config.latency_min_ms = float(table["latency-min-ms"])
    if config.fail_on_latency is None and "fail-on-latency" in table:
        config.fail_on_latency = table["fail-on-latency"]
