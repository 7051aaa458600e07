"""Replaying large answers: left in the cassette by replay's look-ups until they are used."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from mcprec import wire
from mcprec.cassette.store import Cassette, Message, StoredMessage, message_from_row
from mcprec.cassette.writer import Recorder

C2S, S2C = wire.CLIENT_TO_SERVER, wire.SERVER_TO_CLIENT
DATA = base64.b64encode(os.urandom(3 * 2**20 // 4 * 3)).decode()  # 3 MiB of base64: 3 pieces
RESULT = json.dumps({"content": [{"type": "image", "data": DATA, "mimeType": "image/png"}]},
                    separators=(",", ":"))
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "c", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "image", "arguments": {"size": 3}}}

ANSWERS = {
    "id first": '{"jsonrpc":"2.0","id":1,"result":%s}' % RESULT,
    "id last": '{"result":%s,"jsonrpc":"2.0","id":1}' % RESULT,
    "id last, spaced": '{"jsonrpc": "2.0", "result": %s, "id": 1}\t' % RESULT,
    # not where a look at the head and tail finds it: read whole, as before
    "id in the middle": '{"result":%s,"id":1,"jsonrpc":"2.0"}' % RESULT,
    "id past the head": '{' + " " * 70_000 + '"id":1,"result":%s}' % RESULT,
}


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
