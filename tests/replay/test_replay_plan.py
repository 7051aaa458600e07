"""The replay plan (``mcprec/cassette/plan.py``): built when a recording ends, dropped whenever
its session's messages change, rebuilt by ``redact``, built for older cassettes by the
migration; and a replay from it answers byte for byte as a replay without it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from mcprec import wire
from mcprec.cassette import Cassette, schema
from mcprec.record.writer import open_session_writer
from mcprec.cassette.plan import PLAN_BYTES, PLAN_VERSION

from support.helpers import INITIALIZE_ANSWER_LINE, INITIALIZE_LINE, copy_cassette, sqlite

INIT, INIT_ANSWER = INITIALIZE_LINE, INITIALIZE_ANSWER_LINE
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'


def _call(rid: object, text: str, meta: dict | None = None) -> bytes:
    params: dict = {"name": "echo", "arguments": {"text": text}}
    if meta is not None:
        params["_meta"] = meta
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})


def _result(rid: object, text: str) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid,
                         "result": {"content": [{"type": "text", "text": text}]}})


def _record(path: Path) -> None:
    """A session of every kind of exchange: plain answers (one request recorded three times),
    an error, a progress notification before an answer, an answer longer than a plan holds,
    the id last, a request answered by nothing, a notification the server sent on its own."""
    w = open_session_writer(path, "s", transport="stdio", target=["echo"])
    t = iter(range(0, 10**9, 100))
    c2s, s2c = wire.CLIENT_TO_SERVER, wire.SERVER_TO_CLIENT
    w.message(c2s, INIT, next(t))
    w.message(s2c, INIT_ANSWER, next(t))
    w.message(c2s, INITIALIZED, next(t))
    for i in (1, 2, 3):
        w.message(c2s, _call(i, "same"), next(t))
        w.message(s2c, _result(i, f"same #{i}"), next(t))
    w.message(c2s, _call(4, "fail"), next(t))
    w.message(s2c, orjson.dumps({"jsonrpc": "2.0", "id": 4, "error": {
        "code": -32602, "message": "no such tool"}}), next(t))
    w.message(c2s, _call(5, "slow", {"progressToken": "p5"}), next(t))
    w.message(s2c, orjson.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                                 "params": {"progressToken": "p5", "progress": 1}}), next(t))
    w.message(s2c, _result(5, "slow done"), next(t))
    w.message(c2s, _call(6, "big"), next(t))
    w.message(s2c, _result(6, "x" * (PLAN_BYTES + 10)), next(t))
    w.message(c2s, _call("s-7", "string id"), next(t))
    w.message(s2c, b'{"result":{"content":[{"type":"text","text":"id last"}]},'
                   b'"jsonrpc":"2.0","id":"s-7"}', next(t))
    w.message(c2s, _call(9, "then a change"), next(t))
    w.message(s2c, _result(9, "changed"), next(t))
    w.message(s2c, b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}', next(t))
    w.message(c2s, _call(8, "never answered"), next(t))
    w.close()


CLIENT = [INIT, INITIALIZED, _call(11, "same"), _call(12, "same"),
          _call(13, "same").replace(b'"id":13', b'"id":"a\\u0041"'), _call(14, "same"), _call(15, "fail"), _call(16, "slow", {"progressToken": 99}),
          _call(17, "big"), _call(18, "string id"), _call(19, "then a change"),
          _call(20, "not recorded")]


def _replay(path: Path, *args: str) -> tuple[bytes, str]:
    p = subprocess.run([sys.executable, "-m", "mcprec", "replay", str(path),
                        "--allow-unmatched", *args],
                       input=b"".join(m + b"\n" for m in CLIENT), capture_output=True,
                       timeout=60, check=False)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    return p.stdout, p.stderr.decode()


def _plan(path: Path) -> list[tuple]:
    with sqlite(path) as conn:
        return conn.execute("SELECT p.seq, m.method, p.id_at IS NOT NULL, "
                            "p.answer IS NOT NULL FROM replay_plan p "
                            "JOIN messages m ON m.id = p.request ORDER BY p.seq").fetchall()


def _planned_sessions(path: Path) -> list[tuple]:
    with sqlite(path) as conn:
        return conn.execute("SELECT session_id, version FROM replay_plans").fetchall()


@pytest.fixture()
def cassette(tmp_path: Path) -> Path:
    path = tmp_path / "c.db"
    _record(path)
    return path


def test_a_recording_ends_with_its_plan(cassette: Path) -> None:
    assert _planned_sessions(cassette) == [(1, PLAN_VERSION)]
    plan = {seq: (method, cut, plain) for seq, method, cut, plain in _plan(cassette)}
    with Cassette.open(cassette) as c:
        s = c.session("s")
        requests = [m for m in c.messages(s) if m.kind == wire.REQUEST]
        assert sorted(plan) == [m.seq for m in requests]  # one row per client request
        plain = {m.json["params"]["arguments"]["text"] for m in requests if plan[m.seq][2]}
    # plain: one answer, nothing before it; not initialize, progress, too long or unanswered
    assert plain == {"same", "fail", "string id", "then a change"}
    assert all(cut for _, cut, _ in plan.values())


def test_the_plan_answers_as_the_full_way_does(cassette: Path, tmp_path: Path) -> None:
    planned, planned_err = _replay(cassette)
    (tmp_path / "without").mkdir()
    without = tmp_path / "without" / "c.db"
    copy_cassette(cassette, without)
    with sqlite(without) as conn:
        conn.execute("DELETE FROM replay_plans")
    assert _planned_sessions(without) == []
    full, full_err = _replay(without)
    assert planned.replace(b"/without/", b"/") == full.replace(b"/without/", b"/")
    assert planned_err == full_err.replace("/without/", "/")
    answers = [orjson.loads(line) for line in planned.splitlines()]
    texts = [a["result"]["content"][0]["text"] for a in answers if "result" in a and
             "content" in a.get("result", {})]
    # identical requests in recorded order, then the last again; the escaped id canonical
    assert texts[:4] == ["same #1", "same #2", "same #3", "same #3"]
    assert b'"id":"aA"' in planned
    assert b'"progressToken":99' in planned  # the client's own token, not the recorded one
    assert b"list_changed" in planned  # what the server sent on its own, after its answer
    assert planned.index(b'"text":"changed"') < planned.index(b"list_changed")


def test_the_plan_answers_the_client_s_ids(cassette: Path) -> None:
    out, _ = _replay(cassette)
    ids = [orjson.loads(line).get("id") for line in out.splitlines()]
    assert ids[:5] == [0, 11, 12, "aA", 14]


@pytest.mark.parametrize("change", [
    ("UPDATE messages SET raw = CAST(replace(CAST(raw AS TEXT), 'same #2', 'other') AS BLOB) "
     "WHERE instr(CAST(raw AS TEXT), 'same #2') > 0"),
    "DELETE FROM messages WHERE seq = (SELECT max(seq) FROM messages)",
])
def test_any_change_to_a_session_s_messages_drops_its_plan(cassette: Path, change: str) -> None:
    with sqlite(cassette) as conn:
        conn.execute(change)
    assert _planned_sessions(cassette) == []
    assert _plan(cassette) == []
    out, _ = _replay(cassette)
    if "UPDATE" in change:  # what replay answers is what the cassette now holds
        assert b'"text":"other"' in out


def test_a_session_continued_has_its_plan_dropped_then_rebuilt(cassette: Path) -> None:
    """As ``replay --mode new_episodes`` appends what the real server answered."""
    from mcprec.record.writer import SessionWriter

    c = Cassette.open(cassette)
    s = c.session("s")
    last_seq, _ = c.last_position(s)
    w = SessionWriter(c, s, first_seq=last_seq + 1)
    w.message(wire.CLIENT_TO_SERVER, _call(30, "new"))
    assert w.sync(timeout=10)
    assert _planned_sessions(cassette) == [] and _plan(cassette) == []
    w.message(wire.SERVER_TO_CLIENT, _result(30, "new answer"))
    w.close()
    assert _planned_sessions(cassette) == [(1, PLAN_VERSION)]
    assert _plan(cassette)[-1] == (last_seq + 1, "tools/call", True, True)
    p = subprocess.run([sys.executable, "-m", "mcprec", "replay", str(cassette)],
                       input=INIT + b"\n" + _call(31, "new") + b"\n", capture_output=True,
                       timeout=60, check=True)
    assert b'"id":31,"result":{"content":[{"type":"text","text":"new answer"}]}' in p.stdout


def test_a_change_to_another_session_leaves_a_plan(cassette: Path, tmp_path: Path) -> None:
    w = open_session_writer(cassette, "t", transport="stdio", target=["echo"])
    w.message(wire.CLIENT_TO_SERVER, _call(1, "x"), 0)
    w.message(wire.SERVER_TO_CLIENT, _result(1, "y"), 10)
    w.close()
    assert sorted(_planned_sessions(cassette)) == [(1, PLAN_VERSION), (2, PLAN_VERSION)]
    with sqlite(cassette) as conn:
        conn.execute("DELETE FROM messages WHERE session_id = 2")
    assert _planned_sessions(cassette) == [(1, PLAN_VERSION)]


def test_redact_rebuilds_the_plan_from_the_redacted_messages(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    w = open_session_writer(path, "s", transport="stdio", target=["echo"], redact=None)
    w.message(wire.CLIENT_TO_SERVER, INIT, 0)
    w.message(wire.SERVER_TO_CLIENT, INIT_ANSWER, 10)
    w.message(wire.CLIENT_TO_SERVER, _call(1, "token?"), 20)
    w.message(wire.SERVER_TO_CLIENT, _result(1, f"token {secret}"), 30)
    w.close()
    p = subprocess.run([sys.executable, "-m", "mcprec", "redact", str(path)],
                       capture_output=True, timeout=60, check=False)
    assert p.returncode == 0, p.stderr.decode()
    assert _planned_sessions(path) == [(1, PLAN_VERSION)]
    assert secret.encode() not in path.read_bytes()
    out = subprocess.run([sys.executable, "-m", "mcprec", "replay", str(path)],
                         input=INIT + b"\n" + _call(5, "token?") + b"\n", capture_output=True,
                         timeout=60, check=True).stdout
    assert secret.encode() not in out and b'"id":5' in out


def _as_format_6(path: Path) -> None:
    """``path`` as the mcprec before the plan left it: no plan tables, triggers or migration."""
    with sqlite(path) as conn:
        for trigger in ("update", "delete"):
            conn.execute(f"DROP TRIGGER replay_plan_stale_on_{trigger}")
        conn.execute("DROP TABLE replay_plan")
        conn.execute("DROP TABLE replay_plans")
        conn.execute("DELETE FROM migrations WHERE name = '0007_replay_plan'")
        conn.execute("UPDATE meta SET value = '6' WHERE key = 'format_version'")
        conn.execute("PRAGMA user_version = 6")


def test_an_older_cassette_gets_its_plans_when_opened(cassette: Path, tmp_path: Path) -> None:
    before, _ = _replay(cassette)
    _as_format_6(cassette)
    with Cassette.open(cassette) as c:
        assert c.planned
    assert _planned_sessions(cassette) == [(1, PLAN_VERSION)]
    with sqlite(cassette) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'format_version'"
                            ).fetchone()[0] == str(schema.FORMAT_VERSION)
    assert _replay(cassette)[0] == before


def _in_process(c: Cassette) -> list[bytes]:
    from mcprec.replay.playback import Playback, candidates

    playback = Playback(c, candidates(c, None), server_stderr=lambda line: None)
    playback.start()
    out = []
    for m in CLIENT:
        playback.receive(m)
        out += [bytes(data) for data, _ in playback.take()]
    return out


def test_an_older_read_only_cassette_replays_without_a_plan(cassette: Path) -> None:

    with Cassette.open(cassette) as c:
        before = _in_process(c)
    _as_format_6(cassette)
    with Cassette.open(cassette, read_only=True) as c:
        assert not c.planned
        assert _in_process(c) == before
    assert b"".join(m + b"\n" for m in before) == _replay(cassette)[0]


def test_a_session_still_recording_has_no_plan(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    w = open_session_writer(path, "s", transport="stdio", target=["echo"])
    w.message(wire.CLIENT_TO_SERVER, _call(1, "x"), 0)
    w.message(wire.SERVER_TO_CLIENT, _result(1, "y"), 10)
    assert w.sync(timeout=10)
    assert _planned_sessions(path) == []
    w.close()
    assert _planned_sessions(path) == [(1, PLAN_VERSION)]


def test_replay_answers_from_the_plan(cassette: Path) -> None:
    """The plan is what replay reads for a plain answer (changed here behind the triggers'
    back, which watch the messages alone: every plain answer points to the first one), and
    only for one."""
    with sqlite(cassette) as conn:
        first = conn.execute("SELECT answer, answer_id_at, answer_id_end FROM replay_plan "
                             "WHERE answer IS NOT NULL ORDER BY seq LIMIT 1").fetchone()
        conn.execute("UPDATE replay_plan SET answer = ?, answer_id_at = ?, answer_id_end = ? "
                     "WHERE answer IS NOT NULL", first)
    out, _ = _replay(cassette)
    lines = [orjson.loads(line) for line in out.splitlines()]
    texts = [line["result"]["content"][0]["text"] for line in lines[1:6]]
    # the repeat of #3 (id 14) is played the full way; so is the one with progress (id 16)
    assert texts == ["same #1", "same #1", "same #1", "same #3", "same #1"]
    assert lines[6]["method"] == "notifications/progress"
    assert lines[7]["result"]["content"][0]["text"] == "slow done"
    assert [line["id"] for line in lines[1:6]] == [11, 12, "aA", 14, 15]


def test_a_text_stored_as_text_is_left_to_the_full_way(cassette: Path) -> None:
    """A message whose text was stored as TEXT (by hand, not by mcprec) has no plan entry,
    and its session still replays, opens, and plans."""
    with sqlite(cassette) as conn:
        conn.execute("UPDATE messages SET raw = CAST(raw AS TEXT) "
                     "WHERE instr(CAST(raw AS TEXT), 'same #1') > 0 "
                     "OR (kind = 'request' AND instr(CAST(raw AS TEXT), '\"fail\"') > 0)")
    assert _planned_sessions(cassette) == []
    _as_format_6(cassette)
    out, _ = _replay(cassette)  # replayed as it is (format 6, no plan): replay never writes
    Cassette.open(cassette).close()  # a writable opening migrates it: the plan is built
    assert _planned_sessions(cassette) == [(1, PLAN_VERSION)]
    plan = {seq: (cut, plain) for seq, _, cut, plain in _plan(cassette)}
    assert sum(1 for cut, plain in plan.values() if not plain) == 5  # 4 as before, "same #1"
    # the request for "fail": matched by its parsed form, its answer still from the plan
    assert sum(1 for cut, plain in plan.values() if not cut) == 1
    assert b'"id":11,"result":{"content":[{"type":"text","text":"same #1"}]}' in out
    assert b'"id":15,"error"' in out
