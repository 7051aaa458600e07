"""A recording proxy that rotates its cassette, by size or by time: a new file for the sessions
that begin past the bound, never a session split between files, names that sort; and the set
of files read as one by replay (stdio and --http), sessions and verify --all.

The upstream is the official SDK's Streamable HTTP server (tests/peers/http_server.py); the
proxy and the replay server are `mcprec` processes, the clients plain HTTP.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from support.helpers import run_mcprec
from support.http_helpers import start_proxy, start_replay, start_sdk_http
from mcprec.cassette import Cassette
from mcprec.cassette.sets import CassetteSet, expand, open_set, rotated_path
from mcprec.errors import CassetteError, UsageError

HEAD = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "rotate", "version": "1"}}}
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'


def _call(text: str, rid: int = 2) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}}}


class _Client:
    """One MCP session over plain HTTP, kept open until ``end``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(timeout=30)
        r = self.http.post(url, content=orjson.dumps(INIT), headers=HEAD)
        assert r.status_code == 200, r.text
        self.sid = r.headers["mcp-session-id"]
        assert self.post(INITIALIZED).status_code == 202
        self.next_id = 2

    def post(self, body: bytes) -> httpx.Response:
        return self.http.post(self.url, content=body, headers={**HEAD, "mcp-session-id": self.sid})

    def echo(self, text: str) -> None:
        r = self.post(orjson.dumps(_call(text, self.next_id)))
        self.next_id += 1
        assert r.status_code == 200 and text in r.text, r.text

    def end(self) -> None:
        assert self.http.delete(self.url, headers={"mcp-session-id": self.sid}).status_code == 200
        self.http.close()


@pytest.fixture(scope="module")
def upstream() -> Iterator[Any]:
    proc = start_sdk_http()
    yield proc
    proc.stop()


def _echoed(path: Path) -> dict[str, tuple[str, list[str]]]:
    """Per session name in one file: its status and the texts its tools/calls echoed."""
    with Cassette.open(path) as c:
        return {s.name: (s.status, [m.json["params"]["arguments"]["text"]
                                    for m in c.requests(s, "tools/call")])
                for s in c.sessions()}


def _record_overlapping(upstream: Any, base: Path, *flags: str, pause: float = 0.0) -> None:
    """Session ``r`` begins, then (after ``pause``) ``r-2``; ``r`` goes on after ``r-2`` began
    and ends last; then ``r-3``."""
    proxy = start_proxy(upstream.url, base, "r", extra=flags)
    try:
        a = _Client(proxy.url)
        a.echo("a-first")
        time.sleep(pause)
        b = _Client(proxy.url)
        b.echo("b-only")
        a.echo("a-after-rotation")
        b.end()
        a.echo("a-last")
        a.end()
        c = _Client(proxy.url)
        c.echo("c-only")
        c.end()
    finally:
        code, _ = proxy.stop()
    assert code == 0, proxy.stderr_text()


def test_rotate_size_starts_a_new_file_and_never_splits_a_session(upstream: Any,
                                                                   tmp_path: Path) -> None:
    """--rotate-size 1K: r-2 begins in a new file while r goes on, whole, in the first."""
    _record_overlapping(upstream, tmp_path / "rot.db", "--rotate-size", "1K")
    files = sorted(tmp_path.glob("rot-*.db"))
    assert not (tmp_path / "rot.db").exists()
    assert [p.name for p in files] == sorted(p.name for p in files) and len(files) == 3
    assert [_echoed(p) for p in files] == [
        {"r": ("complete", ["a-first", "a-after-rotation", "a-last"])},
        {"r-2": ("complete", ["b-only"])},
        {"r-3": ("complete", ["c-only"])}]


def test_rotate_every_starts_a_new_file_once_the_first_session_is_old(upstream: Any,
                                                                       tmp_path: Path) -> None:
    """--rotate-every 400ms: a session begun after 400 ms goes to a new file, the next one
    begun soon after joins it; the first session stays whole in the first file."""
    _record_overlapping(upstream, tmp_path / "t.db", "--rotate-every", "400ms", pause=0.6)
    files = sorted(tmp_path.glob("t-*.db"))
    assert [_echoed(p) for p in files] == [
        {"r": ("complete", ["a-first", "a-after-rotation", "a-last"])},
        {"r-2": ("complete", ["b-only"]), "r-3": ("complete", ["c-only"])}]


def test_stateless_traffic_moves_to_the_new_file_between_requests(tmp_path: Path) -> None:
    """A stateless server: the one session of sessionless traffic ends in its file once the
    bound is passed, and the requests after it are recorded in a new session of a new file."""
    server = start_sdk_http("--stateless", "--json-response")
    proxy = start_proxy(server.url, tmp_path / "sl.db", "sl", extra=["--rotate-every", "300ms"])
    try:
        with httpx.Client(timeout=30) as http:
            for i, text in enumerate(("early-1", "early-2", None, "late-1", "late-2")):
                if text is None:
                    time.sleep(0.5)
                    continue
                r = http.post(proxy.url, content=orjson.dumps(_call(text, i)), headers=HEAD)
                assert r.status_code == 200 and text in r.text, r.text
    finally:
        code, _ = proxy.stop()
        server.stop()
    assert code == 0, proxy.stderr_text()
    files = sorted(tmp_path.glob("sl-*.db"))
    assert [_echoed(p) for p in files] == [{"sl": ("complete", ["early-1", "early-2"])},
                                          {"sl-2": ("complete", ["late-1", "late-2"])}]


@pytest.fixture(scope="module")
def rotated(upstream: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the three files of a recording rotated by size."""
    where = tmp_path_factory.mktemp("rotated")
    _record_overlapping(upstream, where / "set.db", "--rotate-size", "1K")
    return where


def test_replay_http_answers_from_any_file_of_a_directory(rotated: Path) -> None:
    """replay --http DIR: a client calling what only the second file recorded is answered
    from it, one calling what the first recorded from the first."""
    replay = start_replay(rotated)
    try:
        for text in ("b-only", "a-after-rotation", "c-only"):
            client = _Client(replay.url)
            client.echo(text)
            client.end()
    finally:
        code, _ = replay.stop()
    assert code == 0, replay.stderr_text()
    assert "3 sessions" in replay.stderr_text()


def test_replay_stdio_of_a_glob_plays_the_session_its_traffic_matches(rotated: Path) -> None:
    """replay 'DIR/set-*.db' over stdio answers a tools/call recorded in the second file."""
    lines = [orjson.dumps(INIT), INITIALIZED, orjson.dumps(_call("b-only"))]
    r = run_mcprec("replay", str(rotated / "set-*.db"), input=b"\n".join(lines) + b"\n")
    assert r.returncode == 0, r.stderr
    answers = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert answers[-1]["id"] == 2 and "b-only" in orjson.dumps(answers[-1]).decode()


def test_replay_names_a_session_of_any_file(rotated: Path) -> None:
    """replay DIR -s r-2 serves the session the second file holds."""
    lines = [orjson.dumps(INIT), INITIALIZED, orjson.dumps(_call("b-only"))]
    r = run_mcprec("replay", str(rotated), "-s", "r-2", input=b"\n".join(lines) + b"\n")
    assert r.returncode == 0, r.stderr
    assert b"b-only" in r.stdout.splitlines()[-1]


def test_sessions_lists_every_file_of_a_directory(rotated: Path) -> None:
    """sessions DIR: one table of every file's sessions, with the file; --json says it too."""
    r = run_mcprec("sessions", str(rotated))
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode().splitlines()
    assert out[0].split()[:2] == ["FILE", "NAME"]
    assert [line.split()[1] for line in out[1:]] == ["r", "r-2", "r-3"]
    r = run_mcprec("sessions", str(rotated / "set-*.db"), "--json")
    found = orjson.loads(r.stdout)
    assert [(Path(s["file"]).parent, s["name"]) for s in found] == [
        (rotated, "r"), (rotated, "r-2"), (rotated, "r-3")]


def test_verify_all_takes_a_glob(rotated: Path, upstream: Any, tmp_path: Path) -> None:
    """verify --all 'DIR/set-*.db' --target URL verifies every session of every file."""
    copied = tmp_path / "copy"
    shutil.copytree(rotated, copied)
    r = run_mcprec("verify", "--all", str(copied / "set-*.db"), "--target", upstream.url,
                   timeout=120)
    assert r.returncode == 0, r.stderr
    text = (r.stdout + r.stderr).decode()
    verified = sorted(line.split()[1].rsplit(":", 1)[1] for line in text.splitlines()
                      if line.startswith("  EQUAL") or line.startswith("  PASSED"))
    assert verified == ["r", "r-2", "r-3"], text


def test_a_set_is_read_only_and_names_must_be_unambiguous(rotated: Path,
                                                           tmp_path: Path) -> None:
    """A set refuses writes, and a name two files hold, with one line each."""
    files = expand([rotated])
    twin = tmp_path / "twin.db"
    twin.write_bytes(files[0].read_bytes())
    c = open_set([*files, twin])
    try:
        assert isinstance(c, CassetteSet)
        with pytest.raises(CassetteError, match="several cassettes"):
            c.session("r")
        with pytest.raises(CassetteError, match="read-only"):
            c.delete_session("r-2")
        assert c.session("r-2").name == "r-2"
    finally:
        c.close()


def test_bad_set_arguments_fail_with_one_line(tmp_path: Path) -> None:
    """A glob matching nothing, an empty directory, a recording mode on a set: one line, exit 2
    or 1, no traceback."""
    with pytest.raises(UsageError, match="no cassettes match"):
        expand([str(tmp_path / "none-*.db")])
    r = run_mcprec("replay", str(tmp_path / "none-*.db"))
    assert r.returncode != 0 and b"no cassettes match" in r.stderr
    assert b"Traceback" not in r.stderr
    r = run_mcprec("sessions", str(tmp_path))
    assert r.returncode != 0 and b"no cassettes (*.db) under" in r.stderr
    (tmp_path / "x.db").write_bytes(b"")
    r = run_mcprec("replay", str(tmp_path), "--mode", "once", "--", "true")
    assert r.returncode != 0 and b"mode 'none' only" in r.stderr
    for flags in (["--rotate-size", "10"], ["--rotate-every", "soon"]):
        r = run_mcprec("record", "--target", "http://127.0.0.1:9/mcp", "-c",
                       str(tmp_path / "y.db"), *flags)
        assert r.returncode == 2 and b"Traceback" not in r.stderr, r.stderr
    r = run_mcprec("record", "--rotate-every", "1h", "--", "true")
    assert r.returncode == 2 and b"go with --target" in r.stderr


def test_rotated_names_sort_as_opened(tmp_path: Path) -> None:
    """Names within one millisecond, or with the clock set back, still sort after the last."""
    first = rotated_path(tmp_path / "n.db", now=1_800_000_000.0)
    assert first.name == "n-20270115T080000.000Z.db"
    second = rotated_path(tmp_path / "n.db", after=first, now=1_800_000_000.0)
    third = rotated_path(tmp_path / "n.db", after=second, now=1_700_000_000.0)
    assert first.name < second.name < third.name


def test_a_name_the_rotated_set_holds_is_refused(rotated: Path) -> None:
    """record -s r into a rotated set whose first file has a session r: one line, exit 1."""
    r = run_mcprec("record", "--target", "http://127.0.0.1:9/mcp", "-c", str(rotated / "set.db"),
                   "-s", "r", "--rotate-size", "1M")
    assert r.returncode != 0 and b"already has a session named 'r'" in r.stderr, r.stderr
    assert b"Traceback" not in r.stderr
