"""`mcprec replay` answers the same through the click-free fast path and the full command line:
the same exit codes and messages for good and bad invocations; and replay is strict by
default (exit 3 after an unmatched request)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.helpers import LINE_SERVER, recorded

FULL = [sys.executable, "-c",
        "import sys; from mcprec.cli import main; sys.argv[0] = 'mcprec'; main()"]
FAST = [sys.executable, "-m", "mcprec"]
INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"}}}).encode() + b"\n"
UNKNOWN = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "never-recorded"}}).encode() + b"\n"


def run(prefix: list[str], *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPREC_")}
    return subprocess.run([*prefix, *args], input=stdin, capture_output=True, env=env,
                          timeout=60, check=False)


@pytest.fixture(scope="module")
def cassette(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session of tests/peers/line_server.py: one initialize."""
    path = tmp_path_factory.mktemp("entry") / "c.db"
    out = subprocess.run(recorded(path, sys.executable, str(LINE_SERVER), extra=("-s", "one")),
                         input=INIT, capture_output=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    return path


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bad")
    (d / "empty.db").touch()
    (d / "junk.db").write_bytes(b"not a database at all" * 100)
    (d / "dir.db").mkdir()
    return {"empty": d / "empty.db", "junk": d / "junk.db", "dir": d / "dir.db",
            "missing": d / "missing.db"}


@pytest.mark.parametrize("case", [
    ["{cassette}"],
    ["{cassette}", "-s", "one"],
    ["{cassette}", "--session", "nope"],
    ["{cassette}", "--mode", "none", "--timing", "none", "--repeat", "last"],
    ["{cassette}", "--allow-unmatched"],
    ["{empty}"], ["{junk}"], ["{dir}"], ["{missing}"],
    ["-c", "{cassette}"], ["--cassette", "{cassette}", "-s", "one"], ["-c", "{missing}"],
    ["-c", "{dir}"],
])
def test_fast_path_and_full_command_line_agree(case: list[str], cassette: Path,
                                               bad_files: dict[str, Path]) -> None:
    """Same exit code, stdout and stderr through both entry points."""
    args = [a.format(cassette=cassette, **bad_files) for a in case]
    fast = run(FAST, "replay", *args, stdin=INIT)
    full = run(FULL, "replay", *args, stdin=INIT)
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        full.returncode, full.stdout, full.stderr)
    assert b"Traceback" not in fast.stderr


def test_unmatched_request_exits_3_with_a_summary(cassette: Path) -> None:
    """The client gets its error, and replay then exits 3 and says why in one line."""
    out = run(FAST, "replay", str(cassette), stdin=INIT + UNKNOWN)
    assert out.returncode == 3
    answers = [json.loads(line) for line in out.stdout.splitlines()]
    assert answers[1]["id"] == 2 and "no recorded response" in answers[1]["error"]["message"]
    last = out.stderr.decode().strip().splitlines()[-1]
    assert last == ("mcprec: 1 request had no recorded match (the first: id=2 tools/call); "
                    "exit 3 (--allow-unmatched to exit 0)")


def test_allow_unmatched_exits_0(cassette: Path) -> None:
    """--allow-unmatched keeps the exit code 0 after an unmatched request."""
    out = run(FAST, "replay", str(cassette), "--allow-unmatched", stdin=INIT + UNKNOWN)
    assert out.returncode == 0


def test_cassette_option_leaves_the_server_command_whole(tmp_path: Path) -> None:
    """``replay -c FILE -m once -- SERVER...`` (as ``record -c FILE -- SERVER...``): the
    server's first word is not taken for the cassette; a missing cassette is recorded."""
    path = tmp_path / "once.db"
    out = run(FULL, "replay", "-c", str(path), "-m", "once", "--", sys.executable,
              str(LINE_SERVER), stdin=INIT)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[0])["id"] == 1
    again = run(FAST, "replay", "-c", str(path), stdin=INIT)
    assert again.returncode == 0 and again.stdout == out.stdout
    missing = run(FULL, "replay", "-s", "x")
    assert missing.returncode == 2
    assert missing.stderr.decode().strip() == (
        "mcprec: Missing argument 'CASSETTE' (or -c FILE). (see `mcprec replay --help`)")
