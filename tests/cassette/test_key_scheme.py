"""Sessions record which ``match_key`` made their keys (``sessions.key_scheme``, format 6).

Replay trusts the stored keys of its own scheme without making one, so a client sending what it
sent when recording is answered with no JSON parser imported at all; a session of another or an
unknown scheme (recorded before format 6) is checked by making a key, as before.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from support.helpers import INITIALIZE_ANSWER_LINE, INITIALIZE_LINE, REPO

from mcprec import wire
from mcprec.cassette import FORMAT_VERSION, open_cassette
from mcprec.record.writer import open_session_writer

INITIALIZE, ANSWER = INITIALIZE_LINE, INITIALIZE_ANSWER_LINE
CALL = (b'{"method":"tools/call","params":{"name":"echo","arguments":{"i":1}},"jsonrpc":"2.0",'
        b'"id":1}')
RESULT = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"1"}]}}'


def test_match_key_outputs_are_those_of_its_scheme() -> None:
    """If this fails, match_key's output changed: bump wire.KEY_SCHEME (stored keys of the old
    scheme must not be trusted) and put the new outputs here."""
    assert wire.KEY_SCHEME == "1"
    assert wire.match_key("tools/call", {"name": "echo", "arguments": {
        "text": "héllo", "n": 12345678901234567890123}}) == "c00390301d98e64214b9"
    assert wire.match_key("tools/list", None) == "10a629c39a1c6543ad51"
    assert wire.match_key("tools/call", {"arguments": {"b": 1.5, "a": [True, None]}, "name": "x",
                                         "_meta": {"progressToken": 7}}) == "74127c31e8634ea60fae"
    assert wire.match_key("resources/read", {"uri": "file:///a"},
                          has_meta=False) == "e3176594dfe99c615d38"


def _cassette(path: Path) -> Path:
    w = open_session_writer(path, "s", transport="stdio", target=["server"])
    for i, (raw, direction) in enumerate(((INITIALIZE, wire.CLIENT_TO_SERVER),
                                          (ANSWER, wire.SERVER_TO_CLIENT),
                                          (CALL, wire.CLIENT_TO_SERVER),
                                          (RESULT, wire.SERVER_TO_CLIENT))):
        w.message(direction, raw, i * 1000)
    w.close()
    return path


def _as_format_5(path: Path) -> None:
    """The cassette as format 5 left it: no key_scheme column."""
    conn = sqlite3.connect(path)
    conn.executescript("ALTER TABLE sessions DROP COLUMN key_scheme;"
                       "DELETE FROM migrations WHERE name = '0006_key_scheme';"
                       "UPDATE meta SET value = '5' WHERE key = 'format_version';"
                       "PRAGMA wal_checkpoint(TRUNCATE);")
    conn.close()


# replays on stdin/stdout as `mcprec replay` does, then says whether it imported orjson
_REPLAY_THEN_SAY = (
    "import sys\n"
    "from mcprec.replay import replay_stdio\n"
    "code = replay_stdio(sys.argv[1])\n"
    "print('orjson' in sys.modules, code, file=sys.stderr)\n")


def _replay(path: Path) -> tuple[bytes, str]:
    done = subprocess.run([sys.executable, "-c", _REPLAY_THEN_SAY, str(path)],
                          input=INITIALIZE.replace(b'"id":0', b'"id":5') + b"\n"
                          + CALL.replace(b'"id":1', b'"id":6') + b"\n",
                          capture_output=True, timeout=60, cwd=REPO)
    return done.stdout, done.stderr.decode().splitlines()[-1]


def test_a_session_of_this_scheme_replays_without_orjson(tmp_path: Path) -> None:
    path = _cassette(tmp_path / "c.db")
    with open_cassette(path) as c:
        assert c.session("s").key_scheme == wire.KEY_SCHEME
    out, said = _replay(path)
    assert out == (ANSWER.replace(b'"id":0', b'"id":5') + b"\n"
                   + RESULT.replace(b'"id":1', b'"id":6') + b"\n")
    assert said == "False 0"


def test_a_session_recorded_before_is_checked_and_replays_the_same(tmp_path: Path) -> None:
    """Format 5: replayed as it is (replay never writes), migrated by a writable opening; its
    session's scheme unknown (NULL): the stored keys are checked by making one, and the answers
    are the same."""
    path = _cassette(tmp_path / "c.db")
    _as_format_5(path)
    out, said = _replay(path)
    assert out == (ANSWER.replace(b'"id":0', b'"id":5') + b"\n"
                   + RESULT.replace(b'"id":1', b'"id":6') + b"\n")
    assert said == "True 0"
    with open_cassette(path) as c:
        assert c.session("s").key_scheme is None
        assert c.connection.execute(
            "SELECT value FROM meta WHERE key = 'format_version'").fetchone()[0] == "5"
    with open_cassette(path, read_only=False) as c:
        assert c.session("s").key_scheme is None
        assert c.connection.execute(
            "SELECT value FROM meta WHERE key = 'format_version'").fetchone()[0] == str(
            FORMAT_VERSION)


def test_a_cassette_of_format_5_opened_read_only_is_read_as_it_is(tmp_path: Path) -> None:
    """Not migrated (``mcprec view`` opens cassettes so): its sessions' scheme is unknown."""
    from mcprec.cassette import Cassette

    path = _cassette(tmp_path / "c.db")
    _as_format_5(path)
    with Cassette.open(path, read_only=True) as c:
        session = c.session("s")
        assert session.key_scheme is None and session.name == "s"
        assert [s.name for s in c.sessions_latest_first()] == ["s"]
