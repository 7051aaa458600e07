"""Replay ends, waits and chooses as the recording did: crashes, cut-off sessions, truncated
answers, causes between messages, and cassettes holding many sessions.

The server is tests/peers/causal_server.py (no SDK), driven line by line by a raw JSON-RPC
client, first through ``mcprec record`` and then against ``mcprec replay``; a replay must give
every request an answer or an end of file within a second unless the recording waited.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from support.helpers import PEERS, recorded, run_mcprec, sqlite
from support.line_client import LineClient, reap_line_clients  # noqa: F401
from support.replay_helpers import replay_cmd

CAUSAL = [sys.executable, str(PEERS / "causal_server.py")]
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {"roots": {}},
    "clientInfo": {"name": "line-client", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
QUICK = 1.0  # an answer or EOF that must not wait, in seconds


def call(rid: Any, name: str, **arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}


def cancel(rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": rid, "reason": "gave up"}}


@pytest.fixture(autouse=True)
def _reap(reap_line_clients: Any) -> Any:
    """Kill what a failing test left running."""
    yield


def initialize(client: LineClient) -> dict[str, Any]:
    client.send(INIT)
    answer = client.recv()
    assert answer is not None and answer["id"] == 1, answer
    client.send(INITIALIZED)
    return answer


def report_of(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())  # type: ignore[no-any-return]


# --- endings --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session whose server exited with 42 in the middle of a call, after a stderr line; an
    unanswered ping went in just before it died."""
    cassette = tmp_path_factory.mktemp("crash") / "c.db"
    client = LineClient(recorded(cassette, *CAUSAL, extra=("-s", "crash")))
    initialize(client)
    client.send(call(2, "echo"))
    assert client.recv() is not None
    client.send(call(3, "crash"), {"jsonrpc": "2.0", "id": 4, "method": "ping"})
    assert client.recv() is None
    code, err = client.close()
    assert code == 42 and "fatal: crash requested" in err
    return cassette


def test_crash_mid_call_ends_the_replay_as_it_ended_live(crashed: Path, tmp_path: Path) -> None:
    """Replay plays up to the crash, replays the server's stderr, closes stdout at once and
    exits with the recorded exit code; --report counts the request as unanswered."""
    report = tmp_path / "report.json"
    client = LineClient(replay_cmd(crashed, "--report", str(report)))
    initialize(client)
    client.send(call(2, "echo"))
    assert client.recv()["result"]["content"][0]["text"] == "echo"  # type: ignore[index]
    client.send(call(3, "crash"))
    started = time.monotonic()
    assert client.recv(QUICK) is None
    assert time.monotonic() - started < QUICK
    code, err = client.close()
    assert code == 42
    assert "causal server starting" in err and "fatal: crash requested" in err
    data = report_of(report)
    assert data["matched"] == 2 and data["unmatched"] == []
    assert data["unanswered"] == [{"method": "tools/call", "id": 3,
                                   "reason": "the server exited with 42"}]


def test_unanswered_ping_gets_the_empty_result(crashed: Path) -> None:
    """A recorded ping that was never answered gets the documented empty result."""
    client = LineClient(replay_cmd(crashed))
    initialize(client)
    client.send({"jsonrpc": "2.0", "id": 9, "method": "ping"})
    assert client.recv(QUICK) == {"jsonrpc": "2.0", "id": 9, "result": {}}
    assert client.close()[0] == 0


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session cut off by kill -9 of mcprec and its server while a call was in flight."""
    cassette = tmp_path_factory.mktemp("killed") / "k.db"
    client = LineClient(recorded(cassette, *CAUSAL, extra=("-s", "killed", "--durable")),
                        start_new_session=True)
    initialize(client)
    client.send(call(2, "hang"))
    time.sleep(0.5)  # --durable: committed before it was forwarded; the server has it
    os.killpg(client.p.pid, signal.SIGKILL)
    client.p.wait(10)
    return cassette


def test_killed_session_is_repaired_as_incomplete(killed: Path) -> None:
    """A session whose tap and recorder were both killed is marked incomplete on next open."""
    out = run_mcprec("sessions", str(killed), "--json")
    assert out.returncode == 0, out.stderr
    sessions = json.loads(out.stdout)
    assert [(s["name"], s["status"]) for s in sessions] == [("killed", "incomplete")]
    with sqlite(killed) as conn:  # ended now, with its replay plan
        assert conn.execute("SELECT count(*) FROM replay_plans").fetchone()[0] == 1


def test_request_cut_off_by_kill_gets_an_error_at_once(killed: Path, tmp_path: Path) -> None:
    """A request the recording never answered gets a JSON-RPC error at once that says why;
    --report lists it as unanswered, neither matched nor unmatched."""
    report = tmp_path / "report.json"
    client = LineClient(replay_cmd(killed, "--report", str(report)))
    initialize(client)
    client.send(call(2, "hang"))
    answer = client.recv(QUICK)
    assert answer is not None and answer["id"] == 2
    assert "no response was recorded for this request" in answer["error"]["message"]
    assert "cut off" in answer["error"]["message"]
    code, err = client.close()
    assert code == 0
    assert "has no recorded response" in err
    data = report_of(report)
    assert data["matched"] == 1 and data["unmatched"] == []
    assert [u["id"] for u in data["unanswered"]] == [2]


def test_truncated_answer_is_an_error_not_broken_json(tmp_path: Path) -> None:
    """An answer recorded truncated by --max-message-size replays as an error naming the size,
    and `show` marks the message as truncated."""
    cassette = tmp_path / "t.db"
    client = LineClient(recorded(cassette, *CAUSAL,
                                 extra=("-s", "t", "--max-message-size", "2000")))
    initialize(client)
    client.send(call(2, "big", size=5000))
    live = client.recv()
    assert live is not None and len(live["result"]["content"][0]["text"]) == 5000
    assert client.close()[0] == 0

    client = LineClient(replay_cmd(cassette))
    initialize(client)
    client.send(call(2, "big", size=5000))
    answer = client.recv(QUICK)
    assert answer is not None and answer["id"] == 2
    assert "truncated at 2,000 of 5,0" in answer["error"]["message"]
    client.close()
    shown = run_mcprec("show", str(cassette), "t")
    assert shown.returncode == 0, shown.stderr
    assert any("truncated" in line and "tools/call" in line
               for line in shown.stdout.decode().splitlines())


# --- causality ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def causal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One session with each kind of cause: a ping answered without waiting for the roots the
    server asked for; a call answered after the client's roots; a call answered after the
    client's cancellation."""
    cassette = tmp_path_factory.mktemp("causal") / "c.db"
    client = LineClient(recorded(cassette, *CAUSAL, extra=("-s", "causal")))
    client.send(INIT)
    assert client.recv() is not None
    client.send(INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
    roots_request, ping_answer = client.recv(), client.recv()
    assert roots_request["method"] == "roots/list"  # type: ignore[index]
    assert ping_answer == {"jsonrpc": "2.0", "id": 2, "result": {}}
    client.send({"jsonrpc": "2.0", "id": roots_request["id"],  # type: ignore[index]
                 "result": {"roots": [{"uri": "file:///a"}]}})
    client.send(call(3, "ask"))
    ask = client.recv()
    assert ask["method"] == "roots/list"  # type: ignore[index]
    time.sleep(0.2)
    client.send({"jsonrpc": "2.0", "id": ask["id"],  # type: ignore[index]
                 "result": {"roots": [{"uri": "file:///a"}, {"uri": "file:///b"}]}})
    assert client.recv()["result"]["content"][0]["text"] == "2 roots"  # type: ignore[index]
    client.send(call(4, "cancel"))
    time.sleep(0.3)
    client.send(cancel(4))
    assert client.recv()["error"]["code"] == -32800  # type: ignore[index]
    assert client.close()[0] == 0
    return cassette


def test_answer_the_server_did_not_hold_is_not_held(causal: Path) -> None:
    """The server asked for the roots and answered the ping without waiting for them: a
    strictly sequential client gets the ping's answer before it answers the roots."""
    client = LineClient(replay_cmd(causal))
    client.send(INIT)
    assert client.recv() is not None
    client.send(INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "ping"})
    first, second = client.recv(QUICK), client.recv(QUICK)
    assert first["method"] == "roots/list"  # type: ignore[index]
    assert second == {"jsonrpc": "2.0", "id": 2, "result": {}}
    client.close()


def test_answer_the_server_held_waits_for_the_clients_answer(causal: Path) -> None:
    """The call's answer waits for the client's answer to the server's roots/list request."""
    client = LineClient(replay_cmd(causal))
    initialize(client)
    client.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    got = [client.recv(QUICK), client.recv(QUICK)]
    roots = next(m for m in got if m and m.get("method") == "roots/list")
    client.send({"jsonrpc": "2.0", "id": roots["id"], "result": {"roots": []}})
    client.send(call(3, "ask"))
    ask = client.recv(QUICK)
    assert ask["method"] == "roots/list"  # type: ignore[index]
    assert client.quiet(0.5)  # the answer waits, as the server waited
    client.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": []}})  # type: ignore
    assert client.recv(QUICK)["result"]["content"][0]["text"] == "2 roots"  # type: ignore
    client.close()


def test_answer_after_cancellation_waits_for_the_cancellation(causal: Path) -> None:
    """The server answered the cancelled call only after the client's cancellation: so does
    the replay, and the client sees the recorded error, not an early failure."""
    client = LineClient(replay_cmd(causal))
    initialize(client)
    client.send(call(4, "cancel"))
    assert client.quiet(0.4)
    client.send(cancel(4))
    answer = client.recv(QUICK)
    assert answer == {"jsonrpc": "2.0", "id": 4,
                      "error": {"code": -32800, "message": "Request cancelled"}}
    client.close()


def test_cancellation_that_never_comes_does_not_hang(causal: Path) -> None:
    """A client that does not cancel this time still gets the recorded answer, after a bounded
    wait, and stderr says why it waited."""
    client = LineClient(replay_cmd(causal))
    initialize(client)
    client.send(call(4, "cancel"))
    answer = client.recv(5.0)
    assert answer is not None and answer["error"]["code"] == -32800
    code, err = client.close()
    assert "notifications/cancelled" in err


# --- many sessions in one cassette ----------------------------------------------------------


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three sessions in one cassette: 'alpha' and 'beta' call different tools; 'other' was
    initialized by another client and calls the tool both of the others call."""
    cassette = tmp_path_factory.mktemp("many") / "m.db"
    for name, tools, info in (("alpha", ["alpha", "both"], "line-client"),
                              ("beta", ["beta", "both"], "line-client"),
                              ("other", ["both"], "other-client")):
        client = LineClient(recorded(cassette, *CAUSAL, extra=("-s", name)))
        init = json.loads(json.dumps(INIT))
        init["params"]["clientInfo"]["name"] = info
        client.send(init)
        assert client.recv() is not None
        client.send(INITIALIZED)
        for i, tool in enumerate(tools):
            client.send(call(10 + i, tool))
            assert client.recv() is not None
        assert client.close()[0] == 0
    return cassette


@pytest.mark.parametrize("tool", ["alpha", "beta"])
def test_each_client_gets_the_session_its_traffic_matches(many: Path, tool: str) -> None:
    """Without --session, a client is served the session whose requests it makes, and stderr
    names it."""
    client = LineClient(replay_cmd(many))
    initialize(client)
    client.send(call(2, "both"), call(3, tool))
    answers = [client.recv(QUICK), client.recv(QUICK)]
    assert [a["result"]["content"][0]["text"] for a in answers] == ["both", tool]  # type: ignore
    code, err = client.close()
    assert code == 0
    assert f"the client's requests match session {tool!r} now" in err or (
        f"replaying session {tool!r}" in err)


def test_initialize_params_choose_among_equal_sessions(many: Path, tmp_path: Path) -> None:
    """A client whose initialize matches one session's exactly gets that session, even when a
    later session would answer its requests too."""
    report = tmp_path / "r.json"
    client = LineClient(replay_cmd(many, "--report", str(report)))
    init = json.loads(json.dumps(INIT))
    init["params"]["clientInfo"]["name"] = "other-client"
    client.send(init)
    assert client.recv(QUICK) is not None
    client.send(call(2, "both"))
    assert client.recv(QUICK)["result"]["content"][0]["text"] == "both"  # type: ignore[index]
    code, err = client.close()
    assert "replaying session 'other'" in err
    assert report_of(report)["session"] == "other"


def test_latest_session_is_the_one_that_ended_last(tmp_path: Path) -> None:
    """'Latest' is the session whose recording ended last, not the one that started last."""
    from mcprec.cassette import Cassette

    path = tmp_path / "l.db"
    with Cassette.open(path, create=True) as c:
        long = c.create_session("long", transport="stdio", target=[],
                                started_at="2026-01-01T10:00:00.000000Z")
        short = c.create_session("short", transport="stdio", target=[],
                                 started_at="2026-01-01T10:01:00.000000Z")
        c.update_session(short, ended_at="2026-01-01T10:02:00.000000Z", status="complete")
        c.update_session(long, ended_at="2026-01-01T10:05:00.000000Z", status="complete")
        assert c.session(None).name == "long"
        assert [s.name for s in c.sessions_latest_first()] == ["long", "short"]


# --- small repairs --------------------------------------------------------------------------


def test_missing_session_hint_says_it_is_not_the_whole_list(tmp_path: Path) -> None:
    """The 'no such session' hint says how many there are when it lists only the last five."""
    from mcprec.cassette import Cassette
    from mcprec.errors import SessionNotFoundError

    path = tmp_path / "h.db"
    with Cassette.open(path, create=True) as c:
        for i in range(7):
            c.create_session(f"s{i}", transport="stdio", target=[])
        with pytest.raises(SessionNotFoundError) as e:
            c.session("nope")
    assert "7 in all, the last five: ..., s2, s3, s4, s5, s6" in str(e.value)


def test_empty_file_made_beforehand_becomes_owner_only(tmp_path: Path) -> None:
    """An empty file given as the cassette (made by touch or mktemp) is 0600 once recorded."""
    path = tmp_path / "pre.db"
    path.touch(mode=0o644)
    os.chmod(path, 0o644)
    client = LineClient(recorded(path, *CAUSAL))
    initialize(client)
    assert client.close()[0] == 0
    assert path.stat().st_mode & 0o777 == 0o600


def test_record_into_a_missing_directory_says_so(tmp_path: Path) -> None:
    """`record -c` into a directory that does not exist creates it and says so on stderr."""
    path = tmp_path / "new" / "deeper" / "c.db"
    client = LineClient(recorded(path, *CAUSAL))
    initialize(client)
    code, err = client.close()
    assert code == 0 and path.exists()
    assert f"mcprec: created directory {path.parent}" in err
