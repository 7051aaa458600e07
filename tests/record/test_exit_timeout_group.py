"""`record --exit-timeout` stops the server's whole process group: a child of the server that
ignores SIGTERM and the closed stdin does not outlive mcprec."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from support.helpers import run_mcprec

SERVER = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"],
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(120)  # never reads stdin: a closed stdin does not stop it
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_exit_timeout_kills_the_servers_children(tmp_path: Path) -> None:
    """The client closes stdin; after --exit-timeout the server and its SIGTERM-proof child
    are both gone, and mcprec exits in seconds."""
    server = tmp_path / "server.py"
    server.write_text(SERVER)
    pidfile = tmp_path / "child.pid"
    started = time.monotonic()
    done = run_mcprec("record", "-c", str(tmp_path / "c.db"), "--exit-timeout", "0.5", "--",
                      sys.executable, str(server), str(pidfile), input=b"", timeout=60)
    assert time.monotonic() - started < 20, done.stderr
    assert done.returncode != 0
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert not _alive(child), "the server's child outlived mcprec"
    finally:
        if _alive(child):
            os.kill(child, 9)
