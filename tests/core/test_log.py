"""The library's notices go through logging; the command line shows them as one line each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any


from mcprec.cassette import Cassette

ROOT = Path(__file__).resolve().parents[2]


def test_library_notice_reaches_logging_not_stderr(tmp_path: Path, caplog: Any,
                                                   capsys: Any) -> None:
    """A notice from library code is a log record under ``mcprec.*``, not a print."""
    caplog.set_level("INFO", logger="mcprec")
    with Cassette.open(tmp_path / "new" / "dir" / "c.db", create=True):
        pass
    records = [r for r in caplog.records if r.name == "mcprec.cassette"]
    assert records and "created directory" in records[0].getMessage()
    assert "created directory" not in capsys.readouterr().err


def test_command_line_shows_notices_as_one_prefixed_line(tmp_path: Path) -> None:
    """``mcprec record`` prints a library notice on stderr as ``mcprec: <text>``, once."""
    cassette = tmp_path / "new" / "c.db"
    done = subprocess.run([sys.executable, "-m", "mcprec", "record", "-c", str(cassette), "--",
                           sys.executable, "-c", "pass"], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL, check=False)
    notices = [ln for ln in done.stderr.splitlines() if "created directory" in ln]
    assert notices == [f"mcprec: created directory {cassette.parent} for the cassette"], (
        done.stderr)
