"""Recording when things go wrong: crashes, EOF, signals, stuck servers, bad commands, bad files."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from support.helpers import LINE_SERVER, MCPREC, run_mcprec, sqlite
from mcprec.cassette import open_cassette


def request(i: int, method: str = "tools/list") -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": i, "method": method}).encode() + b"\n"


def start(cassette: Path, *server_args: str, extra: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
    """`mcprec record` in front of tests/peers/line_server.py, with pipes on all three ends."""
    return subprocess.Popen(
        [*MCPREC, "record", "-c", str(cassette), *extra, "--", sys.executable, str(LINE_SERVER),
         *server_args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def exchange(proc: subprocess.Popen[bytes], i: int) -> dict:
    """Send request ``i`` and wait for its answer."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(request(i))
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def finish(proc: subprocess.Popen[bytes], timeout: float = 30) -> tuple[int, bytes]:
    """Wait for mcprec to exit (without closing its stdin); its code and stderr."""
    code = proc.wait(timeout=timeout)
    assert proc.stderr is not None
    err = proc.stderr.read()
    for f in (proc.stdin, proc.stdout, proc.stderr):
        if f is not None:
            f.close()
    return code, err


def one_line_error(stderr: bytes) -> str:
    """Assert that stderr is one `mcprec: ...` line with no traceback; return it."""
    text = stderr.decode()
    assert "Traceback" not in text
    lines = text.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mcprec: "), text
    return lines[0]


# --- the server dies or ends ------------------------------------------------------------------


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, list, object, list[str]]:
    """A server that exits with code 3 on reading its second request, client stdin still open."""
    cas = tmp_path_factory.mktemp("crash") / "crash.db"
    proc = start(cas, "--crash-after", "2", "3")
    assert exchange(proc, 1)["id"] == 1
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(request(2, "tools/call"))
    proc.stdin.flush()
    assert proc.stdout.read() == b""  # the client sees EOF
    code, _ = finish(proc)
    with open_cassette(cas) as c:
        s = c.session()
        return code, list(c.messages(s)), s, [e.line for e in c.stderr(s)]


def test_crash_exit_code_passed_on(crashed: tuple) -> None:
    """mcprec exits with the crashed server's exit code, though the client never closed stdin."""
    assert crashed[0] == 3


def test_crash_keeps_messages_up_to_the_crash(crashed: tuple) -> None:
    """Everything forwarded before the crash is in the cassette, the unanswered request too."""
    flow = [(m.direction, m.kind, m.rpc_id) for m in crashed[1]]
    assert flow == [("client_to_server", "request", "1"), ("server_to_client", "response", "1"),
                    ("client_to_server", "request", "2")]


def test_crash_session_complete_with_exit_code(crashed: tuple) -> None:
    """The session is closed as complete with exit_code 3 and the server's last words."""
    s = crashed[2]
    assert (s.status, s.exit_code) == ("complete", 3)
    assert "crashing after line 2" in crashed[3]


def test_server_killed_by_a_signal_gives_128_plus_n(cassette: Path) -> None:
    """A server that dies of signal N makes mcprec exit with 128+N, as a shell would."""
    proc = subprocess.Popen(
        [*MCPREC, "record", "-c", str(cassette), "--", sys.executable, "-c",
         "import os, signal, sys; sys.stdin.readline(); os.kill(os.getpid(), signal.SIGABRT)"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    proc.stdin.write(request(1))
    proc.stdin.flush()
    code, _ = finish(proc)
    assert code == 128 + signal.SIGABRT
    with open_cassette(cassette) as c:
        assert c.session().exit_code == 128 + signal.SIGABRT


def test_client_eof_closes_server_stdin(tmp_path: Path, cassette: Path) -> None:
    """When the client closes stdin the server sees EOF and mcprec exits, well before the timeout."""
    marker = tmp_path / "eof"
    proc = start(cassette, "--on-eof", str(marker), extra=("--exit-timeout", "30"))
    assert exchange(proc, 1)["id"] == 1
    t0 = time.monotonic()
    assert proc.stdin is not None
    proc.stdin.close()
    code, err = finish(proc)
    assert code == 0, err
    assert time.monotonic() - t0 < 20  # far below --exit-timeout: the EOF did it, not a signal
    assert marker.read_text() == "eof"


def test_client_going_away_ends_the_session(cassette: Path) -> None:
    """When the client stops reading (closes our stdout), mcprec ends the server and exits."""
    proc = start(cassette, extra=("--exit-timeout", "30"))
    assert exchange(proc, 1)["id"] == 1
    assert proc.stdout is not None
    proc.stdout.close()  # stdin stays open
    code, _ = finish(proc, timeout=20)
    assert code == 0
    with open_cassette(cassette) as c:
        s = c.session()
        assert (s.status, s.exit_code) == ("complete", 0)
        assert [m.rpc_id for m in c.messages(s)] == ["1", "1"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                         ids=lambda s: s.name)
def test_signal_forwarded_to_server(tmp_path: Path, cassette: Path, sig: signal.Signals) -> None:
    """A signal to mcprec reaches the server; mcprec exits with its code, traffic recorded."""
    marker = tmp_path / "marker"
    # a long --exit-timeout, so that only forwarding (not the escalation timer) can stop it
    proc = start(cassette, "--trap", sig.name, str(marker), "42", extra=("--exit-timeout", "60"))
    assert exchange(proc, 1)["id"] == 1
    assert exchange(proc, 2)["id"] == 2
    proc.send_signal(sig)
    code, err = finish(proc)
    assert code == 42, err
    assert marker.read_text() == f"got {sig.name}"
    with open_cassette(cassette) as c:
        s = c.session()
        assert (s.status, s.exit_code) == ("complete", 42)
        assert [(m.kind, m.rpc_id) for m in c.messages(s)] == [
            ("request", "1"), ("response", "1"), ("request", "2"), ("response", "2")]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_stuck_server_killed_after_exit_timeout(tmp_path: Path, cassette: Path) -> None:
    """A server ignoring EOF and SIGTERM is killed once --exit-timeout (and the grace) run out."""
    pid_file = tmp_path / "pid"
    proc = start(cassette, "--ignore-term", "--pid-file", str(pid_file),
                 extra=("--exit-timeout", "0.5"))
    assert exchange(proc, 1)["id"] == 1
    t0 = time.monotonic()
    assert proc.stdin is not None
    proc.stdin.close()
    code, _ = finish(proc, timeout=30)
    assert time.monotonic() - t0 >= 0.5
    assert code == 128 + signal.SIGKILL
    assert _gone(int(pid_file.read_text()))
    with open_cassette(cassette) as c:
        s = c.session()
        assert (s.status, s.exit_code) == ("complete", 128 + signal.SIGKILL)


def test_second_sigint_kills_at_once(tmp_path: Path, cassette: Path) -> None:
    """Two Ctrl-C to mcprec kill a server that ignores them, without waiting for the timeout."""
    pid_file = tmp_path / "pid"
    proc = start(cassette, "--ignore-term", "--pid-file", str(pid_file),
                 extra=("--exit-timeout", "60"))
    assert exchange(proc, 1)["id"] == 1
    proc.send_signal(signal.SIGINT)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    code, _ = finish(proc, timeout=30)
    assert code == 128 + signal.SIGKILL
    assert _gone(int(pid_file.read_text()))


@pytest.mark.parametrize("durable", [True, False], ids=["durable", "default"])
def test_killed_recorder_leaves_an_incomplete_session(cassette: Path, durable: bool) -> None:
    """After `kill -9` of mcprec, the next reader marks its session incomplete (not recording)."""
    proc = start(cassette, extra=("--durable",) if durable else ())
    assert exchange(proc, 1)["id"] == 1
    proc.kill()
    finish(proc)
    with open_cassette(cassette) as c:
        s = c.session()
        assert (s.status, s.exit_code) == ("incomplete", None) and s.ended_at is not None


def test_durable_commits_before_forwarding(cassette: Path) -> None:
    """With --durable every message the client has seen answered is on disk at once, kill -9 or not."""
    proc = start(cassette, extra=("--durable",))
    for i in range(1, 6):
        assert exchange(proc, i)["id"] == i
    proc.kill()  # no time for a lagging writer to catch up
    finish(proc)
    with open_cassette(cassette) as c:
        assert [(m.kind, m.rpc_id) for m in c.messages()] == [
            (kind, str(i)) for i in range(1, 6) for kind in ("request", "response")]


# --- the server cannot start ------------------------------------------------------------------


def _not_executable(tmp: Path) -> str:
    script = tmp / "server.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)
    return str(script)


BAD_COMMANDS = {
    "unknown name": lambda tmp: "no-such-mcp-server-for-mcprec-tests",
    "missing path": lambda tmp: str(tmp / "nowhere" / "server"),
    "directory": lambda tmp: str(tmp),
    "not executable": _not_executable,
}


@pytest.mark.parametrize("kind", list(BAD_COMMANDS))
def test_bad_command_is_one_line_error(tmp_path: Path, cassette: Path, kind: str) -> None:
    """A server command that cannot run gives one `mcprec:` line, non-zero exit, no cassette."""
    exe = BAD_COMMANDS[kind](tmp_path)
    proc = run_mcprec("record", "-c", str(cassette), "--", exe, "--flag", input=b"")
    assert proc.returncode != 0
    assert exe in one_line_error(proc.stderr)
    assert proc.stdout == b""
    assert not cassette.exists()


def test_missing_server_command_is_usage_error(cassette: Path) -> None:
    """`mcprec record` with nothing after it is a usage error, not a crash."""
    proc = run_mcprec("record", "-c", str(cassette), input=b"")
    assert proc.returncode == 2
    assert b"Traceback" not in proc.stderr
    assert not cassette.exists()


def test_server_exiting_at_once_is_reported(cassette: Path) -> None:
    """A server that dies before saying anything: its exit code, its stderr and a clear line."""
    proc = subprocess.Popen(
        [*MCPREC, "record", "-c", str(cassette), "--", sys.executable, "-c",
         "import sys; sys.stderr.write('boom: missing API key\\n'); sys.exit(1)"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    code, err = finish(proc)  # stdin stays open, as a waiting MCP host keeps it
    assert code == 1
    text = err.decode()
    assert "boom: missing API key" in text and "Traceback" not in text
    assert "mcprec: server" in text and "exited with code 1" in text
    with open_cassette(cassette) as c:
        assert (c.session().status, c.session().exit_code) == ("complete", 1)


# --- concurrent recorders ---------------------------------------------------------------------

RECORDERS = 3
REQUESTS = 1000  # each answered: 2000 messages per session


def test_concurrent_recorders_share_one_cassette(cassette: Path) -> None:
    """Several recorders writing one cassette at once lose nothing and never report a lock."""
    data = b"".join(request(i) for i in range(REQUESTS))

    def record(n: int) -> tuple[int, bytes, bytes]:
        proc = subprocess.run(
            [*MCPREC, "record", "-c", str(cassette), "-s", f"rec-{n}", "--", sys.executable,
             str(LINE_SERVER)],
            input=data, capture_output=True, timeout=90, check=False,
        )
        return proc.returncode, proc.stdout, proc.stderr

    with ThreadPoolExecutor(RECORDERS) as pool:
        outcomes = list(pool.map(record, range(RECORDERS)))
    for code, out, err in outcomes:
        assert code == 0 and b"locked" not in err and b"mcprec:" not in err, err
        assert out.count(b"\n") == REQUESTS
    with open_cassette(cassette) as c:
        sessions = {s.name: s for s in c.sessions()}
        assert sorted(sessions) == [f"rec-{n}" for n in range(RECORDERS)]
        for s in sessions.values():
            assert s.status == "complete" and s.message_count == 2 * REQUESTS
            msgs = list(c.messages(s))
            assert [m.seq for m in msgs] == list(range(2 * REQUESTS))
            assert [m.raw + b"\n" for m in msgs if m.kind == "request"] == data.splitlines(True)


# --- cassettes that are not cassettes ---------------------------------------------------------


@pytest.fixture(scope="module")
def good_cassette(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The bytes of a real, checkpointed cassette with one short session."""
    cas = tmp_path_factory.mktemp("good") / "good.db"
    proc = subprocess.run(
        [*MCPREC, "record", "-c", str(cas), "--", sys.executable, str(LINE_SERVER)],
        input=b"".join(request(i) for i in range(50)), capture_output=True, timeout=60,
        check=True,
    )
    assert proc.returncode == 0
    with sqlite(cas) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return cas.read_bytes()


def _format_999(path: Path, good: bytes) -> None:
    path.write_bytes(good)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'format_version'")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()


def _other_sqlite(path: Path, good: bytes) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO customers (name) VALUES ('ann')")
    conn.close()


BAD_FILES = {
    "text file": lambda p, good: p.write_bytes(b"these are not the bytes you are looking for\n" * 50),
    "random garbage": lambda p, good: p.write_bytes(os.urandom(8192)),
    "truncated cassette": lambda p, good: p.write_bytes(good[:1500]),
    "sqlite but not a cassette": _other_sqlite,
    "format version 999": _format_999,
    "empty file": lambda p, good: p.write_bytes(b""),
}


@pytest.mark.parametrize("command", ["sessions", "show", "export"])
@pytest.mark.parametrize("kind", list(BAD_FILES))
def test_bad_cassette_is_one_line_error(tmp_path: Path, good_cassette: bytes, kind: str,
                                        command: str) -> None:
    """Reading a file that is not a usable cassette fails with one `mcprec:` line and no trace."""
    path = tmp_path / "bad.db"
    BAD_FILES[kind](path, good_cassette)
    proc = run_mcprec(command, str(path))
    assert proc.returncode != 0
    assert str(path) in one_line_error(proc.stderr)


@pytest.mark.parametrize("kind", list(BAD_FILES))
def test_bad_cassette_left_untouched(tmp_path: Path, good_cassette: bytes, kind: str) -> None:
    """Refusing a file does not change it."""
    path = tmp_path / "bad.db"
    BAD_FILES[kind](path, good_cassette)
    before = path.read_bytes()
    run_mcprec("sessions", str(path))
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.db"]


@pytest.mark.parametrize("kind", [k for k in BAD_FILES if k != "empty file"])
def test_record_refuses_a_bad_cassette(tmp_path: Path, good_cassette: bytes, kind: str) -> None:
    """Recording into a file that is not a usable cassette fails in one line, server not started."""
    path, pid_file = tmp_path / "bad.db", tmp_path / "pid"
    BAD_FILES[kind](path, good_cassette)
    before = path.read_bytes()
    proc = run_mcprec("record", "-c", str(path), "--", sys.executable, str(LINE_SERVER),
                      "--pid-file", str(pid_file), input=request(1))
    assert proc.returncode != 0 and proc.stdout == b""
    assert str(path) in one_line_error(proc.stderr)
    assert not pid_file.exists()
    assert path.read_bytes() == before


def test_format_too_new_says_upgrade(tmp_path: Path, good_cassette: bytes) -> None:
    """A cassette from a newer mcprec names its format and says to upgrade."""
    path = tmp_path / "new.db"
    _format_999(path, good_cassette)
    line = one_line_error(run_mcprec("sessions", str(path)).stderr)
    assert "999" in line and "upgrade" in line


def test_missing_cassette_is_one_line_error(tmp_path: Path) -> None:
    """Reading a cassette that does not exist gives one `mcprec:` line and creates nothing."""
    path = tmp_path / "nothing.db"
    proc = run_mcprec("sessions", str(path))
    assert proc.returncode != 0
    assert str(path) in one_line_error(proc.stderr)
    assert not path.exists()


def test_directory_as_cassette_is_usage_error(tmp_path: Path) -> None:
    """A directory without cassettes (a directory reads as the set of its cassettes) is a
    usage error (exit 2) naming it, with no trace."""
    proc = run_mcprec("sessions", str(tmp_path))
    assert proc.returncode == 2
    assert b"Traceback" not in proc.stderr and b"no cassettes" in proc.stderr
    assert str(tmp_path).encode() in proc.stderr


@pytest.mark.parametrize("command", ["show", "export"])
def test_unknown_session_is_one_line_error(tmp_path: Path, good_cassette: bytes,
                                           command: str) -> None:
    """Asking for a session the cassette lacks names it and the sessions there are."""
    path = tmp_path / "good.db"
    path.write_bytes(good_cassette)
    proc = run_mcprec(command, str(path), "no-such-session")
    assert proc.returncode != 0
    line = one_line_error(proc.stderr)
    assert "no-such-session" in line and "line_server" in line
