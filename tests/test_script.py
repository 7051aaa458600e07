"""Scripted sessions: mcprec as the client (``record --script``, ``script --init``), against real
servers; the recordings are read back with show, verify and replay like any other."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import run_mcprec


@pytest.mark.parametrize("argv", [
    ["record", "--scrpit", "s.toml", "-c", "c.db", "--", "python", "server.py"],
    ["record", "--bogus", "--", "python", "server.py"],
    ["record", "-c", "c.db", "--bogus=1", "python", "server.py"],
    ["verify", "c.db", "--bogus", "--", "python", "server.py"],
    ["verify", "--bogus", "c.db", "--", "python", "server.py"],
])
def test_an_unknown_option_before_the_server_is_no_such_option(tmp_path: Path,
                                                                argv: list[str]) -> None:
    """An option that does not exist, before the server command, is "no such option" (exit 2),
    not a server of that name."""
    done = run_mcprec(*argv, cwd=tmp_path)
    stderr = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2
    assert "No such option '--" in stderr
    assert "command not found" not in stderr
