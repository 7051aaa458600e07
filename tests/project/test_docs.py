"""The docs: the generated CLI reference is current, every command is documented, and every
relative link in README.md and docs/*.md leads somewhere."""

from __future__ import annotations

import importlib.util
import re
import unicodedata
from pathlib import Path
from types import ModuleType

import click
import pytest

from mcprec.cli import cli

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_cli_docs", REPO / "scripts" / "gen_cli_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cli_md() -> str:
    return (DOCS / "cli.md").read_text(encoding="utf-8")


def test_cli_reference_is_up_to_date(cli_md: str) -> None:
    """docs/cli.md is exactly what scripts/gen_cli_docs.py writes from the current --help."""
    expected = _load_generator().render()
    assert cli_md == expected, (
        "docs/cli.md is out of date with the CLI's --help: run `python scripts/gen_cli_docs.py` "
        "and commit docs/cli.md"
    )


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_command_has_help_and_is_documented(name: str, cli_md: str) -> None:
    """Every command has help, every option of it has help, and docs/cli.md has its section."""
    command = cli.commands[name]
    assert (command.help or "").strip(), f"`mcprec {name}` has no help text"
    undocumented = [p.name for p in command.params
                    if isinstance(p, click.Option) and not (p.help or "").strip()]
    assert not undocumented, f"`mcprec {name}` options without help: {undocumented}"
    assert f"\n## mcprec {name}\n" in cli_md, f"docs/cli.md has no section for `mcprec {name}`"


# --- links -----------------------------------------------------------------------------------

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def _prose(text: str) -> str:
    """The page without code blocks and code spans, where brackets are not links."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def _anchors(text: str) -> set[str]:
    """The anchors GitHub gives the page's headings."""
    seen: dict[str, int] = {}
    out = set()
    for heading in _HEADING.findall(_FENCE.sub("", text)):
        plain = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
        slug = "".join(ch for ch in plain if ch in " -_" or unicodedata.category(ch)[0] in "LN")
        slug = slug.replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(page: Path) -> list[str]:
    return _LINK.findall(_prose(page.read_text(encoding="utf-8")))


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_relative_links_resolve(page: Path) -> None:
    """Every relative link (and #anchor) in the page points at an existing file (and heading)."""
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:, ...
            continue
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(f"{target} (no such file: {dest.relative_to(REPO)})"
                          if dest.is_relative_to(REPO) else f"{target} (outside the repo)")
            continue
        if anchor and dest.suffix == ".md" and anchor not in _anchors(dest.read_text("utf-8")):
            broken.append(f"{target} (no heading with anchor #{anchor} in "
                          f"{dest.relative_to(REPO)})")
    assert not broken, f"broken links in {page.relative_to(REPO)}:\n  " + "\n  ".join(broken)


def test_docs_index_links_every_page() -> None:
    """docs/index.md links every page under docs/, so none is an orphan."""
    linked = {(DOCS / t.partition("#")[0]).resolve() for t in _links(DOCS / "index.md")}
    orphans = [p.name for p in DOCS.glob("*.md") if p.name != "index.md" and p.resolve() not in linked]
    assert not orphans, f"docs/index.md does not link: {orphans}"
