"""Replaying recorded SDK sessions to the real SDK client, with the real server gone.

Each session was recorded from tests/peers/sdk_server.py through `mcprec record` (see the
``sdk_recordings`` fixture); each replay starts `mcprec replay CASSETTE` in its place and drives
it with the official SDK client, which must see what it saw live.
"""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import Implementation

from support.helpers import dump, sqlite
from mcprec.cassette import open_cassette
from support.replay_helpers import (
    BIG,
    CANCEL_AFTER_S,
    PAYLOAD_SIZE,
    SLOW_ARGS,
    SLOW_STEPS,
    Run,
    cancel_slow_then_add,
    drive,
    errors_and_edges,
    main_scenario,
    page_through,
    progress_recorder,
    replay_cmd,
    timed,
)


@pytest.fixture(scope="module")
def main(sdk_recordings: SimpleNamespace) -> Any:
    return sdk_recordings.main


@pytest.fixture(scope="module")
def extra(sdk_recordings: SimpleNamespace) -> Any:
    return sdk_recordings.extra


@pytest.fixture(scope="module")
def replayed(main: Any) -> Run:
    """The main scenario, replayed from the cassette with no server."""
    return drive(replay_cmd(main.cassette), main_scenario)


def replay(recording: Any, scenario: Any, *options: str, **kwargs: Any) -> Run:
    return drive(replay_cmd(recording.cassette, "-s", recording.session, *options), scenario,
                 **kwargs)


# --- the whole session -------------------------------------------------------------------------


@pytest.mark.parametrize("part", ["results", "logs", "progress", "sampling", "notifications"])
def test_replay_gives_the_client_what_it_saw_live(main: Any, replayed: Run, part: str) -> None:
    """Every result, log message, progress update, sampling request and notification is as live."""
    assert getattr(replayed, part) == getattr(main.live, part)


def test_live_session_exercised_every_feature(main: Any) -> None:
    """The recorded session really has logs, progress, sampling and three distinct counter calls."""
    live = main.live
    assert len(live.logs) == SLOW_STEPS and len(live.progress) == SLOW_STEPS
    assert len(live.sampling) == 1
    counters = [live.results[f"counter {i}"]["structuredContent"] for i in (1, 2, 3)]
    assert counters == [{"result": "call 1"}, {"result": "call 2"}, {"result": "call 3"}]


def test_notifications_come_before_the_response(replayed: Run) -> None:
    """The progress of the slow call reached the client before the call returned."""
    assert replayed.results["progress before slow returned"] == SLOW_STEPS


def test_replay_stderr_is_the_servers(replayed: Run, sdk_recordings: Any) -> None:
    """A replay where everything matches says which session it plays, then writes only what the
    recorded server wrote on stderr."""
    rec = sdk_recordings.main
    assert replayed.stderr.splitlines() == [
        f"mcprec: replaying session {rec.session!r} of {rec.cassette}",
        "mcprec test server v1 starting",
    ]


# --- identical requests ------------------------------------------------------------------------


async def call_counter_five_times(s: Any, run: Run) -> None:
    for i in range(1, 6):
        try:
            run.results[i] = dump(await s.call_tool("counter", {}))["structuredContent"]["result"]
        except MCPError as e:
            run.results[i] = f"error: {e}"


def test_identical_calls_replay_in_order_then_repeat_the_last(main: Any) -> None:
    """counter answers call 1, 2, 3 as recorded, then keeps answering call 3."""
    run = replay(main, call_counter_five_times)
    assert [run.results[i] for i in range(1, 6)] == ["call 1", "call 2", "call 3", "call 3",
                                                      "call 3"]


def test_repeat_error_fails_once_the_recorded_answers_run_out(main: Any) -> None:
    """With --repeat error, the fourth identical call gets a JSON-RPC error saying why."""
    run = replay(main, call_counter_five_times, "--repeat", "error")
    assert [run.results[i] for i in range(1, 4)] == ["call 1", "call 2", "call 3"]
    assert "no recorded response matches" in run.results[4]
    assert "no recorded response matches" in run.results[5]
    assert "recorded answers are used up" in run.stderr


# --- pagination --------------------------------------------------------------------------------


def test_paged_list_replays_page_by_page(extra: Any) -> None:
    """Following nextCursor through the replay gives the recorded pages, in order."""
    run = replay(extra, page_through)
    assert len(run.results["pages"]) == 3
    assert run.results["pages"] == extra.live.results["pages"]


def test_each_cursor_gets_its_own_page(extra: Any) -> None:
    """Asking for the last page first gets the last page: the cursor is matched, not the order."""
    from mcp_types import PaginatedRequestParams

    async def last_page_first(s: Any, run: Run) -> None:
        last = await s.list_resources(params=PaginatedRequestParams(cursor="10"))
        run.results["last"] = dump(last)

    run = replay(extra, last_page_first)
    assert run.results["last"] == extra.live.results["pages"][2]


# --- progress ----------------------------------------------------------------------------------


async def ping_then_slow(s: Any, run: Run) -> None:
    """An extra request first, so the slow call's request id (the SDK's progress token) shifts."""
    await s.send_ping()
    await s.list_tools()
    run.results["slow"] = dump(await s.call_tool("slow", SLOW_ARGS,
                                                 progress_callback=progress_recorder(run)))


def _progress_tokens(run: Run) -> set[Any]:
    return {n["params"]["progressToken"] for n in run.notifications
            if n.get("method") == "notifications/progress"}


def test_progress_reaches_a_client_with_a_different_token(main: Any) -> None:
    """Progress tokens are rewritten to the client's: its progress callback still fires."""
    run = replay(main, ping_then_slow)
    assert _progress_tokens(run) != _progress_tokens(main.live)  # the token really changed
    assert len(_progress_tokens(run)) == 1
    assert run.progress == main.live.progress
    assert run.results["slow"] == main.live.results["slow"]


def test_no_progress_for_a_client_that_did_not_ask(main: Any) -> None:
    """A call without a progress token gets no progress notifications, but the same result."""

    async def slow_without_progress(s: Any, run: Run) -> None:
        await s.list_tools()
        run.results["slow"] = dump(await s.call_tool("slow", SLOW_ARGS))

    run = replay(main, slow_without_progress)
    assert run.results["slow"] == main.live.results["slow"]
    assert not _progress_tokens(run)
    assert run.logs == main.live.logs


# --- sampling ----------------------------------------------------------------------------------


async def ask(s: Any, run: Run) -> None:
    await s.list_tools()
    run.results["ask_model"] = dump(await timed(run, "ask_model",
                                                s.call_tool("ask_model", {"question": "why?"})))


def test_sampling_request_reaches_the_client_with_the_recorded_params(main: Any) -> None:
    """The replay sends the recorded sampling request; the client's callback gets its params."""
    run = replay(main, ask)
    assert run.sampling == main.live.sampling
    assert run.results["ask_model"] == main.live.results["ask_model"]


def test_replay_waits_for_the_clients_sampling_answer(main: Any) -> None:
    """The tool's response comes only after the client has answered the sampling request."""
    run = replay(main, ask, sampling_delay=0.5)
    assert run.timings["ask_model"] >= 0.5
    assert run.results["ask_model"] == main.live.results["ask_model"]


# --- cancellation ------------------------------------------------------------------------------


def test_cancelled_request_recorded_as_cancelled_does_not_hang(extra: Any) -> None:
    """The client cancels the slow call as it did live; the replay goes on and answers add."""
    run = replay(extra, cancel_slow_then_add)
    assert run.results["slow cancelled"] is True
    assert run.timings["cancelled slow"] < CANCEL_AFTER_S + 1.0
    assert run.results["add"] == extra.live.results["add"]


def test_client_cancels_a_request_that_completed_live(main: Any) -> None:
    """Cancelling a slow call mid-replay (--timing recorded) stops it; later calls still work."""

    async def cancel_then_add(s: Any, run: Run) -> None:
        await s.list_tools()
        with anyio.move_on_after(0.2) as scope:
            await s.call_tool("slow", SLOW_ARGS, progress_callback=progress_recorder(run))
        run.results["cancelled"] = scope.cancelled_caught
        run.results["add"] = dump(await s.call_tool("add", {"a": 2, "b": 3}))
        await anyio.sleep(0.8)  # the rest of the slow call's progress must not arrive now
        run.results["echo"] = dump(await s.call_tool("echo", {"text": "hello"}))

    run = replay(main, cancel_then_add, "--timing", "recorded")
    assert run.results["cancelled"] is True
    assert run.results["add"] == main.live.results["add"]
    assert run.results["echo"] == main.live.results["echo"]
    assert len(run.progress) < SLOW_STEPS


# --- errors and edge cases ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def edges(extra: Any) -> Run:
    """The recorded errors and edge cases, replayed."""
    return replay(extra, errors_and_edges)


def test_live_edges_are_real(extra: Any) -> None:
    """Live, setLevel failed with -32601, the unknown tool gave isError, the payload was whole."""
    r = extra.live.results
    assert r["setLevel error"]["code"] == -32601
    assert r["unknown tool"]["isError"] is True
    assert len(r["payload"]["content"][0]["text"]) == PAYLOAD_SIZE
    assert r["big add"]["structuredContent"] == {"result": BIG + 1}


@pytest.mark.parametrize("name", ["setLevel error", "unknown tool", "payload"])
def test_recorded_errors_and_large_answers_replay_as_live(extra: Any, edges: Run,
                                                          name: str) -> None:
    """A JSON-RPC error, a tool error result and a 1 MB result replay exactly as live."""
    assert edges.results[name] == extra.live.results[name]


def test_integer_beyond_64_bits_replays_exactly(extra: Any, edges: Run) -> None:
    """A result holding 2**70 + 1 comes back as that integer, not as a rounded float."""
    assert edges.results["big add"] == extra.live.results["big add"]


def test_integers_beyond_64_bits_are_told_apart_when_matching(extra: Any) -> None:
    """add(2**70 + 1, 1) does not match the recorded add(2**70, 1)."""

    async def other_big_add(s: Any, run: Run) -> None:
        await s.list_tools()
        try:
            run.results["add"] = dump(await s.call_tool("add", {"a": BIG + 1, "b": 1}))
        except MCPError as e:
            run.results["add"] = f"error: {e.error.message}"

    run = replay(extra, other_big_add)
    assert "no recorded response matches" in run.results["add"]


# --- initialize and ping -----------------------------------------------------------------------


def test_initialize_answered_whatever_the_client_offers(main: Any) -> None:
    """Another clientInfo and no capabilities at all still get the recorded initialize result."""

    async def nothing(s: Any, run: Run) -> None:
        run.results["add"] = dump(await s.call_tool("add", {"a": 2, "b": 3}))

    run = replay(main, nothing, sampling=False,
                 client_info=Implementation(name="a-different-client", version="9.9.9"))
    assert run.results["initialize"] == main.live.results["initialize"]
    assert run.results["add"] == main.live.results["add"]


@pytest.mark.parametrize("which", ["main", "extra"])
def test_ping_is_answered(sdk_recordings: SimpleNamespace, which: str) -> None:
    """ping gets an empty result, whether the session recorded one (main) or not (extra)."""

    async def pings(s: Any, run: Run) -> None:
        run.results["pings"] = [dump(await s.send_ping()) for _ in range(3)]

    run = replay(getattr(sdk_recordings, which), pings)
    assert run.results["pings"] == [{}, {}, {}]


# --- unmatched requests ------------------------------------------------------------------------


async def add_wrong_then_right(s: Any, run: Run) -> None:
    await s.list_tools()
    try:
        await s.call_tool("add", {"a": 2, "b": 4})
    except MCPError as e:
        run.results["error"] = {"code": e.error.code, "message": e.error.message}
    run.results["add"] = dump(await s.call_tool("add", {"a": 2, "b": 3}))


@pytest.fixture(scope="module")
def unmatched(main: Any) -> Run:
    return replay(main, add_wrong_then_right)


def test_unmatched_request_gets_a_jsonrpc_error(unmatched: Run) -> None:
    """The client's call fails with a JSON-RPC error saying no recorded response matches."""
    error = unmatched.results["error"]
    assert "no recorded response matches" in error["message"]
    assert error["code"] == -32000


def test_replay_goes_on_after_an_unmatched_request(main: Any, unmatched: Run) -> None:
    """The next, recorded, request is answered as recorded."""
    assert unmatched.results["add"] == main.live.results["add"]


@pytest.mark.parametrize("expected", [
    "no recorded response matches request id=",
    "playback position: request #3 of this run",
    "closest recorded requests:",
    "params.arguments.b: recorded 3, got 4",
    "(not yet played)",
])
def test_unmatched_request_is_explained_on_stderr(unmatched: Run, expected: str) -> None:
    """stderr names the request, the playback position, and the closest candidates' differences."""
    assert expected in unmatched.stderr


def test_closest_candidate_comes_first(unmatched: Run) -> None:
    """The add call that differs in one field is listed before calls to other tools."""
    lines = unmatched.stderr.splitlines()
    first = next(i for i, line in enumerate(lines) if line.strip().startswith("1. seq"))
    assert lines[first + 1].strip() == "params.arguments.b: recorded 3, got 4"


def test_never_recorded_method_lists_the_recorded_ones(main: Any) -> None:
    """A method the session never saw fails, and stderr lists the methods it did record."""
    from mcp_types import PromptReference

    async def complete(s: Any, run: Run) -> None:
        try:
            await s.complete(PromptReference(type="ref/prompt", name="opener"),
                             {"name": "mood", "value": "c"})
        except MCPError as e:
            run.results["error"] = e.error.message

    run = replay(main, complete)
    assert "no recorded response matches" in run.results["error"]
    assert "'completion/complete' was never recorded in this session; recorded methods: " \
        "initialize, ping, prompts/get" in run.stderr


# --- matching options --------------------------------------------------------------------------


async def echo_other_text(s: Any, run: Run) -> None:
    await s.list_tools()
    try:
        run.results["echo"] = dump(await s.call_tool("echo", {"text": "something else"}))
    except MCPError as e:
        run.results["echo"] = f"error: {e.error.message}"


def test_different_argument_does_not_match(main: Any) -> None:
    """Without --ignore, a different argument is a different request."""
    run = replay(main, echo_other_text)
    assert "no recorded response matches" in run.results["echo"]


@pytest.mark.parametrize("path", ["params.arguments.text", "$.params.arguments.*"])
def test_ignored_path_is_left_out_of_matching(main: Any, path: str) -> None:
    """With --ignore PATH, the request matches the recorded one and gets its answer."""
    run = replay(main, echo_other_text, "--ignore", path)
    assert run.results["echo"] == main.live.results["echo"]


def _in_order(s: Any) -> list[Any]:
    return [s.list_tools, lambda: s.call_tool("add", {"a": 2, "b": 3}),
            lambda: s.call_tool("echo", {"text": "hello"})]


async def recorded_order(s: Any, run: Run) -> None:
    for i, call in enumerate(_in_order(s)):
        run.results[i] = dump(await call())


async def swapped_order(s: Any, run: Run) -> None:
    await s.list_tools()
    try:
        run.results["echo"] = dump(await s.call_tool("echo", {"text": "hello"}))
    except MCPError as e:
        run.results["echo"] = f"error: {e.error.message}"


def test_strict_order_accepts_the_recorded_order(main: Any) -> None:
    """--strict-order replays requests that come exactly in the recorded order."""
    run = replay(main, recorded_order, "--strict-order")
    assert run.results[1] == main.live.results["add"]
    assert run.results[2] == main.live.results["echo"]


def test_strict_order_rejects_a_request_out_of_turn(main: Any) -> None:
    """--strict-order refuses echo when add comes next in the recording, and says so."""
    run = replay(main, swapped_order, "--strict-order")
    assert "no recorded response matches" in run.results["echo"]
    assert "strict order: the next recorded request is" in run.stderr


def test_strict_order_names_the_method_the_recording_expects(main: Any) -> None:
    """Out of turn with the same (empty) params, the report names the expected method."""

    async def prompts_first(s: Any, run: Run) -> None:
        with pytest.raises(MCPError):
            await s.list_prompts()

    run = replay(main, prompts_first, "--strict-order")
    assert "same params, but the recording has tools/list here, not prompts/list" in run.stderr
    assert "custom matcher" not in run.stderr


def test_stale_match_key_is_reported_as_such(main: Any, tmp_path: Any) -> None:
    """A stored match key from another mcprec's index is reported as such, not as a matcher."""
    
    cassette = main.copy_to(tmp_path)
    with sqlite(cassette) as conn:
        conn.execute("UPDATE messages SET match_key = 'from-another-version' "
                     "WHERE method = 'tools/call' AND kind = 'request'")
        conn.execute("UPDATE sessions SET key_scheme = NULL")  # as that mcprec recorded it
    conn.close()

    async def add(s: Any, run: Run) -> None:
        await s.list_tools()
        with pytest.raises(MCPError):
            await s.call_tool("add", {"a": 2, "b": 3})

    run = drive(replay_cmd(cassette, "-s", main.session), add)
    assert "identical params, but its stored match key differs" in run.stderr
    assert "custom matcher" not in run.stderr


def test_without_strict_order_a_request_out_of_turn_matches(main: Any) -> None:
    """By default the order does not matter: echo before add still matches."""
    run = replay(main, swapped_order)
    assert run.results["echo"] == main.live.results["echo"]


# --- timing ------------------------------------------------------------------------------------


def recorded_latency(recording: Any, tool: str) -> float:
    """Seconds between the recorded call of ``tool`` and its response."""
    with open_cassette(recording.cassette) as c:
        s = c.session(recording.session)
        messages = list(c.messages(s))
    request = next(m for m in messages if m.kind == "request" and m.method == "tools/call"
                   and json.loads(m.raw)["params"]["name"] == tool)
    response = next(m for m in messages if m.reply_to == request.seq)
    return (response.t_ns - request.t_ns) / 1e9


async def slow_only(s: Any, run: Run) -> None:
    await s.list_tools()
    run.results["slow"] = dump(await timed(run, "slow", s.call_tool(
        "slow", SLOW_ARGS, progress_callback=progress_recorder(run))))


@pytest.mark.parametrize("timing,low,high", [
    ("recorded", 0.7, 3.0),
    ("2", 1.4, 4.0),
    ("none", 0.0, 0.35),
])
def test_timing_scales_the_recorded_latency(main: Any, timing: str, low: float,
                                            high: float) -> None:
    """--timing recorded takes about as long as live, 2 twice as long, none next to nothing."""
    latency = recorded_latency(main, "slow")
    assert latency >= SLOW_STEPS * 0.1  # the recording really was slow
    run = replay(main, slow_only, "--timing", timing)
    assert low * latency <= run.timings["slow"] <= high * latency + 0.2
    assert run.results["slow"] == main.live.results["slow"]
    assert run.progress == main.live.progress


def test_recorded_timing_spreads_progress_over_the_call(main: Any) -> None:
    """With --timing recorded the progress updates arrive over time, not all at once."""
    arrivals: list[float] = []

    async def watch(s: Any, run: Run) -> None:
        await s.list_tools()
        start = time.monotonic()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            arrivals.append(time.monotonic() - start)

        await s.call_tool("slow", SLOW_ARGS, progress_callback=on_progress)

    replay(main, watch, "--timing", "recorded")
    assert len(arrivals) == SLOW_STEPS
    assert arrivals[-1] - arrivals[0] >= 0.7 * (SLOW_STEPS - 1) * 0.150


# --- the report --------------------------------------------------------------------------------


def test_report_lists_unmatched_and_unplayed_requests(main: Any, tmp_path: Any) -> None:
    """--report writes the counts, the unmatched request and the recorded ones never played."""
    report = tmp_path / "report.json"
    replay(main, add_wrong_then_right, "--report", str(report))
    deadline = time.monotonic() + 5
    while not report.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    data = json.loads(report.read_text())
    assert data["session"] == "main"
    assert (data["requests"], data["matched"]) == (4, 3)  # initialize, tools/list, 2 x add
    assert [(u["method"], u["id"]) for u in data["unmatched"]] == [("tools/call", 3)]
    assert data["unmatched"][0]["report"].startswith(
        "no recorded response matches request id=3 tools/call")
    unplayed = {u["method"] for u in data["unplayed"]}
    assert {"resources/list", "prompts/get", "ping"} <= unplayed
    assert "initialize" not in unplayed
