"""Text from a recording never reaches the terminal raw: a real server whose name, version,
instructions, tool description and stderr hold escape sequences (set the title, clear the
screen, move the cursor), recorded, then looked at with every command."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from support.helpers import PEERS, record_scenario, run_mcprec
from mcprec.terminal import safe, safe_lines

HOSTILE = "\x1b]0;title\x07\x1b[2J\x1b[1A"
ESCAPE_SERVER = [sys.executable, str(PEERS / "escape_server.py")]
RAW = (b"\x1b", b"\x07", "\x9b".encode(), "\u202e".encode())


def _clean(out: bytes) -> bool:
    return not any(c in out for c in RAW)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cassette of the escape server: session ``a<ESC…>`` (v1) and ``b`` (v2, another
    description), and a session whose client sent a method full of escapes."""
    cassette = tmp_path_factory.mktemp("escape") / "e.db"

    async def scenario(s: object, run: object) -> None:
        await s.list_tools()  # type: ignore[attr-defined]
        await s.call_tool("echo", {"text": "hi" + HOSTILE})  # type: ignore[attr-defined]

    record_scenario(cassette, "a" + HOSTILE, ESCAPE_SERVER, scenario)
    record_scenario(cassette, "b", ESCAPE_SERVER, scenario,
                    env={"MCPREC_TEST_SERVER_VARIANT": "v2"})
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "c" + HOSTILE, "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "x/" + HOSTILE, "params": {}}]
    done = run_mcprec("record", "-c", str(cassette), "-s", "m", "--", *ESCAPE_SERVER,
                      input=b"".join(json.dumps(m).encode() + b"\n" for m in lines))
    assert done.returncode == 0, done.stderr
    return cassette


def test_safe_escapes_every_control_character() -> None:
    """safe() makes C0, DEL, C1 and bidi controls visible; safe_lines() keeps line feeds."""
    assert safe(HOSTILE) == "\\x1b]0;title\\x07\\x1b[2J\\x1b[1A"
    assert safe("a\nb\r\t\x7f\x9b\u202e") == "a\\nb\\r\\t\\x7f\\x9b\\u202e"
    assert safe_lines("a\nb\x1b") == "a\nb\\x1b"
    assert safe("plain é ✓") == "plain é ✓"


def test_no_command_prints_raw_escapes(hostile: Path) -> None:
    """sessions, show, diff, verify, lint and scan, in every text format: no ESC, BEL, C1 or
    bidi control from the recording."""
    c = str(hostile)
    runs = {
        "sessions": ["sessions", c],
        "sessions --json": ["sessions", c, "--json"],
        "show": ["show", c, "-s", "a" + HOSTILE, "--body", "--stderr"],
        "show m": ["show", c, "m", "--body"],
        "show --tools": ["show", c, "b", "--tools"],
        "show --json": ["show", c, "b", "--json", "--body"],
        "show missing": ["show", c, "nope" + HOSTILE],
        "diff": ["diff", f"{c}:a{HOSTILE}", f"{c}:b"],
        "diff md": ["diff", f"{c}:a{HOSTILE}", f"{c}:b", "--format", "markdown"],
        "diff github": ["diff", f"{c}:a{HOSTILE}", f"{c}:b", "--format", "github"],
        "verify": ["verify", c, "-s", "b", "--", *ESCAPE_SERVER],
        "verify all": ["verify", c, "--all", "--", *ESCAPE_SERVER],
        "lint": ["lint", c, "--all"],
        "lint md": ["lint", c, "--all", "--format", "markdown"],
        "lint github": ["lint", c, "--all", "--format", "github"],
        "scan": ["scan", c],
    }
    for what, args in runs.items():
        done = run_mcprec(*args)
        assert done.returncode in (0, 1, 2), (what, done.stderr)
        assert _clean(done.stdout) and _clean(done.stderr), (what, done.stdout, done.stderr)
    shown = run_mcprec("show", c, "-s", "a" + HOSTILE, "--stderr").stdout.decode()
    assert "evil\\x1b]0;title\\x07" in shown and "\\u202eoops" in shown


def test_colour_codes_are_ours_only(hostile: Path) -> None:
    """diff --color: every escape sequence in the report is a colour code of mcprec's."""
    done = run_mcprec("diff", f"{hostile}:a{HOSTILE}", f"{hostile}:b", "--color")
    out = done.stdout.decode()
    assert done.returncode == 1 and "\x1b[31m" in out, done.stderr
    assert "\x07" not in out and re.sub(r"\x1b\[[0-9]+m", "", out).count("\x1b") == 0
    assert "evil\\x1b]0;title" in out


def test_replay_stderr_is_safe(hostile: Path) -> None:
    """replay: the recorded stderr lines and the no-match hint (naming recorded and asked-for
    methods full of escapes) reach stderr escaped; the answers stay byte-exact."""
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "c" + HOSTILE, "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "x/" + HOSTILE + "y", "params": {}}]
    for session in ("m", "a" + HOSTILE):
        done = run_mcprec("replay", str(hostile), "-s", session,
                          input=b"".join(json.dumps(m).encode() + b"\n" for m in lines))
        assert done.returncode == 3, done.stderr
        assert _clean(done.stderr), done.stderr
        assert b"no recorded response matches" in done.stderr
    assert b"starting\\x1b]0;title" in done.stderr  # the recorded server's stderr, escaped
    assert b'"name":"evil\\u001b]0;title\\u0007' in done.stdout  # the recorded answer, exact
