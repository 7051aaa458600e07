"""Project configuration: ``[<section>]`` in ./mcprec.toml and ``[tool.mcprec.<section>]`` in
./pyproject.toml (or one explicit file). The one place that reads TOML."""

from __future__ import annotations

import os
from pathlib import Path
# typing is imported for type checkers only: at run time it cost replay's start-up ~3-5 ms
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

from .errors import UsageError

NO_TOML = "reading TOML needs Python 3.11+ or the tomli package (pip install tomli)"
SOURCES = (("mcprec.toml", ()), ("pyproject.toml", ("tool", "mcprec")))


def mentions(*words: bytes, cwd: str | os.PathLike[str] = ".") -> bool:
    """Whether ./mcprec.toml or ./pyproject.toml holds any of ``words`` at all: a substring
    test, far cheaper than parsing TOML (~10 ms), so that start-up parses only a file that may
    matter."""
    for name, _ in SOURCES:
        try:
            with open(os.path.join(cwd, name), "rb") as f:
                data = f.read()
            if any(w in data for w in words):
                return True
        except OSError:
            continue
    return False


def _toml_module() -> Any:
    """tomllib (or tomli on Python 3.10), imported only when there is a file to read."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]
        except ModuleNotFoundError:
            return None
    return tomllib


def sections(section: str, path: str | os.PathLike[str] | None = None,
             cwd: str | os.PathLike[str] = ".", warnings: list[str] | None = None,
             ) -> list[tuple[Path, dict[str, Any]]]:
    """Each ``(file, table)`` holding ``section``: the explicit ``path`` alone (which must have
    it), or else ./mcprec.toml then ./pyproject.toml. Files without TOML support are skipped
    with a warning (an explicit file is an error)."""
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise UsageError(f"config file {p} not found")
        if _toml_module() is None:
            raise UsageError(f"cannot read config file {p}: {NO_TOML}")
        table = read(p)
        found = table.get(section, dig(table, "tool", "mcprec", section))
        if found is None:
            raise UsageError(f"config file {p} has no [{section}] (or [tool.mcprec.{section}]) "
                             "table")
        return [(p, _table(found, p, section))]
    out = []
    for name, prefix in SOURCES:
        p = Path(cwd) / name
        if not p.is_file():
            continue
        if _toml_module() is None:
            if warnings is not None:
                warnings.append(f"{p} not read: {NO_TOML}")
            continue
        found = dig(read(p), *prefix, section)
        if found is not None:
            out.append((p, _table(found, p, section)))
    return out


def read(p: Path) -> dict[str, Any]:
    toml = _toml_module()
    assert toml is not None
    try:
        with open(p, "rb") as f:
            return toml.load(f)  # type: ignore[no-any-return]
    except OSError as e:
        raise UsageError(f"cannot read config file {p}: {e.strerror}") from e
    except toml.TOMLDecodeError as e:
        raise UsageError(f"config file {p} is not valid TOML: {e}") from e


def parse_text(text: str, source: str | os.PathLike[str]) -> dict[str, Any]:
    """TOML text from ``source`` (a file other than the config files, e.g. a scenario); a
    syntax error is one line: ``source:LINE: not valid TOML: ... (column C)``."""
    import re

    toml = _toml_module()
    if toml is None:
        raise UsageError(f"cannot read {source}: {NO_TOML}")
    try:
        return toml.loads(text)  # type: ignore[no-any-return]
    except toml.TOMLDecodeError as e:
        message = str(e)
    m = re.search(r"\s*\(at (?:line (\d+), column (\d+)|end of document)\)$", message)
    if m is None:
        raise UsageError(f"{source}: not valid TOML: {message}")
    line = m.group(1) or str(text.count("\n") + (not text.endswith("\n")))
    column = f" (column {m.group(2)})" if m.group(2) else " (at the end)"
    raise UsageError(f"{source}:{line}: not valid TOML: {message[:m.start()]}{column}")


def dig(table: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(table, dict) or k not in table:
            return None
        table = table[k]
    return table


def _table(found: Any, p: Path, section: str) -> dict[str, Any]:
    if not isinstance(found, dict):
        raise UsageError(f"config file {p}: the {section} settings must be a table")
    return {k.replace("_", "-"): v for k, v in found.items()}


def string_list(table: dict[str, Any], key: str, p: Path) -> list[str]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise UsageError(f"config file {p}: {key} must be a list of strings")
    return value
