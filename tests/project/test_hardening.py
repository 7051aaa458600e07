"""Limits and second runs: oversized messages, repeated verifies, already-redacted cassettes,
taken session names, and a killed tap whose recorder finishes the job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.helpers import MCPREC, REPO, copy_cassette

from mcprec import wire
from mcprec.cassette import open_cassette
from mcprec.record.writer import open_session_writer

EXAMPLE_SERVER = [sys.executable, str(REPO / "examples" / "weather_server.py")]
EXAMPLE_CLIENT = [sys.executable, str(REPO / "examples" / "weather_client.py"), "--"]


def run(*args: str, input: bytes = b"", timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*MCPREC, *args], input=input, capture_output=True, timeout=timeout,
                          check=False)


def test_oversized_message_is_forwarded_whole_and_recorded_truncated(tmp_path: Path) -> None:
    """Past --max-message-size a message still reaches the other side whole; the cassette keeps
    its first bytes, marked truncated with the real size, and says so once on stderr."""
    big = b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"d":"' + b"a" * 3_000_000 + b'"}}'
    small = b'{"jsonrpc":"2.0","id":2,"method":"ping"}'
    cassette = tmp_path / "c.db"
    done = run("record", "-c", str(cassette), "--max-message-size", "1M", "--", "cat",
               input=big + b"\n" + small + b"\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == big + b"\n" + small + b"\n"
    assert done.stderr.count(b"larger than --max-message-size") == 1
    with open_cassette(cassette) as c:
        msgs = list(c.messages())
    assert [m.size for m in msgs] == [1 << 20, len(small), 1 << 20, len(small)]
    assert msgs[0].http == {"truncated": True, "size": len(big)}
    assert msgs[0].raw == big[: 1 << 20]
    assert msgs[1].kind == "request" and msgs[1].method == "ping"


def test_bad_max_message_size_is_a_usage_error(tmp_path: Path) -> None:
    """A size that does not parse is refused before anything starts."""
    done = run("record", "-c", str(tmp_path / "c.db"), "--max-message-size", "lots", "--", "cat")
    assert done.returncode == 2
    assert b"expected a size" in done.stderr
    assert not (tmp_path / "c.db").exists()


def test_retried_verify_still_compares_with_the_reference(tmp_path: Path) -> None:
    """A second verify of a broken build fails again: it compares with the recorded reference,
    not with the previous verify run, and the cassette keeps one verify run per reference."""
    cassette = tmp_path / "w.db"
    rec = subprocess.run([*EXAMPLE_CLIENT, *MCPREC, "record", "-c", str(cassette), "-s", "v1",
                          "--", *EXAMPLE_SERVER], capture_output=True, timeout=120, check=False)
    assert rec.returncode == 0, rec.stderr
    for _ in range(2):
        v = run("verify", str(cassette), "--", *EXAMPLE_SERVER, "--v2")
        assert v.returncode == 1, v.stderr
        assert b"A: " + str(cassette).encode() + b":v1 " in v.stdout
    with open_cassette(cassette) as c:
        names = [s.name for s in c.sessions()]
    assert names[0] == "v1" and len(names) == 2 and names[1].startswith("v1-verify-")


def test_verify_of_a_missing_session_exits_2(tmp_path: Path) -> None:
    """verify exits like diff: 2 for trouble (here an unknown session), never 1."""
    cassette = tmp_path / "w.db"
    w = open_session_writer(cassette, "only", transport="stdio", target=["x"])
    w.message(wire.CLIENT_TO_SERVER, b'{"jsonrpc":"2.0","id":1,"method":"ping"}', 0)
    w.close()
    v = run("verify", str(cassette), "-s", "nope", "--", *EXAMPLE_SERVER)
    assert v.returncode == 2
    assert v.stderr.startswith(b"mcprec: ") and b"no session 'nope'" in v.stderr


def test_scan_accepts_what_redaction_left(tmp_path: Path) -> None:
    """A cassette holding only redacted secrets ("Bearer [REDACTED]") scans clean, while one
    with a secret in clear does not."""
    cassette = tmp_path / "c.db"
    w = open_session_writer(cassette, "s", transport="http", target="http://x")
    w.message(wire.CLIENT_TO_SERVER, orjson.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"authorization": "Bearer [REDACTED]", "password": "[REDACTED]"}}), 0,
        http={"headers": {"authorization": "Bearer [REDACTED]"}})
    w.close()
    clean = run("scan", str(cassette))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    w = open_session_writer(cassette, "leak", transport="stdio", target=["x"])
    w.message(wire.CLIENT_TO_SERVER, b'{"jsonrpc":"2.0","id":1,"method":"x","params":'
              b'{"note":"sk-abcdefghijklmnopqrstuvwx1234"}}', 0)
    w.close()
    dirty = run("scan", str(cassette))
    assert dirty.returncode == 1 and b"OpenAI/Anthropic key" in dirty.stdout


def test_record_target_refuses_a_taken_session_name(tmp_path: Path) -> None:
    """The HTTP proxy refuses a --session name the cassette already has, before listening."""
    cassette = tmp_path / "c.db"
    open_session_writer(cassette, "taken", transport="stdio", target=["x"]).close()
    done = run("record", "--target", "http://127.0.0.1:9/mcp", "-c", str(cassette),
               "-s", "taken", timeout=30)
    assert done.returncode == 1
    assert b"already has a session named 'taken'" in done.stderr
    assert b"Traceback" not in done.stderr


def test_killed_tap_leaves_its_recorder_to_finish(tmp_path: Path) -> None:
    """kill -9 of mcprec: the recorder process still commits everything it was handed and
    marks the session incomplete; the cassette opens."""
    cassette = tmp_path / "k.db"
    proc = subprocess.Popen([*MCPREC, "record", "-c", str(cassette), "-s", "k", "--", "cat"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    lines = [b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % i for i in range(200)]
    for line in lines:
        proc.stdin.write(line + b"\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == line + b"\n"  # forwarded, both ways
    time.sleep(0.3)  # the last chunks reach the recorder (one event-loop turn)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    deadline = time.monotonic() + 20
    while True:
        with open_cassette(cassette) as c:
            s = c.session("k")
            if s.status != "recording" or time.monotonic() > deadline:
                break
        time.sleep(0.1)
    assert s.status == "incomplete"
    assert s.message_count == 400
    proc.stdin.close()
    proc.stdout.close()


def test_payloads_are_never_corrupted_by_redaction(tmp_path: Path) -> None:
    """A base64 image that happens to hold a key-shaped run is recorded byte for byte; a secret
    beside it in the same message is still redacted."""
    from mcprec.redact import Redactor

    blob = b"A" * 3000 + b"AIza" + b"B" * 35 + b"C" * 3000
    msg = (b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"image","data":"' + blob +
           b'","mimeType":"image/png"}],"note":"token sk-abcdefghijklmnopqrstuvwx1234"}}')
    out = Redactor().redact(msg)
    assert blob in out
    assert b"sk-abcdefghijklmnopqrstuvwx1234" not in out and b"[REDACTED]" in out
    assert Redactor().scan(out) == []


@pytest.mark.parametrize("args", [
    ["scan", "/"],
    ["replay", "c.db", "--timing", "abc"],
    ["record", "-c", "c.db", "--tag", "bad", "--", "cat"],
    ["diff", "a.db", "b.db", "--format", "yaml"],
    ["nosuchcommand"],
    ["replay"],
    ["export", "c.db", "-o", "/nonexistent-dir/x.jsonl"],
    ["import", "missing.jsonl", "c2.db"],
])
def test_every_bad_invocation_is_one_line(tmp_path: Path, args: list[str]) -> None:
    """Bad arguments or paths: one line on stderr, ``mcprec: ...``, a non-zero exit."""
    open_session_writer(tmp_path / "c.db", "s", transport="stdio", target=["x"]).close()
    done = subprocess.run([*MCPREC, *args], cwd=tmp_path, capture_output=True, timeout=60,
                          check=False)
    err = done.stderr.decode()
    assert done.returncode != 0
    assert err.startswith("mcprec: ") and err.count("\n") == 1, err
    assert "Traceback" not in err


@pytest.mark.parametrize("http", [False, True])
@pytest.mark.parametrize("where", ["dir", "missing"])
def test_replay_report_that_cannot_be_written_is_refused_at_start(
        sdk_recordings: Any, tmp_path: Path, http: bool, where: str) -> None:
    """A --report that is a directory, or in no directory, is one line and exit 2 before
    serving (it used to be a traceback at the end, after the whole session)."""
    report = tmp_path if where == "dir" else tmp_path / "no" / "r.json"
    argv = [*MCPREC, "replay", str(sdk_recordings.main.cassette), "--report", str(report),
            *(["--http"] if http else [])]
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    assert done.returncode == 2
    err = done.stderr.decode()
    assert err.count("\n") == 1 and "--report" in err and "Traceback" not in err


@pytest.mark.parametrize("how", ["exits", "refused"])
def test_verify_against_a_dead_server_is_one_line_at_once(sdk_recordings: Any, tmp_path: Path,
                                                          how: str) -> None:
    """A server that exits at start, or a --target that refuses: verify says so in one line
    with exit 2 (trouble) at once, not after waiting --timeout for every request."""
    cassette = copy_cassette(sdk_recordings.main.cassette, tmp_path / "c.db")
    server = (["--", sys.executable, "-c", "import sys; print('boom', file=sys.stderr); "
               "sys.exit(3)"] if how == "exits" else ["--target", "http://127.0.0.1:1/mcp"])
    t0 = time.monotonic()
    done = subprocess.run([*MCPREC, "verify", str(cassette), "-s", sdk_recordings.main.session,
                           *server], capture_output=True, timeout=60)
    assert time.monotonic() - t0 < 20
    assert done.returncode == 2, done.stderr
    err = done.stderr.decode()
    assert err.count("\n") == 1 and "Traceback" not in err
    if how == "exits":
        assert "exit code 3" in err and "boom" in err
    else:
        assert "could not be reached" in err


def test_scan_of_an_unreadable_cassette_exits_2_not_1(sdk_recordings: Any, tmp_path: Path
                                                      ) -> None:
    """scan's exit 1 means findings; a cassette it cannot read is trouble (2), said in one
    line, and the other cassettes are still scanned."""
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all")
    alone = subprocess.run([*MCPREC, "scan", str(tmp_path / "missing.db")], capture_output=True,
                           timeout=30)
    assert alone.returncode == 2 and alone.stderr.decode().count("\n") == 1
    both = subprocess.run([*MCPREC, "scan", str(junk), str(sdk_recordings.main.cassette)],
                          capture_output=True, timeout=30)
    assert both.returncode == 2 and "1 of 2 cassettes could not be scanned" in both.stderr.decode()


# --- started with a standard stream closed ----------------------------------------------------


def _closed(which: str, *argv: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """``argv`` started by a shell with fd 0, 1 or 2 closed (``1>&-``)."""
    return subprocess.run(["sh", "-c", f'exec "$@" {which}>&-', "sh", *argv], input=stdin,
                          capture_output=which != "1", timeout=60, check=False)


@pytest.mark.parametrize("which", ["0", "1", "2"])
def test_record_with_a_standard_stream_closed(tmp_path: Path, which: str) -> None:
    """No traceback, and the cassette is not taken for stdout: a closed stream is /dev/null
    (the first file opened used to take its number: the recorder wrote into the cassette's
    place and mcprec ended on `sys.stdout` being None)."""
    from support.helpers import LINE_SERVER

    cassette = tmp_path / "c.db"
    request = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n'
    done = _closed(which, *MCPREC, "record", "-c", str(cassette), "--",
                   sys.executable, str(LINE_SERVER), stdin=request)
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in (done.stderr or b"")
    with open_cassette(cassette) as c:
        s = c.session()
        assert s.status == "complete"
        expected = [] if which == "0" else ["1", "1"]
        assert [m.rpc_id for m in c.messages(s)] == expected


@pytest.mark.parametrize("which", ["0", "1", "2"])
def test_replay_with_a_standard_stream_closed(sdk_recordings: Any, which: str) -> None:
    done = _closed(which, *MCPREC, "replay", str(sdk_recordings.main.cassette), "-s",
                   sdk_recordings.main.session,
                   stdin=b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in (done.stderr or b"")
    if which == "2":
        assert done.stdout == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'


@pytest.mark.parametrize(("args", "where"), [
    (["replay", "c.db", "-s"], "mcprec replay"),
    (["record", "-c"], "mcprec record"),
    (["diff", "c.db", "c.db", "--format"], "mcprec diff"),
    (["--nosuchoption"], "mcprec"),
])
def test_an_option_without_its_value_points_at_its_commands_help(
        tmp_path: Path, args: list[str], where: str) -> None:
    """click reports an option missing its value without the command's context: the line
    still names the command whose help to read."""
    done = subprocess.run([*MCPREC, *args], cwd=tmp_path, capture_output=True, timeout=60,
                          check=False)
    err = done.stderr.decode()
    assert done.returncode == 2 and err.count("\n") == 1, err
    assert err.rstrip().endswith(f"(see `{where} --help`)"), err


@pytest.mark.parametrize("command", [["show"], ["export"], ["view", "--html", "-"]])
def test_a_session_is_named_with_s_as_replay_names_it(tmp_path: Path,
                                                      command: list[str]) -> None:
    """``-s NAME`` names the session wherever a SESSION argument does; both, differing, is a
    usage error."""
    for name in ("one", "two"):
        w = open_session_writer(tmp_path / "c.db", name, transport="stdio", target=["x"])
        w.message(wire.CLIENT_TO_SERVER, b'{"jsonrpc":"2.0","id":1,"method":"ping"}', 0)
        w.close()
    cmd, *rest = command
    by_argument = run(cmd, str(tmp_path / "c.db"), "one", *rest)
    by_option = run(cmd, str(tmp_path / "c.db"), "-s", "one", *rest)
    latest = run(cmd, str(tmp_path / "c.db"), *rest)
    assert by_argument.returncode == by_option.returncode == 0, by_option.stderr
    assert by_argument.stdout == by_option.stdout != latest.stdout
    both = run(cmd, str(tmp_path / "c.db"), "one", "-s", "two", *rest)
    assert both.returncode == 2
    assert both.stderr.decode().startswith("mcprec: two sessions given: 'one' and -s 'two'")
