"""The layout docs/architecture.md describes is the layout of the code: its layers, checked row
by row against every import (at module level and inside functions), no cycle between packages,
every path it names present, SQL and printing where the page says they are, modules small
enough to read in one sitting."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from support.helpers import REPO

PKG = REPO / "mcprec"
DOC = REPO / "docs" / "architecture.md"
MAX_LINES = 700
RULE_TABLES: frozenset[str] = frozenset()
"""Modules allowed past MAX_LINES because they are tables of rules, not logic (none today)."""


def _unit(module: str) -> str:
    """The top-level unit a dotted module belongs to: ``cassette`` for ``mcprec.cassette.store``,
    ``wire.py`` for ``mcprec.wire``, ``__init__.py`` for ``mcprec``."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__.py"
    if (PKG / parts[1]).is_dir():
        return parts[1] + "/"
    return parts[1] + ".py"


@cache
def _modules() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(REPO).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(module: str, path: Path) -> set[str]:
    """The mcprec modules ``module`` imports, wherever in it (functions included)."""
    mods = _modules()
    is_pkg = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_pkg else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            targets = [target] + [f"{target}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            if not t.startswith("mcprec"):
                continue
            while t not in mods and "." in t:
                t = t.rsplit(".", 1)[0]
            if t in mods and t not in (module, "mcprec"):  # the root: every import passes it
                out.add(t)
    return out


@cache
def _graph() -> dict[str, set[str]]:
    return {m: _imports(m, p) for m, p in _modules().items()}


@cache
def _layers() -> list[tuple[str, list[str]]]:
    """(layer, units) for each row of the doc's layer table, in order."""
    text = DOC.read_text()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] in ("layer", "---") or set(cells[0]) <= {"-"}:
            continue
        rows.append((cells[0], re.findall(r"`([^`]+)`", cells[1])))
    assert rows, "docs/architecture.md has no layer table"
    return rows


def _layer_of() -> dict[str, int]:
    return {unit: i for i, (_, units) in enumerate(_layers()) for unit in units}


def test_every_top_level_module_and_package_has_a_layer() -> None:
    """A new top-level module or package is placed in the doc's layer table."""
    units = {p.name + ("/" if p.is_dir() else "") for p in PKG.iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"}
    placed = _layer_of()
    assert sorted(units - set(placed)) == [], "add them to docs/architecture.md's layers"
    assert sorted(set(placed) - units) == [], "the doc names units that do not exist"


@pytest.mark.parametrize("row", [name for name, _ in _layers()])
def test_a_layer_imports_only_itself_and_the_layers_above(row: str) -> None:
    """Each module of a row imports modules of its own row or of rows above it."""
    layer = _layer_of()
    index = next(i for i, (name, _) in enumerate(_layers()) if name == row)
    wrong = []
    for module, targets in _graph().items():
        if layer.get(_unit(module)) != index:
            continue
        for t in targets:
            if layer.get(_unit(t), -1) > index:
                wrong.append(f"{module} -> {t} ({_layers()[layer[_unit(t)]][0]})")
    assert wrong == []


def test_no_import_cycle_between_packages() -> None:
    """Packages and top-level modules import each other without a cycle."""
    edges: dict[str, set[str]] = {}
    for module, targets in _graph().items():
        a = _unit(module)
        for t in targets:
            b = _unit(t)
            if a != b and "__init__.py" not in (a, b):
                edges.setdefault(a, set()).add(b)
    seen: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, stack: list[str]) -> bool:
        seen[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if seen.get(nxt) == 1:
                cycle.extend(stack[stack.index(nxt):] + [node, nxt])
                return True
            if nxt not in seen and visit(nxt, stack + [nxt]):
                return True
        seen[node] = 2
        return False

    for node in sorted(edges):
        if node not in seen and visit(node, [node]):
            break
    assert cycle == []


def test_every_path_the_doc_names_exists() -> None:
    """Each module or package path docs/architecture.md names is in the tree."""
    names = set(re.findall(r"`([\w/]+(?:\.py|/))`", DOC.read_text()))
    names |= {m.group(1) for m in re.finditer(r"\]\(\.\./mcprec/([\w/.]+)\)", DOC.read_text())}
    every = {str(p.relative_to(PKG)) + ("/" if p.is_dir() else "") for p in PKG.rglob("*")
             if "__pycache__" not in p.parts}
    def exists(name: str) -> bool:
        if name.split("/")[0] in ("tests", "docs", "scripts", "bench", "examples"):
            return (REPO / name).exists()
        name = name.removeprefix("mcprec/")
        return name in every or any(e.endswith("/" + name) for e in every)

    missing = [n for n in sorted(names) if not exists(n)]
    assert missing == []


def test_only_the_cassette_package_imports_sqlite3() -> None:
    """All the SQL lives in cassette/: nothing else imports sqlite3."""
    found = []
    for module, path in _modules().items():
        if _unit(module) == "cassette/":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import) and any(a.name == "sqlite3" for a in node.names):
                found.append(module)
            if isinstance(node, ast.ImportFrom) and node.module == "sqlite3":
                found.append(module)
    assert found == []


def test_library_code_never_prints() -> None:
    """Only the command line prints for a person; the library reports through _log and
    callbacks (a program's ``if __name__ == "__main__"`` block aside)."""
    front = {"cli/", "_entry.py", "__main__.py"}
    found = []
    for module, path in _modules().items():
        if _unit(module) in front:
            continue
        tree = ast.parse(path.read_text())
        main_blocks = [n for n in tree.body if isinstance(n, ast.If)
                       and "__main__" in ast.unparse(n.test)]
        skip = {id(x) for b in main_blocks for x in ast.walk(b)}
        for node in ast.walk(tree):
            if id(node) in skip or not isinstance(node, ast.Call):
                continue
            name = ast.unparse(node.func)
            if name in ("print", "click.echo", "click.secho"):
                found.append(f"{module}:{node.lineno} {name}")
    assert found == []


def test_modules_are_small_enough_to_read() -> None:
    """No module past 700 lines, but tables of rules."""
    long = {str(p.relative_to(REPO)): n for p in PKG.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES
            and str(p.relative_to(REPO)) not in RULE_TABLES}
    assert long == {}
