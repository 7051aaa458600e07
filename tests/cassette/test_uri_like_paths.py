"""A cassette named like an SQLite URI (``-c file:z.db``) is a plain file of that name."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from support.helpers import SDK_SERVER, run_mcprec

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}


def test_file_colon_name_is_a_path(tmp_path: Path) -> None:
    """record -c file:z.db writes ./file:z.db (no z.db), and sessions, show and replay read it."""
    line = json.dumps(INIT).encode() + b"\n"
    done = run_mcprec("record", "-c", "file:z.db", "-s", "s", "--", sys.executable,
                      str(SDK_SERVER), input=line, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "file:z.db").stat().st_size > 0
    assert not (tmp_path / "z.db").exists()
    listed = run_mcprec("sessions", "file:z.db", cwd=tmp_path)
    assert listed.returncode == 0 and b"complete" in listed.stdout, listed.stderr
    replayed = run_mcprec("replay", "file:z.db", input=line, cwd=tmp_path)
    assert replayed.returncode == 0 and b'"id":0' in replayed.stdout, replayed.stderr
    assert not (tmp_path / "z.db").exists()
