"""A request recorded just as it comes is matched without redacting it again; one holding a
secret is still redacted first, and matches the redacted recording."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

from support.helpers import sqlite
from mcprec import wire
from mcprec.record.writer import open_session_writer
from mcprec.redact import default_redactor

SECRET = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3"


def _request(i: int, text: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                         "params": {"name": "echo", "arguments": {"text": text}}})


def _answer(i: int, text: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": i,
                         "result": {"content": [{"type": "text", "text": text}]}})


INIT = orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"}}})
INIT_ANSWER = orjson.dumps({"jsonrpc": "2.0", "id": 0, "result": {
    "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
    "serverInfo": {"name": "echo", "version": "1"}}})


def _cassette(path: Path) -> None:
    w = open_session_writer(path, "s", transport="stdio", target=["echo"],
                            redact=default_redactor())
    w.message(wire.CLIENT_TO_SERVER, INIT, 0)
    w.message(wire.SERVER_TO_CLIENT, INIT_ANSWER, 10)
    for i, text in enumerate(["plain", f"key {SECRET}"], start=1):
        w.message(wire.CLIENT_TO_SERVER, _request(i, text), 100 * i)
        w.message(wire.SERVER_TO_CLIENT, _answer(i, f"answer {i}"), 100 * i + 50)
    w.close()


def _replay(cassette: Path, *requests: bytes) -> tuple[list[dict], set[str]]:
    """The answers, and the modules the replay imported."""
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "mcprec", "replay",
                        str(cassette)], input=b"".join(r + b"\n" for r in (INIT, *requests)),
                       capture_output=True, timeout=60, check=False)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in p.stderr.decode().splitlines()
                if line.startswith("import time:")}
    return [orjson.loads(line) for line in p.stdout.splitlines()], imported


def _text(answer: dict) -> str:
    return answer["result"]["content"][0]["text"]


def test_requests_as_recorded_match_without_the_redactor(tmp_path: Path) -> None:
    """Requests identical to the recorded ones (one plain, one as stored, placeholder and all)
    are answered without the redaction rules ever being loaded."""
    cassette = tmp_path / "c.db"
    _cassette(cassette)
    as_stored = default_redactor().redact(_request(12, f"key {SECRET}"))
    assert SECRET.encode() not in as_stored
    answers, imported = _replay(cassette, _request(11, "plain"), as_stored)
    assert [a["id"] for a in answers] == [0, 11, 12]
    assert [_text(a) for a in answers[1:]] == ["answer 1", "answer 2"]
    assert "mcprec.redact" not in imported


def test_a_request_holding_a_secret_is_redacted_and_matched(tmp_path: Path) -> None:
    """The client sends the secret the recording had redacted: it is redacted on arrival and
    matches; a request recorded as it was still matches beside it."""
    cassette = tmp_path / "c.db"
    _cassette(cassette)
    answers, imported = _replay(cassette, _request(21, f"key {SECRET}"), _request(22, "plain"))
    assert [(a["id"], _text(a)) for a in answers[1:]] == [(21, "answer 2"), (22, "answer 1")]
    assert "mcprec.redact" in imported


# --- requests matched by their bytes (Matcher.match_bytes) ------------------------------------


def _reordered(raw: bytes) -> bytes:
    """The same request written otherwise (keys reversed, spaced): it cannot be matched by its
    bytes, only parsed and keyed."""
    obj = orjson.loads(raw)
    return ("{ " + ", ".join(f'"{k}": {orjson.dumps(obj[k]).decode()}'
                             for k in reversed(list(obj))) + " }").encode()


def _many(path: Path) -> None:
    w = open_session_writer(path, "s", transport="stdio", target=["echo"])
    w.message(wire.CLIENT_TO_SERVER, INIT, 0)
    w.message(wire.SERVER_TO_CLIENT, INIT_ANSWER, 10)
    t = 100
    for i in range(1, 60):
        text = f"call {i % 40}"  # some requests recorded twice, answered differently
        w.message(wire.CLIENT_TO_SERVER, _request(i, text), t)
        w.message(wire.SERVER_TO_CLIENT, _answer(i, f"answer {i}"), t + 5)
        t += 10
    # the id last, as the TypeScript SDK writes it
    tail = b'{"method":"tools/call","params":{"name":"echo","arguments":{"text":"tail"}},' \
           b'"jsonrpc":"2.0","id":"t-1"}'
    w.message(wire.CLIENT_TO_SERVER, tail, t)
    w.message(wire.SERVER_TO_CLIENT, _answer(99, "tail answer").replace(b'"id":99', b'"id":"t-1"'),
              t + 5)
    w.close()


def _played(cassette: Path, requests: list[bytes]) -> tuple[list[bytes], dict]:
    from mcprec.cassette import Cassette
    from mcprec.replay.playback import Playback, candidates

    with Cassette.open(cassette) as c:
        pb = Playback(c, candidates(c, None))
        pb.start()
        out = [bytes(data) for data, _ in pb.take()]
        for raw in requests:
            pb.receive(raw)
            out += [bytes(data) for data, _ in pb.take()]
        return out, pb.report()


def test_requests_sent_as_recorded_are_answered_as_parsed_ones_are(tmp_path: Path) -> None:
    """Matching by bytes changes nothing a client sees: the answers (ids, order, the second
    answer of a request recorded twice, repeats past the last), the unmatched and invalid
    requests, and the report are those of the same requests written so that they must be
    parsed."""
    cassette = tmp_path / "c.db"
    _many(cassette)
    tail = b'{"method":"tools/call","params":{"name":"echo","arguments":{"text":"tail"}},' \
           b'"jsonrpc":"2.0","id":'
    requests = [INIT.replace(b'"id":0', b'"id":"i"')]
    requests += [_request(1000 + i, f"call {i % 40}") for i in range(1, 60)]
    requests += [_request(2000, "call 3"),  # recorded twice, both used: repeated
                 _request(2001, "never recorded"),
                 _request(7, "call 5").replace(b'"id":7', b'"id":"str\\u0069d"'),
                 _request(8, "call 6").replace(b'"id":8', b'"id":007'),  # not JSON
                 tail + b'"t-9"}', tail + b'42}']
    as_sent, report = _played(cassette, requests)
    parsed, parsed_report = _played(cassette, [requests[0]] + [
        r if b"007" in r else _reordered(r) for r in requests[1:]])
    assert as_sent == parsed
    assert report == parsed_report
    assert report["repeated"] == 3 and len(report["unmatched"]) == 1
    answers = [orjson.loads(a) for a in as_sent]
    assert [a["id"] for a in answers][-5:] == [2001, "strid", None, "t-9", 42]
    assert _text(answers[1]) == "answer 1" and _text(answers[41]) == "answer 41"
    assert _text(answers[-1]) == "tail answer"


def test_a_stale_stored_key_is_not_trusted_by_bytes(tmp_path: Path) -> None:
    """Keys stored by another mcprec version (another hash): a request sent as recorded is not
    matched by its bytes either, so every client gets the same no-match."""
    
    cassette = tmp_path / "c.db"
    _many(cassette)
    with sqlite(cassette) as conn:
        conn.execute("UPDATE messages SET match_key = 'other' WHERE method = 'tools/call'")
        conn.execute("UPDATE sessions SET key_scheme = NULL")  # as recorded by that version
    conn.close()
    out, report = _played(cassette, [INIT, _request(5, "call 1"), _request(6, "call 2")])
    assert len(report["unmatched"]) == 2 and report["matched"] == 1
    assert all("error" in orjson.loads(a) for a in out[1:])


def test_the_texts_kept_for_matching_by_bytes_stay_bounded(tmp_path: Path, monkeypatch) -> None:
    """A long session of large requests: the recorded texts kept to match by bytes stay within
    their bound (the oldest go first), and a request whose text went is matched as any other."""
    from mcprec import matching
    from mcprec.cassette import Cassette
    from mcprec.replay.playback import Playback, candidates

    monkeypatch.setattr(matching, "CUT_BYTES", 50_000)
    cassette = tmp_path / "c.db"
    w = open_session_writer(cassette, "s", transport="stdio", target=["echo"])
    w.message(wire.CLIENT_TO_SERVER, INIT, 0)
    w.message(wire.SERVER_TO_CLIENT, INIT_ANSWER, 10)
    texts = [f"{i:04d} " + "x" * 2000 for i in range(300)]
    for i, text in enumerate(texts, start=1):
        w.message(wire.CLIENT_TO_SERVER, _request(i, text), 100 * i)
        w.message(wire.SERVER_TO_CLIENT, _answer(i, f"answer {i}"), 100 * i + 50)
    w.close()
    with Cassette.open(cassette) as c:
        pb = Playback(c, candidates(c, None))
        pb.start()
        pb.receive(INIT)
        pb.take()
        got = []
        for i, text in [*enumerate(texts, start=1), (1, texts[0])]:
            pb.receive(_request(5000 + i, text))
            got += [orjson.loads(bytes(data)) for data, _ in pb.take()]
            m = pb.matcher
            assert m._cut_bytes <= 50_000
            assert m._cut_bytes == sum(len(k) for k in m._by_cut)
        assert [_text(a) for a in got] == [f"answer {i}" for i in range(1, 301)] + ["answer 1"]
        assert [a["id"] for a in got] == [5000 + i for i in range(1, 301)] + [5001]
        assert pb.report()["matched"] == 302 and pb.report()["repeated"] == 1
