"""Replaying large answers: sent from the cassette in pieces, never read whole, and byte for byte
what replay sent when it read them whole and spliced the client's id in (``wire.with_id``)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.helpers import LARGE_CALL, LARGE_INITIALIZE, LARGE_INITIALIZED, run_mcprec
from mcprec import wire
from mcprec.cassette.store import Cassette
from mcprec.cassette.models import STORED_APART, Message, StoredText, message_from_row
from mcprec.cassette.models import StoredMessage
from mcprec.record.writer import Recorder
from mcprec.errors import CassetteError
from mcprec.replay import model as model_module
from mcprec.replay.engine import AsyncPlayback
from mcprec.replay.lean import serve_lean
from mcprec.replay.playback import Playback, candidates
from mcprec.replay.stdio import serve_stdio

C2S, S2C = wire.CLIENT_TO_SERVER, wire.SERVER_TO_CLIENT
DATA = base64.b64encode(os.urandom(3 * 2**20 // 4 * 3)).decode()  # 3 MiB of base64: 3 pieces
RESULT = json.dumps({"content": [{"type": "image", "data": DATA, "mimeType": "image/png"}]},
                    separators=(",", ":"))
INITIALIZE, INITIALIZED, CALL = LARGE_INITIALIZE, LARGE_INITIALIZED, LARGE_CALL

ANSWERS = {
    "id first": '{"jsonrpc":"2.0","id":1,"result":%s}' % RESULT,
    "id last": '{"result":%s,"jsonrpc":"2.0","id":1}' % RESULT,
    "id last, spaced": '{"jsonrpc": "2.0", "result": %s, "id": 1}\t' % RESULT,
    # not where a look at the head and tail finds it: read whole, as before
    "id in the middle": '{"result":%s,"id":1,"jsonrpc":"2.0"}' % RESULT,
    "id past the head": '{' + " " * 70_000 + '"id":1,"result":%s}' % RESULT,
}
WHOLE = ("id in the middle", "id past the head")


def _record(path: Path, answer: bytes) -> None:
    """A session answering initialize and one tools/call (with ``answer``), recorded as the
    recorder records (a large message written in pieces)."""
    with Cassette.open(path, create=True) as c:
        s = c.create_session("s", transport="stdio", target=["x"], tags={})
        rec = Recorder(c.connection, s)
        rec.add(C2S, 0, orjson.dumps(INITIALIZE))
        rec.add(S2C, 1, orjson.dumps({"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "big", "version": "1"}}}))
        rec.add(C2S, 2, orjson.dumps(INITIALIZED))
        rec.add(C2S, 3, orjson.dumps(CALL))
        rec.add(S2C, 4, bytearray(answer))
        rec.finish(exit_code=0)


def test_lookups_leave_a_large_text_in_the_cassette(tmp_path: Path) -> None:
    """Replay's look-ups read a large message without its text, which is read when used."""
    answer = ANSWERS["id first"].encode()
    path = tmp_path / "big.db"
    _record(path, answer)
    with Cassette.open(path) as c:
        s = c.session()
        _, handling = c.window(s, 0, 10)
        assert [type(message_from_row(r, c)) for r in handling] == [Message, StoredMessage]
        m = c.answer(s, 3)
        assert type(m) is StoredMessage and (m.size, m.kind, m.reply_to) == (len(answer),
                                                                             "response", 3)
        assert m.json["id"] == 1 and m.raw == answer
        assert type(c.answer(s, 0)) is Message


def _client_input(call_id: Any) -> bytes:
    return b"".join(orjson.dumps(m) + b"\n" for m in (
        {**INITIALIZE, "id": "init"}, INITIALIZED, {**CALL, "id": call_id}))


def _serve(driver: str, path: Path, data: bytes) -> bytes:
    """What a stdio driver writes to its client, which sends ``data`` and closes."""
    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    os.write(w_in, data)
    os.close(w_in)
    got: list[bytes] = []

    def read() -> None:
        while chunk := os.read(r_out, 1 << 20):
            got.append(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        with Cassette.open(path) as c:
            found = candidates(c, None)
            if driver == "lean":
                serve_lean(Playback(c, found), stdin_fd=r_in, stdout_fd=w_out)
            else:
                def make(send: Any, send_stored: Any) -> AsyncPlayback:
                    return AsyncPlayback(c, found, send, send_stored=send_stored)

                asyncio.run(serve_stdio(make, stdin_fd=r_in, stdout_fd=w_out))
    finally:
        os.close(w_out)
        reader.join()
        os.close(r_out)
        os.close(r_in)
    return b"".join(got)


def _unread(c: Cassette, m: Any) -> bytes:
    raise AssertionError(f"message seq {m.seq} was read whole")


@pytest.mark.parametrize("driver", ["lean", "asyncio"])
@pytest.mark.parametrize("case", list(ANSWERS))
def test_large_answer_goes_out_as_it_did_whole(tmp_path: Path, driver: str, case: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Both stdio drivers send a large answer from the cassette in pieces, never reading it
    whole where its id is at its start or end, and the client gets the very bytes it got when
    the answer was read whole and spliced."""
    answer = ANSWERS[case].encode()
    assert len(answer) > STORED_APART
    path = tmp_path / "big.db"
    _record(path, answer)
    data = _client_input("call-7")
    with monkeypatch.context() as m:  # the answer read whole, as replay did before
        m.setattr(model_module, "stored_with_id", lambda message, rid: None)
        before = _serve(driver, path, data)
    if case not in WHOLE:
        monkeypatch.setattr(Cassette, "raw_of", _unread)
    now = _serve(driver, path, data)
    assert now == before
    lines = now.split(b"\n")
    assert lines[2:] == [b""] and len(lines[1]) >= len(answer)
    assert lines[1] == (wire.with_id(answer, "call-7") or wire.dumps(
        {**orjson.loads(answer), "id": "call-7"}))


@pytest.mark.parametrize("driver", ["lean", "asyncio"])
def test_a_cassette_failing_mid_answer_ends_the_replay(tmp_path: Path, driver: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A cassette that cannot be read any more half-way through an answer ends the replay with
    the error (as one that cannot be read at all)."""
    path = tmp_path / "big.db"
    _record(path, ANSWERS["id first"].encode())
    read = StoredText.read

    def failing(self: StoredText, offset: int, n: int) -> bytes:
        if offset > 2**20:
            raise CassetteError("the cassette is gone")
        return read(self, offset, n)

    monkeypatch.setattr(StoredText, "read", failing)
    with pytest.raises(CassetteError, match="the cassette is gone"):
        _serve(driver, path, _client_input(5))


@pytest.mark.parametrize("case", ["id first", "id last"])
def test_large_answer_read_whole_without_blob_io(tmp_path: Path, case: str) -> None:
    """Where Python has no incremental blob I/O (3.10), the answer is read whole, as before."""
    answer = ANSWERS[case].encode()
    path = tmp_path / "big.db"
    _record(path, answer)

    class NoBlobIO:
        def __init__(self, conn: Any) -> None:
            self._conn = conn

        def __getattr__(self, name: str) -> Any:
            if name == "blobopen":
                raise AttributeError(name)
            return getattr(self._conn, name)

    with Cassette.open(path) as c:
        c._conn = NoBlobIO(c.connection)  # type: ignore[assignment]
        sent: list[bytes] = []

        async def send(data: bytes, related: str | None) -> None:
            sent.append(data)

        async def play() -> None:
            engine = AsyncPlayback(c, candidates(c, None), send, send_stored=send)
            await engine.receive(orjson.dumps({**CALL, "id": 9}))

        asyncio.run(play())
    assert sent == [wire.with_id(answer, 9)]


def test_engine_without_a_streaming_driver_gets_it_whole(tmp_path: Path) -> None:
    """A driver that sends messages whole (HTTP, in-process) gets a large answer as bytes."""
    answer = ANSWERS["id last"].encode()
    path = tmp_path / "big.db"
    _record(path, answer)
    sent: list[Any] = []

    async def send(data: bytes, related: str | None) -> None:
        sent.append(data)

    async def play(c: Cassette) -> None:
        engine = AsyncPlayback(c, candidates(c, None), send)
        await engine.receive(wire.dumps({**CALL, "id": 2**70}))
        m = engine.matcher.handling(3)[-1]
        assert type(m) is StoredMessage and m.size == len(answer)

    with Cassette.open(path) as c:
        asyncio.run(play(c))
    assert sent == [wire.with_id(answer, 2**70)]


def test_replay_command_sends_a_large_answer(tmp_path: Path) -> None:
    """``mcprec replay`` (the lean driver, on the command line) sends it byte for byte."""
    answer = ANSWERS["id first"].encode()
    path = tmp_path / "big.db"
    _record(path, answer)
    done = run_mcprec("replay", str(path), input=_client_input(12345))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(b"\n")[1:] == [wire.with_id(answer, 12345), b""]


# --- where the id is, from the head and tail alone -----------------------------------------------

ids = st.integers(-(2**70), 2**70) | st.text(max_size=12)
blanks = st.sampled_from(["", " ", "\n  ", "\t"])


@settings(max_examples=500, deadline=None)
@given(ids, ids, st.sampled_from(["head", "tail", "tail after jsonrpc", "middle", "both"]),
       blanks, st.integers(0, 300), st.data())
def test_id_span_finds_what_with_id_finds(old: Any, new: Any, where: str, blank: str,
                                          pad: int, data: st.DataObject) -> None:
    """From any head of a message (and its tail), ``wire.id_span`` gives the span ``with_id``
    splices, or None (then the message is read whole); a head holding the whole id says."""
    rid = json.dumps(old)
    result = json.dumps({"text": "x" * pad, "id": 5})
    b = blank
    members = {
        "head": [f'"jsonrpc"{b}:{b}"2.0"', f'"id"{b}:{b}{rid}', f'"result":{result}'],
        "tail": [f'"result":{result}', f'"id"{b}:{b}{rid}'],
        "tail after jsonrpc": [f'"result":{result}', f'"id":{rid}', '"jsonrpc":"2.0"'],
        "middle": [f'"result":{result}', f'"id":{rid}', '"x":1'],
        "both": [f'"id":{rid}', f'"result":{result}', '"id":3'],
    }[where]
    raw = (b + "{" + b + f",{b}".join(members) + b + "}" + b).encode()
    h = data.draw(st.integers(0, len(raw)))
    span = wire.id_span(raw[:h], len(raw), lambda n: raw[len(raw) - n:])
    spliced = wire.with_id(raw, new)
    if span is not None:
        assert raw[:span[0]] + wire.dumps(new) + raw[span[1]:] == spliced
    elif h == len(raw):
        assert spliced is None
    found = wire._id_patterns()[0].match(raw)
    if found is not None and h >= found.end():
        assert span == found.span(1)
