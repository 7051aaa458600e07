"""``mcprec diff`` settings from TOML: ``--config FILE``, else ./mcprec.toml and ./pyproject.toml.

    # mcprec.toml (or --config FILE)          # pyproject.toml
    [diff]                                    [tool.mcprec.diff]
    ignore = ["$.result.contents[*].text"]    ignore = ["$..timestamp"]
    latency-threshold = 2.0
    latency-min-ms = 10
    fail-on-latency = false
    fail-on = "breaking"                      # breaking | warning | any (default any)
    surface-only = false
    normalize = ["timestamps", "uuids", "order_id"]

    [diff.normalizers]                        # custom kinds, for normalize and --normalize
    order_id = "ORD-[0-9]+"
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import sections, string_list
from ..errors import UsageError

KEYS = ("ignore", "latency-threshold", "latency-min-ms", "fail-on-latency", "fail-on",
        "surface-only", "normalize", "normalizers")
FAIL_ON = ("breaking", "warning", "any")


@dataclass
class DiffConfig:
    ignore: tuple[str, ...] = ()
    latency_threshold: float | None = None
    latency_min_ms: float | None = None
    fail_on_latency: bool | None = None
    fail_on: str | None = None
    surface_only: bool | None = None
    normalize: tuple[str, ...] = ()
    normalizers: dict[str, str] = field(default_factory=dict)
    """Custom kinds by name: a regular expression each."""
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
    for key in ("fail-on-latency", "surface-only"):
        if key in out and not isinstance(out[key], bool):
            raise UsageError(f"config file {p}: {key} must be true or false")
    if "fail-on" in out and out["fail-on"] not in FAIL_ON:
        raise UsageError(f"config file {p}: fail-on must be one of {', '.join(FAIL_ON)}; "
                         f"got {out['fail-on']!r}")
    string_list(out, "normalize", p)
    custom = out.get("normalizers", {})
    if not isinstance(custom, dict) or not all(isinstance(v, str) for v in custom.values()):
        raise UsageError(f"config file {p}: [diff.normalizers] must map names to regular "
                         'expressions, e.g. order_id = "ORD-[0-9]+"')
    from ..normalize import parse_custom

    for name, regex in custom.items():
        parse_custom(name, regex, f"config file {p}")
    return out


def _merge(config: DiffConfig, table: dict[str, Any], source: Path) -> None:
    """Ignores and normalizers add up; for the other settings the first file that sets them
    wins (a custom normalizer too, by name)."""
    config.sources.append(source)
    config.ignore += tuple(x for x in table.get("ignore", []) if x not in config.ignore)
    if config.latency_threshold is None and "latency-threshold" in table:
        config.latency_threshold = float(table["latency-threshold"])
    if config.latency_min_ms is None and "latency-min-ms" in table:
        config.latency_min_ms = float(table["latency-min-ms"])
    if config.fail_on_latency is None and "fail-on-latency" in table:
        config.fail_on_latency = table["fail-on-latency"]
    if config.fail_on is None and "fail-on" in table:
        config.fail_on = table["fail-on"]
    if config.surface_only is None and "surface-only" in table:
        config.surface_only = table["surface-only"]
    config.normalize += tuple(x for x in table.get("normalize", [])
                              if x not in config.normalize)
    for name, regex in table.get("normalizers", {}).items():
        config.normalizers.setdefault(name, regex)
