"""Declared runtime dependencies are used: each one is imported by mcprec, or is named here
with the reason it is declared all the same."""

from __future__ import annotations

import ast
import sys

import pytest
from packaging.requirements import Requirement

from helpers import REPO

NOT_IMPORTED = {
    "sniffio": "httpcore looks for it on every lock; without it each look costs ~50 µs",
    "uvloop": "uvicorn runs its event loop on uvloop when it is installed",
}


def declared() -> list[str]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        tomllib = pytest.importorskip("tomli")
    with open(REPO / "pyproject.toml", "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    return [Requirement(d).name.lower().replace("-", "_") for d in deps]


def imported() -> set[str]:
    """Top-level names of the modules that mcprec's own code imports."""
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


def test_the_explained_ones_are_still_declared() -> None:
    """The list of exceptions holds no dependency that has since been dropped."""
    assert set(NOT_IMPORTED) <= set(declared())
