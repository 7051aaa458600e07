"""Every Python example of docs/api.md runs as it is: each block in a fresh directory holding a
copy of the golden cassette as ``weather.db`` and the repository's ``examples/``."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.helpers import REPO

PAGE = REPO / "docs" / "api.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```$", PAGE.read_text(encoding="utf-8"), re.S | re.M)


def test_the_page_has_its_examples() -> None:
    """The page shows reading, recording, replaying, diffing and verifying: a block each."""
    text = "\n".join(BLOCKS)
    assert len(BLOCKS) >= 8
    for name in ("open_cassette", "losses()", "backpressure()", "record_stdio",
                 "replay_streams", "replay_server", "diff_sessions", "run_verification",
                 "resolve(", "ReplaySettings"):
        assert name in text, name


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(1, len(BLOCKS) + 1)])
def test_each_example_runs(block: str, tmp_path: Path) -> None:
    """The block exits 0 with no traceback or warning (its own asserts check what it shows;
    a replay subprocess's notices are on stderr)."""
    shutil.copy(REPO / "cassettes" / "golden" / "weather.db", tmp_path / "weather.db")
    shutil.copytree(REPO / "examples", tmp_path / "examples",
                    ignore=shutil.ignore_patterns("typescript", "__pycache__"))
    done = subprocess.run([sys.executable, "-W", "error", "-c", block], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(line.startswith("mcprec: ") for line in done.stderr.splitlines()), done.stderr


def test_a_session_writer_refuses_an_unknown_direction(tmp_path: Path) -> None:
    """A direction the cassette does not know is one UsageError at the call, the session
    still writable after it (it used to crash the writing thread)."""
    from mcprec import open_cassette
    from mcprec.errors import UsageError
    from mcprec.record.writer import open_session_writer

    writer = open_session_writer(tmp_path / "c.db", "s", transport="stdio", target=["x"])
    with pytest.raises(UsageError, match="direction must be 'client_to_server' or "
                                         "'server_to_client', got 'c2s'"):
        writer.message("c2s", b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
    writer.message("client_to_server", b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
    writer.close()
    with open_cassette(tmp_path / "c.db") as c:
        assert [m.method for m in c.messages("s")] == ["ping"]
