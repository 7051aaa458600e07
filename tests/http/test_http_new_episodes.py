"""`replay --http --mode new_episodes --target URL`: what the recording answers is replayed, the
rest goes to the live HTTP server and is appended to the session; `once` and `all` record
through the proxy. Real processes: the SDK's HTTP server peer (its requests log says what
reached it), the recording proxy, mcprec replay --http, and the SDK client."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from support.helpers import run_mcprec
from support.http_helpers import (
    free_port, progress_recorder, read_jsonl, run_http_session, start_proxy, start_replay,
    start_sdk_http,
)

from mcprec.cassette import open_cassette


def _calls(log: Path) -> list[str]:
    """The tools called on the live server, in order (from its requests log)."""
    return [r["rpc"] for r in read_jsonl(log) if r.get("rpc") == "tools/call"]


def _tool_calls(cassette: Path, session: str) -> list[tuple[str, str]]:
    with open_cassette(cassette) as c:
        return [(m.kind, m.json["params"]["name"] if m.kind == "request" else "")
                for m in c.messages(c.session(session)) if m.method == "tools/call"]


async def _add(s: Any, run: Any) -> None:
    run.results["add"] = (await s.call_tool("add", {"a": 2, "b": 3})).content[0].text


@pytest.fixture
def live(tmp_path: Path) -> Any:
    log = tmp_path / "requests.jsonl"
    server = start_sdk_http(requests_log=log)
    server.log = log  # type: ignore[attr-defined]
    yield server
    server.stop()


@pytest.fixture
def recorded(live: Any, tmp_path: Path) -> Path:
    """A session of one add(2, 3), recorded through the proxy."""
    cassette = tmp_path / "http.db"
    proxy = start_proxy(live.url, cassette, "s")
    assert anyio.run(run_http_session, proxy.url, _add).results["add"] == "5"
    assert proxy.stop()[0] == 0
    return cassette


def test_unmatched_requests_go_live_and_are_appended(live: Any, recorded: Path) -> None:
    """add is replayed, echo reaches the live server; echo is then part of the session."""
    before = len(_calls(live.log))
    replay = start_replay(recorded, extra=["--mode", "new_episodes", "--target", live.url])

    async def scenario(s: Any, run: Any) -> None:
        await _add(s, run)
        run.results["echo"] = (await s.call_tool("echo", {"text": "new"})).content[0].text

    run = anyio.run(run_http_session, replay.url, scenario)
    code, _ = replay.stop()
    assert code == 0, replay.stderr_text()
    assert (run.results["add"], run.results["echo"]) == ("5", "new")
    assert len(_calls(live.log)) == before + 1  # echo only: add came from the recording
    assert _tool_calls(recorded, "s") == [("request", "add"), ("response", ""),
                                          ("request", "echo"), ("response", "")]


def test_the_new_episode_replays_without_the_server(live: Any, recorded: Path) -> None:
    """After new_episodes, a plain replay (mode none) answers the appended request itself."""
    replay = start_replay(recorded, extra=["--mode", "new_episodes", "--target", live.url])

    async def echo(s: Any, run: Any) -> None:
        run.results["echo"] = (await s.call_tool("echo", {"text": "again"})).content[0].text

    anyio.run(run_http_session, replay.url, echo)
    assert replay.stop()[0] == 0
    before = len(_calls(live.log))
    replay = start_replay(recorded)
    run = anyio.run(run_http_session, replay.url, echo)
    assert replay.stop()[0] == 0, replay.stderr_text()
    assert run.results["echo"] == "again"
    assert len(_calls(live.log)) == before


def test_a_forwarded_stream_carries_its_progress(live: Any, recorded: Path) -> None:
    """A forwarded call answered as an event stream: the client gets its progress, in order."""
    replay = start_replay(recorded, extra=["--mode", "new_episodes", "--target", live.url])

    async def slow(s: Any, run: Any) -> None:
        result = await s.call_tool("slow", {"steps": 3}, progress_callback=progress_recorder(run))
        run.results["slow"] = result.content[0].text

    run = anyio.run(run_http_session, replay.url, slow)
    assert replay.stop()[0] == 0, replay.stderr_text()
    assert run.results["slow"] == "done after 3 steps"
    assert [e[1] for e in run.events if e[0] == "progress"] == [1, 2, 3]


def test_a_forwarded_call_may_ask_the_client(live: Any, recorded: Path) -> None:
    """The live server asks the client for sampling while handling a forwarded call."""
    replay = start_replay(recorded, extra=["--mode", "new_episodes", "--target", live.url])

    async def ask(s: Any, run: Any) -> None:
        result = await s.call_tool("ask_model", {"question": "why?"})
        run.results["ask"] = result.content[0].text

    run = anyio.run(run_http_session, replay.url, ask)
    assert replay.stop()[0] == 0, replay.stderr_text()
    assert ("sampling", "why?") in run.events
    assert "you asked: why?" in run.results["ask"]


def test_an_unreachable_server_is_an_unmatched_request(recorded: Path) -> None:
    """The live server is down: the client gets an error, replay exits 3 with one line."""
    dead = f"http://127.0.0.1:{free_port()}/mcp"
    replay = start_replay(recorded, extra=["--mode", "new_episodes", "--target", dead])

    async def echo(s: Any, run: Any) -> None:
        result = await s.call_tool("echo", {"text": "x"})
        run.results["error"] = result

    with pytest.raises(BaseException):  # the SDK raises the JSON-RPC error
        anyio.run(run_http_session, replay.url, echo)
    code, _ = replay.stop()
    assert code == 3
    err = replay.stderr_text()
    assert "could not be reached" in err and "Traceback" not in err


def test_once_records_through_the_proxy_when_nothing_is_recorded(live: Any,
                                                                 tmp_path: Path) -> None:
    """--http --mode once with no cassette records the session, then replays it."""
    cassette = tmp_path / "once.db"
    first = start_replay(cassette, "s", extra=["--mode", "once", "--target", live.url])
    assert anyio.run(run_http_session, first.url, _add).results["add"] == "5"
    assert first.stop()[0] == 0, first.stderr_text()
    assert _tool_calls(cassette, "s") == [("request", "add"), ("response", "")]
    before = len(_calls(live.log))
    second = start_replay(cassette, "s", extra=["--mode", "once", "--target", live.url])
    assert anyio.run(run_http_session, second.url, _add).results["add"] == "5"
    assert second.stop()[0] == 0
    assert len(_calls(live.log)) == before


@pytest.mark.parametrize("args", [
    ["--mode", "new_episodes", "--target", "http://127.0.0.1:9/mcp"],  # no --http
    ["--http", "--mode", "new_episodes"],  # no --target
    ["--http", "--target", "http://127.0.0.1:9/mcp"],  # mode none
    ["--http", "--mode", "new_episodes", "--target", "ftp://127.0.0.1/mcp"],  # not http(s)
])
def test_bad_combinations_are_one_line(recorded: Path, args: list[str]) -> None:
    """--target without --http, new_episodes without --target, --target in mode none, a
    --target that is not an http(s) URL."""
    out = run_mcprec("replay", str(recorded), *args, timeout=30)
    assert out.returncode == 2, out.stderr
    err = out.stderr.decode()
    assert err.count("\n") == 1 and "--target" in err and "Traceback" not in err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_sigterm_ends_an_http_replay_as_sigint_does(recorded: Path, tmp_path: Path,
                                                    sig: int) -> None:
    """SIGTERM, as SIGINT: the replay shuts down, writes its report and exits 3 for the
    unmatched request (with SIGTERM it used to die at once: 143, no report)."""
    report = tmp_path / "report.json"
    replay = start_replay(recorded, extra=["--report", str(report)])

    async def echo(s: Any, run: Any) -> None:
        await s.call_tool("echo", {"text": "never recorded"})

    with pytest.raises(BaseException):  # the SDK raises the JSON-RPC error
        anyio.run(run_http_session, replay.url, echo)
    code, _ = replay.stop(sig)
    assert code == 3, replay.stderr_text()
    assert json.loads(report.read_text())["unmatched"]
