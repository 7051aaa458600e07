"""The in-process API: `mcprec.testing.replay_streams` feeding the SDK's ClientSession directly,
with no subprocess, and custom matcher callables (which only work in-process)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from support.helpers import dump
from mcprec.errors import SessionNotFoundError
from mcprec.matching import MatchOptions
from mcprec.testing import replay_streams
from support.replay_helpers import Run, converse, main_scenario


def replay_in_process(recording: Any, scenario: Any, *, options: MatchOptions | None = None,
                      timeout: float = 20, **kwargs: Any) -> Run:
    run = Run()

    async def main() -> None:
        with anyio.fail_after(timeout):
            async with replay_streams(recording.cassette, session=recording.session,
                                      options=options) as replay:
                await converse(replay.read, replay.write, scenario, run, **kwargs)
        run.report = replay.report()  # type: ignore[attr-defined]

    anyio.run(main)
    return run


@pytest.fixture(scope="module")
def main(sdk_recordings: SimpleNamespace) -> Any:
    return sdk_recordings.main


@pytest.fixture(scope="module")
def replayed(main: Any) -> Run:
    return replay_in_process(main, main_scenario)


@pytest.mark.parametrize("part", ["results", "logs", "progress", "sampling", "notifications"])
def test_in_process_replay_gives_what_was_seen_live(main: Any, replayed: Run, part: str) -> None:
    """Results, logs, progress, sampling requests and notifications are as in the live session."""
    assert getattr(replayed, part) == getattr(main.live, part)


def test_engine_reports_what_was_played(main: Any) -> None:
    """After the block, the yielded replay's report() gives played, repeated and unplayed
    calls; the deprecated replay_streams.last_engine still gives the same."""

    async def counter_four_times(s: Any, run: Run) -> None:
        for _ in range(4):
            await s.call_tool("counter", {})

    report = replay_in_process(main, counter_four_times).report  # type: ignore[attr-defined]
    assert replay_streams.last_engine.report() == report  # type: ignore[attr-defined]
    assert report["session"] == "main"
    assert report["repeated"] == 1 and report["unmatched"] == []
    assert {u["method"] for u in report["unplayed"]} >= {"resources/list", "prompts/get"}


def echo(text: str) -> Any:
    async def scenario(s: Any, run: Run) -> None:
        await s.list_tools()
        try:
            run.results["echo"] = dump(await s.call_tool("echo", {"text": text}))
        except MCPError as e:
            run.results["echo"] = f"error: {e.error.message}"

    return scenario


def same_text_ignoring_case(incoming: dict[str, Any], recorded: dict[str, Any]) -> bool:
    args = [(r.get("params") or {}).get("arguments") or {} for r in (incoming, recorded)]
    return str(args[0].get("text", "")).lower() == str(args[1].get("text", "")).lower()


@pytest.mark.parametrize("text,matches", [("HELLO", True), ("BYE", False)])
def test_custom_matcher_decides_among_candidates(main: Any, text: str, matches: bool) -> None:
    """With the text ignored, a case-insensitive matcher accepts HELLO for hello, not BYE."""
    options = MatchOptions(ignore=["params.arguments.text"], matchers=[same_text_ignoring_case])
    run = replay_in_process(main, echo(text), options=options)
    if matches:
        assert run.results["echo"] == main.live.results["echo"]
    else:
        assert "no recorded response matches" in run.results["echo"]


def test_custom_matcher_gets_full_jsonrpc_requests(main: Any) -> None:
    """Matchers are called with the incoming and the recorded request as whole JSON-RPC objects."""
    seen: list[tuple[Any, Any]] = []

    def spy(incoming: dict[str, Any], recorded: dict[str, Any]) -> bool:
        seen.append((incoming, recorded))
        return True

    replay_in_process(main, echo("HELLO"), options=MatchOptions(ignore=["params.arguments.text"],
                                                       matchers=[spy]))
    incoming, recorded = next((i, r) for i, r in seen if i["method"] == "tools/call")
    assert incoming["params"]["arguments"] == {"text": "HELLO"}
    assert recorded["params"]["arguments"] == {"text": "hello"}
    assert recorded["jsonrpc"] == "2.0" and "id" in recorded and "id" in incoming


def test_custom_matcher_can_reject_and_the_report_says_so(main: Any, caplog: Any) -> None:
    """A matcher that rejects leaves the request unmatched; the library's warning (logger
    ``mcprec.replay``) blames the custom matcher."""

    def refuse_echo(incoming: dict[str, Any], recorded: dict[str, Any]) -> bool:
        return (incoming.get("params") or {}).get("name") != "echo"

    async def echo_hello(s: Any, run: Run) -> None:
        await s.list_tools()
        try:
            await s.call_tool("echo", {"text": "hello"})
        except MCPError as e:
            run.results["error"] = e.error.message

    run = replay_in_process(main, echo_hello, options=MatchOptions(matchers=[refuse_echo]))
    assert "no recorded response matches" in run.results["error"]
    warned = [r for r in caplog.records if r.name == "mcprec.replay"]
    assert any("a custom matcher rejected it" in r.getMessage() for r in warned)


def test_custom_matcher_that_raises_fails_the_request_not_the_replay(main: Any) -> None:
    """A matcher raising an exception gets the client an error answer instead of no answer."""

    def broken(incoming: dict[str, Any], recorded: dict[str, Any]) -> bool:
        if incoming["method"] == "tools/call":
            raise KeyError("oops")
        return True

    async def echo_then_ping(s: Any, run: Run) -> None:
        try:
            await s.call_tool("echo", {"text": "hello"})
        except MCPError as e:
            run.results["error"] = e.error.message
        run.results["ping"] = dump(await s.send_ping())

    run = replay_in_process(main, echo_then_ping, options=MatchOptions(matchers=[broken]),
                            timeout=10)
    assert "KeyError" in run.results["error"]
    assert run.results["ping"] == {}


def test_unknown_session_raises(main: Any) -> None:
    """replay_streams with a session the cassette lacks raises SessionNotFoundError."""

    async def main_() -> None:
        async with replay_streams(main.cassette, session="nope"):
            pass  # pragma: no cover

    with pytest.raises(SessionNotFoundError, match="no session 'nope'"):
        anyio.run(main_)
