"""Record modes of `mcprec replay` (none, once, new_episodes, all); errors on bad cassettes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from support.helpers import dump, run_mcprec, sqlite
from mcprec.cassette import open_cassette
from support.replay_helpers import (
    SDK,
    Recording,
    Run,
    drive,
    one_line_error,
    progress_recorder,
    replay_cmd,
)

NOT_A_SERVER = ["false"]
"""A server command that fails at once: a client would get no answer if it were started."""


async def add_and_count(s: Any, run: Run) -> None:
    run.results["add"] = dump(await s.call_tool("add", {"a": 2, "b": 3}))
    run.results["counter"] = [dump(await s.call_tool("counter", {})) for _ in range(2)]


def recorded_calls(cassette: Path, session: str | None = None) -> list[Any]:
    """(tool name, arguments) of every recorded tools/call, in order."""
    with open_cassette(cassette) as c:
        s = c.session(session)
        return [(json.loads(m.raw)["params"]["name"], json.loads(m.raw)["params"].get("arguments"))
                for m in c.messages(s, kinds=("request",)) if m.method == "tools/call"]


# --- none --------------------------------------------------------------------------------------


def test_none_without_a_cassette_is_a_one_line_error(tmp_path: Path) -> None:
    """Mode none (the default) with no cassette: `mcprec: no cassette at ...`, exit non-zero."""
    missing = tmp_path / "missing.db"
    result = run_mcprec("replay", str(missing), input=b"")
    assert result.returncode != 0
    assert "no cassette at" in one_line_error(result.stderr)
    assert not missing.exists()


def test_none_does_not_start_the_server(sdk_recordings: SimpleNamespace, tmp_path: Path) -> None:
    """Mode none replays even with a server command after `--` that could not serve."""
    rec = sdk_recordings.main
    run = drive(replay_cmd(rec.cassette, "--", *NOT_A_SERVER), add_and_count)
    assert run.results["add"] == rec.live.results["add"]


# --- once --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def once_recorded(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """`mcprec replay --mode once` on a missing cassette, in front of the real SDK server."""
    cassette = tmp_path_factory.mktemp("once") / "sub" / "once.db"
    run = drive(replay_cmd(cassette, "--mode", "once", "--", *SDK), add_and_count)
    return SimpleNamespace(cassette=cassette, run=run)


def test_once_records_when_the_cassette_is_missing(once_recorded: SimpleNamespace) -> None:
    """The cassette is created and holds the session the client just had with the real server."""
    assert once_recorded.cassette.exists()
    assert recorded_calls(once_recorded.cassette) == [("add", {"a": 2, "b": 3}),
                                                      ("counter", {}), ("counter", {})]


def test_once_forwards_to_the_real_server_while_recording(once_recorded: SimpleNamespace) -> None:
    """While recording, the client gets the real server's answers (counter counts up)."""
    texts = [r["structuredContent"]["result"] for r in once_recorded.run.results["counter"]]
    assert texts == ["call 1", "call 2"]
    assert once_recorded.run.results["add"]["structuredContent"] == {"result": 5}


def test_once_replays_when_the_cassette_exists(once_recorded: SimpleNamespace) -> None:
    """The second run replays what the first recorded, without starting the server."""
    run = drive(replay_cmd(once_recorded.cassette, "--mode", "once", "--", *NOT_A_SERVER),
                add_and_count)
    assert run.results == once_recorded.run.results


def test_once_records_a_missing_session(sdk_recordings: SimpleNamespace, tmp_path: Path) -> None:
    """With an existing cassette but a session name it lacks, once records that session."""
    cassette = sdk_recordings.main.copy_to(tmp_path)
    drive(replay_cmd(cassette, "--mode", "once", "-s", "second", "--", *SDK), add_and_count)
    with open_cassette(cassette) as c:
        assert [s.name for s in c.sessions()] == ["main", "second"]
    assert recorded_calls(cassette, "second")[0] == ("add", {"a": 2, "b": 3})


def test_once_without_a_server_command_is_a_one_line_error(tmp_path: Path) -> None:
    """Mode once with nothing to replay and no server after `--` says what is missing."""
    result = run_mcprec("replay", str(tmp_path / "missing.db"), "--mode", "once", input=b"")
    assert result.returncode != 0
    assert "no server command was given" in one_line_error(result.stderr)


# --- new_episodes ------------------------------------------------------------------------------


async def known_then_new(s: Any, run: Run) -> None:
    """Recorded calls and calls never recorded, one of them asking the client's model and one
    reporting progress."""
    run.results["add 2+3"] = dump(await s.call_tool("add", {"a": 2, "b": 3}))
    try:
        run.results["add 10+20"] = dump(await s.call_tool("add", {"a": 10, "b": 20}))
    except MCPError as e:
        run.results["add 10+20"] = f"error: {e.error.message}"
    run.results["counter"] = dump(await s.call_tool("counter", {}))
    run.results["ask how"] = dump(await s.call_tool("ask_model", {"question": "how?"}))
    run.results["slow 2"] = dump(await s.call_tool("slow", {"steps": 2, "delay_ms": 20},
                                                   progress_callback=progress_recorder(run)))


NEW_CALLS = [("add", {"a": 10, "b": 20}), ("ask_model", {"question": "how?"}),
             ("slow", {"steps": 2, "delay_ms": 20})]


@pytest.fixture(scope="module")
def new_episodes(sdk_recordings: SimpleNamespace,
                 tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """The main session replayed in new_episodes mode, with a call it never recorded."""
    main: Recording = sdk_recordings.main
    cassette = main.copy_to(tmp_path_factory.mktemp("new-episodes"))
    before = recorded_calls(cassette, "main")
    run = drive(replay_cmd(cassette, "--mode", "new_episodes", "-s", "main", "--", *SDK),
                known_then_new)
    return SimpleNamespace(cassette=cassette, run=run, before=before, main=main)


def test_new_episodes_replays_what_matches(new_episodes: SimpleNamespace) -> None:
    """Recorded calls get their recorded answers (counter says call 1, not a fresh count)."""
    run, live = new_episodes.run, new_episodes.main.live
    assert run.results["add 2+3"] == live.results["add"]
    assert run.results["counter"] == live.results["counter 1"]


def test_new_episodes_forwards_the_unmatched_call_to_the_real_server(
        new_episodes: SimpleNamespace) -> None:
    """The call never recorded is answered by the real server."""
    assert new_episodes.run.results["add 10+20"]["structuredContent"] == {"result": 30}


def test_new_episodes_relays_the_real_servers_requests_and_progress(
        new_episodes: SimpleNamespace) -> None:
    """The real server's sampling request and progress reach the client, its answer the server."""
    run = new_episodes.run
    assert [m["messages"][0]["content"]["text"] for m in run.sampling] == ["how?"]
    assert run.results["ask how"]["structuredContent"] == {
        "result": "model test-model said: you asked: how?"}
    assert run.progress == [(1.0, 2.0, "step 1 of 2"), (2.0, 2.0, "step 2 of 2")]


def test_new_episodes_appends_the_new_call_to_the_session(new_episodes: SimpleNamespace) -> None:
    """The session now ends with the new call; what was recorded before is kept."""
    after = recorded_calls(new_episodes.cassette, "main")
    assert after[: len(new_episodes.before)] == new_episodes.before
    assert after[len(new_episodes.before):] == NEW_CALLS


def test_new_episode_replays_in_mode_none(new_episodes: SimpleNamespace) -> None:
    """A third run in mode none replays the new calls, their sampling request and progress too."""
    run = drive(replay_cmd(new_episodes.cassette, "-s", "main"), known_then_new)
    assert run.results == new_episodes.run.results
    assert run.sampling == new_episodes.run.sampling
    assert run.progress == new_episodes.run.progress
    assert "no recorded response matches" not in run.stderr


def new_then_known(*new_args: dict[str, int]) -> Any:
    """Calls never recorded, each followed by a recorded one; an unanswered call is noted."""

    async def scenario(s: Any, run: Run) -> None:
        for i, args in enumerate(new_args):
            run.results[f"new {i}"] = "no answer within 3 s"
            with anyio.move_on_after(3):
                try:
                    run.results[f"new {i}"] = dump(await s.call_tool("add", args))
                except MCPError as e:
                    run.results[f"new {i}"] = f"error: {e.error.message}"
            run.results[f"known {i}"] = dump(await s.call_tool("add", {"a": 2, "b": 3}))

    return scenario


@pytest.mark.parametrize("server", [["/nonexistent/server"], ["false"]],
                         ids=["cannot start", "exits at once"])
def test_new_episodes_without_a_working_server_answers_with_an_error(
        sdk_recordings: SimpleNamespace, tmp_path: Path, server: list[str]) -> None:
    """An unmatched call gets a JSON-RPC error saying the real server failed; replay goes on."""
    main: Recording = sdk_recordings.main
    cassette = main.copy_to(tmp_path)
    run = drive(replay_cmd(cassette, "--mode", "new_episodes", "-s", "main", "--", *server),
                new_then_known({"a": 7, "b": 7}), timeout=20)
    assert "the real server could not answer it" in run.results["new 0"]
    assert run.results["known 0"] == main.live.results["add"]


def test_new_episodes_after_the_server_exited_later_calls_fail_too(
        sdk_recordings: SimpleNamespace, tmp_path: Path) -> None:
    """A second unmatched call, after the real server has exited, also gets an error."""
    main: Recording = sdk_recordings.main
    cassette = main.copy_to(tmp_path)
    run = drive(replay_cmd(cassette, "--mode", "new_episodes", "-s", "main", "--", "false"),
                new_then_known({"a": 7, "b": 7}, {"a": 8, "b": 8}), timeout=20)
    assert "the real server could not answer it" in run.results["new 0"]
    assert run.results["new 1"].startswith("error: ")


# --- all ---------------------------------------------------------------------------------------


async def forecast(s: Any, run: Run) -> None:
    run.results["forecast"] = dump(await s.call_tool("forecast", {"city": "Paris"}))


def test_all_rerecords_the_session(sdk_recordings: SimpleNamespace, tmp_path: Path) -> None:
    """Mode all replaces the named session with a fresh recording of the (new) real server."""
    cassette = sdk_recordings.main.copy_to(tmp_path)
    live = drive(replay_cmd(cassette, "--mode", "all", "-s", "main", "--", *SDK), forecast,
                 env={"MCPREC_TEST_SERVER_VARIANT": "v2"})
    assert "rain" in live.results["forecast"]["structuredContent"]["result"]
    with open_cassette(cassette) as c:
        assert [s.name for s in c.sessions()] == ["main"]
    assert recorded_calls(cassette, "main") == [("forecast", {"city": "Paris"})]
    replayed = drive(replay_cmd(cassette, "-s", "main"), forecast)
    assert replayed.results == live.results


# --- bad cassettes -----------------------------------------------------------------------------


def _truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)


def make_bad_cassette(kind: str, tmp_path: Path, good: Recording) -> tuple[Path, list[str]]:
    """A cassette that cannot be replayed, and the replay options to try it with."""
    path = tmp_path / f"{kind}.db"
    if kind == "unknown session":
        return good.copy_to(tmp_path), ["-s", "no-such-session"]
    if kind == "session without messages":
        recorded = run_mcprec("record", "-c", str(path), "-s", "empty", "--", "true", input=b"")
        assert recorded.returncode == 0, recorded.stderr
        return path, []
    if kind == "session without requests":
        note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
        recorded = run_mcprec("record", "-c", str(path), "-s", "notes", "--", "cat", input=note)
        assert recorded.returncode == 0, recorded.stderr
        return path, []
    if kind.startswith("truncated"):
        path = good.copy_to(tmp_path)
        assert not path.with_name(path.name + "-wal").exists()
        size = path.stat().st_size
        _truncate(path, size // 2 if kind == "truncated to half" else size - 4096 + 100)
        return path, []
    if kind == "text file":
        path.write_text("this is not a cassette\n")
        return path, []
    if kind == "empty file":
        path.write_bytes(b"")
        return path, []
    if kind == "other sqlite database":
        with sqlite(path) as conn:
            conn.execute("CREATE TABLE notes (text)")
        return path, []
    raise AssertionError(kind)


BAD = {
    "unknown session": "has no session 'no-such-session'",
    "session without messages": "recorded no messages",
    "session without requests": "holds no client requests",
    "truncated to half": "corrupt",
    "truncated in its last page": "corrupt",
    "text file": "not an mcprec cassette",
    "empty file": "empty file",
    "other sqlite database": "not an mcprec cassette",
}


@pytest.mark.parametrize("kind", list(BAD))
def test_bad_cassette_is_a_one_line_error(sdk_recordings: SimpleNamespace, tmp_path: Path,
                                          kind: str) -> None:
    """Replaying a cassette that cannot be replayed: one `mcprec: ...` line, exit non-zero."""
    path, options = make_bad_cassette(kind, tmp_path, sdk_recordings.main)
    result = run_mcprec("replay", str(path), *options, input=b"", timeout=20)
    assert result.returncode != 0
    line = one_line_error(result.stderr)
    assert BAD[kind] in line
    assert str(path) in line or os.path.basename(path) in line
    assert result.stdout == b""


def test_unparsable_ignore_path_is_a_one_line_error(sdk_recordings: SimpleNamespace) -> None:
    """--ignore with a JSON path that does not parse is refused before replaying: exit 2."""
    result = run_mcprec("replay", str(sdk_recordings.main.cassette), "--ignore", "params.x[",
                        input=b"")
    assert result.returncode == 2
    assert "cannot parse JSON path 'params.x['" in one_line_error(result.stderr)
