"""Declared runtime dependencies are used: each one is imported by mcprec, or is named here
with the reason it is declared all the same; docs/dependencies.md names each with its reason."""

from __future__ import annotations

import ast
import sys

import pytest
from packaging.requirements import Requirement

from support.helpers import REPO

NOT_IMPORTED = {
    "sniffio": "httpcore looks for it on every lock; without it each look costs ~50 µs",
}
DESIGNED_OUT = ("aiofiles", "sqlite-utils")
"""Named by the design, not runtime dependencies: docs/dependencies.md says why."""


def declared() -> list[str]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        tomllib = pytest.importorskip("tomli")
    with open(REPO / "pyproject.toml", "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    return [Requirement(d).name.lower().replace("-", "_") for d in deps]


def imported() -> set[str]:
    """Top-level names of the modules that mcprec's own code imports (inside functions too)."""
    names: set[str] = set()
    for path in (REPO / "mcprec").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def test_every_runtime_dependency_is_imported_or_explained() -> None:
    """A dependency nothing imports (as sqlite-utils was) fails here until it is used or dropped."""
    unused = sorted(set(declared()) - imported() - set(NOT_IMPORTED))
    assert not unused, f"declared in pyproject.toml but imported by no module of mcprec: {unused}"


def test_the_explained_ones_are_still_declared_and_still_not_imported() -> None:
    """The list of exceptions holds no dependency that has since been dropped, nor one that a
    module imports after all (uvloop was listed long after transports/stdio.py imported it)."""
    assert set(NOT_IMPORTED) <= set(declared())
    stale = sorted(set(NOT_IMPORTED) & imported())
    assert not stale, f"imported by mcprec, no longer an exception: {stale}"


def test_the_designed_out_ones_stay_out_of_the_runtime() -> None:
    """aiofiles and sqlite-utils are neither declared nor imported (docs/dependencies.md)."""
    for name in DESIGNED_OUT:
        module = name.replace("-", "_")
        assert module not in declared() and module not in imported(), name


def test_the_page_gives_each_dependency_its_reason() -> None:
    """docs/dependencies.md has a row for every runtime dependency and for the two designed
    out, and the README links it."""
    page = (REPO / "docs" / "dependencies.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip().strip("`").lower().replace("-", "_")
            for line in page.splitlines() if line.startswith("| `")}
    assert rows == set(declared()) | {d.replace("-", "_") for d in DESIGNED_OUT}
    assert "docs/dependencies.md" in (REPO / "README.md").read_text(encoding="utf-8")
