"""Replay's first answer needs no JSON parser (issue 11: start-up).

A client that sends ``initialize`` as it was recorded is matched by its bytes; its id is read
(``wire.id_value``) and written (``wire.id_json``) without orjson, and a notification without
params is read by ``wire.bare_notification``. Importing orjson (with the dataclasses, inspect,
uuid and json it imports) was 15-19 ms of a 50 ms start-up. Each shortcut must read and write
exactly what orjson does, for any input: the property tests below compare them with orjson.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from support.helpers import INITIALIZE_ANSWER_LINE, INITIALIZE_LINE, REPO
from hypothesis import given, settings
from hypothesis import strategies as st

from mcprec import wire
from mcprec.cassette import open_cassette
from mcprec.record.writer import open_session_writer

INITIALIZE, ANSWER = INITIALIZE_LINE, INITIALIZE_ANSWER_LINE
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'


# --- the shortcuts read and write what orjson does --------------------------------------------

ids = st.integers(-(2**63), 2**64) | st.text() | st.text(st.characters(codec="ascii"))


@given(ids)
@settings(max_examples=500)
def test_an_id_reads_and_writes_as_orjson_does(rid: object) -> None:
    try:
        text = orjson.dumps(rid)
    except TypeError:  # beyond 64 bits: written exactly by json
        text = str(rid).encode()
    assert wire.id_json(rid) == text
    assert wire.id_text(rid) == text.decode()
    value = wire.id_value(text)
    assert value == rid and type(value) is type(rid)


# texts the id pattern of ``wire.id_cut`` can cut out: digits (leading zeros, a minus), and
# quoted texts with escapes, control characters, odd UTF-8
id_texts = (st.from_regex(rb"\A-?[0-9]{1,25}\Z")
            | st.builds(lambda b: b'"' + b + b'"',
                        st.binary(max_size=12).map(lambda b: b.replace(b'"', b"").replace(
                            b"\\", b"")))
            | st.builds(lambda s: b'"' + s.encode() + b'"',
                        st.text(max_size=12).filter(lambda s: '"' not in s and "\\" not in s)))


@given(id_texts)
@settings(max_examples=500)
def test_an_id_text_reads_as_wire_loads_reads_it(text: bytes) -> None:
    try:
        expected = wire.loads(text)
    except orjson.JSONDecodeError:
        with pytest.raises(orjson.JSONDecodeError):
            wire.id_value(text)
        return
    value = wire.id_value(text)
    assert value == expected and type(value) is type(expected)


blanks = st.text(st.sampled_from(" \t\n\r\x0b\x0c"), max_size=2).map(str.encode)
methods = st.text(max_size=12) | st.sampled_from(["notifications/initialized", "a.b$c-d_e/f"])


@given(st.lists(blanks, min_size=6, max_size=6), methods, st.booleans(),
       st.sampled_from([b"", b',"params":{}', b',"id":1', b',"jsonrpc":"2.0"']))
@settings(max_examples=500)
def test_a_notification_read_without_a_parser_is_what_orjson_reads(
        gaps: list[bytes], method: str, method_first: bool, extra: bytes) -> None:
    a, b, c, d, e, f = gaps
    name = orjson.dumps(method)
    members = [b'"jsonrpc"' + a + b":" + b + b'"2.0"', b'"method"' + c + b":" + d + name]
    if method_first:
        members.reverse()
    raw = e + b"{" + b",".join(members) + extra + b"}" + f
    got = wire.bare_notification(raw)
    if got is not None:
        assert orjson.loads(raw) == {"jsonrpc": "2.0", "method": got}
    elif not extra and not a + b + c + d + e + f and method.replace("/", "").replace(
            ".", "").replace("$", "").replace("-", "").replace("_", "").isalnum() \
            and method.isascii():
        pytest.fail(f"{raw!r} is a bare notification")


def test_a_bare_notification_is_read_as_such() -> None:
    assert wire.bare_notification(INITIALIZED) == "notifications/initialized"
    assert wire.bare_notification(b'{"method":"x/y","jsonrpc":"2.0"}') == "x/y"
    for other in (b'{"jsonrpc":"2.0","method":"x","params":{}}', b'{"jsonrpc":"2.0","id":1}',
                  b'{"jsonrpc":"2.0","method":"x\\u0041"}', b"[]", b""):
        assert wire.bare_notification(other) is None


# --- a replay answers initialize without importing orjson ------------------------------------

def _cassette(tmp_path: Path) -> Path:
    path = tmp_path / "c.db"
    w = open_session_writer(path, "s", transport="stdio", target=["server"])
    w.message(wire.CLIENT_TO_SERVER, INITIALIZE, 0)
    w.message(wire.SERVER_TO_CLIENT, ANSWER, 1000)
    w.message(wire.CLIENT_TO_SERVER, INITIALIZED, 2000)
    w.message(wire.CLIENT_TO_SERVER, b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', 3000)
    w.message(wire.SERVER_TO_CLIENT, b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}', 4000)
    w.close()
    return path


# replays on stdin/stdout as `mcprec replay` does, then says which of them it imported
_REPLAY_THEN_SAY = (
    "import sys\n"
    "from mcprec.replay import replay_stdio\n"
    "code = replay_stdio(sys.argv[1])\n"
    "print(sorted({'orjson', 'dataclasses', 'json.scanner'} & set(sys.modules)), code,"
    " file=sys.stderr)\n")


@pytest.mark.parametrize("rid", [b"0", b"7", b'"init-1"'])
def test_initialize_sent_as_recorded_is_answered_without_orjson(tmp_path: Path,
                                                                rid: bytes) -> None:
    path = _cassette(tmp_path)
    sent = INITIALIZE.replace(b'"id":0', b'"id":' + rid)
    done = subprocess.run([sys.executable, "-c", _REPLAY_THEN_SAY, str(path)],
                          input=sent + b"\n" + INITIALIZED + b"\n", capture_output=True,
                          timeout=60, cwd=REPO)
    assert done.stdout == ANSWER.replace(b'"id":0', b'"id":' + rid) + b"\n", done.stderr
    assert done.stderr.decode().splitlines()[-1] == "[] 0", done.stderr


def test_initialize_sent_otherwise_is_parsed_and_answered_as_before(tmp_path: Path) -> None:
    """Another protocol version: parsed, compared with the recording's, and said so."""
    path = _cassette(tmp_path)
    sent = INITIALIZE.replace(b"2025-06-18", b"2025-11-25").replace(b'"id":0', b'"id":"a\\u0062"')
    done = subprocess.run([sys.executable, "-m", "mcprec", "replay", str(path)],
                          input=sent + b"\n" + INITIALIZED + b"\n", capture_output=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout) == {**orjson.loads(ANSWER), "id": "ab"}
    assert b"the client offers protocol version 2025-11-25" in done.stderr


def test_a_session_reads_its_json_columns_when_asked(tmp_path: Path) -> None:
    path = _cassette(tmp_path)
    with open_cassette(path) as c:
        session = c.session("s")
        again = c.session("s")
        assert session.target == ["server"] and session.tags == {}
        assert session == again and repr(session) == repr(again)
        assert session.client_info == {"name": "t", "version": "1"}
        assert session.server_label == "s 1" and session.target_label == "server"


def test_a_session_sent_as_recorded_is_never_parsed_to_be_matched(tmp_path: Path,
                                                                  monkeypatch) -> None:
    """initialize, notifications/initialized, then the first keyed request (which reads the
    first window): each matched by its bytes, none parsed by ``wire.classify``."""
    from mcprec.cassette import Cassette
    from mcprec.replay.playback import Playback, candidates

    path = _cassette(tmp_path)
    classified: list[bytes] = []
    real = wire.classify
    monkeypatch.setattr(wire, "classify", lambda raw: classified.append(raw) or real(raw))
    with Cassette.open(path) as c:
        pb = Playback(c, candidates(c, None))
        pb.start()
        got = []
        for sent in (INITIALIZE.replace(b'"id":0', b'"id":"a"'), INITIALIZED,
                     b'{"jsonrpc":"2.0","id":9,"method":"tools/list"}'):
            pb.receive(sent)
            got += [bytes(data) for data, _ in pb.take()]
        assert got == [ANSWER.replace(b'"id":0', b'"id":"a"'),
                       b'{"jsonrpc":"2.0","id":9,"result":{"tools":[]}}']
        assert pb.report()["matched"] == 2 and classified == []
