"""Looking into a cassette: `show --method GLOB --grep REGEX --tools`, and the unanswered-request
count of `sessions`. The cassettes are real recordings: the SDK server driven by the SDK client,
and tests/peers/line_server.py crashing before it answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.helpers import LINE_SERVER, SDK_SERVER, record_scenario, recorded, run_mcprec


async def _scenario(session: Any, run: Any) -> None:
    await session.list_tools()
    await session.call_tool("echo", {"text": "hello Paris"})
    await session.call_tool("add", {"a": 2, "b": 3})


@pytest.fixture(scope="module")
def cassette(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("show") / "sdk.db"
    record_scenario(path, "sdk", [sys.executable, str(SDK_SERVER)], _scenario)
    return path


def _json_lines(out: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_method_glob_keeps_only_those_methods(cassette: Path) -> None:
    """--method 'tools/*' keeps tools/list and tools/call, requests and answers, nothing else."""
    out = run_mcprec("show", str(cassette), "--json", "--method", "tools/*")
    assert out.returncode == 0, out.stderr
    rows = _json_lines(out.stdout)
    assert {r["method"] for r in rows} == {"tools/list", "tools/call"}
    assert {r["kind"] for r in rows} == {"request", "response"}
    assert len(rows) == 6
    assert b"6 of " in out.stderr


def test_method_is_repeatable(cassette: Path) -> None:
    """Two --method options: messages of either method."""
    out = run_mcprec("show", str(cassette), "--json", "--method", "initialize",
                     "--method", "tools/list")
    assert {r["method"] for r in _json_lines(out.stdout)} == {"initialize", "tools/list"}


def test_grep_matches_the_json_text(cassette: Path) -> None:
    """--grep keeps the messages whose JSON text matches: the call and its answer."""
    out = run_mcprec("show", str(cassette), "--json", "--body", "--grep", r"hello P\w+s")
    rows = _json_lines(out.stdout)
    assert [r["kind"] for r in rows] == ["request", "response"]
    assert all("hello Paris" in r["raw"] for r in rows)


def test_grep_and_method_both_hold(cassette: Path) -> None:
    """--grep with --method: only messages matching both."""
    out = run_mcprec("show", str(cassette), "--json", "--method", "tools/call",
                     "--grep", '"name":"add"')
    rows = _json_lines(out.stdout)
    assert [(r["method"], r["kind"]) for r in rows] == [("tools/call", "request")]


def test_tools_lists_names_descriptions_and_input(cassette: Path) -> None:
    """--tools: each listed tool with its description and input schema in short."""
    out = run_mcprec("show", str(cassette), "--tools")
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode()
    assert "add(a: integer, b: integer)\n    Add two integers." in text
    assert "slow(steps?: integer, delay_ms?: integer)" in text


def test_tools_json_carries_the_schema(cassette: Path) -> None:
    """--tools --json: one object per tool, with the full inputSchema."""
    out = run_mcprec("show", str(cassette), "--tools", "--json")
    tools = {t["name"]: t for t in _json_lines(out.stdout)}
    assert tools["echo"]["inputSchema"]["required"] == ["text"]
    assert tools["echo"]["input"] == "text: string"


@pytest.mark.parametrize("args", [["--grep", "("], ["--tools", "--method", "x"]])
def test_bad_filters_are_one_line(cassette: Path, args: list[str]) -> None:
    """A bad regular expression, or --tools with a timeline filter: one line, exit 2."""
    out = run_mcprec("show", str(cassette), *args)
    assert out.returncode == 2
    assert out.stderr.decode().count("\n") == 1 and b"Traceback" not in out.stderr


def test_sessions_counts_unanswered_requests(tmp_path: Path) -> None:
    """A server that died with a request in flight: sessions shows 1 unanswered, --json too."""
    path = tmp_path / "crash.db"
    lines = b"".join(json.dumps(o).encode() + b"\n" for o in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "x"}}))
    subprocess.run(recorded(path, sys.executable, str(LINE_SERVER), "--crash-after", "2", "3",
                            extra=("-s", "crash")), input=lines, capture_output=True,
                   timeout=60, check=False)
    table = run_mcprec("sessions", str(path)).stdout.decode().splitlines()
    at = table[0].index("UNANS")  # columns are aligned; the target has spaces
    assert table[1][at:].split()[0] == "1"
    listed = json.loads(run_mcprec("sessions", str(path), "--json").stdout)
    assert listed[0]["unanswered"] == 1


def test_sessions_counts_zero_when_all_answered(cassette: Path) -> None:
    """Every request answered: the count is 0."""
    listed = json.loads(run_mcprec("sessions", str(cassette), "--json").stdout)
    assert listed[0]["unanswered"] == 0
