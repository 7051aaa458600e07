"""The repository's .pre-commit-hooks.yaml: it parses, and every hook's entry is a real mcprec
command that takes the staged file names as pre-commit passes them, run here on real cassettes
(a recording of the SDK server by the SDK client; the same with a token put into it)."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.helpers import REPO, SDK_SERVER, record_scenario, run_mcprec

HOOKS_FILE = REPO / ".pre-commit-hooks.yaml"
TOKEN = "ghp_aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3z5A"  # the shape of a GitHub token


def hooks() -> list[dict[str, Any]]:
    found = yaml.safe_load(HOOKS_FILE.read_text(encoding="utf-8"))
    assert isinstance(found, list)
    return found


async def _scenario(session: Any, run: Any) -> None:
    await session.list_tools()
    await session.call_tool("echo", {"text": "hello"})


@pytest.fixture(scope="module")
def cassettes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A clean cassette, a second one, and one holding a token (imported from an edited dump)."""
    d = tmp_path_factory.mktemp("hooks") / "cassettes"
    d.mkdir()
    clean, other = d / "clean.db", d / "other.db"
    for path in (clean, other):
        record_scenario(path, "s", [sys.executable, str(SDK_SERVER)], _scenario)
    dump = run_mcprec("export", str(clean)).stdout.replace(b"hello", TOKEN.encode())
    assert TOKEN.encode() in dump
    dirty = d / "dirty.db"
    dump_file = d.parent / "dirty.jsonl"
    dump_file.write_bytes(dump)
    assert run_mcprec("import", str(dump_file), str(dirty)).returncode == 0
    return {"clean": clean, "other": other, "dirty": dirty}


def _run_entry(hook: dict[str, Any], *files: Path) -> Any:
    argv = shlex.split(hook["entry"]) + list(hook.get("args", []))
    assert argv[0] == "mcprec", hook["entry"]
    return run_mcprec(*argv[1:], *(str(f) for f in files))


def test_the_file_parses_into_hooks() -> None:
    """A YAML list of hooks, each with the keys pre-commit requires, ids unique."""
    found = hooks()
    assert {h["id"] for h in found} == {"mcprec-scan", "mcprec-lint"}
    for h in found:
        assert {"id", "name", "entry", "language"} <= set(h)
        assert h["language"] == "python"  # pre-commit installs this repository: mcprec itself


@pytest.mark.parametrize("path,matched", [
    ("cassettes/weather.db", True), ("tests/cassettes/test_x/test_y.db", True),
    ("cassettes/notes.md", False), ("data/app.db", False)])
def test_files_pattern_picks_cassettes(path: str, matched: bool) -> None:
    """files: matches where mcprec puts cassettes (cassettes/…/*.db) and nothing else."""
    for h in hooks():
        assert bool(re.search(h["files"], path)) is matched


@pytest.mark.parametrize("hook_id", ["mcprec-scan", "mcprec-lint"])
def test_each_entry_passes_clean_cassettes(hook_id: str, cassettes: dict[str, Path]) -> None:
    """The entry, given two clean cassettes as file arguments, exits 0."""
    hook = next(h for h in hooks() if h["id"] == hook_id)
    out = _run_entry(hook, cassettes["clean"], cassettes["other"])
    assert out.returncode == 0, out.stdout + out.stderr


def test_scan_entry_fails_on_a_token(cassettes: dict[str, Path]) -> None:
    """The scan hook fails (exit 1) when one of the files holds a token, and names it."""
    hook = next(h for h in hooks() if h["id"] == "mcprec-scan")
    out = _run_entry(hook, cassettes["clean"], cassettes["dirty"])
    assert out.returncode == 1
    assert b"dirty.db" in out.stdout and b"clean.db" not in out.stdout
    assert b"GitHub token" in out.stdout
