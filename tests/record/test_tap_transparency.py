"""The stdio tap is byte-transparent in both directions, records every line, and never waits."""

from __future__ import annotations

import json
import os
import random
import select
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.helpers import BYTE_MIRROR, LINE_SERVER, MCPREC, wire_lines
from mcprec import wire
from mcprec.cassette import open_cassette


def _garbage(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


REQ = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
INPUTS = {
    "json-rpc lines": REQ + b"\n" + b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n',
    "random bytes": _garbage(1, 256 * 1024),
    "invalid utf-8": b"\xff\xfe\xfd\n\xc3\x28 broken\n\xed\xa0\x80 surrogate\n" + REQ + b"\xff\n",
    "no trailing newline": REQ + b"\n" + REQ,
    "crlf": REQ + b"\r\n" + b"plain text\r\n\r\n",
    "empty lines": b"\n\n\n" + REQ + b"\n\n",
    "nothing": b"",
    "nul and control bytes": b"\x00\x01\x02\x1b[31m\x7f\n\x00\n",
    "20 MB line": b'{"jsonrpc":"2.0","id":7,"method":"x","params":{"blob":"'
                  + b"z" * (20 * 1024 * 1024) + b'"}}\n' + REQ + b"\n",
}


def _mirror(tmp: Path, data: bytes, through_tap: bool) -> SimpleNamespace:
    got = tmp / ("tapped.bin" if through_tap else "direct.bin")
    server = [sys.executable, str(BYTE_MIRROR), str(got)]
    cas = tmp / "mirror.db"
    argv = [*MCPREC, "record", "-c", str(cas), "--", *server] if through_tap else server
    proc = subprocess.run(argv, input=data, capture_output=True, timeout=60, check=False)
    return SimpleNamespace(stdout=proc.stdout, stderr=proc.stderr, code=proc.returncode,
                           received=got.read_bytes(), cassette=cas)


@pytest.fixture(scope="module", params=list(INPUTS), ids=list(INPUTS))
def mirrored(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """One input sent to byte_mirror directly and through `mcprec record`."""
    tmp = tmp_path_factory.mktemp("mirror")
    data = INPUTS[request.param]
    direct = _mirror(tmp, data, through_tap=False)
    tapped = _mirror(tmp, data, through_tap=True)
    with open_cassette(tapped.cassette) as c:
        messages = list(c.messages())
    return SimpleNamespace(data=data, direct=direct, tapped=tapped, messages=messages)


def test_client_gets_the_same_bytes(mirrored: SimpleNamespace) -> None:
    """What the server writes reaches the client through the tap exactly as it does directly."""
    assert mirrored.direct.code == mirrored.tapped.code == 0
    assert mirrored.tapped.stdout == mirrored.direct.stdout


def test_server_gets_exactly_what_the_client_sent(mirrored: SimpleNamespace) -> None:
    """What the client writes reaches the server through the tap byte for byte."""
    assert mirrored.tapped.received == mirrored.data


@pytest.mark.parametrize("direction", ["client_to_server", "server_to_client"])
def test_every_line_recorded_as_is(mirrored: SimpleNamespace, direction: str) -> None:
    """Every line in each direction is a message whose raw is that line, without the newline."""
    sent = mirrored.data if direction == "client_to_server" else mirrored.tapped.stdout
    raws = [m.raw for m in mirrored.messages if m.direction == direction]
    assert raws == wire_lines(sent)


def test_non_json_rpc_lines_are_invalid(mirrored: SimpleNamespace) -> None:
    """A recorded line that is not a JSON object is of kind 'invalid'."""
    for m in mirrored.messages:
        try:
            obj = json.loads(m.raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            obj = None
        if not isinstance(obj, (dict, list)):
            assert m.kind == "invalid", m.raw[:80]


@pytest.mark.parametrize("stdin_file,stdout_file", [(True, False), (False, True), (True, True)],
                         ids=["stdin-file", "stdout-file", "both-files"])
def test_regular_files_as_client_ends(tmp_path: Path, stdin_file: bool, stdout_file: bool) -> None:
    """Bytes stay exact when the client's end of the tap is a regular file instead of a pipe."""
    data = INPUTS["random bytes"] + INPUTS["no trailing newline"]
    direct = _mirror(tmp_path, data, through_tap=False)
    src, dst = tmp_path / "in.bin", tmp_path / "out.bin"
    src.write_bytes(data)
    argv = [*MCPREC, "record", "-c", str(tmp_path / "files.db"), "--", sys.executable,
            str(BYTE_MIRROR), str(tmp_path / "tapped.bin")]
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        proc = subprocess.run(argv, stdin=fin if stdin_file else None,
                              input=None if stdin_file else data,
                              stdout=fout if stdout_file else subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=60, check=False)
    out = dst.read_bytes() if stdout_file else proc.stdout
    assert proc.returncode == 0, proc.stderr
    assert out == direct.stdout
    assert (tmp_path / "tapped.bin").read_bytes() == data


def test_dev_null_stdin_is_eof(tmp_path: Path, cassette: Path) -> None:
    """With stdin from /dev/null (not pollable) the server gets EOF and mcprec exits."""
    marker = tmp_path / "eof"
    with open(os.devnull, "rb") as null:
        proc = subprocess.run(
            [*MCPREC, "record", "-c", str(cassette), "--exit-timeout", "30", "--",
             sys.executable, str(LINE_SERVER), "--on-eof", str(marker)],
            stdin=null, capture_output=True, timeout=20, check=False,
        )
    assert proc.returncode == 0, proc.stderr
    assert marker.read_text() == "eof" and proc.stderr == b""


def test_dev_null_stdout_still_records(cassette: Path) -> None:
    """With stdout to /dev/null the server's answers are discarded but recorded."""
    with open(os.devnull, "wb") as null:
        proc = subprocess.run(
            [*MCPREC, "record", "-c", str(cassette), "--", sys.executable, str(LINE_SERVER)],
            input=REQ + b"\n", stdout=null, stderr=subprocess.PIPE, timeout=20, check=False,
        )
    assert proc.returncode == 0, proc.stderr
    with open_cassette(cassette) as c:
        assert [m.kind for m in c.messages()] == ["request", "response"]


def test_terminal_as_client_end(cassette: Path) -> None:
    """On a (raw) terminal, as when run by hand, requests and answers go through."""
    import pty
    import tty

    master, slave = pty.openpty()
    tty.setraw(slave)
    proc = subprocess.Popen(
        [*MCPREC, "record", "-c", str(cassette), "--", sys.executable, str(LINE_SERVER)],
        stdin=slave, stdout=slave, stderr=subprocess.PIPE,
    )
    os.close(slave)
    try:
        os.write(master, REQ + b"\n")
        answer = json.loads(_read_line(master, bytearray()))
        assert answer["id"] == 1 and answer["result"]["echo"] == "tools/list"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        os.close(master)
        assert proc.stderr is not None
        proc.stderr.close()


# --- kinds of single lines --------------------------------------------------------------------

KIND_CASES = [
    (b'{"jsonrpc":"2.0","id":1,"method":"ping"}', "request"),
    (b'{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x"}}', "request"),
    (b'{"jsonrpc":"2.0","method":"notifications/progress","params":{}}', "notification"),
    (b'{"jsonrpc":"2.0","id":1,"result":{}}', "response"),
    (b'{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}', "error"),
    (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]', "batch"),
    (b"[]", "invalid"),
    (b"{}", "invalid"),
    (b'"just a string"', "invalid"),
    (b"42", "invalid"),
    (b"null", "invalid"),
    (b'{"jsonrpc":"2.0","method":7}', "invalid"),
    (b"not json at all", "invalid"),
    (b'{"jsonrpc":"2.0","id":1,"method":"ping"', "invalid"),
    (b"\xff\xfe{}", "invalid"),
    (b"", "invalid"),
    (b"   ", "invalid"),
]


@pytest.fixture(scope="module")
def kinds_recorded(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[bytes, str]]:
    """KIND_CASES sent as one stream through the tap; the recorded (raw, kind) in order."""
    tmp = tmp_path_factory.mktemp("kinds")
    data = b"".join(line + b"\n" for line, _ in KIND_CASES)
    cas = tmp / "kinds.db"
    argv = [*MCPREC, "record", "-c", str(cas), "--", sys.executable, str(BYTE_MIRROR),
            str(tmp / "got.bin")]
    subprocess.run(argv, input=data, capture_output=True, timeout=60, check=True)
    with open_cassette(cas) as c:
        return [(m.raw, m.kind) for m in c.messages() if m.direction == "client_to_server"]


@pytest.mark.parametrize("index", range(len(KIND_CASES)),
                         ids=[kind + ":" + line[:24].decode("utf-8", "replace")
                              for line, kind in KIND_CASES])
def test_recorded_kind(kinds_recorded: list[tuple[bytes, str]], index: int) -> None:
    """Each kind of line is recorded with the right kind."""
    assert kinds_recorded[index] == KIND_CASES[index]


# --- stderr -----------------------------------------------------------------------------------

STDERR_BYTES = b"plain line\n\xff\xfe not utf-8\n\x00nul\nno newline at the end"
STDERR_SERVER = (
    "import os, sys; os.write(2, bytes.fromhex(sys.argv[1])); sys.stdin.buffer.read()"
)


def test_stderr_passes_through_byte_exact(cassette: Path) -> None:
    """The server's stderr reaches our stderr unchanged, and each line is recorded."""
    proc = subprocess.run(
        [*MCPREC, "record", "-c", str(cassette), "--", sys.executable, "-c", STDERR_SERVER,
         STDERR_BYTES.hex()],
        input=b"", capture_output=True, timeout=60, check=False,
    )
    assert proc.returncode == 0
    assert proc.stderr == STDERR_BYTES
    with open_cassette(cassette) as c:
        lines = [e.line for e in c.stderr()]
    expected = [ln.decode("utf-8", "replace") for ln in STDERR_BYTES.split(b"\n")]
    assert lines == expected


# --- no buffering -----------------------------------------------------------------------------


def _read_line(fd: int, buf: bytearray, timeout: float = 15.0) -> bytes:
    """Read one line from ``fd`` (keeping what follows in ``buf``), failing after ``timeout``."""
    while b"\n" not in buf:
        ready, _, _ = select.select([fd], [], [], timeout)
        assert ready, f"no line within {timeout} s: the tap is holding data back"
        chunk = os.read(fd, 65536)
        assert chunk, "unexpected EOF"
        buf.extend(chunk)
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return line


def test_ping_pong_without_buffering(cassette: Path) -> None:
    """Each request reaches the server, and its answer the client, before the next is sent."""
    proc = subprocess.Popen(
        [*MCPREC, "record", "-c", str(cassette), "--", sys.executable, str(LINE_SERVER)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    buf = bytearray()
    try:
        for i in range(20):
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": f"m{i}"}).encode()
                             + b"\n")
            proc.stdin.flush()
            answer = json.loads(_read_line(proc.stdout.fileno(), buf))
            assert answer == {"jsonrpc": "2.0", "id": i, "result": {"echo": f"m{i}", "n": i + 1}}
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
        proc.stdout.close()


def test_server_output_forwarded_before_client_sends(tmp_path: Path, cassette: Path) -> None:
    """Bytes the server writes unprompted reach the client while the client is still silent."""
    proc = subprocess.Popen(
        [*MCPREC, "record", "-c", str(cassette), "--", sys.executable, str(BYTE_MIRROR),
         str(tmp_path / "got.bin")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        greeting = _read_line(proc.stdout.fileno(), bytearray())
        assert greeting == b"hello from byte_mirror \xff\xfe not json"
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()


# --- the line framer and the classifier -------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=2000), cuts=st.lists(st.integers(0, 2000), max_size=30))
def test_line_framer_is_chunking_independent(data: bytes, cuts: list[int]) -> None:
    """Cutting a stream into any chunks yields the lines of split(b"\\n"); only the last may be open."""
    out: list[tuple[bytes, bool]] = []
    framer = wire.LineFramer(lambda line, terminated: out.append((line, terminated)))
    bounds = sorted({0, len(data), *(c for c in cuts if c <= len(data))})
    for a, b in zip(bounds, bounds[1:]):
        framer.feed(data[a:b])
    framer.close()
    parts = data.split(b"\n")
    expected = [(p, True) for p in parts[:-1]]
    if parts[-1]:
        expected.append((parts[-1], False))
    assert out == expected


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.binary(max_size=500),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
            st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "x"]),
            inner, max_size=5),
        max_leaves=12,
    ).map(lambda v: json.dumps(v).encode()),
))
def test_classify_never_raises(raw: bytes) -> None:
    """Any bytes classify to one of the known kinds, without raising."""
    c = wire.classify(raw)
    assert c.kind in wire.KINDS
    if c.kind in ("request", "notification"):
        assert isinstance(c.method, str)
