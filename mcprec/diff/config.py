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

from ..errors import UsageError

try:
    import tomllib as _toml
except ModuleNotFoundError:  # Python 3.10
    try:
        import tomli as _toml  # type: ignore[no-redef,import-not-found,unused-ignore]
    except ModuleNotFoundError:
        _toml = None  # type: ignore[assignment]

NO_TOML = "reading TOML needs Python 3.11+ or the tomli package (pip install tomli)"
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
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise UsageError(f"config file {p} not found")
        if _toml is None:
            raise UsageError(f"cannot read config file {p}: {NO_TOML}")
        table = _read(p)
        found = table.get("diff", _dig(table, "tool", "mcprec", "diff"))
        if found is None:
            raise UsageError(f"config file {p} has no [diff] (or [tool.mcprec.diff]) table")
        _merge(config, _check(found, p), p)
        return config
    for name, keys in (("mcprec.toml", ("diff",)), ("pyproject.toml", ("tool", "mcprec", "diff"))):
        p = Path(cwd) / name
        if not p.is_file():
            continue
        if _toml is None:
            config.warnings.append(f"{p} not read: {NO_TOML}")
            continue
        found = _dig(_read(p), *keys)
        if found is not None:
            _merge(config, _check(found, p), p)
    return config


def _read(p: Path) -> dict[str, Any]:
    assert _toml is not None
    try:
        with open(p, "rb") as f:
            return _toml.load(f)
    except OSError as e:
        raise UsageError(f"cannot read config file {p}: {e.strerror}") from e
    except _toml.TOMLDecodeError as e:
        raise UsageError(f"config file {p} is not valid TOML: {e}") from e


def _dig(table: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(table, dict) or k not in table:
            return None
        table = table[k]
    return table


def _check(table: Any, p: Path) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise UsageError(f"config file {p}: the diff settings must be a table")
    out = {k.replace("_", "-"): v for k, v in table.items()}
    unknown = sorted(set(out) - set(KEYS))
    if unknown:
        raise UsageError(f"config file {p}: unknown diff setting(s) {', '.join(unknown)}; "
                         f"known: {', '.join(KEYS)}")
    ignore = out.get("ignore", [])
    if not isinstance(ignore, list) or not all(isinstance(x, str) for x in ignore):
        raise UsageError(f"config file {p}: ignore must be a list of JSON paths (strings)")
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
