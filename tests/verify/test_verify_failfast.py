"""`mcprec verify` against a server that never answers, exits or refuses: one line, exit 2,
within --timeout plus a few seconds, and the cassette left as it was, byte for byte."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from support.helpers import MCPREC, copy_cassette


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("how", ["hung", "exits", "refused", "not-found"])
def test_a_failed_verify_is_one_line_fast_and_stores_nothing(sdk_recordings: Any,
                                                             tmp_path: Path, how: str) -> None:
    """`verify --timeout 3 -- sleep 100` (and a server that exits, a refused --target, a
    command not found): exit 2 within 8 s, one line on stderr, the cassette unchanged."""
    cassette = copy_cassette(sdk_recordings.main.cassette, tmp_path / "c.db")
    before = digest(cassette)
    server = {"hung": ["--", "sleep", "100"],
              "exits": ["--", sys.executable, "-c", "import sys; sys.exit(3)"],
              "refused": ["--target", "http://127.0.0.1:1/mcp"],
              "not-found": ["--", str(tmp_path / "no-such-server")]}[how]
    t0 = time.monotonic()
    done = subprocess.run([*MCPREC, "verify", str(cassette), "--timeout", "3", *server],
                          capture_output=True, timeout=60, check=False)
    took = time.monotonic() - t0
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert took < 8, took
    assert err.count("\n") == 1 and err.startswith("mcprec: ") and "Traceback" not in err
    if how == "hung":
        assert "did not answer initialize within 3 s" in err
    assert not done.stdout
    assert digest(cassette) == before
    assert not Path(f"{cassette}-wal").exists() or Path(f"{cassette}-wal").stat().st_size == 0
