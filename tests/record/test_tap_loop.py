"""The tap's event loop and what the server is given: uvloop where our stdin and stdout are pipes
or sockets (as a client that starts mcprec gives), asyncio's loop elsewhere (a terminal, a file,
/dev/null); and whichever loop runs, the server's stdin, stdout and stderr are pipes."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.helpers import LINE_SERVER, MCPREC
from mcprec.cassette import open_cassette
from mcprec.transports.stdio import run_loop

KINDS = (
    "import json, os, stat\n"
    "def kind(fd):\n"
    "    m = os.fstat(fd).st_mode\n"
    "    return 'fifo' if stat.S_ISFIFO(m) else 'socket' if stat.S_ISSOCK(m) else 'other'\n"
    "os.write(1, json.dumps({n: kind(fd) for n, fd in "
    "(('stdin', 0), ('stdout', 1), ('stderr', 2))}).encode() + b'\\n')\n"
)
PING = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_uvloop_on_pipes_and_sockets_asyncio_elsewhere(tmp_path: Path) -> None:
    pytest.importorskip("uvloop")
    r, w = os.pipe()
    a, b = socket.socketpair()
    regular = os.open(tmp_path / "file", os.O_CREAT | os.O_RDWR)
    null = os.open(os.devnull, os.O_RDWR)
    try:
        assert run_loop(_loop_module(), (r, w)).startswith("uvloop")
        assert run_loop(_loop_module(), (a.fileno(), b.fileno())).startswith("uvloop")
        assert run_loop(_loop_module(), (r, regular)).startswith("asyncio")
        assert run_loop(_loop_module(), (null, w)).startswith("asyncio")
    finally:
        for fd in (r, w, regular, null):
            os.close(fd)
        a.close()
        b.close()


@pytest.mark.parametrize("ends", ["pipes", "sockets"])
def test_the_server_gets_pipes(tmp_path: Path, ends: str) -> None:
    """Pipes for the server whatever we were given: a client with pipes (uvloop's own
    subprocess_exec would give the server socket pairs) or with socket pairs, as Node's
    child_process gives its children."""
    cassette = tmp_path / "c.db"
    argv = [*MCPREC, "record", "-c", str(cassette), "--", sys.executable, "-c", KINDS]
    if ends == "pipes":
        done = subprocess.run(argv, input=b"", capture_output=True, timeout=30, check=False)
        out, code, err = done.stdout, done.returncode, done.stderr
    else:
        to_tap, tap_in = socket.socketpair()  # one pair a stream, as Node makes them
        tap_out, from_tap = socket.socketpair()
        with tap_in, tap_out:
            proc = subprocess.Popen(argv, stdin=tap_in, stdout=tap_out, stderr=subprocess.PIPE)
        to_tap.close()  # EOF for mcprec's stdin
        out = b""
        while chunk := from_tap.recv(65536):
            out += chunk
        from_tap.close()
        code = proc.wait(30)
        assert proc.stderr is not None
        err = proc.stderr.read()
        proc.stderr.close()
    assert code == 0, err
    assert json.loads(out) == {"stdin": "fifo", "stdout": "fifo", "stderr": "fifo"}
    with open_cassette(cassette) as c:
        assert [m.raw for m in c.messages(c.session())] == [out.rstrip(b"\n")]


def test_a_terminal_for_stdin_and_stdout(tmp_path: Path) -> None:
    """A user typing to a server through mcprec in a terminal: the answer comes back on the
    terminal, and the end of input (^D) ends the session. On uvloop the transport writing to
    the terminal also read from it, taking what was typed, and failed."""
    master, slave = pty.openpty()
    cassette = tmp_path / "c.db"
    proc = subprocess.Popen([*MCPREC, "record", "-c", str(cassette), "--", sys.executable,
                             str(LINE_SERVER)], stdin=slave, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    seen = b""
    try:
        os.write(master, PING)
        deadline = time.monotonic() + 20
        while b'"result"' not in seen:
            assert time.monotonic() < deadline, seen
            if select.select([master], [], [], 0.1)[0]:
                seen += os.read(master, 65536)
        os.write(master, b"\x04")  # ^D: the end of input
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert proc.stderr is not None
    err = proc.stderr.read()
    proc.stderr.close()
    assert b"Fatal error" not in err and b"Traceback" not in err, err
    with open_cassette(cassette) as c:
        s = c.session()
        assert (s.status, [m.method for m in c.messages(s)]) == ("complete", ["ping", "ping"])
