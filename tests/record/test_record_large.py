"""Recording at wire speed: large messages stored whole, in pieces; the tap exits at once while
the recorder finishes; readers wait for a session that has ended but is still being written."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.helpers import MCPREC, PEERS
from mcprec import wire
from mcprec.cassette import open_cassette
from mcprec.record import recorder as writer_module
from mcprec.record.child import _Lines
from mcprec.cassette.store import Cassette
from mcprec.record.writer import Recorder
from mcprec.record.recorder import redacted_pieces
from mcprec.redact import Redactor, Rules

BIG_SERVER = [sys.executable, str(PEERS / "big_result_server.py")]
BLOB = base64.b64encode(bytes(range(256)) * 12)


def blob(size: int) -> bytes:
    return (BLOB * (size // len(BLOB) + 1))[:size]


# --- the SDK client and a 100 MB result ---------------------------------------------------------


def test_sdk_client_100mb_message_exits_within_grace(tmp_path: Path) -> None:
    """With the SDK's stdio_client, a 100 MB message and then the client closing: mcprec exits by
    itself well before the SDK's 2 s grace, and the cassette holds every byte, complete.

    The 100 MB go from the client (an upload): the SDK client reads a 100 MB *answer* in about
    100 s (it joins its buffer to each 64 KiB chunk), by which time the recorder has long caught
    up; a message written at once leaves the recorder the most to do when the client closes.
    bench_record.py's 100mb load measures a 100 MB answer with a fast client."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import get_default_environment, stdio_client

    cassette = tmp_path / "big.db"
    data = blob(100_000_000).decode()
    params = StdioServerParameters(
        command=MCPREC[0], args=[*MCPREC[1:], "record", "-c", str(cassette), "--", *BIG_SERVER],
        env={**get_default_environment(), "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    timing: dict[str, float] = {}

    async def main() -> None:
        with open(tmp_path / "stderr.txt", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()
                    result = await s.call_tool("upload", {"data": data})
                    assert result.content[0].text == str(len(data))  # type: ignore[union-attr]
                timing["closing"] = time.monotonic()
            timing["closed"] = time.monotonic()

    anyio.run(main)
    assert timing["closed"] - timing["closing"] < 2.0, (tmp_path / "stderr.txt").read_text()
    with open_cassette(cassette) as c:
        s = c.session()
        assert (s.status, s.exit_code) == ("complete", 0)
        call = [m for m in c.messages(s) if m.method == "tools/call" and m.kind == "request"]
        assert len(call) == 1
        assert orjson.loads(call[0].raw)["params"]["arguments"]["data"] == data


# --- readers wait for a session being finished ---------------------------------------------------


def test_reader_waits_for_a_session_being_finished(tmp_path: Path) -> None:
    """A session marked as ended while its live recorder still writes it is read once complete."""
    path = tmp_path / "c.db"
    with Cassette.open(path, create=True) as c:
        s = c.create_session("s", transport="stdio", target=["x"], tags={})
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with Cassette.open(path, wait=False) as c:
            c.update_session(s, recorder_pid=sleeper.pid)
            c.connection.execute("UPDATE sessions SET ended_at = '2026-01-01T00:00:00Z'")

        def finish() -> None:
            time.sleep(0.3)
            with Cassette.open(path, wait=False) as c:
                c.connection.execute("UPDATE sessions SET status = 'complete'")

        threading.Thread(target=finish).start()
        t0 = time.monotonic()
        with open_cassette(path) as c:
            assert c.session().status == "complete"
        assert time.monotonic() - t0 >= 0.25
    finally:
        sleeper.kill()
        sleeper.wait()


def test_tap_exit_does_not_wait_for_the_recorder(tmp_path: Path) -> None:
    """mcprec exits once the recorder has the rest; the recorder, in its own process group,
    completes the session after."""
    cassette = tmp_path / "c.db"
    lines = b"".join(orjson.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                   "params": {"name": "image", "arguments": {"size": 3_000_000}}})
                     + b"\n" for i in range(1, 11))
    proc = subprocess.run([*MCPREC, "record", "-c", str(cassette), "--", *BIG_SERVER],
                          input=lines, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          timeout=60, check=True)
    assert proc.stdout.count(b"\n") == 10
    with open_cassette(cassette) as c:
        s = c.session()
        assert s.status == "complete"
        sizes = [m.size for m in c.messages(s) if m.kind == "response"]
        assert sizes == [3_000_000 + 96 + len(str(i)) for i in range(1, 11)]


# --- large messages: the same rows as the small-message path --------------------------------------


def _record(tmp: Path, messages: list[tuple[str, bytes]], large: int) -> list[tuple]:
    path = tmp / f"r{large}.db"
    with Cassette.open(path, create=True) as c:
        s = c.create_session("s", transport="stdio", target=["x"], tags={})
    old = writer_module.LARGE_MESSAGE
    writer_module.LARGE_MESSAGE = large
    try:
        with Cassette.open(path, wait=False) as c:
            rec = Recorder(c.connection, c.session_by_id(s.id), redact=Redactor(Rules()))
            for i, (direction, raw) in enumerate(messages):
                rec.add(direction, i, bytearray(raw))
            rec.commit()
            rows = c.connection.execute(
                "SELECT seq, direction, kind, rpc_id, method, reply_to, context_seq, follows, "
                "waits_for, match_key, size, raw FROM messages ORDER BY seq").fetchall()
            meta = c.connection.execute(
                "SELECT server_info, protocol_version FROM sessions").fetchall()
    finally:
        writer_module.LARGE_MESSAGE = old
    return [tuple(bytes(x) if isinstance(x, bytes) else x for x in r) for r in rows] + meta


C2S, S2C = wire.CLIENT_TO_SERVER, wire.SERVER_TO_CLIENT
SECRET = b"sk-abcdefghijklmnopqrstuvwxyz0123"


def _msg(obj: dict) -> bytes:
    return orjson.dumps(obj)


LARGE_CASES = {
    "image answer": [
        (C2S, _msg({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "i"}})),
        (S2C, _msg({"jsonrpc": "2.0", "id": 1, "result": {"content": [
            {"type": "image", "data": blob(5000).decode()},
            {"type": "text", "text": f"key {SECRET.decode()} and {blob(3000).decode()}"}]}})),
    ],
    "initialize answer with a payload": [
        (C2S, _msg({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})),
        (S2C, _msg({"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": "2025-06-18", "serverInfo": {"name": "x", "icon": blob(4000).decode()},
            "capabilities": {}}})),
    ],
    "secret-named key beside a payload": [
        (C2S, _msg({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "i"}})),
        (S2C, _msg({"jsonrpc": "2.0", "id": 2, "result": {"password": "hunter22",
                                                           "data": blob(5000).decode()}})),
    ],
    "payload as the id": [
        (C2S, _msg({"jsonrpc": "2.0", "id": blob(2000).decode(), "method": "ping"})),
        (S2C, _msg({"jsonrpc": "2.0", "id": blob(2000).decode(), "result": {
            "data": blob(4000).decode()}})),
    ],
    "request with a payload": [
        (C2S, _msg({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "upload", "arguments": {"file": blob(5000).decode(), "_meta": {"x": 1}}}})),
        (S2C, _msg({"jsonrpc": "2.0", "id": 3, "error": {"code": 1, "message": blob(3000).decode()}})),
    ],
    "not JSON around a payload": [
        (S2C, b'garbage "' + blob(5000) + b'" more'),
        (S2C, b'{"jsonrpc":"2.0","id":9,"result":"' + blob(5000) + b'"'),
    ],
    "an escaped quote before a payload": [
        (S2C, b'{"jsonrpc":"2.0","id":4,"result":{"t":"x\\"' + blob(5000) + b'"}}'),
    ],
}


@pytest.mark.parametrize("case", list(LARGE_CASES))
def test_large_path_stores_the_same_rows(tmp_path: Path, case: str) -> None:
    """Recorded as large (in pieces, classified around payloads), a message gives the very rows
    and session details the small-message path gives."""
    messages = LARGE_CASES[case]
    assert _record(tmp_path, messages, 1024) == _record(tmp_path, messages, 1 << 40)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(
    st.sampled_from([b'"', b"{", b'"password":', b"Bearer abcdefghijk ", b"\\", b",", b"sk-",
                     SECRET, b'"api_key":"', b" ", b"\n", b"[", b"]", b"}"]),
    st.integers(1020, 1500).map(lambda n: b'"' + blob(n) + b'"'),
    st.binary(max_size=20)), max_size=12))
def test_redacted_pieces_join_to_redact(parts: list[bytes]) -> None:
    """The pieces of a message join to exactly what Redactor.redact makes of it."""
    raw = b"".join(parts)
    red = Redactor(Rules())
    assert b"".join(bytes(p) for p in redacted_pieces(red, bytearray(raw))) == red.redact(raw)
    assert b"".join(bytes(p) for p in redacted_pieces(None, raw)) == raw


# --- the recorder's line cutter ------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=2000).map(lambda b: b.replace(b"\x01", b"\n")),
       cuts=st.lists(st.integers(0, 2000), max_size=30), limit=st.integers(1, 300))
def test_line_cutter_matches_the_line_framer(data: bytes, cuts: list[int], limit: int) -> None:
    """The recorder's cutter gives the lines (and truncated heads) wire.LineFramer gives, however
    the stream is cut."""
    want: list[tuple[bytes, int]] = []
    framer = wire.LineFramer(lambda line, _t: want.append((line, len(line))), limit=limit,
                             oversize=lambda head, size: want.append((head, size)))
    got: list[tuple[bytes, int]] = []
    cutter = _Lines(limit)
    bounds = sorted({0, len(data), *(c for c in cuts if c <= len(data))})
    for a, b in zip(bounds, bounds[1:]):
        framer.feed(data[a:b])
        chunk = b"xx" + data[a:b] + b"yy"  # fed as a range of a larger buffer
        cutter.feed(chunk, 2, 2 + b - a, 0, lambda line, size: got.append((bytes(line), size)))
    framer.close()
    cutter.close(lambda line, size: got.append((bytes(line), size)))
    assert got == want


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    st.sampled_from([b'"', b"\\", b",", b" ", b"{", b'"a":']),
    st.integers(0, 40).map(lambda n: blob(n)),
    st.integers(10, 40).map(lambda n: b'"' + blob(n) + b'"')), max_size=25),
    st.integers(1, 64))
def test_payload_spans_match_the_expression(parts: list[bytes], window: int) -> None:
    """Found a window at a time, payload spans are those the redactor's expression finds."""
    import re

    blob_rx = re.compile(rb'("[A-Za-z0-9+/=_-]{8,}")')
    raw = b"".join(parts)
    old = writer_module._B64_RUN
    writer_module._B64_RUN = 8
    try:
        got = writer_module.payload_spans(raw, blob_rx, window)
    finally:
        writer_module._B64_RUN = old
    assert got == [m.span() for m in blob_rx.finditer(raw)]


def test_large_whole_messages_through_the_recorder_process(tmp_path: Path) -> None:
    """Whole messages (the HTTP proxy's way), large ones among small, are recorded byte-exact."""
    from mcprec.record.process import ProcessSessionWriter, RecorderProcess, \
        create_recorded_session

    path = tmp_path / "http.db"
    session = create_recorded_session(path, "h", transport="http", target="http://x/mcp",
                                      tags=None, redact=Redactor(Rules()), recorder_pid=None)
    recorder = RecorderProcess(path, rules=Rules().to_dict())
    writer = ProcessSessionWriter(recorder, session, own=False)
    big = b'{"jsonrpc":"2.0","id":1,"result":{"data":"' + blob(20_000_000) + b'"}}'
    writer.message(C2S, b'{"jsonrpc":"2.0","id":1,"method":"tools/call"}', http={"exchange": 1})
    writer.message(S2C, big, http={"exchange": 1, "status": 200})
    writer.message(C2S, b'{"jsonrpc":"2.0","method":"notifications/x"}', context=None)
    writer.close()
    recorder.close(timeout=60)
    with open_cassette(path) as c:
        got = [(m.kind, m.reply_to, m.raw, m.http) for m in c.messages(c.session())]
    assert got == [
        ("request", None, b'{"jsonrpc":"2.0","id":1,"method":"tools/call"}', {"exchange": 1}),
        ("response", 0, big, {"exchange": 1, "status": 200}),
        ("notification", None, b'{"jsonrpc":"2.0","method":"notifications/x"}', None)]


def test_checkpoints_run_beside_the_writing_connection(tmp_path: Path) -> None:
    """The recorder's checkpoint thread copies committed pages into the database file on its
    own connection, while the writing connection (checkpoints off, as in the recorder) goes on:
    the file grows by what was committed only when the thread has been asked."""
    from mcprec.record.child import _Checkpointer

    path = tmp_path / "c.db"
    cassette = open_cassette(path, create=True)
    conn = cassette.connection
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute("CREATE TABLE bulk (b BLOB)")
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO bulk VALUES (?)", [(os.urandom(100_000),)] * 40)
    conn.execute("COMMIT")
    before = path.stat().st_size
    assert before < 1_000_000  # all of it still in the WAL
    checkpointer = _Checkpointer(str(path))
    checkpointer.ask()
    conn.execute("BEGIN IMMEDIATE")  # the writer is not held up meanwhile
    conn.execute("INSERT INTO bulk VALUES (x'00')")
    conn.execute("COMMIT")
    checkpointer.close()
    assert path.stat().st_size >= 4_000_000
    cassette.close()
